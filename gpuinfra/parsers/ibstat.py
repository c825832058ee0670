"""InfiniBand/RoCE adapters and ports: `ibstat`.

::

    CA 'mlx5_0'
        CA type: MT4129
        Number of ports: 1
        Firmware version: 28.39.1002
        ...
        Port 1:
            State: Active
            Physical state: LinkUp
            Rate: 400
            ...
            Link layer: Ethernet

Indentation (tabs, or spaces where a capture was pasted) is not relied on: every key line
after ``Port N:`` belongs to that port. Output may end without a newline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines, split_blocks

SOURCE = "ibstat"

_CA_LINE = re.compile(r"^CA '(?P<name>[^']+)'$")
_PORT_LINE = re.compile(r"^Port (?P<port>[0-9]+):$")
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<value>.*)$")
_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]+)?$")

# ibstat key -> attribute, for the adapter and for a port.
_CA_KEYS = {
    "CA type": "ca_type", "Number of ports": "number_of_ports", "Firmware version": "firmware",
    "Hardware version": "hardware_version", "Node GUID": "node_guid",
    "System image GUID": "system_image_guid",
}
_PORT_KEYS = {
    "State": "state", "Physical state": "physical_state", "Rate": "rate",
    "Base lid": "base_lid", "LMC": "lmc", "SM lid": "sm_lid",
    "Capability mask": "capability_mask", "Port GUID": "port_guid", "Link layer": "link_layer",
}
_INT_FIELDS = {"number_of_ports", "base_lid", "lmc", "sm_lid"}
# Printed last in a port block: a port without them was cut off.
_REQUIRED_PORT_FIELDS = ("state", "physical_state", "rate", "link_layer")


@dataclass
class IbPort:
    """One port: state ("Active", "Down", ...), physical_state ("LinkUp", "Polling",
    "Disabled", ...), rate in Gb/s (int, or float for 2.5), lids as ints, GUIDs as printed."""

    state: str | None = None
    physical_state: str | None = None
    rate: int | float | None = None
    base_lid: int | None = None
    lmc: int | None = None
    sm_lid: int | None = None
    capability_mask: str | None = None
    port_guid: str | None = None
    link_layer: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state, "physical_state": self.physical_state, "rate": self.rate,
            "base_lid": self.base_lid, "lmc": self.lmc, "sm_lid": self.sm_lid,
            "capability_mask": self.capability_mask, "port_guid": self.port_guid,
            "link_layer": self.link_layer, **self.extra,
        }


@dataclass
class IbCa:
    """One channel adapter (``CA 'mlx5_0'``) and its ports by number."""

    name: str
    ca_type: str | None = None
    number_of_ports: int | None = None
    firmware: str | None = None
    hardware_version: str | None = None
    node_guid: str | None = None
    system_image_guid: str | None = None
    ports: dict[int, IbPort] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "ca_type": self.ca_type, "number_of_ports": self.number_of_ports,
            "firmware": self.firmware, "hardware_version": self.hardware_version,
            "node_guid": self.node_guid, "system_image_guid": self.system_image_guid,
            **self.extra, "ports": {str(n): p.to_json() for n, p in self.ports.items()},
        }


@dataclass
class IbStat:
    """Adapters by name, in the order ibstat printed them."""

    cas: dict[str, IbCa]

    def to_json(self) -> dict[str, Any]:
        """``{"mlx5_0": {"ca_type", "number_of_ports", "firmware", "hardware_version",
        "node_guid", "system_image_guid", "ports": {"1": {"state", "physical_state",
        "rate", "base_lid", "lmc", "sm_lid", "capability_mask", "port_guid",
        "link_layer"}}}}``."""
        return {name: ca.to_json() for name, ca in self.cas.items()}


def parse_ibstat(text: str) -> IbStat:
    """Read `ibstat` output (all adapters, or ``ibstat mlx5_0``)."""
    cas: dict[str, IbCa] = {}
    ca: IbCa | None = None
    port: IbPort | None = None
    last_no = 0
    for no, line in enumerate(clean_lines(text, SOURCE), 1):
        stripped = line.strip()
        if not stripped:
            continue
        last_no = no
        ca_match = _CA_LINE.match(stripped)
        if ca_match:
            if ca is not None:
                _check_complete(ca, no - 1)
            ca, port = _new_ca(cas, ca_match["name"], no), None
            continue
        if ca is None:
            raise ParseError(SOURCE, f"expected \"CA '<name>'\", got {stripped[:60]!r}", line=no)
        port_match = _PORT_LINE.match(stripped)
        if port_match:
            port = _new_port(ca, int(port_match["port"]), no)
            continue
        _set_field(ca, port, stripped, no)
    if ca is None:
        raise ParseError(SOURCE, "no \"CA '<name>'\" line (empty output?)")
    _check_complete(ca, last_no)
    return IbStat(cas)


def parse_ibstat_partial(text: str) -> tuple[IbStat, list[str], IbPort | None, dict[str, str]]:
    """A pasted `ibstat` read block by block (issue 24, section 3): (the complete CAs, the
    cuts seen, the port read from rows without their ``CA``/``Port`` header, the first port's
    ``State`` of each incomplete block that shows it).

    A block a poster shortened (``...``), or the last one cut mid-way, is left out and said in
    the cuts; every other block is read as :func:`parse_ibstat` reads it. Of a left-out block,
    its first port's state is kept when its ``State:`` line is whole: a port shown Down is down,
    whatever was cut after it (issue 47). Rows above the first ``CA`` line (``ibstat mlx5_0 1``
    prints a port's rows alone) are read as one port when they hold its state; which adapter
    they belong to is the caller's to say.
    """
    head, blocks, cuts = split_blocks(text, _CA_LINE, SOURCE)
    cas: dict[str, IbCa] = {}
    cut_states: dict[str, str] = {}
    for no, block in blocks:
        try:
            for name, ca in parse_ibstat(block).cas.items():
                if name in cas:
                    raise ParseError(SOURCE, f"CA {name!r} listed twice", line=no)
                cas[name] = ca
        except ParseError as exc:
            cuts.append(f"the block at line {no} is incomplete ({exc}): not judged")
            shown = _cut_block_state(block)
            if shown is not None:
                cut_states[shown[0]] = shown[1]
    port = _headless_port(head)
    if head and port is None:
        cuts.append(f"{len(head)} line(s) above the first \"CA '<name>'\" line, not a port's "
                    "rows: not judged")
    return IbStat(cas), cuts, port, cut_states


# ibstat's port states (infiniband-diags: Down, Initializing, Armed, Active, Active-Defer).
_PORT_STATES = ("Down", "Initializing", "Armed", "Active", "Active-Defer", "ActiveDefer")


def _cut_block_state(block: str) -> tuple[str, str] | None:
    """(CA name, its first port's ``State`` as printed) of an incomplete block, when that
    line is whole (a known state word, not one cut mid-way)."""
    lines = block.split("\n")
    name = _CA_LINE.match(lines[0].strip()) if lines else None
    if name is None:
        return None
    in_port = False
    for line in lines[1:]:
        stripped = line.strip()
        if _PORT_LINE.match(stripped):
            if in_port:
                return None  # the first port only
            in_port = True
            continue
        match = _KEY_VALUE.match(stripped)
        if in_port and match and match["key"] == "State":
            state = match["value"].strip()
            return (name.group(1), state) if state in _PORT_STATES else None
    return None


def _headless_port(lines: list[str]) -> IbPort | None:
    """The port whose rows ``lines`` are (no CA or Port header), when they hold its state."""
    port = IbPort()
    for line in lines:
        match = _KEY_VALUE.match(line.strip())
        attr = _PORT_KEYS.get(match["key"]) if match else None
        if match is None or attr is None or _PORT_LINE.match(line.strip()):
            if match is None and not _PORT_LINE.match(line.strip()):
                return None
            continue
        try:
            setattr(port, attr, _convert(attr, match["value"].strip(), "?", 0))
        except ParseError:
            return None
    return port if port.state is not None and port.physical_state is not None else None


def _new_ca(cas: dict[str, IbCa], name: str, no: int) -> IbCa:
    if name in cas:
        raise ParseError(SOURCE, f"CA {name!r} listed twice", line=no)
    cas[name] = IbCa(name)
    return cas[name]


def _new_port(ca: IbCa, number: int, no: int) -> IbPort:
    if number in ca.ports:
        raise ParseError(SOURCE, f"{ca.name}: port {number} listed twice", line=no)
    ca.ports[number] = IbPort()
    return ca.ports[number]


def _set_field(ca: IbCa, port: IbPort | None, stripped: str, no: int) -> None:
    match = _KEY_VALUE.match(stripped)
    if not match:
        raise ParseError(SOURCE, f"{ca.name}: expected 'Key: value', got {stripped[:60]!r}",
                         line=no)
    key, value = match["key"], match["value"].strip()
    if port is not None:
        attr = _PORT_KEYS.get(key)
        target: IbCa | IbPort = port
    else:
        attr = _CA_KEYS.get(key)
        target = ca
    if attr is None:
        target.extra[_snake(key)] = value
        return
    setattr(target, attr, _convert(attr, value, ca.name, no))


def _convert(attr: str, value: str, ca_name: str, no: int) -> Any:
    if attr in _INT_FIELDS:
        if not re.fullmatch(r"[0-9]+", value):
            raise ParseError(SOURCE, f"{ca_name}: {attr} is not a number: {value!r}", line=no)
        return int(value)
    if attr == "rate":
        if not _NUMBER.match(value):
            raise ParseError(SOURCE, f"{ca_name}: rate is not a number: {value!r}", line=no)
        return float(value) if "." in value else int(value)
    return value


def _check_complete(ca: IbCa, last_line: int) -> None:
    """Every port has its last fields and every announced port is there (else: truncated)."""
    for number, port in ca.ports.items():
        missing = [f for f in _REQUIRED_PORT_FIELDS if getattr(port, f) is None]
        if missing:
            raise ParseError(SOURCE, f"{ca.name} port {number} lacks {', '.join(missing)} "
                             "(truncated output?)", line=last_line)
    if ca.number_of_ports is None or ca.ca_type is None:
        raise ParseError(SOURCE, f"{ca.name}: no 'CA type'/'Number of ports' lines "
                         "(truncated output?)", line=last_line)
    if len(ca.ports) != ca.number_of_ports:
        raise ParseError(SOURCE, f"{ca.name}: {ca.number_of_ports} ports announced, "
                         f"{len(ca.ports)} listed (truncated output?)", line=last_line)


def _snake(key: str) -> str:
    return "_".join(key.lower().split())
