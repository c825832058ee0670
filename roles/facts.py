"""pyinfra facts about GPU hosts, read through the gpuinfra parsers.

Hardware facts (for roles such as Slurm's gres.conf or VFIO binding, and for the deploy's own
decisions) return the parser's plain data (``to_json()``), and ``{}`` when the tool is absent
(``requires_command``) or fails: no driver loaded, no GPU ("No devices were found"), a lab
stand-in refusing a query. Only the output of a *successful* command is parsed; output the
parser cannot read fails the host with the parser's message (FactProcessError), since acting on
a half-read topology would be worse.

Every command runs as ``out=$(CMD 2>/dev/null) && printf '%s\\n' "$out"; true``: a failing tool
prints nothing and the fact command itself always succeeds.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

from pyinfra.api import FactBase
from pyinfra.api.exceptions import FactProcessError

from gpuinfra.aptpolicy import parse_apt_policy
from gpuinfra.errors import ParseError
from gpuinfra.migplan import STATE_COMMAND as MIG_STATE_COMMAND
from gpuinfra.migplan import split_sections
from gpuinfra.parsers.cpus import LSCPU_COMMAND, parse_lscpu, parse_meminfo_mb
from gpuinfra.parsers.gpus import parse_gpus
from gpuinfra.parsers.lspci import parse_lspci
from gpuinfra.parsers.nvlink import parse_nvlink
from gpuinfra.parsers.p2p import normalize_mode, parse_p2p
from gpuinfra.parsers.pcisysfs import (
    DRIVERCTL_SAVED_COMMAND,
    PCI_SYSFS_COMMAND,
    device_users_command,
    parse_device_users,
    parse_driverctl_saved,
    parse_pci_sysfs,
)
from gpuinfra.parsers.system import (
    DEVICE_NODES_COMMAND,
    GPU_INFORMATION_COMMAND,
    parse_device_nodes,
    parse_gpu_minors,
    parse_group_ids,
    parse_held_packages,
    parse_proc_modules,
)
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.platforms import distro_key
from gpuinfra.runtimes import CONFIG_PATHS, check_runtime
from gpuinfra.vfio import parse_qm_config

GPU_FIELDS = ["index", "name", "uuid", "pci.bus_id", "driver_version", "persistence_mode",
              "memory.total"]


def quiet(command: str) -> str:
    """``command``'s stdout when it succeeds, nothing when it fails; always exits 0."""
    return f'out=$({command} 2>/dev/null) && printf \'%s\\n\' "$out"; true'


def _parsed(parse: Callable[..., Any], output: list[str], **kwargs: Any) -> dict[str, Any]:
    try:
        return parse("\n".join(output), **kwargs).to_json()
    except ParseError as exc:
        raise FactProcessError(str(exc)) from exc


class NvidiaGpus(FactBase):
    """GPUs from ``nvidia-smi --query-gpu`` (:data:`GPU_FIELDS`), ``{}`` without a driver.

    ``{"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...",
    "model": "H100-SXM5-80GB", "mig_devices": [], "pci.bus_id": "00000000:19:00.0",
    "driver_version": "535.161.08", "persistence_mode": "Enabled", "memory.total": 81559}]}``
    """

    default = dict

    def requires_command(self) -> str:
        return "nvidia-smi"

    def command(self) -> str:
        return quiet(f"nvidia-smi --query-gpu={','.join(GPU_FIELDS)} "
                     "--format=csv,noheader,nounits")

    def process(self, output: list[str]) -> dict[str, Any]:
        return _parsed(parse_gpus, output, fields=GPU_FIELDS)


class NvidiaMigState(FactBase):
    """What the MIG plan reads (gpuinfra.migplan.STATE_COMMAND), one text per part:
    ``{"list": <nvidia-smi -L>, "mode": <index, uuid, mig.mode.current, mig.mode.pending>,
    "lgi": <nvidia-smi mig -lgi>, "lci": <-lci>, "apps": <--query-compute-apps>}``; ``{}``
    without nvidia-smi. Turned into each GPU's state by gpuinfra.migplan.node_state."""

    default = dict

    def requires_command(self) -> str:
        return "nvidia-smi"

    def command(self) -> str:
        return MIG_STATE_COMMAND

    def process(self, output: list[str]) -> dict[str, str]:
        try:
            return split_sections("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class NvidiaTopology(FactBase):
    """``nvidia-smi topo -m``: ``{"gpus", "nics", "nic_devices", "links", "cpu_affinity",
    "numa_affinity"}``; ``links["GPU0"]["GPU1"] == "NV18"``. ``{}`` without a driver."""

    default = dict

    def requires_command(self) -> str:
        return "nvidia-smi"

    def command(self) -> str:
        return quiet("nvidia-smi topo -m")

    def process(self, output: list[str]) -> dict[str, Any]:
        return _parsed(parse_topo, output)


class NvidiaP2P(FactBase):
    """``nvidia-smi topo -p2p <mode>`` (r, w, n, a, p): ``{"mode", "gpus", "status"}``,
    ``status["GPU0"]["GPU1"] == "OK"``. ``{}`` without a driver."""

    default = dict

    def requires_command(self, mode: str) -> str:
        return "nvidia-smi"

    def command(self, mode: str) -> str:
        self.mode = normalize_mode(mode)
        return quiet(f"nvidia-smi topo -p2p {self.mode}")

    def process(self, output: list[str]) -> dict[str, Any]:
        return _parsed(parse_p2p, output, mode=self.mode)


class NvidiaNvlink(FactBase):
    """``nvidia-smi nvlink --status``: ``{"GPU0": {"name", "uuid", "links": {"0": {"active",
    "gbps"}}, "all_inactive"}}``. ``{}`` without a driver or without NVLink."""

    default = dict

    def requires_command(self) -> str:
        return "nvidia-smi"

    def command(self) -> str:
        return quiet("nvidia-smi nvlink --status")

    def process(self, output: list[str]) -> dict[str, Any]:
        return _parsed(parse_nvlink, output)


class PciDevices(FactBase):
    """``lspci -Dnnk``: ``{"devices": [{"address", "class_code", "vendor_id", "device_id",
    "driver", "modules", ...}]}``. ``{}`` without pciutils."""

    default = dict

    def requires_command(self) -> str:
        return "lspci"

    def command(self) -> str:
        return quiet("lspci -Dnnk")

    def process(self, output: list[str]) -> dict[str, Any]:
        return _parsed(parse_lspci, output)


class LoadedModules(FactBase):
    """/proc/modules: ``{"modules": {"nvidia": {"size", "instances", "used_by", "state"}}}``.

    ``{}`` where /proc/modules is absent (a kernel without module support). Not pyinfra's
    ``server.KernelModules``: that one runs a second command first (the ``Kernel`` fact) and
    raises a bare ValueError on a line it cannot split, where this one fails the host with the
    parser's message naming the line."""

    default = dict

    def command(self) -> str:
        return quiet("cat /proc/modules")

    def process(self, output: list[str]) -> dict[str, Any]:
        return _parsed(parse_proc_modules, output)


# ---------------------------------------------------------------- facts the GPU roles use

class HeldPackages(FactBase):
    """Packages on hold (``apt-mark showhold``): a sorted list of names."""

    default = list

    def requires_command(self) -> str:
        return "apt-mark"

    def command(self) -> str:
        return quiet("apt-mark showhold")

    def process(self, output: list[str]) -> list[str]:
        return parse_held_packages("\n".join(output))


class AptPolicy(FactBase):
    """``apt-cache policy PKG...``: ``{"nvidia-smi": {"installed", "candidate", "versions"}}``;
    packages apt does not know are absent. ``{}`` without apt."""

    default = dict

    def requires_command(self, packages: list[str]) -> str:
        return "apt-cache"

    def command(self, packages: list[str]) -> str:
        return quiet("apt-cache policy " + " ".join(shlex.quote(p) for p in packages))

    def process(self, output: list[str]) -> dict[str, Any]:
        try:
            parsed = parse_apt_policy("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc
        return {name: entry.to_json() for name, entry in parsed.items()}


class GroupIds(FactBase):
    """Every group with its numeric gid (``getent group``): ``{"video": 44, ...}``."""

    default = dict

    def command(self) -> str:
        return quiet("getent group")

    def process(self, output: list[str]) -> dict[str, int]:
        try:
            return parse_group_ids("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class NvidiaDeviceNodes(FactBase):
    """/dev/nvidia* character devices as they are now:
    ``{"/dev/nvidia0": {"gid": 0, "group": "root", "mode": "0666"}}`` (``{}``: none)."""

    default = dict

    def command(self) -> str:
        return quiet(DEVICE_NODES_COMMAND)

    def process(self, output: list[str]) -> dict[str, Any]:
        try:
            return parse_device_nodes("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class ContainerRuntimeConfig(FactBase):
    """The configuration text of a container runtime (``containerd`` or ``docker``): its main
    file and drop-ins concatenated, ``""`` where there is none. Judged by
    :func:`gpuinfra.runtimes.has_nvidia_runtime`."""

    default = str

    def command(self, runtime: str) -> str:
        paths = CONFIG_PATHS[check_runtime(runtime)]
        # Globs stay unquoted so the shell expands them; fixed paths are quoted. Each file is
        # read on its own: a missing drop-in must not hide the main file.
        words = " ".join(p if "*" in p else shlex.quote(p) for p in paths)
        return f'for f in {words}; do [ -f "$f" ] && cat "$f"; done; true'

    def process(self, output: list[str]) -> str:
        return "\n".join(output) + "\n"


# ---------------------------------------------------------------- facts the Slurm roles use

class CpuLayout(FactBase):
    """Online logical CPUs with core and socket (``lscpu -p``): ``{"cpus": [[cpu, core,
    socket, node], ...], "sockets", "cores_per_socket", "threads_per_core"}``; ``{}`` when
    lscpu is missing or fails. :meth:`gpuinfra.parsers.cpus.CpuLayout.from_json` reads it."""

    default = dict

    def requires_command(self) -> str:
        return "lscpu"

    def command(self) -> str:
        return quiet(LSCPU_COMMAND)

    def process(self, output: list[str]) -> dict[str, Any]:
        return _parsed(parse_lscpu, output)


class MemTotalMb(FactBase):
    """MemTotal in MiB (as ``slurmd -C`` reports RealMemory); None when unreadable."""

    def command(self) -> str:
        return quiet("cat /proc/meminfo")

    def process(self, output: list[str]) -> int | None:
        try:
            return parse_meminfo_mb("\n".join(output))
        except ParseError:
            return None


class NvidiaDeviceMinors(FactBase):
    """PCI bus id -> /dev/nvidia minor, from /proc/driver/nvidia/gpus/*/information
    (``{}`` when the driver is not loaded)."""

    default = dict

    def command(self) -> str:
        return quiet(GPU_INFORMATION_COMMAND)

    def process(self, output: list[str]) -> dict[str, int]:
        try:
            return parse_gpu_minors("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


# ---------------------------------------------------------------- facts the vfio role uses

class PciFunctions(FactBase):
    """Every PCI function from sysfs with its driver, IOMMU group and driver override:
    ``{"functions": [{"address", "vendor_id", "device_id", "class_code", "driver",
    "iommu_group", "driver_override"}]}`` (:mod:`gpuinfra.parsers.pcisysfs`)."""

    default = dict

    def command(self) -> str:
        return quiet(PCI_SYSFS_COMMAND)

    def process(self, output: list[str]) -> dict[str, Any]:
        return _parsed(parse_pci_sysfs, output)


class CpuVendor(FactBase):
    """``vendor_id`` of /proc/cpuinfo (``GenuineIntel``, ``AuthenticAMD``); "" if unknown."""

    default = str

    def command(self) -> str:
        return quiet("sed -n 's/^vendor_id[[:space:]]*: *//p' /proc/cpuinfo | head -n 1")

    def process(self, output: list[str]) -> str:
        return output[0].strip() if output else ""


class KernelCommandLine(FactBase):
    """/proc/cmdline: the arguments the running kernel was booted with."""

    default = str

    def command(self) -> str:
        return quiet("cat /proc/cmdline")

    def process(self, output: list[str]) -> str:
        return " ".join(output).strip()


class BootLoader(FactBase):
    """How kernel arguments reach the kernel: ``"systemd-boot"`` (Proxmox VE booting from
    ESPs that proxmox-boot-tool keeps, kernel command line in /etc/kernel/cmdline), ``"grub"``
    (update-grub), or ``""`` (neither found)."""

    default = str

    def command(self) -> str:
        return ("if [ -e /etc/kernel/proxmox-boot-uuids ] && command -v proxmox-boot-tool "
                ">/dev/null && proxmox-boot-tool status 2>/dev/null | grep -q "
                "'configured with: uefi'; then echo systemd-boot; "
                "elif command -v update-grub >/dev/null; then echo grub; fi; true")

    def process(self, output: list[str]) -> str:
        return output[0].strip() if output else ""


class ProxmoxVersion(FactBase):
    """The Proxmox VE major version (``pveversion``: ``pve-manager/8.2.4/...``), None on a
    host without Proxmox VE."""

    def requires_command(self) -> str:
        return "pveversion"

    def command(self) -> str:
        return quiet("pveversion")

    def process(self, output: list[str]) -> int | None:
        text = " ".join(output)
        match = re.search(r"pve-manager/(\d+)\.", text)
        return int(match[1]) if match else None


class DriverctlOverrides(FactBase):
    """The driver overrides driverctl saved for boot: ``{address: driver}``."""

    default = dict

    def command(self) -> str:
        return quiet(DRIVERCTL_SAVED_COMMAND)

    def process(self, output: list[str]) -> dict[str, str]:
        try:
            return parse_driverctl_saved("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class DeviceUsers(FactBase):
    """Processes using PCI functions (VFIO group, /dev/nvidiaN or mapped BARs open):
    ``{address: ["PID (COMM)"]}``; read before a function is rebound."""

    default = dict

    def command(self, addresses: list[str]) -> str:
        return quiet(device_users_command(list(addresses)))

    def process(self, output: list[str]) -> dict[str, list[str]]:
        try:
            return parse_device_users("\n".join(output))
        except ParseError as exc:
            raise FactProcessError(str(exc)) from exc


class LibvirtDomains(FactBase):
    """The domains libvirt knows (``virsh list --all --name``); None where libvirt does not
    run (no virsh, or no daemon answering on qemu:///system)."""

    def requires_command(self) -> str:
        return "virsh"

    def command(self) -> str:
        return ("out=$(virsh -c qemu:///system list --all --name 2>/dev/null) && "
                "{ echo libvirt-running; printf '%s\\n' \"$out\"; }; true")

    def process(self, output: list[str]) -> list[str] | None:
        if not output or output[0].strip() != "libvirt-running":
            return None
        return sorted(line.strip() for line in output[1:] if line.strip())


class QmConfig(FactBase):
    """``qm config VMID`` on Proxmox VE as ``{key: value}``; None when the VM does not exist."""

    def requires_command(self, vmid: int) -> str:
        return "qm"

    def command(self, vmid: int) -> str:
        return (f"out=$(qm config {int(vmid)} 2>/dev/null) && {{ echo qm-config; "
                "printf '%s\\n' \"$out\"; }; true")

    def process(self, output: list[str]) -> dict[str, str] | None:
        if not output or output[0].strip() != "qm-config":
            return None
        return parse_qm_config("\n".join(output[1:]))


# ---------------------------------------------------------------- the host's distribution

def host_distro() -> str:
    """The planned host's distribution key (``debian-12``, ``ubuntu-24.04``): the key of every
    role's per-distribution table. Raises gpuinfra's UnsupportedOS for any other system."""
    from pyinfra import host
    from pyinfra.facts.server import LinuxDistribution

    return distro_key(host.get_fact(LinuxDistribution))
