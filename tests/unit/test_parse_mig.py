"""MIG listing parser (`nvidia-smi mig -lgip/-lgi/-lcip/-lci/-lgipp`) on real captures."""

from __future__ import annotations

import json

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.knowledge.gpus import GPU_MODELS
from gpuinfra.parsers.mig import MigListing, available_profiles, parse_mig
from tests.conftest import REAL, real_files

FOLDER = "nvidia-smi-mig-lgip"
H100_LGIP = "4x-h100-sxm5-80gb-mig-lgip-stackhpc.txt"
A30_LGIP = "a30-24gb-mig-lgip-all-slices-in-use.txt"
A30_LGI = "a30-24gb-mig-lgi-4x-1g.6gb.txt"
A30_LGIPP = "a30-24gb-mig-lgipp-placements.txt"
A100_LCIP = "a100-pcie-40gb-drv460-mig-lcip-7x-1g.5gb.txt"
A100_DISABLED = "a100-pcie-40gb-mig-lgip-mig-disabled.txt"

KINDS = {
    H100_LGIP: "gpu-instance-profiles", A30_LGIP: "gpu-instance-profiles",
    A30_LGI: "gpu-instances", A30_LGIPP: "placements", A100_LCIP: "compute-instance-profiles",
    A100_DISABLED: "none",
}


MIG_ENABLED = {
    "none": False, "gpu-instance-profiles": None, "placements": None,
    "gpu-instances": True, "compute-instance-profiles": True,
}
MIG = REAL.parent / "mig"  # tests/fixtures/mig/INDEX.md
H100_LGIPP_UNRESOLVED = MIG / "h100-80gb-hbm3-mig-lgipp-UNRESOLVED-SOURCE.txt"
# The driver branch each -lgip capture was printed by, as far as its INDEX row tells: the H100
# one is unknown but MIG on H100 needs R525 (knowledge: mig_min_branch); the A30 one is unknown
# too, and lists 1g.6gb+me but not 2g.12gb+me, which the MIG guide says R525 added: a driver
# older than 525 (460 is A30's first MIG branch).
CAPTURE_BRANCH = {H100_LGIP: 525, A30_LGIP: 460}


def _text(name: str) -> str:
    return (REAL / FOLDER / name).read_text()


def _parse(name: str) -> MigListing:
    return parse_mig(_text(name))


@pytest.mark.parametrize("path", real_files(FOLDER), ids=lambda p: p.name)
def test_every_capture_parses(path):
    listing = parse_mig(path.read_text())
    assert listing.kind == KINDS[path.name]
    # Profile and placement listings say nothing about MIG mode: driver 580 prints them with MIG
    # Disabled (tests/fixtures/device/INDEX.md); the instance listings need MIG on.
    assert listing.mig_enabled == MIG_ENABLED[listing.kind]
    json.dumps(listing.to_json())


def test_h100_gpu_instance_profiles():
    listing = _parse(H100_LGIP)
    assert len(listing.entries) == 28  # 4 GPUs x 7 profiles
    entries = listing.to_json()["entries"]
    assert entries[0] == {
        "gpu": 0, "profile": "1g.10gb", "profile_id": 19, "free": 7, "total": 7,
        "memory_gib": 9.75, "p2p": False, "sm": 16, "dec": 1, "enc": 0, "ce": 1, "jpeg": 1,
        "ofa": 0,
    }
    full = entries[27]
    assert (full["gpu"], full["profile"], full["profile_id"], full["memory_gib"], full["sm"],
            full["dec"], full["ce"], full["jpeg"], full["ofa"]) == (3, "7g.80gb", 0, 79.25, 132,
                                                                   7, 8, 7, 1)
    assert entries[1]["profile"] == "1g.10gb+me" and entries[1]["ofa"] == 1


@pytest.mark.parametrize("capture, model_key, gpus", [
    (H100_LGIP, "H100-SXM5-80GB", [0, 1, 2, 3]),
    (A30_LGIP, "A30", [0]),
])
def test_lgip_capture_agrees_with_the_knowledge_table(capture, model_key, gpus):
    """Every profile the table gives the capture's driver, with its instance count; no other."""
    branch = CAPTURE_BRANCH[capture]
    expected = {name: p.max_instances for name, p in GPU_MODELS[model_key].mig_profiles.items()
                if p.min_branch <= branch}
    profiles = available_profiles(_parse(capture))
    assert sorted(profiles) == gpus
    for gpu in gpus:
        assert profiles[gpu] == expected


def test_a30_profile_added_by_r525_is_known_as_such():
    """The pre-R525 A30 capture lacks 2g.12gb+me; on R525 and later the table lists it."""
    known = GPU_MODELS["A30"].mig_profiles
    assert {name for name, p in known.items() if p.min_branch > CAPTURE_BRANCH[A30_LGIP]} == {
        "2g.12gb+me"}
    assert known["2g.12gb+me"].min_branch == 525
    assert known["2g.12gb+me"].max_instances == 1


@pytest.mark.parametrize("lgip, lgipp, model_key", [
    (REAL / FOLDER / A30_LGIP, REAL / FOLDER / A30_LGIPP, "A30"),
    # Placements of unresolved source (tests/fixtures/mig/INDEX.md), names from the stackhpc
    # -lgip (same profile IDs); the real H100 on driver 580 is held to the same table in
    # tests/unit/test_device_captures.py.
    (REAL / FOLDER / H100_LGIP, H100_LGIPP_UNRESOLVED, "H100-SXM5-80GB"),
])
def test_lgipp_capture_agrees_with_the_placement_table(lgip, lgipp, model_key):
    names = {e.profile_id: e.profile for e in parse_mig(lgip.read_text()).entries}
    seen = {(names[p.profile_id], tuple(p.starts), p.size)
            for p in parse_mig(lgipp.read_text()).entries}
    known = GPU_MODELS[model_key].mig_profiles
    assert seen == {(name, known[name].placements, known[name].memory_slices)
                    for name in names.values()}


def test_a30_all_slices_in_use():
    entries = _parse(A30_LGIP).entries
    assert [(e.profile, e.free, e.total) for e in entries] == [
        ("1g.6gb", 0, 4), ("1g.6gb+me", 0, 1), ("2g.12gb", 0, 2), ("4g.24gb", 0, 1)]


def test_gpu_instances():
    listing = _parse(A30_LGI)
    assert listing.to_json()["entries"][3] == {
        "gpu": 0, "profile": "1g.6gb", "profile_id": 14, "instance_id": 6,
        "placement_start": 3, "placement_size": 1,
    }
    assert [e.instance_id for e in listing.entries] == [3, 4, 5, 6]


def test_compute_instance_profiles_with_default_marker():
    entries = _parse(A100_LCIP).to_json()["entries"]
    assert [e["gpu_instance_id"] for e in entries] == list(range(7, 14))
    assert entries[0] == {
        "gpu": 0, "gpu_instance_id": 7, "profile": "1g.5gb", "profile_id": 0, "default": True,
        "free": 1, "total": 1, "sm": 14, "dec": 0, "enc": 0, "ofa": 0, "ce": 1, "jpeg": 0,
    }


def test_placements_singular_and_plural():
    entries = _parse(A30_LGIPP).to_json()["entries"]
    assert entries == [
        {"gpu": 0, "profile_id": 14, "starts": [0, 1, 2, 3], "size": 1},
        {"gpu": 0, "profile_id": 21, "starts": [0, 1, 2, 3], "size": 1},
        {"gpu": 0, "profile_id": 5, "starts": [0, 2], "size": 2},
        {"gpu": 0, "profile_id": 0, "starts": [0], "size": 4},
    ]


def test_mig_disabled():
    listing = _parse(A100_DISABLED)
    assert listing.to_json() == {"kind": "none", "mig_enabled": False, "entries": []}
    assert available_profiles(listing) == {}


LCI = """\
+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
|   0      7       MIG 1g.5gb           0         0          0:1     |
+--------------------------------------------------------------------+
|   1      1       MIG 3g.40gb          2         0          0:3     |
+--------------------------------------------------------------------+
"""


def test_compute_instances():
    listing = parse_mig(LCI)
    assert listing.kind == "compute-instances"
    assert listing.to_json()["entries"][1] == {
        "gpu": 1, "gpu_instance_id": 1, "profile": "3g.40gb", "profile_id": 2,
        "instance_id": 0, "placement_start": 0, "placement_size": 3,
    }


@pytest.mark.parametrize("text, kind", [
    ("No GPU instances found: Not Found\n", "gpu-instances"),
    ("No compute instances found: Not Found\n", "compute-instances"),
])
def test_no_instances_yet(text, kind):
    assert parse_mig(text).to_json() == {"kind": kind, "mig_enabled": True, "entries": []}


def test_available_profiles_needs_lgip():
    with pytest.raises(ParseError, match="-lgip"):
        available_profiles(_parse(A30_LGI))


def _lines(name: str) -> list[str]:
    return _text(name).splitlines()


def _damaged() -> list[tuple[str, str]]:
    lgip, lgi = _lines(A30_LGIP), _lines(A30_LGI)
    return [
        ("\n".join(lgip[:-1]), "no closing border"),  # last border cut
        ("\n".join(lgip[:6]), "no closing border"),  # main row without its continuation line
        ("\n".join(lgip[:5]), "without rows"),  # header only
        ("\n".join(lgip[:3]), "no '|====|'"),
        ("\n".join(lgip).replace("  No  ", " Maybe", 1), "Yes or No"),
        ("\n".join(lgip).replace("0/4", "0-4", 1), "Free/Total"),
        ("\n".join(lgip).replace("5.81", "lots", 1), "GiB"),
        ("\n".join(lgi).replace("0:1", "0-1", 1), "placement"),
        ("\n".join(lgi).replace("  14  ", "  xx  ", 1), "expected a number"),
        ("\n".join(lgi).replace("GPU instances:", "GPU gizmos:"), "unknown MIG table title"),
        ("\n".join(lgi[:5]) + "\n| 0 MIG 1g.6gb 14 |\n" + lgi[6], "expected 3 values"),
        ("\n".join(lgi[:6]) + "\nrandom text\n", "not a table row"),
    ]


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("hello world\n", "not nvidia-smi mig"),
    ("No MIG-enabled devices found.\nextra\n", "unexpected text"),
    ("GPU  0 Profile ID 14 Placements: 0,1:1\n", "Placements"),
    ("GPU  0 Profile ID 14 Placements: {}:1\n", "Placements"),
    *_damaged(),
])
def test_bad_input_raises_parse_error(text, message):
    with pytest.raises(ParseError, match=message) as err:
        parse_mig(text)
    assert err.value.source.startswith("nvidia-smi mig")


def test_error_names_the_line():
    with pytest.raises(ParseError) as err:
        parse_mig("\n".join(_lines(A30_LGIP)).replace("  No  ", " Maybe", 1))
    assert err.value.line == 6
