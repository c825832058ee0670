"""The local lab cluster (`gpuinfra lab up`): one head and GPU workers in podman containers.

The GPU keys are the cluster spec: what each node is meant to be. Each worker's lab hardware
profile (lab/hardware/) decides what its replayed `nvidia-smi` answers; the broken
profile's spec says NVLink-bridged pairs while its replayed hardware is PCIe only.

Connection data come from .lab/hosts.json, written by `gpuinfra lab up`: with it, the hosts are
exactly the running lab's (so lab-worker3 appears only after `lab up --broken`) and pyinfra
reaches them over SSH like any real host. Without it (no lab yet), the default lab is listed
with its specs only, so `gpuinfra validate inventory/lab.py` works anywhere.
"""

import json
from pathlib import Path

_HOSTS_JSON = Path(__file__).resolve().parent.parent / ".lab" / "hosts.json"

# Spec of a worker, by the hardware profile `lab up` gives it.
_PROFILE_SPECS = {
    "8x-h100-sxm-nvswitch": {
        "gpu_model": "H100-SXM5-80GB",
        "gpu_count": 8,
        "gpu_topology": "nvswitch-all-to-all",
    },
    "2x-h100-pcie-bridged": {
        "gpu_model": "H100-PCIE-80GB",
        "gpu_count": 2,
        "gpu_topology": "bridged-pairs",
    },
    "2x-a100-pcie-bridge-missing": {
        "gpu_model": "A100-PCIE-40GB",
        "gpu_count": 2,
        "gpu_topology": "bridged-pairs",
    },
}

# The default lab (`gpuinfra lab up` without options), listed when no lab is running.
_DEFAULT_LAB = {
    "hosts": [
        {"name": "lab-head", "groups": ["head"], "profile": None},
        {"name": "lab-worker1", "groups": ["workers"], "profile": "8x-h100-sxm-nvswitch"},
        {"name": "lab-worker2", "groups": ["workers"], "profile": "2x-h100-pcie-bridged"},
    ]
}


def _host(entry: dict, ssh_key: str | None) -> tuple[str, dict]:
    """(name, data) of one lab host: its spec, and how to reach it when the lab is up."""
    data = dict(_PROFILE_SPECS.get(entry.get("profile"), {}))
    if entry.get("address"):
        data.update(
            ssh_hostname=entry["address"],
            ssh_user="root",
            ssh_key=ssh_key,
            ssh_known_hosts_file="/dev/null",
            ssh_strict_host_key_checking="no",
        )
    return entry["name"], data


def _group(lab: dict, group: str) -> list[tuple[str, dict]]:
    return [_host(h, lab.get("ssh_key")) for h in lab["hosts"] if group in h["groups"]]


_lab = json.loads(_HOSTS_JSON.read_text()) if _HOSTS_JSON.is_file() else _DEFAULT_LAB

head = _group(_lab, "head")
workers = _group(_lab, "workers")
