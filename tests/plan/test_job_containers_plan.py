"""Plan tests of the `job_containers` role on a Slurm head and worker: Debian 12, Ubuntu 22.04
and 24.04. Enroot + Pyxis and Apptainer come from release files NVIDIA and Apptainer publish
on GitHub, unreachable from the lab: these plans are their coverage. The OCI runtime also runs
live in the lab (gpuinfra_lab/oci_jobs.py).

Fixture layers (tests/plan/facts/): a Slurm node the munge and slurm roles converged
(tests/plan/test_munge_plan.py ``converged``); the role's own converged state is written here
(:func:`converged`), from the role's own outputs.
"""

from __future__ import annotations

import hashlib
import re

import pytest
from pyinfra.api.exceptions import PyinfraError

from gpuinfra.jobs.containers import (
    OCI_CONF,
    OCI_CONF_KEPT,
    OCI_SYNC,
    PYXIS_PLUGIN,
    PYXIS_PLUGSTACK,
    SLURMD_SPOOL,
    enroot_conf,
    oci_conf,
    oci_sync_script,
    oci_sync_units,
    pyxis_plugstack,
)
from gpuinfra.knowledge.containers import apptainer_url, enroot_url, pyxis_url
from gpuinfra_deploy.ops.checked import digest
from gpuinfra_deploy.templates import text as file_text
from gpuinfra_roles.job_containers import (
    ENROOT_CONF,
    NVIDIA_RUNTIME_CONFIG,
    job_containers,
)
from tests.plan.harness import REPO, FakeHost, plan_cluster, upload_text
from tests.plan.test_munge_plan import DISTROS, HEAD, HGX, WORKER
from tests.plan.test_munge_plan import converged as slurm_node

SHA = {"job_containers_enroot_sha256": "a" * 64, "job_containers_enroot_caps_sha256": "b" * 64,
       "job_containers_pyxis_sha256": "c" * 64, "job_containers_apptainer_sha256": "d" * 64}
OCI = {"job_containers_runtime": "oci", "container_toolkit_enabled": False}
ENROOT = {"job_containers_runtime": "enroot-pyxis", **SHA}
APPTAINER = {"job_containers_runtime": "apptainer", **SHA}
FILE = {"mode": 644, "size": 1, "user": "root", "group": "root"}


def fresh(distro: str, role: str) -> dict:
    return slurm_node(distro, role)


def site(head: dict, worker: dict, data: dict) -> list[FakeHost]:
    return [FakeHost(HEAD, ("head",), head, {"ssh_hostname": "10.0.0.10", **data}),
            FakeHost(WORKER, ("workers",), worker, {**HGX, "ssh_hostname": "10.0.0.11",
                                                    **data})]


def planned(data: dict, distro: str = "debian-12", on: str = WORKER, head: dict | None = None,
            worker: dict | None = None):
    return plan_cluster(job_containers, site(head or fresh(distro, "head"),
                                             worker or fresh(distro, "worker"), data), on)


def _put(facts: dict, path: str, text: str, mode: int = 644) -> None:
    """``path`` holds ``text``, as files.put finds it (its SHA-1)."""
    facts["files.File"][f"path={path}"] = {**FILE, "mode": mode}
    facts["files.Directory"][f"path={path.rsplit('/', 1)[0]}"] = {**FILE, "mode": 755}
    facts.setdefault("files.Sha1File", {})[f"path={path}"] = \
        hashlib.sha1(text.encode()).hexdigest()  # noqa: S324 (files.put's own comparison)


def converged(distro: str, role: str, data: dict) -> dict:
    """A Slurm node this role converged with ``data``'s runtime."""
    facts = fresh(distro, role)
    installed = dict(facts["deb.DebPackages"])
    runtime = data["job_containers_runtime"]
    if runtime == "oci":
        installed["crun"] = ["1.8.1-1+deb12u1"]
        facts["files.Sha256File"][f"path={OCI_CONF}"] = digest(file_text(oci_conf("crun")))
        facts["files.Sha256File"][f"path={OCI_CONF_KEPT}"] = digest(file_text(oci_conf("crun")))
        _put(facts, OCI_SYNC, file_text(oci_sync_script()), mode=755)
        for unit, body in oci_sync_units().items():
            _put(facts, f"/etc/systemd/system/{unit}", file_text(body))
        for fact in ("systemd.SystemdStatus", "systemd.SystemdEnabled"):
            facts[fact] = {"*": {**facts[fact]["*"], "gpuinfra-oci-conf.path": True}}
        _put(facts, "/etc/tmpfiles.d/gpuinfra-oci.conf", "d /run/gpuinfra-oci 1777 root root -\n")
        facts["files.Directory"]["path=/run/gpuinfra-oci"] = {**FILE, "mode": 1777}
        facts["files.Directory"][f"path={SLURMD_SPOOL}/conf-cache"] = {**FILE, "mode": 755}
    if runtime == "enroot-pyxis":
        installed["enroot"], installed["enroot+caps"] = ["3.5.0-1"], ["3.5.0-1"]
        installed.update({p: ["1"] for p in ("gcc", "make", "libslurm-dev")})
        facts["files.File"][f"path={PYXIS_PLUGIN}"] = FILE
        facts["files.File"]["path=/usr/local/src/pyxis-0.20.0/.gpuinfra-installed"] = FILE
        facts["files.Sha256File"][f"path={PYXIS_PLUGSTACK}"] = digest(file_text(pyxis_plugstack()))
        facts["files.Directory"]["path=/etc/slurm/plugstack.conf.d"] = {**FILE, "mode": 755}
        if role == "worker":
            paths = {"runtime": "/run/enroot/user-$(id -u)",
                     "cache": "/var/lib/enroot/cache/user-$(id -u)",
                     "data": "/var/lib/enroot/data/user-$(id -u)"}
            _put(facts, ENROOT_CONF, file_text(enroot_conf(paths)))
            _put(facts, "/etc/tmpfiles.d/gpuinfra-enroot.conf",
                 "".join(f"d {p} 1777 root root -\n" for p in
                         ("/run/enroot", "/var/lib/enroot/cache", "/var/lib/enroot/data")))
            for parent in ("/run/enroot", "/var/lib/enroot/cache", "/var/lib/enroot/data"):
                facts["files.Directory"][f"path={parent}"] = {**FILE, "mode": 1777}
    if runtime == "apptainer":
        installed["apptainer"] = ["1.3.6"]
    facts["deb.DebPackages"] = installed
    return facts


def uploads_text(op) -> str:
    return upload_text(op.raw[1].src)


def names(result) -> list[str]:
    return [op.name.split("| ", 1)[1] for op in result.changing]


# ----------------------------------------------------------------------------- OCI

@pytest.mark.parametrize("distro", DISTROS)
def test_oci_fresh_worker_gets_crun_state_dir_and_oci_conf_where_slurmstepd_reads_it(distro):
    result = planned(OCI, distro)
    assert result.op("Install crun").commands[-1].endswith("install --no-install-recommends crun")
    put = result.op("oci.conf, its runtime answering first")
    assert put.raw[1].dest == "/etc/slurm/.gpuinfra-oci-staged/oci.conf"
    assert put.raw[1].src.getvalue().decode() == file_text(oci_conf("crun"))
    assert "/usr/bin/crun --version" in put.commands[2]  # the runtime answers before it goes in
    staged = "/etc/slurm/.gpuinfra-oci-staged/oci.conf"
    assert put.commands[3].startswith(f"cp {staged} {OCI_CONF_KEPT}.")
    # ... and into slurmd's cache, where slurmstepd reads it, now and whenever slurmd empties
    # the cache (every fetch of its configuration): the path unit.
    assert result.op(f"{OCI_CONF} from {OCI_CONF_KEPT}").commands == (OCI_SYNC,)
    assert uploads_text(result.op(f"{OCI_SYNC} (oci.conf")) == file_text(oci_sync_script())
    assert result.op("gpuinfra-oci-conf.path watches").commands == (
        "systemctl start gpuinfra-oci-conf.path", "systemctl enable gpuinfra-oci-conf.path")
    assert result.op("/run/gpuinfra-oci exists").commands[1] == "chmod 1777 /run/gpuinfra-oci"


def test_oci_conf_sits_beside_the_slurm_conf_slurmd_fetched():
    """slurmstepd reads oci.conf from the folder of the slurm.conf it runs: the conf-cache of
    the SlurmdSpoolDir the slurm role's slurm.conf names."""
    template = (REPO / "roles/slurm/templates/etc/slurm/slurm.conf.j2").read_text()
    assert f"SlurmdSpoolDir={SLURMD_SPOOL}\n" in template
    assert OCI_CONF == f"{SLURMD_SPOOL}/conf-cache/oci.conf"


def test_oci_the_head_gets_no_oci_conf():
    result = planned(OCI, on=HEAD)
    assert not [op for op in result.ops if "oci" in op.name.lower() and "absent" not in op.name]


@pytest.mark.parametrize("distro", DISTROS)
def test_oci_converged_worker_plans_nothing(distro):
    result = planned(OCI, distro, worker=converged(distro, "worker", OCI))
    assert result.commands == [], names(result)


def test_oci_with_runc():
    result = planned({**OCI, "job_containers_oci_runtime": "runc"})
    text = result.op("oci.conf, its runtime").raw[1].src.getvalue().decode()
    assert 'RunTimeRun="/usr/sbin/runc --rootless=true --root=/run/gpuinfra-oci/%u run ' \
           '%n.%u.%j.%s.%t -b %b"' in text


def test_oci_on_a_gpu_node_with_the_toolkit_goes_through_the_nvidia_hook():
    data = {**OCI, "container_toolkit_enabled": True}
    result = planned(data)
    text = result.op("oci.conf, its runtime").raw[1].src.getvalue().decode()
    assert 'RunTimeRun="/usr/bin/nvidia-container-runtime --rootless=true' in text
    assert result.op("Install crun and runc")  # nvidia-container-runtime runs runc underneath
    assert result.op("NVIDIA hook works rootless").commands == (
        "nvidia-ctk config --in-place --set nvidia-container-cli.no-cgroups=true",)
    facts = fresh("debian-12", "worker")
    facts["files.FileContents"][f"path={NVIDIA_RUNTIME_CONFIG}"] = [
        "[nvidia-container-cli]", "no-cgroups = true"]
    again = planned(data, worker=facts)
    assert not [op for op in again.ops if "NVIDIA hook" in op.name]
    off = planned({**data, "job_containers_oci_gpus": False})
    assert "/usr/bin/crun" in off.op("oci.conf, its runtime").raw[1].src.getvalue().decode()


def test_oci_bundle_built_from_busybox_and_run_once_by_crun_as_nobody():
    result = planned({**OCI, "job_containers_oci_bundle": "/srv/containers/busybox"})
    assert result.op("Install crun and busybox-static")
    script = result.op("A busybox bundle at /srv/containers/busybox").commands[0]
    for part in ("cp /bin/busybox /srv/containers/busybox.gpuinfra-new/rootfs/bin/busybox",
                 "(cd /srv/containers/busybox.gpuinfra-new && crun spec --rootless)",
                 '"terminal": false',
                 "runuser -u nobody -- /usr/bin/crun --rootless=true",
                 "mv /srv/containers/busybox.gpuinfra-new /srv/containers/busybox"):
        assert part in script, part
    # The run as nobody comes before the bundle moves in: a bundle crun cannot run never does.
    assert script.index("runuser") < script.index("mv /srv/containers/busybox.gpuinfra-new")


def test_oci_bundle_with_runc_is_refused_naming_why():
    """By the gate (gpuinfra/spec/cross.py), before any host is touched."""
    with pytest.raises(PyinfraError, match=r"\[lab-worker1\] job_containers_oci_bundle = "
                       r"'/srv/containers/busybox': .*uid mappings of the user who made it"):
        planned({**OCI, "job_containers_oci_runtime": "runc",
                 "job_containers_oci_bundle": "/srv/containers/busybox"})


# --------------------------------------------------------------------- Enroot + Pyxis

@pytest.mark.parametrize("distro", DISTROS)
def test_enroot_pyxis_fresh_worker_downloads_checks_and_installs(distro):
    result = planned(ENROOT, distro)
    for package, sha in (("enroot", "a" * 64), ("enroot+caps", "b" * 64)):
        script = result.op(f"Download {package} 3.5.0-1").commands[0]
        assert enroot_url(package, "3.5.0") in script
        assert f'if [ "$got" != {sha} ]' in script
    assert result.op("Install Enroot from its release packages").commands == (
        "cd /var/cache/gpuinfra/job-containers && DEBIAN_FRONTEND=noninteractive apt-get "
        "install -y --no-install-recommends ./enroot_3.5.0-1_amd64.deb "
        "./enroot+caps_3.5.0-1_amd64.deb",)
    conf = upload_text(result.op(ENROOT_CONF).raw[1].src)
    assert "ENROOT_DATA_PATH /var/lib/enroot/data/user-$(id -u)\n" in conf
    assert pyxis_url("0.20.0") in result.op("Download Pyxis 0.20.0").commands[0]
    assert "libslurm-dev" in result.op("Install what Pyxis builds with").commands[-1]
    build = result.op("Build and install Pyxis 0.20.0").commands[0]
    assert "make -C /usr/local/src/pyxis-0.20.0 install prefix=/usr/local" in build
    stack = result.op(f"{PYXIS_PLUGSTACK}, its plugin present first")
    assert stack.raw[1].src.getvalue().decode().endswith(f"required {PYXIS_PLUGIN}\n")


def test_enroot_site_paths_land_in_enroot_conf():
    data = {**ENROOT, "job_containers_enroot_cache_path": "/scratch/enroot/cache-$(id -u)"}
    conf = upload_text(planned(data).op(ENROOT_CONF).raw[1].src)
    assert "ENROOT_CACHE_PATH /scratch/enroot/cache-$(id -u)\n" in conf


@pytest.mark.parametrize("distro", DISTROS)
def test_enroot_pyxis_head_gets_pyxis_only(distro):
    """srun on the head loads the plugin stack too (it adds --container-image); no Enroot."""
    result = planned(ENROOT, distro, on=HEAD)
    assert result.op("Build and install Pyxis")
    assert not [op for op in result.ops if "enroot" in op.name.lower()]


@pytest.mark.parametrize("distro", DISTROS)
@pytest.mark.parametrize("role", ["head", "worker"])
def test_enroot_pyxis_converged_plans_nothing(distro, role):
    facts = converged(distro, role, ENROOT)
    kwargs = {"head": facts} if role == "head" else {"worker": facts}
    result = planned(ENROOT, distro, on=HEAD if role == "head" else WORKER, **kwargs)
    assert result.commands == [], names(result)


def test_a_download_with_another_checksum_fails_and_is_deleted():
    script = planned(ENROOT).op("Download enroot 3.5.0-1").commands[0]
    failing = re.search(r"then (.*?); fi", script).group(1)
    assert failing.startswith("rm -f /var/cache/gpuinfra/job-containers/enroot_3.5.0-1")
    assert failing.endswith("exit 1")


# ------------------------------------------------------------------------------ Apptainer

@pytest.mark.parametrize("distro", DISTROS)
def test_apptainer_fresh_worker_installs_the_checked_release_package(distro):
    result = planned(APPTAINER, distro)
    assert apptainer_url("1.3.6") in result.op("Download apptainer 1.3.6").commands[0]
    assert f'if [ "$got" != {"d" * 64} ]' in result.op("Download apptainer").commands[0]
    assert result.op("Install Apptainer").commands[0].endswith("./apptainer_1.3.6_amd64.deb")


@pytest.mark.parametrize("distro", DISTROS)
def test_apptainer_converged_plans_nothing(distro):
    result = planned(APPTAINER, distro, worker=converged(distro, "worker", APPTAINER))
    assert result.commands == [], names(result)


def test_apptainer_head_gets_nothing():
    assert not planned(APPTAINER, on=HEAD).changing


# -------------------------------------------------------------------------- switched off

def test_no_runtime_removes_what_a_runtime_wrote():
    facts = converged("debian-12", "worker", OCI)
    facts["files.File"][f"path={OCI_CONF}"] = FILE
    facts["files.File"][f"path={PYXIS_PLUGSTACK}"] = FILE
    result = planned({}, worker=facts)
    facts["files.File"][f"path={OCI_CONF_KEPT}"] = FILE
    result = planned({}, worker=facts)
    assert [op.commands for op in result.changing] == [(f"rm -f {OCI_CONF_KEPT}",),
                                                       (f"rm -f {OCI_CONF}",),
                                                       (f"rm -f {PYXIS_PLUGSTACK}",)]
