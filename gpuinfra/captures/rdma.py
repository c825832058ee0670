"""Judging pasted RDMA captures: `ibstat`, `ibv_devinfo`, `show_gids`, `mlxconfig query`
(ATS) and `lspci -vvv` (ATS and ACS), against the NICs a spec (or the CLI) expects.

The ports are judged by the verify suite's own functions (presence, state, rate:
:mod:`gpuinfra.rdma.verdicts`), the firmware by its ``ats_findings``, the ACS bridges by its
``acs_findings``: a pasted capture and a live node get the same verdict, cause and fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace

from gpuinfra.captures import CaptureVerdict
from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers.gids import parse_show_gids
from gpuinfra.parsers.ibstat import parse_ibstat_partial
from gpuinfra.parsers.ibv import parse_ibv_devinfo_partial
from gpuinfra.parsers.mlxconfig import MlxConfig, MlxDevices, parse_mlxconfig_devices
from gpuinfra.parsers.pcicaps import parse_pci_caps
from gpuinfra.rdma.node import ATS
from gpuinfra.rdma.verdicts import (
    Port,
    acs_findings,
    ats_findings,
    port_findings,
    ports_from_ibstat,
    presence_findings,
    rate_findings,
)
from gpuinfra.spec.model import RdmaNic
from gpuinfra.verdicts import Finding
from gpuinfra.vfio import normalize_address

_IBV_STATES = {"PORT_ACTIVE": "ACTIVE", "PORT_DOWN": "DOWN", "PORT_INIT": "INIT",
               "PORT_ARMED": "ARMED", "PORT_ACTIVE_DEFER": "ACTIVE_DEFER"}


def _nics_json(nics: Sequence[RdmaNic]) -> dict[str, object]:
    return {"nics": [asdict(n) for n in nics]}


def _port_verdict(host: str, kind: str, nics: Sequence[RdmaNic], ports: dict[str, Port],
                  cuts: list[str], cut_down: Mapping[str, Port] | None = None
                  ) -> CaptureVerdict:
    """Presence, state and rate of each expected NIC's port 1, judged only where the capture
    shows its block: a NIC whose block may be in the cut part is not called missing.
    ``cut_down``: ports of incomplete blocks shown in a state other than Active, judged on
    that state alone (the rest of their block is cut)."""
    down = {n.name: (cut_down or {})[n.name] for n in nics
            if n.name not in ports and n.name in (cut_down or {})}
    present = [n for n in nics if n.name in ports]
    absent = [n for n in nics if n.name not in ports and n.name not in down]
    # Every expected NIC in a complete block: what was cut cannot change the verdict (issue 47)
    whole = bool(nics) and not absent and not down
    verdict = CaptureVerdict(kind, host, _nics_json(nics), blocks=len(ports), cuts=list(cuts),
                             sentences=True)
    if cuts and not whole:
        verdict.cuts += [f"{n.name}: not in the complete blocks (its block may be in the cut "
                         "part): not judged" for n in absent]
    else:
        verdict.findings += presence_findings(absent, ports)
    verdict.findings += presence_findings(present, ports)
    verdict.findings += port_findings(present, ports)
    verdict.findings += rate_findings(present, ports)
    verdict.findings += port_findings([n for n in nics if n.name in down], down)
    verdict.judged = bool(nics)
    if whole and not verdict.failed:
        verdict.cuts = []  # nothing cut could have failed: every expected NIC was judged whole
    return verdict


def judge_ibstat(text: str, nics: Sequence[RdmaNic], host: str = "-") -> CaptureVerdict:
    """`ibstat` against ``nics``. Port rows without their CA header count for the one NIC
    expected, and only then (else which NIC they are is a guess)."""
    stat, cuts, headless, cut_states = parse_ibstat_partial(text)
    ports = ports_from_ibstat(stat)
    # A block cut after its port's State line: a port shown other than Active is down, whatever
    # the cut part held (issue 47); an Active one is not judged (its rate may be cut).
    cut_down = {name: Port(name, "", state.upper(), "(cut)", None)
                for name, state in cut_states.items() if state.upper() != "ACTIVE"}
    if headless is not None:
        if len(nics) == 1 and nics[0].name not in ports:
            ports[nics[0].name] = Port(nics[0].name, (headless.link_layer or "").lower(),
                                       (headless.state or "").upper(),
                                       headless.physical_state or "",
                                       float(headless.rate) if headless.rate else None)
            cuts.append(f"port rows without their CA header: read as {nics[0].name}'s (the "
                        "one NIC expected)")
        else:
            cuts.append("port rows without their CA header: which NIC they belong to is not "
                        "in the capture (give one --nic): not judged")
    return _port_verdict(host, "ibstat", nics, ports, cuts, cut_down)


def judge_ibv_devinfo(text: str, nics: Sequence[RdmaNic], host: str = "-") -> CaptureVerdict:
    """`ibv_devinfo` against ``nics``: state and link layer (it shows no rate, nor the
    physical state without ``-v``: "LinkUp" is assumed from PORT_ACTIVE, and a rate in the
    spec is not judged here)."""
    info, cuts = parse_ibv_devinfo_partial(text)
    ports = {}
    for name, device in info.devices.items():
        port = device.ports.get(1)
        if port is None:
            continue
        state = _IBV_STATES.get(port.state or "", port.state or "")
        physical = port.extra.get("phys_state", "").split(" ")[0]
        physical = {"LINK_UP": "LinkUp", "POLLING": "Polling", "DISABLED": "Disabled"}.get(
            physical, "LinkUp" if state == "ACTIVE" else physical or "(not shown)")
        ports[name] = Port(name, (port.link_layer or "").lower(), state, physical, None)
    without_rate = [RdmaNic(n.name, n.pci, n.ats, n.link_layer, None, n.model, n.gid_index,
                            n.netdev) for n in nics]
    verdict = _port_verdict(host, "ibv_devinfo", without_rate, ports, cuts)
    verdict.expectation = _nics_json(nics)
    return verdict


def judge_show_gids(text: str, nics: Sequence[RdmaNic], host: str = "-") -> CaptureVerdict:
    """`show_gids` against the RoCE NICs with a ``gid_index`` (NCCL_IB_GID_INDEX): the index
    exists, is RoCE v2, and (with a netdev in the spec) is on that netdev."""
    table = parse_show_gids(text)
    roce = [n for n in nics if n.link_layer == "ethernet" and n.gid_index is not None]
    verdict = CaptureVerdict("show_gids", host, _nics_json(roce), cuts=list(table.cuts),
                             judged=bool(roce), sentences=True)
    devices = {g.device for g in table.gids}
    verdict.blocks = len(table.gids)
    for nic in roce:
        rows = [g for g in table.of(nic.name) if g.index == nic.gid_index]
        if not rows:
            if table.cuts and nic.name not in devices and table.gids:
                verdict.cuts.append(f"{nic.name}: no rows in the capture: not judged")
                continue
            verdict.findings.append(Finding.said(
                verdict.kind, f"{nic.name}: GID index {nic.gid_index} not in the GID table "
                f"({len(table.of(nic.name))} GIDs listed for it)",
                "the netdev has no IP address (a RoCE v2 GID is made from each address), the "
                "port is down, or the spec's gid_index is wrong for this host; in a container, "
                "the pod's network namespace holds no address of the RDMA netdev",
                "`ip addr show <netdev>` (give it its address), `show_gids` again, then set "
                "gid_index in the spec to the RoCE v2 row of that address"))
            continue
        gid = rows[0]
        if gid.version != "v2":
            verdict.findings.append(Finding.said(
                verdict.kind,
                f"{nic.name}: GID index {nic.gid_index} is RoCE {gid.version}, not v2",
                "the index points at the RoCE v1 twin of the address (each address has a v1 "
                "and a v2 row)", f"set gid_index to the v2 row of the same GID (`show_gids "
                f"{nic.name}`)"))
        if gid.version == "v2" and gid.gid.startswith("fe80:"):
            routable = [g for g in table.of(nic.name)
                        if g.version == "v2" and g.ipv4 and not g.gid.startswith("fe80:")]
            verdict.findings.append(Finding.said(
                verdict.kind,
                f"{nic.name}: GID index {nic.gid_index} is the port's IPv6 link-local address "
                f"({gid.gid}), not a routable one",
                "a link-local GID reaches only its own link: RoCE v2 traffic between nodes "
                "(NCCL_IB_GID_INDEX) needs the IPv4-mapped GID (::ffff:a.b.c.d) of the "
                "netdev's address", "set gid_index to " + (
                    f"{routable[0].index} (the v2 row of {routable[0].ipv4})" if routable
                    else "the v2 row of the netdev's IPv4 address (give it one first: `ip "
                    "addr show <netdev>`)")))
        if nic.netdev and gid.netdev and gid.netdev != nic.netdev:
            verdict.findings.append(Finding.said(
                verdict.kind,
                f"{nic.name}: GID index {nic.gid_index} is on {gid.netdev}, the spec says "
                f"{nic.netdev}", "the netdev was renamed, or the spec names another port",
                "fix netdev in the spec, or the GID index"))
    return verdict


def judge_mlxconfig(text: str, nics: Sequence[RdmaNic], host: str = "-",
                    device: str | None = None) -> CaptureVerdict:
    """`mlxconfig`/`mstconfig` queries, one device or a loop over several, against the NICs'
    ``ats`` (the verify suite's ``ats_findings``: Current with ``-e``, Next-Boot otherwise).

    Which NIC a device is: ``device`` (a NIC's name) for a one-device capture, else the one
    expected NIC, else the NIC whose ``pci`` is the device's address (a loop prints it).
    A loop with no ``pci`` expected is judged device by device against the one ``ats`` every
    expected NIC shares. A device's own cuts (a grep) matter only when ATS_ENABLED is not in
    what is shown. Raises GpuinfraError when the devices cannot be told apart."""
    parsed = parse_mlxconfig_devices(text)
    pairs = _mlx_pairs(parsed, list(nics), device)
    verdict = CaptureVerdict("mlxconfig", host, {**_nics_json(nics), "device": device},
                             sentences=True)
    loop_by_pci = len(parsed.devices) > 1 and any(n.pci for n in nics)
    shown = {normalize_address(label) for label, _, _ in parsed.devices}
    unseen = [n for n in nics if loop_by_pci and n.pci and normalize_address(n.pci) not in shown]
    # A device cut before its parameters matters unless every expected NIC is shown whole.
    wanted = {normalize_address(n.pci or "") for n in unseen}
    cut = [label for label in parsed.cut_devices
           if not loop_by_pci or normalize_address(label) in wanted]
    verdict.cuts += MlxDevices(cut_devices=cut).cuts
    verdict.cuts += [f"{n.name} ({n.pci}): not among the devices shown: not judged"
                     for n in unseen]
    for label, query, cuts, nic in pairs:
        if ATS not in query.params and cuts:
            verdict.cuts += [f"{label}: {cut}" for cut in cuts]
            verdict.cuts.append(f"{label}: {ATS} is not in the capture: not judged")
            continue
        verdict.blocks += 1
        verdict.findings += ats_findings(nic, query)
    verdict.judged = verdict.blocks > 0
    return verdict


def _mlx_pairs(parsed: MlxDevices, nics: list[RdmaNic], device: str | None
               ) -> list[tuple[str, MlxConfig, list[str], RdmaNic]]:
    """(label, query, cuts, the NIC it is judged as) for each device judged."""
    if device is not None:
        chosen = [n for n in nics if n.name == device]
        if not chosen:
            raise GpuinfraError(f"--device {device}: not one of the expected NICs "
                                f"({', '.join(n.name for n in nics) or 'none'})")
        nics = chosen
    by_pci = {normalize_address(n.pci): n for n in nics if n.pci}
    if len(parsed.devices) == 1:
        label, query, cuts = parsed.devices[0]
        nic = nics[0] if len(nics) == 1 else by_pci.get(normalize_address(label))
        if nic is None:
            raise GpuinfraError(f"a mlxconfig query of one NIC and {len(nics)} are expected: "
                                "say which with --device NAME (or give one --nic)")
        return [(label, query, cuts, nic)]
    if by_pci:
        found = [(label, query, cuts, by_pci[normalize_address(label)])
                 for label, query, cuts in parsed.devices if normalize_address(label) in by_pci]
        return [(f"{nic.name} ({label})", query, cuts, replace(nic, name=f"{nic.name} ({label})"))
                for label, query, cuts, nic in found]
    wanted = {n.ats for n in nics}
    if len(wanted) != 1:
        raise GpuinfraError(f"the capture shows {len(parsed.devices)} devices and the expected "
                            "NICs differ in ats: give each NIC its pci= (the loop's addresses) "
                            "so each device is judged against its own")
    return [(label, query, cuts, replace(nics[0], name=label))
            for label, query, cuts in parsed.devices]


def judge_lspci_vvv(text: str, nics: Sequence[RdmaNic], acs_off: bool,
                    bridges: Sequence[str] = (), host: str = "-") -> CaptureVerdict:
    """`lspci -vvv` (whole, ``-s`` per device, or grepped for ATS/ACS lines).

    ATS: each NIC the spec wants with ATS, found by its PCI address (rows without a device
    line count only when the capture's ATS rows all agree). ACS (``acs_off``): every bridge
    shown with ACSCtl, or only ``bridges``, must have ACS Control 0 (the verify suite's
    ``acs_findings``).
    """
    capture = parse_pci_caps(text)
    expectation = {**_nics_json(nics), "acs_off": acs_off, "bridges": list(bridges)}
    verdict = CaptureVerdict("lspci -vvv", host, expectation, cuts=list(capture.cuts),
                             sentences=True)
    named = {d.address: d for d in capture.devices if d.address}
    loose = [d for d in capture.devices if d.address is None]
    judged = 0
    for nic in (n for n in nics if n.ats):
        device = named.get(nic.pci) if nic.pci else None
        if device is None:
            # Rows without their device line (a grep): unambiguous only when they all agree.
            shown = [d for d in loose if d.ats is not None]
            device = shown[0] if len({d.ats for d in shown}) == 1 else None
        if device is None or device.ats is None:
            verdict.cuts.append(f"{nic.name}: its ATS row is not in the capture (or the rows "
                                "do not say which device is which): not judged")
            continue
        judged += 1
        if not device.ats:
            verdict.findings.append(Finding.said(
                verdict.kind, f"{nic.name}: lspci -vvv shows ATSCtl: Enable-",
                "ATS is off in the firmware's Current value, or the IOMMU does not use it",
                f"`mstconfig -d <pci> -e query {ATS}`; set it and reboot the host; "
                "`dmesg | grep -i -e DMAR -e ats`"))
    if acs_off:
        shown = [d for d in capture.devices if d.acs_control is not None
                 and (not bridges or d.address in bridges)]
        control = {(d.address or f"(row {i + 1} without its device line)"): d.acs_control
                   for i, d in enumerate(shown)}
        judged += len(control)
        verdict.findings += acs_findings(sorted(control), control)
        missing = [b for b in bridges if b not in named]
        verdict.cuts += [f"bridge {b}: not in the capture: not judged" for b in missing]
    verdict.blocks = len(named) + len(loose)
    verdict.judged = judged > 0
    return verdict
