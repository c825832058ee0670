"""Container runtimes for Slurm jobs: the files the job_containers role writes, as data
(FileText: each rendered by its template in roles/job_containers/templates/):

- ``oci.conf`` (oci.conf(5), Slurm 22.05): Slurm's own OCI support, ``srun --container=<bundle>``.
  Slurm 22.05 reads exactly ``ContainerPath``, ``CreateEnvFile``, ``RunTimeCreate``,
  ``RunTimeDelete``, ``RunTimeKill``, ``RunTimeQuery``, ``RunTimeRun``, ``RunTimeStart``
  (slurmstepd's parser; its man page's "ContainerPathOverride" is not among them). With
  ``RunTimeRun`` the runtime's own ``run`` replaces create/start (no polling), and Query, Kill
  and Delete must be set too (slurmstepd refuses the file otherwise). The patterns are Slurm's
  containers.html examples for runc and crun, with ``--root`` a per-user directory instead of
  ``/tmp/``. Every command runs as the job's user: the containers are rootless.
- ``enroot.conf``: Enroot's paths (runtime, cache, data) from the site.
- Pyxis's line for ``plugstack.conf.d``.
- A bundle's root filesystem marker (``/etc/os-release`` of the bundle), so that a job can
  tell it runs inside the bundle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuinfra.errors import GpuinfraError
from gpuinfra.text import FileText
from gpuinfra.units import unit_file

RUNTIMES = ("oci", "enroot-pyxis", "apptainer")
# Where slurmstepd reads oci.conf: beside the slurm.conf it runs, which under configless Slurm
# is slurmd's fetched copy in SlurmdSpoolDir's conf-cache (/run/slurm/conf links there; the
# slurm role's slurm.conf sets SlurmdSpoolDir, a plan test holds the two together). Slurm
# 22.05's slurmctld does not serve oci.conf, and slurmd empties that folder whenever it fetches
# its configuration (every start: seen in the lab), so each worker keeps its own copy in
# /etc/slurm and a path unit puts it back into the cache each time the cache changes.
SLURMD_SPOOL = "/var/lib/slurm/slurmd"
OCI_CONF_DIR = f"{SLURMD_SPOOL}/conf-cache"
OCI_CONF = f"{OCI_CONF_DIR}/oci.conf"
OCI_CONF_KEPT = "/etc/slurm/oci.conf"
OCI_SYNC = "/usr/local/sbin/gpuinfra-oci-conf"
OCI_SYNC_UNIT = "gpuinfra-oci-conf"


# oci_sync_script's rounds: each places oci.conf, then waits OCI_SYNC_QUIET_S for the cache to
# stay unchanged (at most 20 rounds: 10 s while slurmd empties and refills it).
OCI_SYNC_ROUNDS, OCI_SYNC_QUIET_S = 20, 0.5


def oci_sync_script() -> FileText:
    """The worker's oci.conf into slurmd's cache when it differs (absent there when the kept
    copy is absent); nothing while slurmd has no cache yet.

    It ends only once the cache stayed unchanged OCI_SYNC_QUIET_S after its last look:
    systemd does not start the path unit's service again for a change made while it runs (a
    oneshot still starting takes no second start: shown in the lab, two changes half a second
    apart ran it once). slurmd emptying the cache during a run left oci.conf out of it until
    the next deploy put it back: a deploy after a reboot changed something (stop 57's CI, and
    once in about 20 lab reboots, 2026-12-08).

    Two runs may overlap (the deploy runs it while the path unit does, when slurmd has just
    refilled its cache): each copies to a temporary name of its own (mktemp, in the cache, so
    the rename is atomic), never to a shared one: with one shared name, seen on 40 lab
    workers, one run renamed the other's file away and failed ("mv: cannot stat")."""
    return FileText(f"job_containers{OCI_SYNC}.j2", {
        "kept": OCI_CONF_KEPT, "cache": OCI_CONF_DIR, "conf": OCI_CONF,
        "rounds": list(range(1, OCI_SYNC_ROUNDS + 1)), "quiet": OCI_SYNC_QUIET_S})


def oci_sync_units() -> dict[str, FileText]:
    """systemd units: the path unit watching the cache (and the kept copy), the service it
    starts (the script above)."""
    return {
        f"{OCI_SYNC_UNIT}.path": unit_file({
            "Unit": [("Description", "Keep oci.conf in slurmd's configuration cache")],
            "Path": [("PathChanged", OCI_CONF_DIR), ("PathChanged", OCI_CONF_KEPT),
                     ("Unit", f"{OCI_SYNC_UNIT}.service")],
            "Install": [("WantedBy", "multi-user.target")],
        }, about="gpuinfra (gpuinfra_roles/job_containers): oci.conf back into slurmd's cache."),
        # No start limit: systemd's default (5 starts in 10 s) failed the path unit for good
        # ("unit-start-limit-hit") after a few slurmd restarts in a row, and oci.conf stayed
        # out of the cache (lab, 2026-12-08). Each run lasts at least OCI_SYNC_QUIET_S.
        f"{OCI_SYNC_UNIT}.service": unit_file({
            "Unit": [("Description", "oci.conf into slurmd's configuration cache"),
                     ("StartLimitIntervalSec", "0")],
            "Service": [("Type", "oneshot"), ("ExecStart", OCI_SYNC)],
        }, about="gpuinfra (gpuinfra_roles/job_containers): run by the path unit."),
    }


OCI_RUNTIMES = ("crun", "runc")
# The runtimes' binaries as Debian and Ubuntu package them (crun: /usr/bin, runc: /usr/sbin);
# absolute, as slurmstepd's environment is not a login shell's.
OCI_BINARIES = {"crun": "/usr/bin/crun", "runc": "/usr/sbin/runc",
                "nvidia": "/usr/bin/nvidia-container-runtime"}
# The runtime's state, per user (--root): under a 1777 directory made at boot (tmpfiles.d).
OCI_STATE = "/run/gpuinfra-oci"
# The container's name: node, user, job, step, task (Slurm's examples).
_NAME = "%n.%u.%j.%s.%t"


def oci_conf(runtime: str, gpus: bool = False) -> FileText:
    """oci.conf for ``runtime`` (crun or runc); ``gpus``: through NVIDIA's
    nvidia-container-runtime (a runc-compatible shim from the container toolkit that adds the
    NVIDIA hook, so the job's GPUs reach the container), which takes runc's arguments."""
    if runtime not in OCI_RUNTIMES:
        raise GpuinfraError(f"unknown OCI runtime {runtime!r}: use one of {OCI_RUNTIMES}")
    style = "runc" if gpus else runtime
    binary = OCI_BINARIES["nvidia" if gpus else runtime]
    base = f"{binary} --rootless=true --root={OCI_STATE}/%u"
    run = (f"{base} run --bundle %b {_NAME}" if style == "crun"
           else f"{base} run {_NAME} -b %b")
    lines = {
        "RunTimeQuery": f"{base} state {_NAME}",
        "RunTimeKill": f"{base} kill -a {_NAME}",
        "RunTimeDelete": f"{base} delete --force {_NAME}",
        "RunTimeRun": run,
    }
    why = ("through nvidia-container-runtime (the NVIDIA hook adds the job's GPUs), runc "
           "underneath" if gpus else runtime)
    return FileText(f"job_containers{OCI_CONF_KEPT}.j2", {"why": why, "settings": lines})


def oci_conf_keys(text: str) -> dict[str, str]:
    """The settings of an oci.conf text (Slurm's parser: key=value, quotes off, # comments)."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, value = line.partition("=")
        found[key.strip().lower()] = value.strip().strip('"')
    return found


# What slurmstepd 22.05 requires of oci.conf (its own refusal, verbatim in the binary:
# "RunTimeRun and RunCreate/RunTimeStart are mutually exclusive. All other RunTime*
# configurations items must be populated.")
def oci_conf_problems(text: str) -> list[str]:
    keys = oci_conf_keys(text)
    known = {"containerpath", "createenvfile", "runtimecreate", "runtimedelete", "runtimekill",
             "runtimequery", "runtimerun", "runtimestart"}
    problems = [f"{k}: not a setting Slurm 22.05 reads" for k in keys if k not in known]
    run = "runtimerun" in keys
    if run and ({"runtimecreate", "runtimestart"} & keys.keys()):
        problems.append("RunTimeRun and RunTimeCreate/RunTimeStart are mutually exclusive")
    needed = ["runtimequery", "runtimekill", "runtimedelete"]
    needed += [] if run else ["runtimecreate", "runtimestart"]
    problems += [f"{k}: missing" for k in needed if k not in keys]
    return problems


def enroot_conf(paths: Mapping[str, str]) -> FileText:
    """/etc/enroot/enroot.conf: ``paths`` maps runtime/cache/data to the site's directories
    (``$(id -u)`` expands per user: enroot reads the file as shell words)."""
    names = {"runtime": "ENROOT_RUNTIME_PATH", "cache": "ENROOT_CACHE_PATH",
             "data": "ENROOT_DATA_PATH"}
    return FileText(f"job_containers{ENROOT_CONF}.j2", {
        "settings": {names[k]: paths[k] for k in ("runtime", "cache", "data")}})


ENROOT_CONF = "/etc/enroot/enroot.conf"
PYXIS_PLUGIN = "/usr/local/lib/slurm/spank_pyxis.so"
PYXIS_PLUGSTACK = "/etc/slurm/plugstack.conf.d/pyxis.conf"


def pyxis_plugstack(plugin: str = PYXIS_PLUGIN) -> FileText:
    """Pyxis in Slurm's plugin stack (``required``: a node that cannot load it refuses jobs
    instead of running them without containers)."""
    return FileText(f"job_containers{PYXIS_PLUGSTACK}.j2", {"plugin": plugin})


BUNDLE_ID = "gpuinfra-bundle"


def bundle_os_release(name: str) -> FileText:
    """The bundle's /etc/os-release: what `cat /etc/os-release` prints inside it."""
    return FileText("job_containers/oci-bundle/rootfs/etc/os-release.j2",
                    {"id": BUNDLE_ID, "name": name})


def tmpfiles_directories(paths: Sequence[str]) -> FileText:
    """A tmpfiles.d file making each of ``paths`` at boot, 1777 (every user may make their
    own folder in it)."""
    return FileText("job_containers/etc/tmpfiles.d/directories.conf.j2",
                    {"paths": list(paths)})
