"""QEMU guests of the lab: Debian 12's own kernel on an emulated q35 machine with an IOMMU.

The containers share this machine's kernel, which has no VFIO and no RDMA; a guest boots
Debian's generic kernel (GRUB from its own disk, so kernel arguments a role writes really take
effect) on a q35 machine with an emulated Intel IOMMU (docs/lab-notes.md). Each guest runs from
a copy-on-write overlay of the cached disk image (gpuinfra_lab/vmimage.py), so `lab down` throws its
changes away. Its state lives in .lab/vm/<host>/: the overlay, qemu.pid, serial.log, guest.json,
and the guest's SSH host key: made here and handed to the guest through fw_cfg (never learnt
over the network), so .lab/known_hosts and :func:`ssh_command` check the guest's key as the
containers' are checked.

Networking stays on this machine: SSH reaches the guest through a port forward on 127.0.0.1
(QEMU's user-mode network, which also gives the guest NAT to Debian's archive), and a private
segment between guests (gpuinfra_lab/profiles.py ``GuestMachine.segment``) is a socket on 127.0.0.1.

Acceleration: KVM when a short probe shows a guest kernel gets through its boot under it (on
this project's machines it hangs: docs/lab-notes.md), else TCG; the verdict is cached per host
kernel and QEMU version (:func:`accelerator`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuinfra_lab.podman import apt_install, last_line, sbin_path
from gpuinfra_lab.profiles import SEGMENT_SLOT, GuestMachine, HostPlan, guest_mgmt_address
from gpuinfra_lab.state import LabError, ensure_ed25519, say

VM_TOOLS = {"qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils"}
QEMU = "qemu-system-x86_64"
# An Intel CPU model: the guest's /proc/cpuinfo says GenuineIntel, matching the emulated
# Intel IOMMU (QEMU's default TCG CPU says AuthenticAMD). KVM hosts' CPUs abort on -cpu host.
CPU = "qemu64,vendor=GenuineIntel"
MGMT_MAC = "52:54:00:12:34:56"  # matched by the guest's management network file
NAME_PREFIX = "gpuinfra-lab-"  # -name of every lab guest: `lab down --all` finds them by it
SSH_TIMEOUT_S = 300
PROBE_TIMEOUT_S = 8
MARKER_OK = "GPUINFRA-BOOTLOADER-OK"
HOST_KEY = "ssh_host_ed25519_key"  # in the guest's folder: its SSH host key (private, 0600)


@dataclass(frozen=True)
class DiskImage:
    """The cached guest image: disk.raw (partition 1 ext4 with GRUB on the MBR), and the
    kernel and initramfs beside it (for the first boot and the KVM probe)."""

    folder: Path
    key: str

    @property
    def disk(self) -> Path:
        return self.folder / "disk.raw"

    @property
    def kernel(self) -> Path:
        return self.folder / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.folder / "initrd.img"


@dataclass(frozen=True)
class Segment:
    """A guest's place on its private segment: listen (first guest) or connect, on ``port``."""

    name: str
    listen: bool
    port: int
    address: str  # ADDRESS/PREFIX of the guest's second NIC
    mac: str


def ensure_vm_tools(log: Path) -> None:
    """Install QEMU (qemu-system-x86, qemu-utils) with apt-get when it is missing."""
    missing = sorted({pkg for tool, pkg in VM_TOOLS.items()
                      if shutil.which(tool, path=sbin_path()) is None})
    if missing:
        apt_install(missing, missing, log, recommends=False)


# ---------------------------------------------------------------------------- the command line

def machine_key(machine: GuestMachine) -> str:
    """What makes a guest's machine: a changed key means the guest is recreated."""
    doc = json.dumps([list(machine.devices), machine.memory_mib, machine.cpus, machine.segment,
                      machine.segment_subnet])
    return hashlib.sha256(doc.encode()).hexdigest()[:12]


def qemu_command(plan: HostPlan, machine: GuestMachine, folder: Path, port: int, accel: str,
                 lab_id: str, keys_file: Path, segment: Segment | None = None) -> list[str]:
    """The QEMU command line of one lab guest (started daemonized; state in ``folder``)."""
    name = f"{NAME_PREFIX}{lab_id}-{plan.name}"
    cmd = [
        QEMU, "-name", f"{name},process={name}",
        "-machine", f"q35,accel={accel}", "-cpu", CPU,
        "-smp", str(machine.cpus), "-m", str(machine.memory_mib),
        "-nodefaults", "-display", "none",
        "-serial", f"file:{folder / 'serial.log'}",
        "-daemonize", "-pidfile", str(folder / "qemu.pid"),
        # The emulated IOMMU (interrupt remapping off: no split irqchip under TCG).
        "-device", "intel-iommu,intremap=off",
        "-drive", f"file={folder / 'overlay.qcow2'},if=virtio,format=qcow2",
        "-netdev", f"user,id=mgmt,dhcpstart={guest_mgmt_address(plan.name)},"
                   f"hostfwd=tcp:127.0.0.1:{port}-:22",
        "-device", f"virtio-net-pci,netdev=mgmt,mac={MGMT_MAC}",
        "-fw_cfg", f"name=opt/gpuinfra/hostname,string={plan.name}",
        "-fw_cfg", f"name=opt/gpuinfra/authorized_keys,file={keys_file}",
        "-fw_cfg", f"name=opt/gpuinfra/ssh_host_ed25519_key,file={folder / HOST_KEY}",
    ]  # fmt: skip
    if segment is not None:
        side = "listen" if segment.listen else "connect"
        cmd += [
            "-netdev", f"socket,id=segment,{side}=127.0.0.1:{segment.port}",
            "-device", f"virtio-net-pci,netdev=segment,mac={segment.mac},"
                       f"addr={SEGMENT_SLOT:#x}",
            "-fw_cfg", f"name=opt/gpuinfra/segment,string={segment.address} {segment.mac}",
        ]  # fmt: skip
    return cmd + list(machine.devices)


def segment_places(plans: Sequence[HostPlan], ports: dict[str, int]) -> dict[str, Segment]:
    """Each guest's place on its machine's segment: the first listens on the segment's port,
    the second connects; addresses are hosts 1, 2 of the segment's subnet."""
    places: dict[str, Segment] = {}
    members: dict[str, list[HostPlan]] = {}
    for plan in plans:
        machine = plan.machine
        if machine is not None and machine.segment:
            members.setdefault(machine.segment, []).append(plan)
    for name, guests in members.items():
        if len(guests) > 2:
            raise LabError(f"segment {name}: {len(guests)} guests; a socket segment joins two")
        subnet = ipaddress.ip_network(guests[0].machine.segment_subnet)
        for index, plan in enumerate(guests):
            places[plan.name] = Segment(
                name, index == 0, ports[name], f"{subnet[index + 1]}/{subnet.prefixlen}",
                f"52:54:00:a0:{len(places) % 256:02x}:{index + 1:02x}")
    return places


# ---------------------------------------------------------------------------- acceleration

def accelerator(cache: Path, kernel: Path) -> str:
    """``kvm`` when a guest kernel gets through its early boot under KVM within a few seconds,
    else ``tcg``; probed once per host kernel and QEMU version (the verdict is cached)."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    version = subprocess.run([QEMU, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256(f"{platform.release()} {version}".encode()).hexdigest()[:12]
    verdict = cache / f"accel-{key}"
    if verdict.is_file():
        return verdict.read_text().strip()
    log = cache / f"accel-{key}.log"
    # The kernel alone, no disk: under working KVM it prints its banner and panics (no root)
    # in about a second; where KVM hangs (after "Probing EDD") nothing comes.
    try:
        subprocess.run([QEMU, "-machine", "q35,accel=kvm", "-cpu", CPU, "-m", "256",
                        "-nodefaults", "-display", "none", "-no-reboot",
                        "-serial", f"file:{log}", "-kernel", str(kernel),
                        "-append", "console=ttyS0 panic=-1"],
                       capture_output=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    text = log.read_text(errors="replace") if log.is_file() else ""
    accel = "kvm" if "Kernel panic" in text or "VFS:" in text else "tcg"
    verdict.write_text(accel + "\n")
    seen = "a guest kernel boots" if accel == "kvm" else f"no boot in {PROBE_TIMEOUT_S} s"
    say(f"KVM probe: {seen} under KVM: guests run under {accel} (cached in {verdict})")
    return accel


# ---------------------------------------------------------------------------- one guest

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def read_state(folder: Path) -> dict:
    path = folder / "guest.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def record_profile(folder: Path, profile: str | None) -> None:
    """Note the profile a kept guest now runs under (its spec changed, not its machine)."""
    state = read_state(folder)
    if state and state.get("profile") != profile:
        (folder / "guest.json").write_text(json.dumps({**state, "profile": profile},
                                                      indent=2) + "\n")


def running_pid(folder: Path) -> int | None:
    """The guest's QEMU process when it runs (checked by its -name, not only its pid)."""
    try:
        pid = int((folder / "qemu.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    name = read_state(folder).get("qemu_name", "").encode()
    return pid if name and f"{name.decode()},process={name.decode()}".encode() in cmdline \
        else None


def stop(folder: Path) -> bool:
    """Stop the guest of ``folder`` (QEMU quits on SIGTERM); True when one was running."""
    pid = running_pid(folder)
    if pid is None:
        return False
    _terminate(pid)
    return True


def _terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        status = Path(f"/proc/{pid}/stat").read_text(errors="replace") \
            if Path(f"/proc/{pid}/stat").exists() else ""
        if ") Z " in status:  # exited, not yet reaped by its parent (init)
            return
        time.sleep(0.1)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)


def stop_every_lab_guest() -> list[str]:
    """Stop every lab guest on the machine, any checkout's: QEMU processes whose -name starts
    with :data:`NAME_PREFIX`. Returns their names."""
    stopped = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not args or not args[0].endswith(QEMU.encode()) or b"-name" not in args:
            continue
        name = args[args.index(b"-name") + 1].decode(errors="replace").split(",")[0]
        if name.startswith(NAME_PREFIX):
            _terminate(int(proc.name))
            stopped.append(name)
    return sorted(stopped)


def start(plan: HostPlan, image: DiskImage, folder: Path, accel: str, lab_id: str,
          pubkey: str, port: int, segment: Segment | None) -> None:
    """Start a guest from a fresh overlay of ``image`` (a new machine), or from its existing
    overlay (a restart keeps the guest's disk)."""
    machine = plan.machine
    if machine is None:
        raise LabError(f"{plan.name}: profile {plan.profile} is not a guest profile")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    overlay = folder / "overlay.qcow2"
    if not overlay.is_file():
        _run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(image.disk),
              str(overlay)], f"{plan.name}: qemu-img create")
    keys = folder / "authorized_keys"
    keys.write_text(pubkey)
    host_key = ensure_ed25519(folder / HOST_KEY, plan.name).split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    (folder / "serial.log").unlink(missing_ok=True)
    command = qemu_command(plan, machine, folder, port, accel, lab_id, keys, segment)
    qemu_name = command[command.index("-name") + 1].split(",")[0]
    (folder / "guest.json").write_text(json.dumps({
        "profile": plan.profile, "machine": machine_key(machine), "image": image.key,
        "port": port, "accel": accel, "qemu_name": qemu_name,
        "segment_port": segment.port if segment and segment.listen else None,
    }, indent=2) + "\n")
    _run(command, f"{plan.name}: {QEMU}")


def _run(command: list[str], what: str) -> None:
    proc = subprocess.run(command, capture_output=True)
    if proc.returncode != 0:
        raise LabError(f"{what} failed: {last_line(proc.stderr)}")


def ssh_answers(port: int, timeout: float = 2.0) -> bool:
    """True when sshd's banner comes through the guest's port forward (QEMU accepts the TCP
    connection itself, so only the banner says the guest's sshd is there)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            return conn.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def wait_ssh(name: str, port: int, folder: Path, timeout: float = SSH_TIMEOUT_S) -> float:
    """Wait for the guest's sshd; the seconds waited. Fails naming the serial log."""
    start_t = time.monotonic()
    while not ssh_answers(port):
        if running_pid(folder) is None:
            raise LabError(f"{name}: QEMU exited (see {folder / 'serial.log'})")
        if time.monotonic() - start_t > timeout:
            raise LabError(f"{name}: sshd does not answer on 127.0.0.1:{port} after "
                           f"{timeout:.0f} s (see {folder / 'serial.log'})")
        time.sleep(1)
    return time.monotonic() - start_t


def host_public_key(folder: Path) -> str:
    """The guest's SSH host public key line (made by :func:`start`)."""
    return (folder / HOST_KEY).with_suffix(".pub").read_text().strip()


def ssh_command(port: int, key: Path, folder: Path, command: str, timeout: float = 60) -> str:
    """Run ``command`` in a guest as root over its port forward, its host key checked against
    the one :func:`start` gave it; its stdout ("" on failure)."""
    try:
        proc = subprocess.run(
            ["ssh", "-p", str(port), "-i", str(key), "-o", "IdentitiesOnly=yes",
             "-o", "StrictHostKeyChecking=yes",
             "-o", f"UserKnownHostsFile={folder / 'known_hosts'}",
             "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10", "root@127.0.0.1", command],
            capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ""
    return proc.stdout.strip()


def reboot(name: str, port: int, key: Path, folder: Path) -> float:
    """Reboot a guest for real (systemctl reboot: QEMU resets the machine, GRUB boots the
    kernel with the arguments on its disk); the seconds until sshd answered on the new boot."""
    before = ssh_command(port, key, folder, "cat /proc/sys/kernel/random/boot_id")
    if not before:
        raise LabError(f"{name}: no answer over SSH on 127.0.0.1:{port}: cannot reboot it")
    start_t = time.monotonic()
    ssh_command(port, key, folder, "systemctl reboot", timeout=20)
    while True:
        if time.monotonic() - start_t > SSH_TIMEOUT_S:
            raise LabError(f"{name}: not back {SSH_TIMEOUT_S} s after the reboot "
                           f"(see {folder / 'serial.log'})")
        if running_pid(folder) is None:
            raise LabError(f"{name}: QEMU exited during the reboot (see {folder / 'serial.log'})")
        time.sleep(2)
        if ssh_answers(port):
            after = ssh_command(port, key, folder, "cat /proc/sys/kernel/random/boot_id")
            if after and after != before:
                return time.monotonic() - start_t
