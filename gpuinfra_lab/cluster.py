"""The lab as a whole: bring it to a plan (`up`), remove it (`down`), reboot it, report it.

Everything podman does for the lab goes through gpuinfra_lab.podman with the lab's containers.conf,
everything QEMU does through gpuinfra_lab.qemu; the hosts are planned by gpuinfra_lab.profiles (the
one table of profiles): containers (the head, the GPU workers) and QEMU guests.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpuinfra_lab import qemu
from gpuinfra_lab.fleet import drop_old_fleet_images, ensure_fleet_image, raise_host_limits
from gpuinfra_lab.image import DEFAULT_OS, drop_old_images, ensure_image
from gpuinfra_lab.podman import (
    Podman,
    ensure_container,
    ensure_host_tools,
    ensure_network,
    wait_booted,
)
from gpuinfra_lab.profiles import FLEET_PREFIX, HEAD_NAME, PROFILES, HostPlan, host_address
from gpuinfra_lab.provision import came_back_broken, provision, ssh_banner, wait_ssh
from gpuinfra_lab.state import LABEL, LabError, Paths, ensure_ssh_key, say, write_state
from gpuinfra_lab.vmimage import CACHE, ensure_vm_image

FLEET_PARALLEL = 8  # containers started and provisioned at once when a fleet is asked for


def lab_up(paths: Paths, plan: list[HostPlan], os_name: str = DEFAULT_OS) -> list[dict]:
    """Bring the lab to ``plan``, every host on the release ``os_name`` (its containers and
    its guests); the hosts as written to hosts.json."""
    containers = [h for h in plan if h.machine is None]
    guests = [h for h in plan if h.machine is not None]
    ensure_host_tools(paths.lab / "apt-install.log")
    podman = Podman(paths)
    pubkey = ensure_ssh_key(paths)
    image = ensure_image(podman, paths, os_name)
    # Guests boot in the background (tens of seconds under TCG) while the containers start.
    started = _guests_up(paths, podman, guests, image, pubkey)
    subnet = ensure_network(podman)
    found = podman.lab_containers()
    for extra in sorted(set(found) - {p.name for p in containers}):
        podman.remove(extra)
        say(f"{extra}: removed (not in this lab)")
    addresses = {h.name: host_address(subnet, h.name) for h in containers}
    fleet = [h for h in containers if h.name.startswith(FLEET_PREFIX)]
    if fleet:
        raise_host_limits()
    fleet_image = ensure_fleet_image(podman, paths, image) if fleet else None
    if fleet_image:
        drop_old_fleet_images(podman, fleet_image)

    def start(h: HostPlan) -> None:
        chosen = fleet_image if h in fleet and fleet_image else image
        done = ensure_container(podman, h, chosen, addresses[h.name], found.get(h.name))
        say(f"{h.name}: {done}")

    def ready(h: HostPlan) -> dict:
        state = provision(podman, paths, h, pubkey)
        wait_ssh(h.name, addresses[h.name])
        host_keys[h.name] = (addresses[h.name], host_public_keys(podman, h.name))
        return {"name": h.name, "address": addresses[h.name], "groups": list(h.groups),
                "profile": h.profile, "systemd": state, "os": os_name}

    host_keys: dict = {}
    # The fleet's containers start and boot a few at a time: one by one, a hundred of them
    # would take minutes of waiting on each systemd in turn.
    with ThreadPoolExecutor(max_workers=FLEET_PARALLEL if fleet else 1) as pool:
        list(pool.map(start, containers))
        drop_old_images(podman, image, paths.customize.read_bytes())
        hosts = list(pool.map(ready, containers))
    for h in guests:
        port, accel = started[h.name]
        waited = qemu.wait_ssh(h.name, port, paths.vms / h.name)
        say(f"{h.name}: sshd answers on 127.0.0.1:{port} ({accel}, {waited:.0f} s after up "
            "reached it)")
        hosts.append({"name": h.name, "address": "127.0.0.1", "port": port,
                      "groups": list(h.groups), "profile": h.profile, "os": os_name,
                      "state": f"running (QEMU, {accel})"})
        host_keys[h.name] = (f"[127.0.0.1]:{port}", [qemu.host_public_key(paths.vms / h.name)])
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


def _guests_up(paths: Paths, podman: Podman, guests: list[HostPlan], image: str,
               pubkey: str) -> dict[str, tuple[int, str]]:
    """Start (or keep) the planned QEMU guests, remove the others; {name: (ssh port, accel)}.

    A running guest whose machine, disk image and acceleration are as planned is kept (a
    profile that only changes the spec, such as a broken variant, keeps it running); a
    stopped one restarts from its overlay; any other is recreated from a fresh overlay."""
    for extra in sorted(_guest_folders(paths) - {g.name for g in guests}):
        qemu.stop(paths.vms / extra)
        shutil.rmtree(paths.vms / extra, ignore_errors=True)
        say(f"{extra}: removed (not in this lab)")
    if not guests:
        return {}
    qemu.ensure_vm_tools(paths.lab / "apt-install.log")
    disk = ensure_vm_image(podman, paths, image)
    accel = qemu.accelerator(CACHE, disk.kernel)
    states = {g.name: qemu.read_state(paths.vms / g.name) for g in guests}
    segment_ports = {}
    for g in guests:
        if g.machine.segment and g.machine.segment not in segment_ports:
            recorded = states[g.name].get("segment_port")
            segment_ports[g.machine.segment] = recorded if recorded and qemu.port_free(recorded) \
                else qemu.free_port()
    places = qemu.segment_places(guests, segment_ports)
    started = {}
    # Listeners of a segment start before the guests that connect to them.
    for g in sorted(guests, key=lambda g: not (places.get(g.name) and places[g.name].listen)):
        folder, state = paths.vms / g.name, states[g.name]
        same = (state.get("machine"), state.get("image"), state.get("accel")) == \
            (qemu.machine_key(g.machine), disk.key, accel)
        running = qemu.running_pid(folder) is not None
        if running and same:
            done, port = "reused", state["port"]
            qemu.record_profile(folder, g.profile)  # a broken variant: same machine, new spec
        else:
            if running or not same:
                qemu.stop(folder)
                shutil.rmtree(folder, ignore_errors=True)
            port = state.get("port") if same and qemu.port_free(state.get("port") or 0) \
                else qemu.free_port()
            qemu.start(g, disk, folder, accel, paths.lab_id, pubkey, port, places.get(g.name))
            done = "started" if same else ("recreated (machine, image or acceleration changed)"
                                           if state else "created")
        say(f"{g.name}: {done} (QEMU guest, {accel}, ssh 127.0.0.1:{port})")
        started[g.name] = (port, accel)
    return started


def _guest_folders(paths: Paths) -> set[str]:
    return {p.name for p in paths.vms.iterdir() if p.is_dir()} if paths.vms.is_dir() else set()


def lab_down(paths: Paths, every_lab: bool = False) -> list[str]:
    """Remove this checkout's lab containers, QEMU guests (stopped, overlays deleted) and
    network (``every_lab``: every gpuinfra lab on the machine, other checkouts' and older ones'
    too); forget their addresses."""
    for stale in (paths.hosts_json, paths.ssh_config):
        stale.unlink(missing_ok=True)
    guests = sorted(g for g in _guest_folders(paths) if qemu.stop(paths.vms / g))
    if every_lab:
        guests += qemu.stop_every_lab_guest()
    shutil.rmtree(paths.vms, ignore_errors=True)
    guests = [f"guest {g}" for g in sorted(set(guests))]
    if shutil.which("podman") is None:
        return guests
    podman = Podman(paths)
    found = podman.lab_containers(every_lab)
    containers = sorted(info["container"] for info in found.values())
    if containers:
        podman.run("rm", "-f", "-t", "0", *containers)
    # slurmctld's state of the controllers (`lab up --backup`): a new lab starts without it.
    shutil.rmtree(podman.shared_state, ignore_errors=True)
    label = f"label={LABEL}=1" if every_lab else f"label={LABEL}.id={podman.lab_id}"
    nets = podman.run("network", "ls", "--filter", label, "--format", "{{.Name}}").split()
    for net in nets:
        podman.run("network", "rm", net)
    return sorted(found) + guests + [f"network {n}" for n in nets]


def lab_reboot(paths: Paths) -> list[dict]:
    """Reboot every running lab host: a container the way a container reboots (`podman
    restart`), a QEMU guest for real (`systemctl reboot`: GRUB boots its kernel with the
    arguments on its disk); and wait until each came back whole: a container's systemd
    running, or degraded by exactly the failures its profile expects (gpuinfra_lab/profiles.py),
    else a LabError naming every other failed unit; a guest's sshd answering on a new boot.

    A container restart boots systemd afresh with a new /run (so the reboot marker
    /run/gpuinfra/reboot-required is gone, as after a real reboot) and a new /dev, whose
    NVIDIA nodes gpuinfra-lab-devices.service recreates from the driver options. Addresses are
    fixed, so hosts.json and ssh_config stay valid. Returns the hosts (name, address, systemd
    or the guest's reboot time).
    """
    podman = Podman(paths) if shutil.which("podman") else None
    found = podman.lab_containers() if podman else {}
    names = sorted((n for n, info in found.items() if info["state"] == "running"), key=_order)
    guests = sorted(g for g in _guest_folders(paths)
                    if qemu.running_pid(paths.vms / g) is not None)
    if not names and not guests:
        raise LabError("no running lab to reboot (run `gpuinfra lab up`)")
    with ThreadPoolExecutor(max_workers=max(1, len(guests))) as pool:
        rebooting = {g: pool.submit(_reboot_guest, paths, g) for g in guests}
        if names:
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
        for name, future in rebooting.items():
            port, seconds = future.result()
            hosts.append({"name": name, "address": f"127.0.0.1:{port}",
                          "systemd": f"rebooted its kernel, sshd back in {seconds:.0f} s"})
    if broken:
        raise LabError("the lab did not come back whole after the reboot:\n  "
                       + "\n  ".join(broken))
    return hosts


def _reboot_guest(paths: Paths, name: str) -> tuple[int, float]:
    folder = paths.vms / name
    port = qemu.read_state(folder)["port"]
    return port, qemu.reboot(name, port, paths.ssh_key, folder)


def lab_status(paths: Paths) -> list[dict]:
    """Each labelled container and each QEMU guest: name, address, state, profile, groups,
    ssh."""
    guests = [_guest_status(paths.vms / g) for g in sorted(_guest_folders(paths))]
    if shutil.which("podman") is None:
        return guests
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
    return hosts + guests


def _guest_status(folder: Path) -> dict:
    state = qemu.read_state(folder)
    running = qemu.running_pid(folder) is not None
    profile = PROFILES.get(state.get("profile") or "")
    port = state.get("port")
    return {
        "name": folder.name, "address": f"127.0.0.1:{port}" if running else "-",
        "state": f"running (QEMU, {state.get('accel', '?')})" if running else "stopped",
        "groups": list(profile.groups) if profile else [],
        "profile": state.get("profile"),
        "ssh": "ok" if running and port and qemu.ssh_answers(port) else "down",
    }  # fmt: skip


def _order(name: str) -> tuple[int, str]:
    return (0 if name == HEAD_NAME else 1, name.zfill(20))


def print_table(hosts: list[dict]) -> None:
    rows = [("HOST", "ADDRESS", "STATE", "GROUPS", "HARDWARE PROFILE")]
    for h in hosts:
        state = h.get("state", "running") + (f", ssh {h['ssh']}" if "ssh" in h else "")
        if "systemd" in h:
            state += f", systemd {h['systemd']}"
        address = f"{h['address']}:{h['port']}" if h.get("port") else h["address"]
        rows.append((h["name"], address, state, ",".join(h["groups"]), h["profile"] or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        say("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
