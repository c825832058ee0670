"""Lab proof that VFIO never takes a device the host runs on, on the hypervisor guest's real
kernel: its own SSH NIC, named by address and then by vendor:device ID (issue 23, finding 5).

    .venv/bin/python molecule/vfio/host_devices.py

On a running hypervisor guest (lab-hv1), for each of ``vfio_devices = ["0000:00:01.0"]`` (the
guest's SSH NIC, enp0s1, virtio-net) and ``vfio_devices = ["1af4:1000"]`` (its ID), a deploy
of the vfio role with that spec must fail before it changes anything, naming the device, its
interface and why; afterwards the guest's modprobe options and driverctl overrides are as they
were, the NIC is still on virtio-pci and SSH still answers. The spec reaches pyinfra through
an inventory in a private temporary folder that reads inventory/lab.py and changes lab-hv1's
VFIO keys only (named lab.py: group_data/lab.py applies to it as to the lab's own).

Exit 0 when all hold, 1 listing what did not.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
GUEST = "lab-hv1"
SSH_NIC, SSH_NIC_ID, SSH_NETDEV = "0000:00:01.0", "1af4:1000", "enp0s1"
STATE = ("sha256sum /etc/modprobe.d/gpuinfra-vfio.conf 2>&1; ls /etc/driverctl.d; "
         f"basename $(readlink /sys/bus/pci/devices/{SSH_NIC}/driver)")
INVENTORY = '''"""lab-hv1 with only the VFIO keys changed (molecule/vfio/host_devices.py)."""
import runpy

_lab = runpy.run_path({lab!r})
head, workers = _lab["head"], _lab["workers"]
hypervisors = [(name, {{**data, "vfio_devices": {devices!r}, "vms": None,
                       "vfio_nvlink": None}} if name == {guest!r} else data)
               for name, data in _lab["hypervisors"]]
'''
# What each refusal must say (gpuinfra.vfio.host_use_refusals).
MUST_SAY = {
    SSH_NIC: [f"vfio: {GUEST}: {SSH_NIC} (1af4:1000, class 0x020000) is a device this host "
              f"runs on: its network interface {SSH_NETDEV} is up. Fix: remove it from "
              "vfio_devices"],
    SSH_NIC_ID: [f"'options vfio-pci ids={SSH_NIC_ID}' takes every function with that ID, "
                 f"including {SSH_NIC}, which this host runs on: its network interface "
                 f"{SSH_NETDEV} is up. Fix: pass the devices meant for VMs by address"],
}


def _run(args: list[str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False,
                          timeout=timeout)


def _on_guest(command: str) -> subprocess.CompletedProcess[str]:
    return _run(["ssh", "-F", str(REPO / ".lab" / "ssh_config"), GUEST, command], 120)


def refused(device: str, folder: Path) -> tuple[list[str], str]:
    """Deploy the vfio role with ``vfio_devices = [device]``: (problems, the refusal line)."""
    inventory = folder / "lab.py"
    inventory.write_text(INVENTORY.format(lab=str(REPO / "inventory" / "lab.py"),
                                          devices=[device], guest=GUEST))
    before = _on_guest(STATE).stdout
    deploy = _run([str(BIN / "pyinfra"), "-y", str(inventory), "roles/vfio/deploy.py"])
    output = " ".join((deploy.stdout + deploy.stderr).split())  # pyinfra wraps long lines
    after = _on_guest(STATE)
    problems = []
    if deploy.returncode == 0:
        problems.append(f"the deploy taking {device} succeeded")
    problems += [f"the deploy taking {device} did not say {words!r}" for words in MUST_SAY[device]
                 if words not in output]
    if after.returncode != 0:
        problems.append(f"SSH to {GUEST} failed after the deploy taking {device}")
    elif after.stdout != before:
        problems.append(f"the deploy taking {device} changed the guest: {before!r} -> "
                        f"{after.stdout!r}")
    if problems:
        print((deploy.stdout + deploy.stderr)[-3000:])
    start = output.find(MUST_SAY[device][0])
    return problems, output[start:start + 200] if start >= 0 else ""


def main() -> int:
    problems = []
    said = {}
    with tempfile.TemporaryDirectory(prefix="gpuinfra-host-devices-") as tmp:
        for device in (SSH_NIC, SSH_NIC_ID):
            found, said[device] = refused(device, Path(tmp))
            problems += found
    for line in problems:
        print(f"host-devices: {line}")
    if problems:
        return 1
    print(f"host-devices: the guest's SSH NIC was refused by address ({said[SSH_NIC][:120]}...) "
          f"and by ID ({said[SSH_NIC_ID][:120]}...); nothing changed, SSH still answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
