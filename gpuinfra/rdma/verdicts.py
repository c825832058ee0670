"""Pure judgements of the RDMA checks: the verify suite on a live node
(gpuinfra_verify/test_rdma.py) and `gpuinfra check` on a pasted capture
(gpuinfra.captures) call the same functions, so both give one reading of a node.

Each returns what it found wrong as :class:`gpuinfra.verdicts.Finding`s said in one sentence
(:meth:`~gpuinfra.verdicts.Finding.said`: the NIC's name first when it is about one), with the
likely cause and the fix; a warning has severity "warn" and does not fail. Ports are read from
sysfs on the host (the same on mlx5 and rxe) or from a real ``ibstat`` capture; the firmware
from ``mstconfig -e query``; the bridges to check from the same rule the role applied
(gpuinfra.rdma.node), so the deploy and the verdict never disagree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpuinfra.knowledge.network import nic_floor
from gpuinfra.parsers.ibstat import IbStat
from gpuinfra.parsers.mlxconfig import MlxConfig
from gpuinfra.parsers.perftest import IbWriteBw
from gpuinfra.parsers.topo import TopoMatrix
from gpuinfra.rdma.node import ATS, PEERMEM, GpuDirect
from gpuinfra.spec.model import RdmaNic
from gpuinfra.verdicts import Finding

# One line per RDMA device, port 1: name|link_layer|state|phys_state|rate (sysfs, as the
# kernel's ib core writes it: "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)").
PORTS_COMMAND = (
    "for d in /sys/class/infiniband/*; do [ -e \"$d/ports/1\" ] || continue; p=$d/ports/1; "
    "echo \"${d##*/}|$(cat $p/link_layer)|$(cat $p/state)|$(cat $p/phys_state)|"
    "$(cat $p/rate)\"; done"
)
_RATE = re.compile(r"([0-9]+(?:\.[0-9]+)?) Gb/sec")

# Soft-RoCE between the lab's two QEMU guests (TCG, one vCPU each, on a 2-core machine shared
# with other work): `ib_write_bw -d rxe0 -x 1 -F --report_gbits -D 5` measured 0.46, 0.50,
# 0.49 Gb/s (64 KiB) and 0.43, 0.46, 0.53 Gb/s (1 MiB) on 2026-11-26; docs/lab-notes.md saw
# 0.21 Gb/s on a busier machine, and 0.04 Gb/s (64 KiB) on 2026-12-06 with both cores also
# running the unit suite and two debootstraps (a CI run failed on the old 0.05 floor). The
# floor sits about 4x under the lowest seen: it fails a path that carries (almost) nothing,
# not a machine that is busy. Not a hardware figure.
SOFT_ROCE_FLOOR_GBPS = 0.01
# The check every finding here is of (a capture judge names its own kind instead, in its JSON).
RDMA = "rdma"


@dataclass(frozen=True)
class Port:
    """Port 1 of an RDMA device: state "ACTIVE"/"DOWN"..., physical state "LinkUp"/
    "Polling"/"Disabled"..., rate in Gb/s, link layer lower case."""

    device: str
    link_layer: str
    state: str
    physical_state: str
    rate_gbps: float | None


def _rdma(what: str, cause: str, fix: str, severity: str = "fail") -> Finding:
    """A finding of the RDMA checks, said in one sentence (:meth:`Finding.said`)."""
    return Finding.said(RDMA, what, cause, fix, severity)


def ports_from_sysfs(text: str) -> dict[str, Port]:
    ports = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5:
            continue
        name, layer, state, phys, rate = parts
        found = _RATE.search(rate)
        ports[name] = Port(name, layer.strip().lower(), state.split(":")[-1].strip().upper(),
                           phys.split(":")[-1].strip(), float(found[1]) if found else None)
    return ports


def ports_from_ibstat(stat: IbStat) -> dict[str, Port]:
    """Port 1 of each CA of a parsed ``ibstat`` (a real capture, or the host's)."""
    ports = {}
    for name, ca in stat.cas.items():
        port = ca.ports.get(1)
        if port is None:
            continue
        ports[name] = Port(name, (port.link_layer or "").lower(), (port.state or "").upper(),
                           port.physical_state or "", float(port.rate) if port.rate else None)
    return ports


def presence_findings(nics: Sequence[RdmaNic], ports: Mapping[str, Port]) -> list[Finding]:
    found = []
    for nic in nics:
        port = ports.get(nic.name)
        if port is None:
            have = ", ".join(sorted(ports)) or "none"
            found.append(_rdma(
                f"{nic.name}: no such RDMA device (the host has {have})",
                "the NIC's driver is not loaded (mlx5_ib; rdma_rxe for Soft-RoCE), the card is "
                "missing or dead, or the spec names it wrongly",
                "`ibv_devices`, `lspci -D | grep -i mellanox`, `dmesg | grep mlx5`; fix the "
                "spec's name (udev may name it ibp..., rocep...)"))
        elif port.link_layer != nic.link_layer:
            kind = "IB" if nic.link_layer == "infiniband" else "ETH"
            found.append(_rdma(
                f"{nic.name}: link layer {port.link_layer}, the spec says {nic.link_layer}",
                "the port runs the other protocol (a VPI card's LINK_TYPE_P1 in firmware)",
                f"`mstconfig -d <pci> set LINK_TYPE_P1={kind}` and reboot, or fix link_layer "
                "in the spec"))
    return found


def port_findings(nics: Sequence[RdmaNic], ports: Mapping[str, Port]) -> list[Finding]:
    """Each present port ACTIVE and LinkUp."""
    found = []
    for nic in nics:
        port = ports.get(nic.name)
        if port is None:
            continue
        if port.state != "ACTIVE" or port.physical_state != "LinkUp":
            ib = nic.link_layer == "infiniband"
            found.append(_rdma(
                f"{nic.name}: port {port.state}/{port.physical_state}, not ACTIVE/LinkUp",
                ("Polling: no link partner (cable unplugged or broken, switch port down); "
                 "Disabled: the port is shut on this side or the switch's"
                 + ("; LinkUp but INIT: no subnet manager" if ib else "")),
                "check the cable and the switch port; `ibstat`, `mlxlink -d <pci>`"
                + ("; `sminfo` (is an SM running?)" if ib else "; `ip link` (the netdev up?)")))
    return found


def rate_findings(nics: Sequence[RdmaNic], ports: Mapping[str, Port]) -> list[Finding]:
    """An ACTIVE port below the spec's rate: its own failure (the link works, slowly)."""
    found = []
    for nic in nics:
        port = ports.get(nic.name)
        if port is None or nic.rate_gbps is None or port.rate_gbps is None:
            continue
        if port.rate_gbps < nic.rate_gbps:
            found.append(_rdma(
                f"{nic.name}: rate {port.rate_gbps:g} Gb/s, the spec says {nic.rate_gbps:g}",
                "the link trained below its rate: a cable or transceiver of a lower class, a "
                "switch port configured slower, lanes lost (width 2X/1X), or speed "
                "auto-negotiated down",
                "`ibstat` / `mlxlink -d <pci>` on both ends (speed, width, errors); replace "
                "the cable; check the switch port's speed"))
    return found


def ats_findings(nic: RdmaNic, query: MlxConfig | None) -> list[Finding]:
    """ATS as the spec wants it in the firmware's Current value (Next-Boot alone is not in
    effect)."""
    if query is None:
        return [_rdma(f"{nic.name}: mstconfig cannot read the firmware",
                      "mstflint missing or too old, or the PCI address is not this NIC",
                      "`mstconfig -d <pci> -e query ATS_ENABLED` on the host")]
    param = query.params.get(ATS)
    if param is None:
        return [_rdma(f"{nic.name}: the firmware shows no {ATS}",
                      "firmware or mstflint older than 4.13, or a model without ATS",
                      "update the firmware and mstflint, or set ats=False for this NIC")]
    if param.current is None and param.default is None:  # a query without -e
        return _ats_next_boot_only(nic, param.value)
    if param.current == nic.ats:
        return []
    if param.value == nic.ats:
        return [_rdma(f"{nic.name}: {ATS} Next-Boot {param.value}, Current {param.current}",
                      "set in firmware but not in effect: the host was not rebooted since",
                      "reboot the host (or `mstfwreset` when no job runs)")]
    return [_rdma(f"{nic.name}: {ATS} Current {param.current}, Next-Boot {param.value}, "
                  f"the spec says {nic.ats}",
                  "the rdma role did not run, or the firmware was reset since",
                  "deploy the rdma role, then reboot")]


def _ats_next_boot_only(nic: RdmaNic, next_boot: object) -> list[Finding]:
    """A query without ``-e``: only the Next-Boot value is shown."""
    if next_boot == nic.ats:
        return [_rdma(f"{nic.name}: {ATS} Next-Boot {next_boot}; the Current value is not "
                      "in this query (no -e)",
                      "set in firmware; whether it is in effect depends on a reboot since",
                      f"`mstconfig -d <pci> -e query {ATS}` (Current column), or `lspci -vvv` "
                      "(ATSCtl: Enable+)", severity="warn")]
    return [_rdma(f"{nic.name}: {ATS} Next-Boot {next_boot}, the spec says {nic.ats}",
                  "ATS is not set in the NIC's firmware (the rdma role did not run, or the "
                  "firmware was reset since)",
                  f"`mstconfig -y -d <pci> set {ATS}={1 if nic.ats else 0}` (the rdma role "
                  "does it), then reboot the host")]


_ATS_CTL = re.compile(r"ATSCtl:\s*Enable([+-])")


def ats_lspci_findings(nic: RdmaNic, lspci_vvv: str) -> list[Finding]:
    """The PCIe function shows ``ATSCtl: Enable+`` (the OS enabled ATS on it)."""
    state = _ATS_CTL.search(lspci_vvv)
    if state and state[1] == "+":
        return []
    seen = "ATSCtl: Enable-" if state else "no ATS capability"
    return [_rdma(f"{nic.name}: lspci -vvv shows {seen}",
                  "ATS is off in the firmware's Current value, or the IOMMU does not use it",
                  "see the firmware check; `dmesg | grep -i -e DMAR -e ats`")]


def gpudirect_findings(path: GpuDirect, modules: Iterable[str]) -> list[Finding]:
    loaded = set(modules)
    if path.path == "peermem" and PEERMEM not in loaded:
        return [_rdma("nvidia_peermem is not loaded",
                      "the module failed to load (an ib_core without PeerDirect: the inbox "
                      "stack, or DOCA-OFED installed after the driver) or the host was not "
                      "rebooted since", "`modprobe nvidia-peermem` and `dmesg | tail`; "
                      "reinstall the driver after DOCA-OFED")]
    if path.path == "none":
        return [_rdma(f"no GPUDirect RDMA path: {path.reason}", path.reason,
                      "nvidia_driver_open_modules = True, or rdma_stack = 'doca-ofed'",
                      severity="warn")]
    return []


def acs_findings(bridges: Sequence[str], control: Mapping[str, int | None]) -> list[Finding]:
    """ACS Control 0 on every bridge between a GPU and its NIC."""
    on = [f"{b} (ACSCtl {control[b]:#06x})" for b in bridges
          if control.get(b) not in (0, None)]
    if not on:
        return []
    return [_rdma(f"ACS still on between GPU and NIC: {', '.join(on)}",
                  "gpuinfra-acs-off.service did not run at this boot, or a bridge was "
                  "re-enumerated: peer traffic goes up to the root complex (GPUDirect RDMA "
                  "slow or hanging)",
                  "`systemctl status gpuinfra-acs-off`; `lspci -vvv -s <bridge> | grep "
                  "ACSCtl`; deploy the rdma role")]


_GOOD = ("PIX", "PXB")
_ACCEPTABLE = ("NODE", "PHB")


def affinity_findings(nics: Sequence[RdmaNic], topo: TopoMatrix) -> list[Finding]:
    """Each NIC's nearest GPU in ``nvidia-smi topo -m``: PIX/PXB good, NODE/PHB acceptable,
    SYS a warning (GPU and NIC on different CPU sockets)."""
    columns = {topo.nic_devices.get(n, n): n for n in topo.nics}
    found = []
    for nic in nics:
        column = columns.get(nic.name)
        if column is None:
            found.append(_rdma(f"{nic.name} is not in nvidia-smi topo -m",
                               "the driver does not see the NIC (its driver not loaded)",
                               "`ibv_devices`; load mlx5_ib"))
            continue
        codes = [topo.links.get(gpu, {}).get(column) for gpu in topo.gpus]
        best = next((c for c in (*_GOOD, *_ACCEPTABLE) if c in codes), None)
        if best is None:
            found.append(_rdma(f"{nic.name}: SYS to every GPU",
                               "the NIC sits on another CPU socket than every GPU: GPUDirect "
                               "RDMA crosses the inter-socket link (NCCL avoids it by "
                               "default: traffic goes through host memory)",
                               "move the NIC to a slot under a GPU's switch or socket, or "
                               "accept host-memory staging", severity="warn"))
    return found


def bandwidth_findings(result: IbWriteBw, nic: RdmaNic, soft_roce: bool) -> list[Finding]:
    """The lowest BW average at the largest size reaches the floor: a fraction of line rate
    on hardware (gpuinfra.knowledge.network), the measured rxe floor in the lab."""
    if soft_roce:
        floor, source = SOFT_ROCE_FLOOR_GBPS, "Soft-RoCE under TCG, measured in the lab"
    elif nic.rate_gbps is not None:
        chosen = nic_floor(nic.rate_gbps, result.largest)
        floor, source = chosen.gbps, chosen.source
    else:
        return [_rdma(f"{nic.name}: no rate_gbps in the spec: no floor to judge "
                      f"{result.lowest_at_largest:g} Gb/s against",
                      "the spec does not say the NIC's rate", "set rate_gbps",
                      severity="warn")]
    if result.lowest_at_largest >= floor:
        return []
    return [_rdma(f"{nic.name}: ib_write_bw {result.lowest_at_largest:g} Gb/s at "
                  f"{result.largest} B, below {floor:g} Gb/s ({source})",
                  "port below its rate, PCIe link degraded, cable errors, or with "
                  "--use_cuda a GPU-NIC path through the CPU (ACS/IOMMU)",
                  "`ibstat`, `mlxlink`, `perfquery -x` on both ends; rerun against "
                  "another node to tell which side is slow")]


def message(node: str, findings: Sequence[Finding]) -> str:
    """The suite's failure text: each finding with its cause and fix."""
    return "\n".join(f"{node}: {f.what}\n  cause: {f.cause}\n  fix: {f.fix}" for f in findings)
