"""GPU nodes of the `monitoring` role: the GPU collector (collector.py and the library zip, a
systemd timer), the GPU job mapping of Slurm GPU workers (gpujobs.py as Slurm's Prolog and
Epilog, the folder made at boot) and NVIDIA's DCGM exporter."""

from __future__ import annotations

import shlex
from io import BytesIO
from typing import Any

from pyinfra.operations import files, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.gpus import AMPERE_OR_OLDER
from gpuinfra.knowledge.packages import PinnedPackages
from gpuinfra.monitoring.jobmap import JOB_MAPPING_DIR
from gpuinfra.monitoring.scrape import DCGM_EXPORTER_PORT, target
from gpuinfra.monitoring.units import (
    collector_service,
    collector_timer,
    dcgm_exporter_dropin,
    job_mapping_tmpfiles,
)
from gpuinfra.slurm.conf import JOB_MAPPING_PROGRAMS
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.nodecode import ZIP_NAME, node_zip, shipped
from gpuinfra_deploy.ops.apt import install_pinned, require_available
from gpuinfra_deploy.ops.checked import check_script, checked_files, upload_source
from gpuinfra_deploy.ops.cuda_repo import cuda_repository, key_url_for
from gpuinfra_deploy.ops.gpu import node_driver
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import render, text
from gpuinfra_roles.monitoring.shared import HERE, TEXTFILE_DIR, UNIT_DIR, UNIT_STAGE

COLLECTOR_LIB = "/usr/local/lib/gpuinfra-gpu-metrics"
COLLECTOR_OUT = f"{TEXTFILE_DIR}/gpuinfra-gpu.prom"
COLLECTOR_UNITS = ("gpuinfra-gpu-metrics.service", "gpuinfra-gpu-metrics.timer")
# Slurm GPU nodes: the Prolog and Epilog keeping which job holds each GPU (gpujobs.py, beside
# the collector; slurm.conf names them: gpuinfra.slurm.conf.JOB_MAPPING_PROGRAMS).
GPUJOBS = f"{COLLECTOR_LIB}/gpujobs.py"
JOB_MAPPING_TMPFILES = "/etc/tmpfiles.d/gpuinfra-gpu-jobs.conf"
# The Prolog's and the Epilog's text: one template for both (each runs gpujobs.py in its mode).
GPUJOBS_ENTRY_TEMPLATE = "monitoring/usr/local/sbin/gpuinfra-gpujobs.j2"
DCGM_PIN_FILE = "/etc/apt/preferences.d/gpuinfra-dcgm"
DCGM_DROPIN = f"{UNIT_DIR}/nvidia-dcgm-exporter.service.d/gpuinfra.conf"


def collector_files() -> dict[str, bytes]:
    """The collector as installed: collect.py and the library with its node-side runner
    (gpuinfra_deploy.nodecode: the same zip the health check runs on)."""
    return {f"{COLLECTOR_LIB}/collect.py": shipped(HERE / "collector.py"),
            f"{COLLECTOR_LIB}/{ZIP_NAME}": node_zip()}


def gpujobs_entry_point(mode: str) -> str:
    """The shell script slurm.conf's Prolog or Epilog names: gpujobs.py, isolated, in ``mode``
    (template :data:`GPUJOBS_ENTRY_TEMPLATE`, the same for both)."""
    return render(GPUJOBS_ENTRY_TEMPLATE, gpujobs=GPUJOBS, mode=mode)


def job_mapping() -> None:
    """The folder made at boot, and the Prolog and Epilog that keep it (gpujobs.py, with the
    collector's zip beside it)."""
    files.put(name=f"{JOB_MAPPING_DIR} made at boot (tmpfiles.d)", dest=JOB_MAPPING_TMPFILES,
              src=upload_source(text(job_mapping_tmpfiles(JOB_MAPPING_DIR))), mode="644")
    files.directory(name=f"{JOB_MAPPING_DIR} exists (0755)", path=JOB_MAPPING_DIR, user="root",
                    group="root", mode="755")
    files.put(name=f"GPU job mapping: {GPUJOBS}", dest=GPUJOBS,
              src=BytesIO(shipped(HERE / "gpujobs.py")), mode="644",
              create_remote_dir=True)
    for mode, path in JOB_MAPPING_PROGRAMS.items():
        files.put(name=f"Slurm's {mode.capitalize()} for the GPU job mapping: {path}",
                  dest=path, src=upload_source(gpujobs_entry_point(mode)), user="root",
                  group="root", mode="755")


def gpu_collector(node: NodeSpec, mapped: bool = False) -> None:
    # The collector once shipped the library as loose modules: gone, the zip holds it now.
    files.directory(name=f"{COLLECTOR_LIB}/gpuinfra absent (the library is in {ZIP_NAME})",
                    path=f"{COLLECTOR_LIB}/gpuinfra", present=False)
    changed = []
    for path, data in collector_files().items():
        changed.append(files.put(name=f"GPU collector: {path}", dest=path, src=BytesIO(data),
                                 mode="644", create_remote_dir=True))
    service, timer = COLLECTOR_UNITS
    units = {f"{UNIT_DIR}/{service}": collector_service(
        COLLECTOR_LIB, COLLECTOR_OUT, TEXTFILE_DIR, node.settings["nvidia_driver_device_group"],
        JOB_MAPPING_DIR if mapped else None),
             f"{UNIT_DIR}/{timer}": collector_timer()}
    verify = " ".join(shlex.quote(f"{UNIT_STAGE}/{unit}") for unit in COLLECTOR_UNITS)
    installed = checked_files(
        name="GPU collector units, checked by systemd-analyze", files=units, stage=UNIT_STAGE,
        check=check_script(f"systemd-analyze verify {verify}", "systemd", UNIT_STAGE))
    systemd.daemon_reload(name="systemd reads the collector's units", _if=installed.did_change)
    systemd.service(name="Run the GPU collector every minute", service=COLLECTOR_UNITS[1],
                    running=True, enabled=True)
    systemd.service(name="Collect GPU metrics now (new collector)", service=COLLECTOR_UNITS[0],
                    running=True, _if=any_changed(installed, *changed))


def dcgm_repo(site: Site, node: NodeSpec, data: Any, distro: dict[str, Any]) -> str:
    """DCGM's repository: the driver's (NVIDIA's CUDA repository, or the site's mirror), else
    monitoring_dcgm_repo_url, else the distribution's CUDA repository."""
    url = (node_driver(site, node).repo or data["monitoring_dcgm_repo_url"]
           or distro["cuda_repo"])
    if url is None:  # no CUDA repository the roles add for this release (Debian 13)
        raise GpuinfraError(f"{node.name}: DCGM comes from NVIDIA's CUDA repository, which "
                            f"these roles do not add on {host_distro()} (its signing key is "
                            "not verified): set monitoring_dcgm_repo_url to a repository "
                            "signed by NVIDIA's CUDA key (3bf863cc.pub) that carries DCGM, or "
                            "monitoring_dcgm = False (the GPU collector still runs)")
    return url.rstrip("/")


def dcgm_packages(data: Any, node: NodeSpec | None = None) -> PinnedPackages:
    """DCGM and its exporter; on Ampere and older GPUs also DCGM's proprietary package, which
    their profiling metrics need (gpuinfra.knowledge.gpus.AMPERE_OR_OLDER), at DCGM's own
    version (one DCGM release builds both: installs pin them together, e.g. Azure's HPC image
    scripts `datacenter-gpu-manager-4-core=${DCGM_VERSION}
    datacenter-gpu-manager-4-proprietary=${DCGM_VERSION}`)."""
    versions = {"datacenter-gpu-manager-4-core": data["monitoring_dcgm_version"],
                "datacenter-gpu-manager-exporter": data["monitoring_dcgm_exporter_version"]}
    if node is not None and node.gpus is not None and node.gpus.model.key in AMPERE_OR_OLDER:
        versions["datacenter-gpu-manager-4-proprietary"] = data["monitoring_dcgm_version"]
    return PinnedPackages(packages=dict(versions), pins=dict(versions))


def dcgm(site: Site, node: NodeSpec, data: Any, distro: dict[str, Any],
         mapped: bool = False, pods: bool = False) -> None:
    url = dcgm_repo(site, node, data, distro)
    cuda_repository(url, key_url_for(url, None), "DCGM")
    pinned = dcgm_packages(data, node)
    require_available("DCGM", pinned, "monitoring_dcgm_version / "
                      "monitoring_dcgm_exporter_version")
    install_pinned("DCGM and its exporter", pinned, DCGM_PIN_FILE)
    listen = target(node, DCGM_EXPORTER_PORT)
    dropin = files.put(name="DCGM exporter listens on the cluster network", dest=DCGM_DROPIN,
                       src=upload_source(text(dcgm_exporter_dropin(
                           listen, JOB_MAPPING_DIR if mapped else None, pods))),
                       mode="644", create_remote_dir=True)
    systemd.daemon_reload(name="systemd reads the DCGM exporter's drop-in",
                          _if=dropin.did_change)
    systemd.service(name="Run the DCGM host engine", service="nvidia-dcgm", running=True,
                    enabled=True)
    systemd.service(name="Run the DCGM exporter", service="nvidia-dcgm-exporter", running=True,
                    enabled=True)
    systemd.service(name="Restart the DCGM exporter on its new address",
                    service="nvidia-dcgm-exporter", restarted=True, _if=dropin.did_change)
