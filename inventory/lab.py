"""The local lab cluster (`gpuinfra lab up`): one head and GPU workers in podman containers,
and, with `lab up --vm`, QEMU guests (a hypervisor, `lab-hv1`, in the `hypervisors` group).

Each host's spec (what the node is meant to be) and what it is made of (a worker's replayed
hardware, a guest's emulated machine) come from the lab's one table of profiles,
gpuinfra_lab/profiles.py; the broken profile's spec says NVLink-bridged pairs while its replayed
hardware is PCIe only. Guests are reached through an SSH port forward on 127.0.0.1.

Connection data come from .lab/hosts.json, written by `gpuinfra lab up`: with it, the hosts are
exactly the running lab's (so lab-worker3 appears only after `lab up --broken`) and pyinfra
reaches them over SSH like any real host. Without it (no lab yet), the default lab is listed
with its specs only, so `gpuinfra validate inventory/lab.py` works anywhere.

The SSH user is root, or ``$GPUINFRA_LAB_SSH_USER`` (a lab proof's non-root user with sudo:
gpuinfra_lab/munge_sudo.py runs `gpuinfra roll --sudo` and `gpuinfra health --sudo` as it).
"""

import json
import os
from pathlib import Path

from gpuinfra_lab.profiles import (
    PROFILES,
    guest_node_address,
    host_address,
    lab_fabric,
    plan_hosts,
)
from gpuinfra_lab.state import Paths

_HOSTS_JSON = Path(__file__).resolve().parent.parent / ".lab" / "hosts.json"


def _host(entry: dict, ssh_key: str | None, known_hosts: str | None) -> tuple[str, dict]:
    """(name, data) of one lab host: its spec, and how to reach it when the lab is up (its
    host key checked against .lab/known_hosts, which `lab up` writes from inside each
    container, and for a QEMU guest from the host key it made and gave the guest)."""
    profile = PROFILES.get(entry.get("profile") or "")
    data = profile.spec_on(entry.get("os")) if profile else {}
    if profile and profile.expected_failures:
        # Units that fail on this lab host by design (no NVIDIA kernel module in a container):
        # the verify suite reports them as expected here, and as failures on any real node.
        data["lab_expected_failures"] = dict(profile.expected_failures)
    if entry.get("node_address"):
        data["node_address"] = entry["node_address"]
    if profile and profile.machine is not None and "node_address" not in data:
        # A QEMU guest: its address on its segment, else on its own user-mode network
        data["node_address"] = guest_node_address(profile, entry["name"])
    if entry.get("address"):
        data.update(
            ssh_hostname=entry["address"],
            ssh_user=os.environ.get("GPUINFRA_LAB_SSH_USER") or "root",
            **({"ssh_port": entry["port"]} if entry.get("port") else {}),
            ssh_key=ssh_key,
            ssh_known_hosts_file=known_hosts or "/dev/null",
            ssh_strict_host_key_checking="yes" if known_hosts else "no",
        )
    return entry["name"], data


def _group(lab: dict, group: str) -> list[tuple[str, dict]]:
    return [_host(h, lab.get("ssh_key"), lab.get("known_hosts")) for h in lab["hosts"]
            if group in h["groups"]]


# Without a lab, the default one, each container at the fixed address `lab up` will give it
# (its node_address: what the roles and the monitoring need), so the site validates anywhere.
_SUBNET = Paths(_HOSTS_JSON.parent.parent).subnet
# GPUINFRA_LAB_OS: the release of that lab (its spec differs on Debian 13: profiles.py
# on_release), as `gpuinfra lab up --os` would start it.
_DEFAULT_LAB = {"hosts": [{"name": h.name, "groups": list(h.groups), "profile": h.profile,
                           "node_address": host_address(_SUBNET, h.name),
                           "os": os.environ.get("GPUINFRA_LAB_OS")}
                          for h in plan_hosts()]}
_lab = json.loads(_HOSTS_JSON.read_text()) if _HOSTS_JSON.is_file() else _DEFAULT_LAB

head = _group(_lab, "head")
workers = _group(_lab, "workers")
hypervisors = _group(_lab, "hypervisors")
# `lab up --backup`: Slurm's backup controller, sharing slurmctld's state folder with the head
# (group_data/lab.py sets slurm_state_save_location to it).
slurm_backup = _group(_lab, "slurm_backup")
# `lab up --login`: a Slurm login node (client commands and MUNGE, the head's slurm.conf).
login = _group(_lab, "login")

# The fabric Slurm's topology/tree reads (topology.conf; a cluster-wide key, the same on every
# host): the lab's workers alternate between two leaf switches under one spine
# (gpuinfra_lab/profiles.py lab_fabric). In the default lab the two workers are on different
# leaves, so a 2-node job asking for one leaf waits (gpuinfra_lab/topology_placement.py).
_fabric = lab_fabric([name for name, _ in workers])
for _name, _data in (*head, *slurm_backup, *login, *workers, *hypervisors):
    if _fabric:
        _data["fabric_switches"] = _fabric
