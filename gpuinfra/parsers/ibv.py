"""RDMA devices and ports: `ibv_devinfo` (without ``-v``; ``-v`` extras are kept as strings).

::

    hca_id: mlx5_0
        transport:          InfiniBand (0)
        fw_ver:             20.35.1012
        ...
        phys_port_cnt:      1
            port:   1
                state:          PORT_ACTIVE (4)
                max_mtu:        4096 (5)
                ...
                link_layer:     InfiniBand

ibv_devinfo indents with tabs; pasted captures may have spaces instead. Indentation is not
relied on: every ``key: value`` line after ``port: N`` belongs to that port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines, split_blocks

SOURCE = "ibv_devinfo"

# What ibv_devinfo prints when no RDMA device exists.
NO_DEVICES = "No IB devices found"

_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_\[\] ]*?):\s*(?P<value>.*)$")
_NAMED_CODE = re.compile(r"^(?P<name>\S+) \((?P<code>[0-9]+)\)$")
_INT = re.compile(r"^[0-9]+$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")

_HCA_STRINGS = ("fw_ver", "node_guid", "sys_image_guid", "vendor_id", "hw_ver", "board_id")
_HCA_INTS = ("vendor_part_id", "phys_port_cnt")
_PORT_INTS = ("sm_lid", "port_lid")


@dataclass
class IbvPort:
    """One port: state "PORT_ACTIVE" with state_code 4, MTUs in bytes with their enum codes,
    lids and lmc as ints, link_layer "InfiniBand" or "Ethernet"."""

    state: str | None = None
    state_code: int | None = None
    max_mtu: int | None = None
    max_mtu_code: int | None = None
    active_mtu: int | None = None
    active_mtu_code: int | None = None
    sm_lid: int | None = None
    port_lid: int | None = None
    port_lmc: int | None = None
    link_layer: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state, "state_code": self.state_code, "max_mtu": self.max_mtu,
            "max_mtu_code": self.max_mtu_code, "active_mtu": self.active_mtu,
            "active_mtu_code": self.active_mtu_code, "sm_lid": self.sm_lid,
            "port_lid": self.port_lid, "port_lmc": self.port_lmc,
            "link_layer": self.link_layer, **self.extra,
        }


@dataclass
class IbvDevice:
    """One HCA (``hca_id``): transport "InfiniBand" (code 0), firmware and ids as printed,
    vendor_part_id and phys_port_cnt as ints, ports by number."""

    hca_id: str
    transport: str | None = None
    transport_code: int | None = None
    fw_ver: str | None = None
    node_guid: str | None = None
    sys_image_guid: str | None = None
    vendor_id: str | None = None
    vendor_part_id: int | None = None
    hw_ver: str | None = None
    board_id: str | None = None
    phys_port_cnt: int | None = None
    ports: dict[int, IbvPort] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "transport": self.transport, "transport_code": self.transport_code,
            "fw_ver": self.fw_ver, "node_guid": self.node_guid,
            "sys_image_guid": self.sys_image_guid, "vendor_id": self.vendor_id,
            "vendor_part_id": self.vendor_part_id, "hw_ver": self.hw_ver,
            "board_id": self.board_id, "phys_port_cnt": self.phys_port_cnt, **self.extra,
            "ports": {str(n): p.to_json() for n, p in self.ports.items()},
        }


@dataclass
class IbvDevInfo:
    """Devices by hca_id, in the order printed (empty for "No IB devices found")."""

    devices: dict[str, IbvDevice]

    def to_json(self) -> dict[str, Any]:
        """``{"mlx5_0": {"transport", "transport_code", "fw_ver", ..., "phys_port_cnt",
        "ports": {"1": {"state", "state_code", "max_mtu", "active_mtu", "sm_lid",
        "port_lid", "port_lmc", "link_layer", ...}}}}``."""
        return {name: dev.to_json() for name, dev in self.devices.items()}


def parse_ibv_devinfo(text: str) -> IbvDevInfo:
    """Read `ibv_devinfo` output (see the module doc)."""
    devices: dict[str, IbvDevice] = {}
    device: IbvDevice | None = None
    port: IbvPort | None = None
    last_extra: tuple[dict[str, str], str] | None = None
    # -v continuation lines, joined once per key (joining line by line copies the growing
    # value each time: quadratic on a long capability list)
    continued: dict[tuple[int, str], tuple[dict[str, str], list[str]]] = {}
    lines = [(n, line.strip()) for n, line in enumerate(clean_lines(text, SOURCE), 1)
             if line.strip()]
    if lines and lines[0][1] == NO_DEVICES and len(lines) == 1:
        return IbvDevInfo({})
    for no, stripped in lines:
        match = _KEY_VALUE.match(stripped)
        if not match:
            if last_extra is None:
                raise ParseError(SOURCE, f"expected 'key: value', got {stripped[:60]!r}",
                                 line=no)
            extra, key = last_extra  # a -v continuation line (e.g. a capability flag)
            continued.setdefault((id(extra), key), (extra, [extra[key]]))[1].append(stripped)
            continue
        key, value = match["key"].strip(), match["value"].strip()
        last_extra = None
        if key == "hca_id":
            if device is not None:
                _check_complete(device, no - 1)
            device, port = _new_device(devices, value, no), None
        elif device is None:
            raise ParseError(SOURCE, f"expected 'hca_id: <name>', got {stripped[:60]!r}",
                             line=no)
        elif key == "port":
            port = _new_port(device, value, no)
        elif port is not None:
            last_extra = _set_port_field(port, key, value, device.hca_id, no)
        else:
            last_extra = _set_device_field(device, key, value, no)
    if device is None:
        raise ParseError(SOURCE, "no 'hca_id:' line (empty output?)")
    _check_complete(device, lines[-1][0])
    for (_, key), (extra, parts) in continued.items():
        extra[key] = " ".join(parts).strip()
    return IbvDevInfo(devices)


_HCA_LINE = re.compile(r"^hca_id:\s*\S+$")


def parse_ibv_devinfo_partial(text: str) -> tuple[IbvDevInfo, list[str]]:
    """A pasted `ibv_devinfo` read block by block (issue 24, section 3): (the complete
    devices, the cuts seen). A device block a poster shortened or that was cut off is left
    out and said in the cuts; rows above the first ``hca_id:`` are not attributable."""
    head, blocks, cuts = split_blocks(text, _HCA_LINE, SOURCE)
    devices: dict[str, IbvDevice] = {}
    for no, block in blocks:
        try:
            devices.update(parse_ibv_devinfo(block).devices)
        except ParseError as exc:
            cuts.append(f"the block at line {no} is incomplete ({exc}): not judged")
    if head:
        cuts.append(f"{len(head)} line(s) above the first 'hca_id:' line: which device they "
                    "belong to is not in the capture, not judged")
    return IbvDevInfo(devices), cuts


def _new_device(devices: dict[str, IbvDevice], name: str, no: int) -> IbvDevice:
    if not name or name in devices:
        raise ParseError(SOURCE, f"hca_id {name!r} empty or listed twice", line=no)
    devices[name] = IbvDevice(name)
    return devices[name]


def _new_port(device: IbvDevice, value: str, no: int) -> IbvPort:
    number = _int(value, f"{device.hca_id} port", no)
    if number in device.ports:
        raise ParseError(SOURCE, f"{device.hca_id}: port {number} listed twice", line=no)
    device.ports[number] = IbvPort()
    return device.ports[number]


def _set_device_field(device: IbvDevice, key: str, value: str,
                      no: int) -> tuple[dict[str, str], str] | None:
    if key == "transport":
        device.transport, device.transport_code = _named_code(value, key, no)
    elif key in _HCA_STRINGS:
        setattr(device, key, value)
    elif key in _HCA_INTS:
        setattr(device, key, _int(value, key, no))
    else:
        device.extra[key] = value
        return device.extra, key
    return None


def _set_port_field(port: IbvPort, key: str, value: str, hca: str,
                    no: int) -> tuple[dict[str, str], str] | None:
    where = f"{hca} {key}"
    if key == "state":
        port.state, port.state_code = _named_code(value, where, no)
    elif key in ("max_mtu", "active_mtu"):
        mtu, code = _named_code(value, where, no)
        setattr(port, key, _int(mtu, where, no))
        setattr(port, f"{key}_code", code)
    elif key in _PORT_INTS:
        setattr(port, key, _int(value, where, no))
    elif key == "port_lmc":
        port.port_lmc = _int(value, where, no)
    elif key == "link_layer":
        port.link_layer = value
    else:
        port.extra[key] = value
        return port.extra, key
    return None


def _named_code(value: str, where: str, no: int) -> tuple[str, int]:
    """``"PORT_ACTIVE (4)"`` -> ("PORT_ACTIVE", 4)."""
    match = _NAMED_CODE.match(value)
    if not match:
        raise ParseError(SOURCE, f"{where}: expected 'NAME (code)', got {value!r}", line=no)
    return match["name"], int(match["code"])


def _int(value: str, where: str, no: int) -> int:
    if _INT.match(value):
        return int(value)
    if _HEX.match(value):
        return int(value, 16)
    raise ParseError(SOURCE, f"{where}: expected a number, got {value!r}", line=no)


def _check_complete(device: IbvDevice, last_line: int) -> None:
    """At least one port, each with state and link layer (else: truncated output)."""
    if not device.ports:
        raise ParseError(SOURCE, f"{device.hca_id}: no 'port:' block (truncated output?)",
                         line=last_line)
    for number, port in device.ports.items():
        if port.state is None or port.link_layer is None:
            raise ParseError(SOURCE, f"{device.hca_id} port {number} lacks state or link_layer "
                             "(truncated output?)", line=last_line)
