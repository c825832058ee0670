"""What `lab up` installs in each host: root's SSH key, and on workers the replayed hardware
(the nvidia-smi stand-in, its captures, the device-node unit); and the waits for sshd."""

from __future__ import annotations

import io
import socket
import tarfile
import time

from gpuinfra_lab.boot import Boot
from gpuinfra_lab.podman import Podman, wait_booted
from gpuinfra_lab.profiles import HostPlan
from gpuinfra_lab.replay import profile_files
from gpuinfra_lab.state import LabError, Paths

SSH_TIMEOUT_S = 60

# Where the lab's files go inside a worker (see gpuinfra_lab/README.md).
GUEST_HARDWARE = "usr/local/share/gpuinfra-lab/hardware"
GUEST_FILES = {  # gpuinfra_lab/<file> -> (path in the container, mode)
    "nvidia-smi": ("usr/local/bin/nvidia-smi", 0o755),
    "dmesg": ("usr/local/bin/dmesg", 0o755),  # replays a kernel log a lab proof wrote
    "gpuinfra-lab-devices": ("usr/local/sbin/gpuinfra-lab-devices", 0o755),
    "gpuinfra-lab-devices.service": ("etc/systemd/system/gpuinfra-lab-devices.service", 0o644),
    # slurmd says it rebooted when it restarts: the container's kernel boot time never changes
    "gpuinfra-lab-slurmd-boot.conf": (
        "etc/systemd/system/slurmd.service.d/gpuinfra-lab-boot-time.conf", 0o644),
}


def guest_tar(paths: Paths, plan: HostPlan, pubkey: str) -> bytes:
    """The files `up` installs in a container: root's authorized key, and a worker's hardware."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _tar_add(tar, "root/.ssh", None, 0o700)
        _tar_add(tar, "root/.ssh/authorized_keys", pubkey.encode(), 0o600)
        if plan.profile:
            for source, (target, mode) in GUEST_FILES.items():
                _tar_add(tar, target, (paths.assets / source).read_bytes(), mode)
            # a variant's folder with its base's files under it: one self-contained folder
            for name, file in sorted(profile_files(paths.hardware, plan.profile).items()):
                _tar_add(tar, f"{GUEST_HARDWARE}/{name}", file.read_bytes(), 0o644)
    return buf.getvalue()


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes | None, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = mode, int(time.time())
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


INSTALL_SCRIPT = f"rm -rf /{GUEST_HARDWARE} && tar -x -p --no-overwrite-dir -C / -f -"
DEVICES_SCRIPT = (
    "systemctl daemon-reload && systemctl enable --quiet gpuinfra-lab-devices.service"
    " && systemctl restart gpuinfra-lab-devices.service"
)


def provision(podman: Podman, paths: Paths, plan: HostPlan, pubkey: str) -> str:
    """Install the SSH key and, on workers, the replayed hardware; the systemd state."""
    boot = wait_booted(podman, plan.name, plan.profile)
    if not boot.done:  # `up` needs a booted host; a failed service is the deploy's to fix
        raise LabError(came_back_broken(plan.name, boot))
    state = boot.state + (f" ({'; '.join(boot.unexpected)})" if boot.unexpected else "")
    podman.exec(plan.name, INSTALL_SCRIPT, stdin=guest_tar(paths, plan, pubkey))
    if plan.profile:
        podman.exec(plan.name, DEVICES_SCRIPT)
    return state


def came_back_broken(name: str, boot: Boot) -> str:
    """Why host ``name`` did not come back whole: its state and each unexpected unit."""
    what = "; ".join(boot.unexpected) or "systemd did not finish starting"
    return f"{name}: systemd {boot.state}: {what} (see `journalctl -b -u UNIT` on the host)"


def ssh_banner(address: str, timeout: float = 1.0) -> bool:
    """True when an SSH server answers on address:22."""
    try:
        with socket.create_connection((address, 22), timeout=timeout) as conn:
            return conn.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def wait_ssh(name: str, address: str) -> None:
    deadline = time.monotonic() + SSH_TIMEOUT_S
    while not ssh_banner(address):
        if time.monotonic() > deadline:
            raise LabError(f"{name}: sshd does not answer on {address}:22")
        time.sleep(0.5)
