"""The head of a Kubernetes site in the `monitoring` role: the GPUs Kubernetes offers on each
GPU worker, against the spec, every minute (kubernetes_nodes.py, the library zip, the expected
resources rendered from the spec and checked by that program before they go live, a timer):
the KubernetesGpusMissing alert (device plugin down, a GPU lost) without kube-state-metrics."""

from __future__ import annotations

import shlex
from io import BytesIO
from pathlib import Path

from pyinfra.operations import files, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.kubernetes.kubeadm import ADMIN_CONF
from gpuinfra.monitoring.k8snodes import EXPECTED_PATH, LIB, PROM_NAME, UNITS, expected_json
from gpuinfra.monitoring.units import kubernetes_nodes_service, kubernetes_nodes_timer
from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra_deploy.nodecode import ZIP_NAME, node_zip, shipped
from gpuinfra_deploy.ops.checked import check_script, checked_files
from gpuinfra_roles.monitoring.shared import HERE, TEXTFILE_DIR, UNIT_DIR, UNIT_STAGE

OUT = f"{TEXTFILE_DIR}/{PROM_NAME}"
EXPECTED_STAGE = f"{Path(EXPECTED_PATH).parent}/.gpuinfra-staged-kubernetes-gpus"


def kubernetes_head(spec: ClusterSpec, node: NodeSpec) -> bool:
    """The head of a site running Kubernetes (its control plane, with the admin kubeconfig)
    writes Kubernetes' GPUs (KubernetesGpusMissing reads them)."""
    return node.is_head and "kubernetes" in spec.schedulers


def kubernetes_files() -> dict[str, bytes]:
    """The head's program as installed, with the library zip."""
    return {f"{LIB}/kubernetes_nodes.py": shipped(HERE / "kubernetes_nodes.py"),
            f"{LIB}/{ZIP_NAME}": node_zip()}


def kubernetes_gpus(spec: ClusterSpec) -> None:
    changed = [files.put(name=f"Kubernetes GPUs: {path}", dest=path, src=BytesIO(data),
                         mode="644", create_remote_dir=True)
               for path, data in kubernetes_files().items()]
    staged = shlex.quote(f"{EXPECTED_STAGE}/{Path(EXPECTED_PATH).name}")
    expected = checked_files(
        name=f"{EXPECTED_PATH}: the GPUs the spec implies, checked by the collector",
        files={EXPECTED_PATH: expected_json(spec)}, stage=EXPECTED_STAGE,
        check=check_script(f"/usr/bin/python3 -I {LIB}/kubernetes_nodes.py --check "
                           f"--expected {staged}", "gpuinfra-kubernetes-nodes", EXPECTED_STAGE))
    service, timer = UNITS
    units = {f"{UNIT_DIR}/{service}": kubernetes_nodes_service(LIB, OUT, TEXTFILE_DIR,
                                                               EXPECTED_PATH, ADMIN_CONF),
             f"{UNIT_DIR}/{timer}": kubernetes_nodes_timer()}
    verify = " ".join(shlex.quote(f"{UNIT_STAGE}/{unit}") for unit in UNITS)
    installed = checked_files(
        name="Kubernetes GPUs' units, checked by systemd-analyze", files=units, stage=UNIT_STAGE,
        check=check_script(f"systemd-analyze verify {verify}", "systemd", UNIT_STAGE))
    systemd.daemon_reload(name="systemd reads the Kubernetes GPUs' units",
                          _if=installed.did_change)
    systemd.service(name="Ask Kubernetes for its GPUs every minute", service=timer,
                    running=True, enabled=True)
    systemd.service(name="Ask Kubernetes for its GPUs now (new program or spec)",
                    service=service, running=True,
                    _if=any_changed(installed, expected, *changed))
