"""Every parser refuses every other command's real output (one test over PARSERS).

A parser that accepts another tool's output turns a wrong paste into a wrong verdict (an
`nvidia-smi -L` list read as `nvlink --status` says "no links: reseat the bridges"). Each
parser is run on every capture in tests/fixtures/real that is not its own command's.

Not the parsers of excerpts (``Parser.excerpts``: logs, greps, pasted listings), which keep
what they know and say the rest in their ``cuts``: another command's output gives them a
result with nothing in it (`gpuinfra check` calls that "no verdict", never a pass).
"""

from __future__ import annotations

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers import PARSERS, parser_for
from tests.conftest import REAL

# Each strict parser's own capture folders under tests/fixtures/real (none: its captures are
# elsewhere in tests/fixtures, see test_parsers_hostile.ELSEWHERE).
OWN: dict[str, set[str]] = {
    "topo": {"nvidia-smi-topo-m"},
    "p2p": {"nvidia-smi-topo-p2p"},
    "nvlink": {"nvidia-smi-nvlink"},
    "gpus": {"nvidia-smi-query-gpu", "nvidia-smi-L"},
    "mig": {"nvidia-smi-mig-lgip"},
    "lspci": {"lspci"},
    "mlxconfig": {"mlxconfig"},
    "ibstat": {"ibstat"},
    "ibv": {"ibv_devinfo"},
    "fabric": {"nvidia-smi-q"},
    "show-gids": set(),
    "lsmod": set(),
}
STRICT = [kind for kind, parser in PARSERS.items() if not parser.excerpts]
# Known gaps: (parser, capture) pairs accepted today; each must fail (strict xfail), so
# closing a gap forces its removal from this list.
EMPTY = "nvidia-smi-nvlink/kvm-vm-1x-a10-nvlink-status-empty-output.txt"
KNOWN_GAPS: set[tuple[str, str]] = {
    # A blank capture: the two read it as a table without rows (check: no verdict); `gpuinfra
    # parse` refuses it before they see it (test_cli_parse.py).
    ("show-gids", EMPTY), ("lsmod", EMPTY),
}

FOLDERS = sorted(p for p in REAL.iterdir() if p.is_dir())


def _cases() -> list:
    cases = []
    for kind in STRICT:
        for folder in FOLDERS:
            if folder.name in OWN[kind]:
                continue
            for path in sorted(p for p in folder.iterdir() if p.is_file()):
                marks = [pytest.mark.xfail(strict=True, reason="accepted today")] \
                    if (kind, f"{folder.name}/{path.name}") in KNOWN_GAPS else []
                cases.append(pytest.param(kind, path, marks=marks,
                                          id=f"{kind}<-{folder.name}/{path.name}"))
    return cases


def test_every_parser_has_its_own_folders():
    assert set(OWN) == set(STRICT)
    assert all((REAL / f).is_dir() for folders in OWN.values() for f in folders)


@pytest.mark.parametrize(("kind", "path"), _cases())
def test_other_commands_output_is_refused(kind, path):
    parse = parser_for(kind)
    text = path.read_text()
    with pytest.raises(ParseError):
        parse(text, mode="r") if kind == "p2p" else parse(text)
