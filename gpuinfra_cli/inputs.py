"""What the subcommands read: capture files (at most one from standard input, refused when
they are another command's output) and a site's spec (``--inventory``, ``--host``,
``--group-data``). `validate`, `parse`, `check` (every form), `nccl check` and `perftest
check` share them; this module imports none of those."""

from __future__ import annotations

import argparse
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuinfra.errors import GpuinfraError
from gpuinfra.parsers._text import MAX_LINE
from gpuinfra.parsers.sniff import mismatch, without_echoed_command

STDIN = "-"


# The largest capture read (issue 44: /dev/zero or an endless pipe must not grow without
# bound): well above any real one (an 8-GPU `nvidia-smi -q` is ~200 KB, a day of `dmesg` a few
# MB).
MAX_CAPTURE_BYTES = 32 << 20


def read_bytes_bounded(path: str, what: str = "capture") -> bytes:
    """The bytes of ``path`` ('-': standard input), at most :data:`MAX_CAPTURE_BYTES`;
    GpuinfraError naming the file when it is larger, a device (``/dev/zero``), or unreadable.
    A pipe (``<(cmd)``, ``/dev/fd/N``) is read up to the bound."""
    name = "standard input" if path == STDIN else path
    try:
        if path == STDIN:
            stream = getattr(sys.stdin, "buffer", None)
            data = stream.read(MAX_CAPTURE_BYTES + 1) if stream is not None else \
                sys.stdin.read(MAX_CAPTURE_BYTES + 1).encode("utf-8", "surrogateescape")
        else:
            mode = Path(path).stat().st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISDIR(mode):
                kind = "a directory" if stat.S_ISDIR(mode) else "a device"
                raise GpuinfraError(f"{name}: {kind}, not a {what} file: give the file the "
                                    "tool's output was saved to")
            with open(path, "rb") as source:
                data = source.read(MAX_CAPTURE_BYTES + 1)
    except OSError as exc:
        raise GpuinfraError(f"{name}: cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_CAPTURE_BYTES:
        raise GpuinfraError(f"{name}: more than {MAX_CAPTURE_BYTES >> 20} MiB: no {what} is "
                            "that large; give the command's own output (or the part of it "
                            "that matters)")
    return data


def read_text(path: str, what: str = "capture") -> str:
    """The text of the capture ``path`` ('-': standard input), bounded
    (:func:`read_bytes_bounded`); GpuinfraError naming the file when it cannot be read, is
    not UTF-8, or holds a line longer than any tool prints."""
    name = "standard input" if path == STDIN else path
    data = read_bytes_bounded(path, what)
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise GpuinfraError(f"{name}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                            f"offset {exc.start}): give the capture as the tool printed it") \
            from None
    for no, line in enumerate(text.split("\n"), 1):
        if len(line) > MAX_LINE:
            raise GpuinfraError(f"{name}: a line of {len(line)} characters: no tool output a "
                                f"{what} holds has lines longer than {MAX_LINE} (line {no})")
    return text


def one_stdin(options: Sequence[tuple[str, str | None]]) -> None:
    """GpuinfraError when more than one capture option reads standard input: (option, path)."""
    readers = list(dict.fromkeys(option for option, path in options if path == STDIN))
    if len(readers) > 1:
        raise GpuinfraError(f"only one capture can come from standard input ('-'): "
                            f"{' and '.join(readers)} both ask for it; give the others as files")


def read_capture(path: str, kind: str) -> str:
    """The text of the capture ``path`` ('-': standard input) meant to be ``kind``'s output;
    GpuinfraError naming the file when it cannot be read, or when it is recognisably another
    command's output ("this looks like `ibstat` output, not `nvidia-smi topo -m`")."""
    name = "standard input" if path == STDIN else path
    text, _echoed = without_echoed_command(read_text(path), kind)
    problem = mismatch(kind, text)
    if problem:
        raise GpuinfraError(f"{name}: {problem}")
    return text


# ---------------------------------------------------------------------------- the site's spec

def add_group_data(p: argparse.ArgumentParser) -> None:
    """--group-data / --no-group-data: where a site's group_data is, said explicitly."""
    p.add_argument("--group-data", metavar="DIR",
                   help="the site's group_data folder (default: group_data/ in the working "
                   "directory, beside the inventory file, or in the folder above it)")
    p.add_argument("--no-group-data", action="store_true",
                   help="the site has no group_data: every key not in the inventory takes "
                   "its default")


def group_data_of(args: argparse.Namespace) -> str | None:
    """The group_data folder to read (None: found beside the inventory); GpuinfraError when
    none is found and --no-group-data was not given: a site read without its group_data
    would be judged on defaults, silently."""
    from gpuinfra_deploy.run.inventory import group_data_candidates, group_data_folders

    if args.group_data or args.no_group_data:
        return args.group_data
    if not Path(args.inventory).is_file() or group_data_folders(args.inventory):
        return None
    looked = ", ".join(str(c) for c in group_data_candidates(args.inventory))
    raise GpuinfraError(
        f"{args.inventory}: no group_data/ folder found (looked for {looked}): run from the "
        "site's root, give --group-data DIR, or --no-group-data if the site keeps all its data "
        "in the inventory")


def add_site_options(p: Any) -> None:
    """--inventory, --host, --group-data, --no-group-data: the expectation from a site's spec
    (`nccl check`, `perftest check`; `check` has them in its host group)."""
    p.add_argument("--inventory", metavar="FILE", help="the site's inventory: the expectation "
                   "is --host's spec (its GPUs, NICs and their rates)")
    p.add_argument("--host", help="the host the capture is from (with --inventory: whose spec "
                   "is the expectation; always: the JSON's host)")
    p.add_argument("--group-data", metavar="DIR", help="the site's group_data folder")
    p.add_argument("--no-group-data", action="store_true", help="the site has none")


def spec_node(args: argparse.Namespace) -> tuple[Any, Any]:
    """(NodeSpec, ClusterSpec) of --host in --inventory (validated as `gpuinfra validate`)."""
    from gpuinfra_deploy.run.site import validated_site

    if not args.host:
        raise GpuinfraError("--inventory needs --host (which host the captures are from)")
    site = validated_site(args.inventory, group_data_of(args))
    if site is None:
        raise GpuinfraError(f"{args.inventory}: the spec is invalid (see above)")
    spec = site[1]
    try:
        return spec.node(args.host), spec
    except (KeyError, GpuinfraError):
        raise GpuinfraError(f"{args.host}: not a host of {args.inventory}") from None
