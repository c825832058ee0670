"""Data keys of the `job_containers` role: default and rule of each (override in group_data).

The container runtime Slurm jobs get (None, "oci", "enroot-pyxis", "apptainer") and its
settings. A runtime installed from a release package needs the SHA-256 of each file it
downloads: this project could not verify any (gpuinfra/knowledge/containers.py), so the site
gives them and the spec gate refuses the runtime without them (gpuinfra/spec/cross.py).
Checked by the spec gate before any host is touched.
"""

from gpuinfra.jobs.containers import OCI_RUNTIMES, RUNTIMES
from gpuinfra.knowledge.containers import (
    APPTAINER_DEFAULT_VERSION,
    ENROOT_DEFAULT_VERSION,
    PYXIS_DEFAULT_VERSION,
)
from gpuinfra.paths import opened_parent_problem, path_problem
from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import Rule, boolean, choice, optional, text

SHA256 = text(r"[0-9a-f]{64}", "a SHA-256 as 64 lower-case hex digits "
              "(`sha256sum FILE` on a copy you trust)", "a SHA-256")
VERSION = text(r"[0-9]+\.[0-9]+\.[0-9]+", "a release version, e.g. '3.5.0'", "a version")
# Enroot's per-user folders (enroot.conf, $(id -u) in the last part): their parents are made
# 1777 by the role, so the path and its parent are judged by the one rule of the folders a role
# opens up (gpuinfra/paths.py: no system folder, nothing under /tmp, no '..').
PATH = Rule("an absolute path of a folder of its own, its last part may hold $(id -u), e.g. "
            "'/var/lib/enroot/data/user-$(id -u)' (never in a system folder, /tmp or with "
            "'..': the role makes its parent writable by every user)",
            lambda value: opened_parent_problem(value, per_user=True))
# The OCI bundle is rebuilt with `rm -rf BUNDLE && mv BUNDLE.gpuinfra-new BUNDLE` as root:
# the same rule (gpuinfra/paths.py).
BUNDLE = Rule("an absolute path of a folder of its own, e.g. '/srv/containers/busybox' (never "
              "a system folder, /tmp or with '..': the role removes and rebuilds it as root)",
              path_problem)

# The scheduler this role belongs to: a deploy running it alone defaults to it.
SCHEDULER = "slurm"

KNOBS = (
    # The runtime of Slurm jobs' containers, on every Slurm node: None (none: the role removes
    # its files), "oci" (Slurm's own, srun --container=<bundle>, with crun or runc from the
    # distribution), "enroot-pyxis" (NVIDIA's: srun --container-image=<image>), "apptainer".
    Knob("job_containers_runtime", None, optional(choice(*RUNTIMES)),
         "the container runtime of Slurm jobs", site_wide=True),
    # "oci": the OCI runtime oci.conf calls: "crun" or "runc" (Debian's/Ubuntu's package).
    Knob("job_containers_oci_runtime", "crun", choice(*OCI_RUNTIMES),
         "the OCI runtime Slurm calls (crun or runc)"),
    # "oci": on GPU nodes with the container toolkit (container_toolkit_enabled), oci.conf
    # calls nvidia-container-runtime (runc underneath), whose hook gives the container the
    # job's GPUs. False: the plain runtime there too (no GPU in the container).
    Knob("job_containers_oci_gpus", True, boolean(),
         "GPUs in OCI job containers through the NVIDIA hook"),
    # "oci": a bundle the role builds on each worker from a local root filesystem (Debian's
    # busybox-static, no registry needed): srun --container=<this path>. None: no bundle.
    Knob("job_containers_oci_bundle", None, optional(BUNDLE),
         "a busybox bundle the role builds for srun --container"),
    # "enroot-pyxis": Enroot's release and the SHA-256 of its two packages (required).
    Knob("job_containers_enroot_version", ENROOT_DEFAULT_VERSION, VERSION,
         "the Enroot release"),
    Knob("job_containers_enroot_sha256", None, optional(SHA256),
         "the SHA-256 of enroot_<v>-1_amd64.deb"),
    Knob("job_containers_enroot_caps_sha256", None, optional(SHA256),
         "the SHA-256 of enroot+caps_<v>-1_amd64.deb"),
    # Enroot's directories (enroot.conf), per user: runtime (containers being run), cache
    # (image layers), data (unpacked containers). Their parents are made 1777 by the role.
    Knob("job_containers_enroot_runtime_path", "/run/enroot/user-$(id -u)", PATH,
         "ENROOT_RUNTIME_PATH"),
    Knob("job_containers_enroot_cache_path", "/var/lib/enroot/cache/user-$(id -u)", PATH,
         "ENROOT_CACHE_PATH"),
    Knob("job_containers_enroot_data_path", "/var/lib/enroot/data/user-$(id -u)", PATH,
         "ENROOT_DATA_PATH"),
    # "enroot-pyxis": Pyxis's source tag, built on each Slurm node, and its tarball's SHA-256
    # (required).
    Knob("job_containers_pyxis_version", PYXIS_DEFAULT_VERSION, VERSION, "the Pyxis tag"),
    Knob("job_containers_pyxis_sha256", None, optional(SHA256),
         "the SHA-256 of Pyxis's v<v>.tar.gz"),
    # "apptainer": the release and the SHA-256 of apptainer_<v>_amd64.deb (required).
    Knob("job_containers_apptainer_version", APPTAINER_DEFAULT_VERSION, VERSION,
         "the Apptainer release"),
    Knob("job_containers_apptainer_sha256", None, optional(SHA256),
         "the SHA-256 of apptainer_<v>_amd64.deb"),
)

DEFAULTS = defaults(KNOBS)
