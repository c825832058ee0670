"""ConnectX firmware settings: `mlxconfig -d DEV query` / `mstconfig -d BDF query`.

::

    Device #1:
    ----------

    Device type:        ConnectX7
    Name:               MCX715105AS-WEAT_Ax
    Description:        NVIDIA ConnectX-7 HHHL Adapter Card; ...
    Device:             /dev/mst/mt4129_pciconf0

    Configurations:                                          Next Boot
            ATS_ENABLED                                 False(0)

With ``-e`` the columns are ``Default  Current  Next Boot`` and a leading ``*`` marks settings
that differ from the default. Values may be padded with trailing spaces (or not). Output
filtered with grep (no header, maybe no ``Configurations:`` line) is accepted; a ``(...)``
line left by someone shortening the output is skipped and recorded as ``truncated``.

Several devices (:func:`parse_mlxconfig_devices`): a shell loop over the NICs, each query under
a ``----- <bdf> -----`` line (as NVIDIA's HGX VM-host guides print it, often filtered to the
header and ATS_ENABLED with the padding collapsed to one space), or ``mlxconfig q`` with no
``-d`` (``Device #1:``, ``Device #2:``...). Each device is read alone; a last device cut before
its parameters is a cut, not an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpuinfra.errors import ParseError
from gpuinfra.parsers._text import clean_lines

SOURCE = "mlxconfig query"

_HEADER_KEYS = {"Device type": "device_type", "Name": "name", "Description": "description",
                "Device": "device"}
_DEVICE_NUMBER = re.compile(r"^Device #(\d+):$")
# A loop's per-device line: ``----- 17:00.0 -----`` (a PCI address or an mst device path).
_LOOP_DEVICE = re.compile(r"^-{3,}\s*(?P<label>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
                          r"\.[0-7]|/dev/mst/\S+|mt\d+_pci\w+)\s*-{3,}$")
# A loop's banner line (``=== mlxconfig ATS ===``): the wrapper's, not mlxconfig's.
_BANNER = re.compile(r"^={3,}[^=]*={3,}$")
_CONFIGURATIONS = re.compile(r"^Configurations:\s*(?P<columns>.*)$")
# Parameter lines are indented (or start with the -e "*"; a copy with its padding collapsed
# has neither); names are upper case with
# underscores (one exception has a lower-case part: EXP_ROM_UEFI_x86_ENABLE).
_PARAM = re.compile(r"^(?:\*|\s)?\s*(?P<name>[A-Z][A-Z0-9]*(?:_[A-Za-z0-9]+)+(?:\[[0-9.]+\])?)"
                    r"\s+(?P<values>\S.*)$")
_LABELLED = re.compile(r"^(?P<label>.+)\((?P<number>-?[0-9]+)\)$")
_TRUNCATION = {"(...)", "...", "…"}
# The footer mlxconfig -e prints under the table.
_FOOTER = "The '*' shows parameters"
_COLUMN_SETS = {
    ("Next Boot",): ("next_boot",),
    ("Default", "Current", "Next Boot"): ("default", "current", "next_boot"),
}


@dataclass
class MlxParam:
    """One firmware parameter.

    raw: the Next Boot value as printed ("False(0)", "IB(1)", "8", "Array[0..7]").
    value: ``raw`` read: True/False, the number in parentheses or the plain number, None for
        "_INVALID_" and arrays (query those by index), else the string.
    label: the name before the parentheses ("IB" in "IB(1)"), None otherwise.
    default, current: the other columns read the same way (only with ``query -e``).
    modified: the ``*`` mark of ``-e`` output.
    """

    raw: str
    value: bool | int | str | None
    label: str | None
    default: bool | int | str | None = None
    current: bool | int | str | None = None
    modified: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"raw": self.raw, "value": self.value, "label": self.label,
                "next_boot": self.value, "current": self.current, "default": self.default,
                "modified": self.modified}


@dataclass
class MlxConfig:
    """One device's query output; header fields are None when not shown (grep-filtered)."""

    device: str | None = None
    device_type: str | None = None
    name: str | None = None
    description: str | None = None
    truncated: bool = False
    params: dict[str, MlxParam] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{"device", "device_type", "name", "description", "truncated",
        "params": {NAME: {"raw", "value", "label", "next_boot", "current", "default",
        "modified"}}}``."""
        return {"device": self.device, "device_type": self.device_type, "name": self.name,
                "description": self.description, "truncated": self.truncated,
                "params": {k: p.to_json() for k, p in self.params.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MlxConfig:
        """The inverse of :meth:`to_json` (a fact's plain data back to the typed query)."""
        params = {name: MlxParam(raw=p["raw"], value=p["value"], label=p["label"],
                                 default=p.get("default"), current=p.get("current"),
                                 modified=bool(p.get("modified")))
                  for name, p in data.get("params", {}).items()}
        return cls(device=data.get("device"), device_type=data.get("device_type"),
                   name=data.get("name"), description=data.get("description"),
                   truncated=bool(data.get("truncated")), params=params)


def parse_mlxconfig(text: str) -> MlxConfig:
    """Read `mlxconfig`/`mstconfig` ``query`` output for one device (see the module doc)."""
    cfg = MlxConfig()
    columns: tuple[str, ...] | None = None
    devices = 0
    for no, line in enumerate(clean_lines(text, SOURCE), 1):
        stripped = line.strip()
        if not stripped or set(stripped) == {"-"} or stripped.startswith(_FOOTER):
            continue
        number = _DEVICE_NUMBER.match(stripped)
        if number:
            devices += 1
            if devices > 1:
                raise ParseError(SOURCE, "output for several devices: query one with -d",
                                 line=no)
            continue
        configurations = _CONFIGURATIONS.match(stripped)
        if configurations:
            columns = _columns(configurations["columns"], no)
            continue
        if stripped in _TRUNCATION:
            cfg.truncated = True
            continue
        if _header_line(cfg, stripped, no):
            continue
        if stripped.startswith("-E-"):
            raise ParseError(SOURCE, f"mlxconfig reported an error: {stripped[:100]!r}", line=no)
        columns = _add_param(cfg, line.rstrip(), columns, no)
    if not cfg.params:
        raise ParseError(SOURCE, "no configuration parameters found (not mlxconfig query "
                         "output, or cut before 'Configurations:')")
    return cfg


def parse_mlxconfig_partial(text: str) -> tuple[MlxConfig, list[str]]:
    """A pasted query read as far as it is whole (issue 24, section 3): (the parameters read,
    the cuts seen). A poster's ``(...)``, a grep that left out the header, or a last line cut
    mid-way (left out, with the lines after it) are cuts; a line mlxconfig never prints in the
    middle of the output still makes the capture unreadable (ParseError)."""
    lines = text.split("\n")
    cuts: list[str] = []
    while True:
        try:
            cfg = parse_mlxconfig("\n".join(lines))
            break
        except ParseError as exc:
            last = max((n for n, line in enumerate(lines, 1) if line.strip()), default=0)
            if exc.line is None or exc.line != last or exc.line <= 1:
                raise
            cuts.append(f"line {exc.line}: {lines[exc.line - 1].strip()[:60]!r} cut mid-way: "
                        "not judged")
            lines = lines[:exc.line - 1]
    if cfg.truncated:
        cuts.append("a '(...)' line: the poster left parameters out")
    if not any(_DEVICE_NUMBER.match(line.strip()) for line in lines):
        cuts.append("no 'Device #1:' line: the output was filtered (grep) or cut at the top, "
                    "other parameters may be missing")
    return cfg, cuts


@dataclass
class MlxDevices:
    """Every device of a query capture, in order: (label, its query, its cuts). ``label`` is
    the loop's PCI address or device path, else the ``Device:`` line, else ``device #N``.
    ``cut_devices``: the labels of devices the capture ends before the parameters of (a last
    device cut mid-way); ``cuts`` says them for the operator."""

    devices: list[tuple[str, MlxConfig, list[str]]] = field(default_factory=list)
    cut_devices: list[str] = field(default_factory=list)

    @property
    def cuts(self) -> list[str]:
        return [f"{label}: the capture ends before its parameters: not judged"
                for label in self.cut_devices]

    def to_json(self) -> dict[str, Any]:
        """``{"devices": [{"label", "cuts", ...one device's to_json()}], "cuts": [...]}``."""
        return {"devices": [{"label": label, "cuts": cuts, **cfg.to_json()}
                            for label, cfg, cuts in self.devices],
                "cuts": list(self.cuts)}


def split_devices(text: str) -> list[tuple[str | None, str, int]]:
    """The capture cut at each device's first line: [(the loop's label or None, its text, the
    capture's line number before its first line)]. One device (or a capture without device
    lines) gives one entry."""
    blocks: list[tuple[str | None, list[str], int]] = [(None, [], 0)]
    for no, line in enumerate(clean_lines(text, SOURCE), 1):
        stripped = line.strip()
        loop = _LOOP_DEVICE.match(stripped)
        if loop or (_DEVICE_NUMBER.match(stripped) and any(
                _DEVICE_NUMBER.match(x.strip()) for x in blocks[-1][1])):
            blocks.append((loop["label"], [], no) if loop else (None, [line], no - 1))
            continue
        if _BANNER.match(stripped) and not any(x.strip() for x in blocks[-1][1]):
            blocks[-1][1].append("")  # the wrapper's banner: a blank line keeps the numbering
            continue
        blocks[-1][1].append(line)
    return [(label, "\n".join(lines), start) for label, lines, start in blocks
            if label is not None or any(x.strip() for x in lines)]


def parse_mlxconfig_devices(text: str) -> MlxDevices:
    """A query capture of one device or several (see the module doc), each read as far as it
    is whole (:func:`parse_mlxconfig_partial`). A device other than the last that cannot be
    read makes the capture unreadable (ParseError, with the capture's line number)."""
    blocks = split_devices(text)
    if not blocks:
        raise ParseError(SOURCE, "no configuration parameters found (not mlxconfig query "
                         "output)")
    result = MlxDevices()
    for n, (label, block, start) in enumerate(blocks, 1):
        try:
            if n < len(blocks):  # more follows: a line it cannot read was not cut mid-way
                cfg = parse_mlxconfig(block)
                cuts = ["a '(...)' line: the poster left parameters out"] if cfg.truncated \
                    else []
            else:
                cfg, cuts = parse_mlxconfig_partial(block)
        except ParseError as exc:
            if n < len(blocks) or len(blocks) == 1 or exc.line is not None:
                if exc.line is None or not start:
                    raise
                raise ParseError(SOURCE, str(exc).split(": ", 1)[1].rsplit(" (line ", 1)[0],
                                 line=exc.line + start) from None
            result.cut_devices.append(label or f"device #{n}")
            continue
        if label is not None:  # a loop's block is its wrapper's filter, not a cut by a poster
            cuts = [c for c in cuts if not c.startswith("no 'Device #1:' line")]
        result.devices.append((label or cfg.device or f"device #{n}", cfg, cuts))
    return result


def ats_enabled(cfg: MlxConfig, column: str = "next_boot") -> bool | None:
    """ATS_ENABLED as a bool (``column``: "next_boot" or, with ``-e``, "current"), None if absent.

    The Next Boot value is what the firmware will use after the next reboot or firmware reset.
    """
    param = cfg.params.get("ATS_ENABLED")
    if param is None:
        return None
    value = param.value if column == "next_boot" else param.current
    return value if isinstance(value, bool) else None


def parse_value(raw: str) -> tuple[bool | int | str | None, str | None]:
    """A value as printed -> (value, label); see :class:`MlxParam`."""
    labelled = _LABELLED.match(raw)
    if labelled:
        label, number = labelled["label"], int(labelled["number"])
        if label in ("True", "False"):
            return label == "True", label
        return number, label
    if re.fullmatch(r"-?[0-9]+", raw):
        return int(raw), None
    if re.fullmatch(r"0x[0-9a-fA-F]+", raw):
        return int(raw, 16), None
    if raw == "_INVALID_" or raw.startswith("Array["):
        return None, None
    return raw, None


def _columns(text: str, no: int) -> tuple[str, ...]:
    names = tuple(re.split(r"\s{2,}", text.strip())) if text.strip() else ("Next Boot",)
    if names not in _COLUMN_SETS:
        raise ParseError(SOURCE, f"unknown Configurations columns {' / '.join(names)!r}",
                         line=no)
    return _COLUMN_SETS[names]


def _header_line(cfg: MlxConfig, stripped: str, no: int) -> bool:
    key, sep, value = stripped.partition(":")
    attr = _HEADER_KEYS.get(key)
    if not sep or attr is None:
        return False
    if cfg.params:
        raise ParseError(SOURCE, f"header line {key!r} after the parameters", line=no)
    setattr(cfg, attr, value.strip())
    return True


def _add_param(cfg: MlxConfig, line: str, columns: tuple[str, ...] | None,
               no: int) -> tuple[str, ...]:
    match = _PARAM.match(line)
    if not match:
        raise ParseError(SOURCE, f"expected an indented 'PARAMETER  VALUE' line, got "
                         f"{line.strip()[:60]!r}", line=no)
    raws = match["values"].split()
    if columns is None:
        # grep-filtered without the Configurations line: the value count tells the columns.
        columns = _COLUMN_SETS.get(("Default", "Current", "Next Boot") if len(raws) == 3
                                   else ("Next Boot",), ())
    if len(raws) != len(columns):
        raise ParseError(SOURCE, f"{match['name']}: {len(raws)} values for "
                         f"{len(columns)} column(s) {list(columns)}", line=no)
    if match["name"] in cfg.params:
        raise ParseError(SOURCE, f"parameter {match['name']} listed twice", line=no)
    modified = line.startswith("*")
    cfg.params[match["name"]] = _param(dict(zip(columns, raws, strict=True)), modified)
    return columns


def _param(raws: dict[str, str], modified: bool) -> MlxParam:
    value, label = parse_value(raws["next_boot"])
    param = MlxParam(raw=raws["next_boot"], value=value, label=label, modified=modified)
    if "default" in raws:
        param.default = parse_value(raws["default"])[0]
        param.current = parse_value(raws["current"])[0]
    return param
