"""The capture sniffer (gpuinfra/parsers/sniff.py) on the real captures: each is recognised as
its own command's output, and given as another kind it is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuinfra.parsers import PARSERS
from gpuinfra.parsers.sniff import FAMILIES, SIGNATURES, command_of, looks_like, mismatch, sniff
from tests.conftest import REPO
from tests.unit.test_parsers_hostile import own_captures

FIX = REPO / "tests" / "fixtures"
CAPTURES: dict[str, list[Path]] = {kind: own_captures(kind) for kind in PARSERS}
CAPTURES["nccl"] = sorted((FIX / "nccl").glob("*.txt"))
CAPTURES["perftest"] = sorted((FIX / "perftest").glob("*.txt"))


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def test_every_kind_has_a_signature():
    assert set(SIGNATURES) == set(PARSERS) | {"nccl", "perftest"}


@pytest.mark.parametrize("kind", list(CAPTURES))
def test_each_real_capture_is_never_refused_as_its_own_kind(kind):
    for path in CAPTURES[kind]:
        text = _text(path)
        assert mismatch(kind, text) is None, path.name
        if text.strip():  # a blank `nvlink --status` (no NVLink) shows no signature at all
            assert sniff(text), f"{path.name}: not recognised"


@pytest.mark.parametrize("kind", list(CAPTURES))
def test_another_kinds_capture_is_named(kind):
    """Every real capture of another kind (outside the lspci family) is refused as ``kind``,
    naming the command that printed it."""
    for other, paths in CAPTURES.items():
        if FAMILIES.get(other, other) == FAMILIES.get(kind, kind):
            continue
        for path in paths:
            text = _text(path)
            if not text.strip():
                continue
            said = mismatch(kind, text)
            assert said == (f"this looks like `{command_of(looks_like(text))}` output, not "
                            f"`{command_of(kind)}`"), (kind, path.name, sniff(text))


def test_the_review_example():
    ibstat = _text(FIX / "real/ibstat/kaust-ibex-login-connectx6-hdr100-rate100.txt")
    assert mismatch("topo", ibstat) == "this looks like `ibstat` output, not `nvidia-smi topo -m`"
    assert looks_like(_text(FIX / "real/nvidia-smi-nvlink/h100-sxm-gpu0-nvlink-status-i0-18-links"
                                  "-26.562.txt")) == "nvlink"  # not `nvidia-smi -L`
