"""`nvidia-smi topo -p2p` parser on every real capture, and on damaged input."""

from __future__ import annotations

import pytest

from gpuinfra.errors import GpuinfraError, ParseError
from gpuinfra.parsers.p2p import P2P_CODES, parse_p2p
from tests.conftest import REAL, real_files

FOLDER = "nvidia-smi-topo-p2p"

# file -> (mode, GPU count, the one status every off-diagonal cell has)
EXPECTED: dict[str, tuple[str, int, str]] = {
    "8x-h100-80gb-hbm3-p2p-r-all-OK.txt": ("r", 8, "OK"),
    "autodl-2x-rtx2080ti-p2p-p-NS.txt": ("p", 2, "NS"),
    "rtx3060-plus-p100-pcie-phb-p2p-r-NS-legend-omitted-UNRESOLVED-SOURCE.txt": ("r", 2, "NS"),
}


def test_every_capture_has_expectations() -> None:
    assert {p.name for p in real_files(FOLDER)} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_capture(name: str) -> None:
    mode, count, code = EXPECTED[name]
    matrix = parse_p2p((REAL / FOLDER / name).read_text(), mode)
    gpus = [f"GPU{i}" for i in range(count)]
    data = matrix.to_json()
    assert list(data) == ["mode", "gpus", "status"]
    assert data["mode"] == mode
    assert data["gpus"] == gpus
    assert data["status"] == {g: {o: code for o in gpus if o != g} for g in gpus}


def test_helpers_and_codes() -> None:
    ok = parse_p2p((REAL / FOLDER / "8x-h100-80gb-hbm3-p2p-r-all-OK.txt").read_text())
    assert ok.mode is None
    assert ok.pair_ok(0, 7) and ok.code("GPU3", "GPU4") == "OK"
    assert ok.code(0, 9) is None
    ns = parse_p2p((REAL / FOLDER / "autodl-2x-rtx2080ti-p2p-p-NS.txt").read_text(), "pcie")
    assert ns.mode == "p"
    assert not ns.pair_ok(0, 1)
    assert set(P2P_CODES) >= {"OK", "CNS", "GNS", "TNS", "NS", "DR", "U"}
    assert P2P_CODES["CNS"] == "Chipset not supported"


def test_tab_separated_and_every_code() -> None:
    text = ("\tGPU0\tGPU1\tGPU2\tGPU3\n"
            " GPU0\tX\tCNS\tGNS\tTNS\n"
            " GPU1\tDR\tX\tU\tOK\n"
            " GPU2\tNS\tOK\tX\tOK\n"
            " GPU3\tOK\tOK\tOK\tX\n")
    matrix = parse_p2p(text, "w")
    assert matrix.status["GPU0"] == {"GPU1": "CNS", "GPU2": "GNS", "GPU3": "TNS"}
    assert matrix.status["GPU1"] == {"GPU0": "DR", "GPU2": "U", "GPU3": "OK"}


def test_bad_mode_is_refused() -> None:
    with pytest.raises(GpuinfraError, match="unknown p2p mode"):
        parse_p2p("        GPU0\n GPU0   X\n", "q")


HEADER = "        GPU0    GPU1\n"


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("", "empty", None),
        ("NVML: Unable to determine the device handle\n", "no header", None),
        (" GPU0   X       OK\n", "before any header", 1),
        (HEADER + " GPU0   X       OK\n GPU1   OK      FOO\n", "'FOO'", 3),
        (HEADER + " GPU0   X       OK\n GPU1   OK\n", "has 1 cells", 3),
        (HEADER + " GPU0   X       OK     OK\n GPU1   OK      X\n", "has 3 cells", 2),
        (HEADER + " GPU0   X       OK\n", "no row for GPU1", 1),
        (HEADER + " GPU0   X       OK\n GPU2   OK      X\n", "'GPU2'", 3),
        (HEADER + " GPU0   OK      X\n GPU1   OK      X\n", "diagonal", 2),
        (HEADER + " GPU0   X       OK\n GPU0   X       OK\n", "two rows", 3),
    ],
)
def test_unreadable_input_raises(text: str, message: str, line: int | None) -> None:
    with pytest.raises(ParseError) as info:
        parse_p2p(text, "r")
    assert message in str(info.value)
    assert info.value.line == line
