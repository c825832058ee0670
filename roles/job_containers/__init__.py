"""The `job_containers` role: a container runtime for Slurm jobs, the site's choice.

Table of contents (``job_containers()``), by ``job_containers_runtime``:

- ``"oci"``: Slurm's own OCI support (``srun --container=<bundle>``) on the workers: crun or
  runc from the distribution, a per-user state directory made at boot, and ``oci.conf``
  (gpuinfra.jobs.containers.oci_conf) where slurmstepd reads it: beside the slurm.conf it runs,
  which under configless Slurm is slurmd's fetched copy in its cache. Slurm 22.05's slurmctld
  does not serve oci.conf, and slurmd empties that cache at every fetch (seen in the lab), so
  each worker keeps its copy in /etc/slurm and a path unit puts it back into the cache each
  time the cache changes. On GPU nodes with the container toolkit, oci.conf calls
  nvidia-container-runtime (the NVIDIA hook), set up for rootless use. Optionally a bundle
  built from Debian's busybox-static (``job_containers_oci_bundle``), run once by the runtime
  as ``nobody`` before it is declared ready.
- ``"enroot-pyxis"``: Enroot's release packages (checked against the site's SHA-256),
  enroot.conf with the site's paths, Pyxis built from its source tag against Slurm's headers
  and loaded by ``plugstack.conf.d/pyxis.conf`` on every Slurm node (srun on the head reads
  it too).
- ``"apptainer"``: Apptainer's release package (checked against the site's SHA-256).
- None: the files this role writes for another runtime are removed (packages stay).

Data keys: defaults.py; per-distribution values: :data:`DISTRO`.
"""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra import host
from pyinfra.api import StringCommand, deploy
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import File, FileContents, Sha256File
from pyinfra.operations import apt, files, server, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.errors import GpuinfraError
from gpuinfra.jobs.containers import (
    ENROOT_CONF,
    OCI_BINARIES,
    OCI_CONF,
    OCI_CONF_KEPT,
    OCI_STATE,
    OCI_SYNC,
    OCI_SYNC_UNIT,
    PYXIS_PLUGIN,
    PYXIS_PLUGSTACK,
    bundle_os_release,
    enroot_conf,
    oci_conf,
    oci_conf_problems,
    oci_sync_script,
    oci_sync_units,
    pyxis_plugstack,
    tmpfiles_directories,
)
from gpuinfra.knowledge.containers import (
    apptainer_url,
    enroot_deb_version,
    enroot_url,
    pyxis_url,
)
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.checked import check_script, checked_files, digest, upload_source
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import text as render_text

OCI_STAGE = "/etc/slurm/.gpuinfra-oci-staged"
OCI_TMPFILES = "/etc/tmpfiles.d/gpuinfra-oci.conf"
NVIDIA_RUNTIME_CONFIG = "/etc/nvidia-container-runtime/config.toml"
ENROOT_TMPFILES = "/etc/tmpfiles.d/gpuinfra-enroot.conf"
DOWNLOADS = "/var/cache/gpuinfra/job-containers"
PYXIS_SRC = "/usr/local/src"

# Per-distribution values: Slurm's version (for oci.conf and Pyxis's headers), the packages.
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": {"slurm": "22.05", "pyxis_build": ["gcc", "make", "libslurm-dev"]},
    # slurm-wlm and libslurm-dev 24.11.5-4+deb13u1, gcc 4:14.2.0-1, make 4.4.1-2 (trixie main
    # Packages, 2026-12-07)
    "debian-13": {"slurm": "24.11", "pyxis_build": ["gcc", "make", "libslurm-dev"]},
    "ubuntu-22.04": {"slurm": "21.08", "pyxis_build": ["gcc", "make", "libslurm-dev"]},
    "ubuntu-24.04": {"slurm": "23.11", "pyxis_build": ["gcc", "make", "libslurm-dev"]},
}


@deploy("job_containers")
def job_containers(site: Site, node: NodeSpec) -> None:
    data = node.settings
    runtime = data["job_containers_runtime"]
    distro = DISTRO[host_distro()]
    if runtime != "oci" and node.is_worker:
        for path in (OCI_CONF_KEPT, OCI_CONF):
            files.file(name=f"{path} absent (job_containers_runtime is {runtime})", path=path,
                       present=False)
    if runtime != "enroot-pyxis":
        files.file(name=f"{PYXIS_PLUGSTACK} absent (job_containers_runtime is {runtime})",
                   path=PYXIS_PLUGSTACK, present=False)
    if runtime == "oci" and node.is_worker:
        _oci(node, data)
    elif runtime == "enroot-pyxis":
        _enroot_pyxis(node, data, distro)
    elif runtime == "apptainer" and node.is_worker:
        version = data["job_containers_apptainer_version"]
        _release_debs("Apptainer", [("apptainer", version, apptainer_url(version),
                                     data["job_containers_apptainer_sha256"])])


# ----------------------------------------------------------------------------------- OCI

def oci_gpus(node: NodeSpec) -> bool:
    """oci.conf calls nvidia-container-runtime: a GPU node with the container toolkit."""
    s = node.settings
    return (node.gpus is not None and bool(s.get("container_toolkit_enabled"))
            and bool(s["job_containers_oci_gpus"]))


def oci_packages(node: NodeSpec) -> list[str]:
    """The OCI runtime, runc beside it for the GPU hook's runtime, busybox for the bundle."""
    data = node.settings
    runtime = data["job_containers_oci_runtime"]
    return [runtime, *(["runc"] if oci_gpus(node) and runtime != "runc" else []),
            *(["busybox-static"] if data["job_containers_oci_bundle"] else [])]


def packages(site: Site, node: NodeSpec) -> list[str]:
    """The runtime's packages from the distribution (the OCI runtime on a worker; what Pyxis
    builds with): the same lists the role's installs take. Enroot and Apptainer are release
    .deb files, installed by the role."""
    runtime = node.settings["job_containers_runtime"]
    if runtime == "oci" and node.is_worker:
        return oci_packages(node)
    if runtime == "enroot-pyxis":
        return list(DISTRO[host_distro()]["pyxis_build"])
    return []


def _oci(node: NodeSpec, data: Any) -> None:
    runtime = data["job_containers_oci_runtime"]
    gpus = oci_gpus(node)
    bundle = data["job_containers_oci_bundle"]
    needed = oci_packages(node)
    apt.packages(name=f"Install {' and '.join(needed)} (Slurm's OCI containers)",
                 packages=needed, no_recommends=True, update=True, cache_time=APT_CACHE_S)
    # The runtime's state (--root), per user, under a directory every user may create in.
    files.put(name=f"{OCI_STATE} made at boot (tmpfiles.d)", dest=OCI_TMPFILES,
              src=upload_source(render_text(tmpfiles_directories([OCI_STATE]))), mode="644")
    files.directory(name=f"{OCI_STATE} exists (1777)", path=OCI_STATE, user="root",
                    group="root", mode="1777")
    if gpus:
        _rootless_nvidia_hook()
    text = render_text(oci_conf(runtime, gpus))
    problems = oci_conf_problems(text)
    if problems:  # slurmstepd's own rules, judged on what the template made
        raise GpuinfraError(f"job_containers: {OCI_CONF_KEPT} from {text.about} would be "
                            f"refused by slurmstepd: {'; '.join(problems)}")
    binary = OCI_BINARIES["nvidia" if gpus else runtime]
    checked_files(name=f"{OCI_CONF_KEPT}, its runtime answering first",
                  files={OCI_CONF_KEPT: text}, stage=OCI_STAGE,
                  check=check_script(f"{binary} --version", binary, OCI_STAGE))
    # slurmd empties its cache at every fetch: a path unit puts oci.conf back each time.
    files.put(name=f"{OCI_SYNC} (oci.conf into slurmd's cache)", dest=OCI_SYNC,
              src=upload_source(render_text(oci_sync_script())), mode="755")
    units = [files.put(name=f"{unit} unit", dest=f"/etc/systemd/system/{unit}",
                       src=upload_source(render_text(body)), mode="644")
             for unit, body in oci_sync_units().items()]
    systemd.daemon_reload(name="systemd reads the oci.conf units", _if=any_changed(*units))
    systemd.service(name=f"{OCI_SYNC_UNIT}.path watches slurmd's cache",
                    service=f"{OCI_SYNC_UNIT}.path", running=True, enabled=True)
    if host.get_fact(Sha256File, path=OCI_CONF) != digest(text):
        server.shell(name=f"{OCI_CONF} from {OCI_CONF_KEPT} (slurmstepd reads it there)",
                     commands=[OCI_SYNC])
    else:
        host.noop(f"{OCI_CONF} is in slurmd's cache")
    if bundle:
        if runtime != "crun":
            raise GpuinfraError(
                f"job_containers: {host.name}: job_containers_oci_bundle needs crun: runc "
                "runs a rootless bundle only with the uid mappings of the user who made it "
                "(each user makes their own: `runc spec --rootless`); set "
                "job_containers_oci_runtime = 'crun' or job_containers_oci_bundle = None")
        _bundle(bundle)


def _rootless_nvidia_hook() -> None:
    """The NVIDIA hook in a rootless container cannot join device cgroups: the toolkit's
    ``no-cgroups = true`` (Slurm's cgroups fence the job's devices)."""
    lines = host.get_fact(FileContents, path=NVIDIA_RUNTIME_CONFIG) or []
    if any(line.replace(" ", "") == "no-cgroups=true" for line in lines):
        host.noop(f"{NVIDIA_RUNTIME_CONFIG} already has no-cgroups = true")
        return
    server.shell(name="The NVIDIA hook works rootless (nvidia-container-cli.no-cgroups)",
                 commands=[StringCommand("nvidia-ctk", "config", "--in-place", "--set",
                                         "nvidia-container-cli.no-cgroups=true")])


def bundle_script(bundle: str) -> str:
    """Shell: a busybox bundle at ``bundle`` (rootfs from Debian's busybox-static, config.json
    from crun's own ``spec --rootless``, no terminal), made in a temporary folder and moved in
    whole, then run once by crun as ``nobody`` (``true``) before it is declared ready."""
    b = shlex.quote(bundle)
    new = shlex.quote(f"{bundle}.gpuinfra-new")
    release = shlex.quote(render_text(bundle_os_release(bundle.rsplit("/", 1)[-1])))
    return " && ".join([
        f"rm -rf {new}", f"mkdir -p {new}/rootfs/bin {new}/rootfs/etc {new}/rootfs/proc "
        f"{new}/rootfs/sys {new}/rootfs/dev {new}/rootfs/tmp",
        f"cp /bin/busybox {new}/rootfs/bin/busybox",
        f"chroot {new}/rootfs /bin/busybox --install -s /bin",
        f"printf %s {release} > {new}/rootfs/etc/os-release",
        f"(cd {new} && crun spec --rootless)",
        f"sed -i 's/\"terminal\": true/\"terminal\": false/' {new}/config.json",
        f"chmod -R a+rX {new}",
        f"runuser -u nobody -- /usr/bin/crun --rootless=true --root={OCI_STATE}/nobody run "
        f"--bundle {new} gpuinfra-bundle-check-$$ < /dev/null",
        f"rm -rf {b}", f"mv {new} {b}",
    ])


def _bundle(bundle: str) -> None:
    made = host.get_fact(File, path=f"{bundle}/config.json") and \
        host.get_fact(File, path=f"{bundle}/rootfs/bin/busybox")
    if made:
        host.noop(f"the bundle {bundle} is there")
        return
    server.shell(name=f"A busybox bundle at {bundle}, run once by crun as nobody",
                 commands=[bundle_script(bundle)])


# ------------------------------------------------------------------------- Enroot + Pyxis

def _enroot_pyxis(node: NodeSpec, data: Any, distro: dict[str, Any]) -> None:
    version = data["job_containers_enroot_version"]
    if node.is_worker:
        _release_debs("Enroot", [
            ("enroot", enroot_deb_version(version), enroot_url("enroot", version),
             data["job_containers_enroot_sha256"]),
            ("enroot+caps", enroot_deb_version(version), enroot_url("enroot+caps", version),
             data["job_containers_enroot_caps_sha256"])])
        paths = {k: data[f"job_containers_enroot_{k}_path"] for k in ("runtime", "cache",
                                                                        "data")}
        files.put(name=f"{ENROOT_CONF} (the site's paths)", dest=ENROOT_CONF,
                  src=upload_source(render_text(enroot_conf(paths))), mode="644",
                  create_remote_dir=True)
        parents = sorted({p.split("$", 1)[0].rstrip("/").rsplit("/", 1)[0] if "$" in p
                          else p for p in paths.values()})
        files.put(name="Enroot's per-user parents made at boot (tmpfiles.d, 1777)",
                  dest=ENROOT_TMPFILES,
                  src=upload_source(render_text(tmpfiles_directories(parents))),
                  mode="644")
        for parent in parents:
            files.directory(name=f"{parent} exists (1777)", path=parent, user="root",
                            group="root", mode="1777")
    _pyxis(data, distro)


def _pyxis(data: Any, distro: dict[str, Any]) -> None:
    """Pyxis built from its tag against this node's Slurm headers, on every Slurm node (srun
    loads it on the head, slurmstepd on the workers), then listed in plugstack.conf.d (Debian's
    plugstack.conf, which the head serves, includes that folder on each node)."""
    version = data["job_containers_pyxis_version"]
    marker = f"{PYXIS_SRC}/pyxis-{version}/.gpuinfra-installed"
    apt.packages(name="Install what Pyxis builds with (gcc, make, Slurm's headers)",
                 packages=distro["pyxis_build"], no_recommends=True, update=True,
                 cache_time=APT_CACHE_S)
    if host.get_fact(File, path=marker) and host.get_fact(File, path=PYXIS_PLUGIN):
        host.noop(f"Pyxis {version} is built and installed")
    else:
        apt.packages(name="Install curl (the download)", packages=["curl", "ca-certificates"],
                     no_recommends=True, update=True, cache_time=APT_CACHE_S)
        tarball = f"{DOWNLOADS}/pyxis-{version}.tar.gz"
        _download(f"Pyxis {version}", pyxis_url(version), tarball,
                  data["job_containers_pyxis_sha256"])
        src = shlex.quote(f"{PYXIS_SRC}/pyxis-{version}")
        server.shell(name=f"Build and install Pyxis {version} ({PYXIS_PLUGIN})", commands=[
            f"tar -C {PYXIS_SRC} -xzf {shlex.quote(tarball)} && make -C {src} && "
            f"make -C {src} install prefix=/usr/local && touch {shlex.quote(marker)}"])
    files.directory(name="/etc/slurm/plugstack.conf.d exists",
                    path="/etc/slurm/plugstack.conf.d", present=True)
    checked_files(name=f"{PYXIS_PLUGSTACK}, its plugin present first",
                  files={PYXIS_PLUGSTACK: pyxis_plugstack()},
                  stage="/etc/slurm/plugstack.conf.d/.gpuinfra-staged",
                  check=check_script(spank_check(PYXIS_PLUGIN), "Pyxis",
                                     "/etc/slurm/plugstack.conf.d/.gpuinfra-staged"))


def spank_check(plugin: str) -> str:
    """Shell: ``plugin`` is a SPANK plugin as slurmd loads one: a shared object defining the
    symbols SPANK_PLUGIN() makes (``plugin_name``, ``plugin_type``, ``plugin_version``;
    slurmd refuses a plugin without them), read with binutils' nm (gcc brought it)."""
    q = shlex.quote(plugin)
    return (f"test -r {q} && syms=$(nm -D --defined-only {q}) && for s in plugin_name "
            "plugin_type plugin_version; do printf '%s\\n' \"$syms\" | grep -qw \"$s\" || "
            f"{{ echo \"{plugin}: no $s: not a SPANK plugin\"; exit 1; }}; done")


# ----------------------------------------------------------------------- release packages

def download_script(url: str, dest: str, sha256: str) -> str:
    """Shell: ``url`` to ``dest`` only when its SHA-256 is ``sha256`` (a partial or different
    file is deleted and the host fails, naming both)."""
    part = shlex.quote(f"{dest}.part")
    return (f"mkdir -p {shlex.quote(dest.rsplit('/', 1)[0])} && "
            f"curl -fsSL --retry 3 -o {part} {shlex.quote(url)} && "
            f"got=$(sha256sum {part} | cut -d' ' -f1) && if [ \"$got\" != {sha256} ]; then "
            f"rm -f {part}; echo \"gpuinfra: {url} has SHA-256 $got, the site expects "
            f"{sha256}: not installed\" >&2; exit 1; fi && mv -f {part} {shlex.quote(dest)}")


def _download(what: str, url: str, dest: str, sha256: str | None) -> None:
    if sha256 is None:  # the spec gate refuses this first (gpuinfra/spec/cross.py)
        raise GpuinfraError(f"job_containers: no SHA-256 for {url}")
    server.shell(name=f"Download {what} (its SHA-256 checked)",
                 commands=[download_script(url, dest, sha256)])


def _release_debs(what: str, debs: list[tuple[str, str, str, str | None]]) -> None:
    """Release .deb files (package, version, URL, SHA-256), each downloaded and checked
    against the site's SHA-256, installed together with apt (which resolves their
    dependencies) when any is missing or at another version."""
    installed = host.get_fact(DebPackages)
    if all(version in (installed.get(package) or []) for package, version, _, _ in debs):
        host.noop(f"{what} is installed at the pinned version")
        return
    apt.packages(name="Install curl (the downloads)", packages=["curl", "ca-certificates"],
                 no_recommends=True, update=True, cache_time=APT_CACHE_S)
    paths = []
    for package, version, url, sha256 in debs:
        path = f"{DOWNLOADS}/{url.rsplit('/', 1)[1]}"
        _download(f"{package} {version}", url, path, sha256)
        paths.append(path)
    names = [p.rsplit("/", 1)[1] for p in paths]
    server.shell(name=f"Install {what} from its release packages", commands=[
        StringCommand("cd", DOWNLOADS, "&&", "DEBIAN_FRONTEND=noninteractive", "apt-get",
                      "install", "-y", "--no-install-recommends", *[f"./{n}" for n in names])])


def applies(site: Site, node: NodeSpec) -> bool:
    """Slurm nodes: the workers run the containers; the head's srun loads Pyxis."""
    return "slurm" in node.schedulers


# The one declaration of where this role applies and how it is called.
ROLE = Role("job_containers", job_containers, applies, needs_head=True,
            reads=("container_toolkit",), packages=packages)
apply = ROLE.apply
