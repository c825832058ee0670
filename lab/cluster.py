"""The lab as a whole: bring it to a plan (`up`), remove it (`down`), reboot it, report it.

Everything podman does for the lab goes through lab.podman with the lab's containers.conf;
the hosts are planned by lab.profiles (the one table of profiles).
"""

from __future__ import annotations

import shutil

from lab.image import drop_old_images, ensure_image
from lab.podman import (
    Podman,
    ensure_container,
    ensure_host_tools,
    ensure_network,
    host_address,
    wait_booted,
)
from lab.profiles import HEAD_NAME, HostPlan
from lab.provision import came_back_broken, provision, ssh_banner, wait_ssh
from lab.state import LABEL, LabError, Paths, ensure_ssh_key, say, write_state


def lab_up(paths: Paths, plan: list[HostPlan]) -> list[dict]:
    """Bring the lab to ``plan``; the hosts as written to hosts.json."""
    ensure_host_tools(paths.lab / "apt-install.log")
    podman = Podman(paths)
    pubkey = ensure_ssh_key(paths)
    image = ensure_image(podman, paths)
    subnet = ensure_network(podman)
    found = podman.lab_containers()
    for extra in sorted(set(found) - {p.name for p in plan}):
        podman.remove(extra)
        say(f"{extra}: removed (not in this lab)")
    addresses = {h.name: host_address(subnet, h.name) for h in plan}
    for h in plan:
        done = ensure_container(podman, h, image, addresses[h.name], found.get(h.name))
        say(f"{h.name}: {done}")
    drop_old_images(podman, image)
    hosts, host_keys = [], {}
    for h in plan:
        state = provision(podman, paths, h, pubkey)
        wait_ssh(h.name, addresses[h.name])
        host_keys[h.name] = (addresses[h.name], host_public_keys(podman, h.name))
        hosts.append({"name": h.name, "address": addresses[h.name], "groups": list(h.groups),
                      "profile": h.profile, "systemd": state})  # fmt: skip
    write_state(paths, hosts, image, host_keys)
    return hosts


def host_public_keys(podman: Podman, name: str) -> list[str]:
    """The host's SSH host public keys, read inside its container (a channel no one on the
    network can answer for): what .lab/known_hosts trusts."""
    out = podman.exec(name, "cat /etc/ssh/ssh_host_*_key.pub")
    keys = [line for line in out.splitlines() if line.startswith(("ssh-", "ecdsa-"))]
    if not keys:
        raise LabError(f"{name}: no SSH host key in /etc/ssh")
    return keys


def lab_down(paths: Paths, every_lab: bool = False) -> list[str]:
    """Remove this checkout's lab containers and network (``every_lab``: every gpuinfra lab on
    the machine, other checkouts' and older ones' too); forget their addresses."""
    for stale in (paths.hosts_json, paths.ssh_config):
        stale.unlink(missing_ok=True)
    if shutil.which("podman") is None:
        return []
    podman = Podman(paths)
    found = podman.lab_containers(every_lab)
    containers = sorted(info["container"] for info in found.values())
    if containers:
        podman.run("rm", "-f", "-t", "0", *containers)
    label = f"label={LABEL}=1" if every_lab else f"label={LABEL}.id={podman.lab_id}"
    nets = podman.run("network", "ls", "--filter", label, "--format", "{{.Name}}").split()
    for net in nets:
        podman.run("network", "rm", net)
    return sorted(found) + [f"network {n}" for n in nets]


def lab_reboot(paths: Paths) -> list[dict]:
    """Reboot every running lab host the way a container reboots: `podman restart`, and wait
    until each came back whole: systemd running, or degraded by exactly the failures its
    profile expects (lab/profiles.py); else a LabError naming every other failed unit.

    A restart boots systemd afresh with a new /run (so the reboot marker
    /run/gpuinfra/reboot-required is gone, as after a real reboot) and a new /dev, whose
    NVIDIA nodes gpuinfra-lab-devices.service recreates from the driver options. Addresses are
    fixed, so hosts.json and ssh_config stay valid. Returns the hosts (name, address, systemd).
    """
    podman = Podman(paths)
    found = podman.lab_containers()
    names = sorted((n for n, info in found.items() if info["state"] == "running"), key=_order)
    if not names:
        raise LabError("no running lab to reboot (run `gpuinfra lab up`)")
    podman.restart(*names)
    hosts, broken = [], []
    for name in names:
        profile = found[name]["labels"].get(f"{LABEL}.profile") or None
        boot = wait_booted(podman, name, profile)
        if not boot.whole:
            broken.append(came_back_broken(name, boot))
        address = podman.address(name)
        wait_ssh(name, address)
        hosts.append({"name": name, "address": address, "systemd": boot.state})
    if broken:
        raise LabError("the lab did not come back whole after the reboot:\n  "
                       + "\n  ".join(broken))
    return hosts


def lab_status(paths: Paths) -> list[dict]:
    """Each labelled container: name, address, state, profile, groups, ssh."""
    if shutil.which("podman") is None:
        return []
    podman = Podman(paths)
    hosts = []
    for name, info in sorted(podman.lab_containers().items(), key=lambda kv: _order(kv[0])):
        running = info["state"] == "running"
        address = podman.address(name) if running else "-"
        labels = info["labels"]
        hosts.append({
            "name": name, "address": address, "state": info["state"],
            "groups": labels.get(f"{LABEL}.groups", "").split(","),
            "profile": labels.get(f"{LABEL}.profile") or None,
            "ssh": "ok" if running and ssh_banner(address) else "down",
        })  # fmt: skip
    return hosts


def _order(name: str) -> tuple[int, str]:
    return (0 if name == HEAD_NAME else 1, name.zfill(20))


def print_table(hosts: list[dict]) -> None:
    rows = [("HOST", "ADDRESS", "STATE", "GROUPS", "HARDWARE PROFILE")]
    for h in hosts:
        state = h.get("state", "running") + (f", ssh {h['ssh']}" if "ssh" in h else "")
        if "systemd" in h:
            state += f", systemd {h['systemd']}"
        rows.append((h["name"], h["address"], state, ",".join(h["groups"]), h["profile"] or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        say("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
