"""Every parser on hostile captures: huge numbers, huge lines, terminal escapes, slow patterns.

The contract for `gpuinfra parse`, `check` and every fact that parses on a host: a result, or
a ParseError naming the command and line with a short message; never another exception,
never a message that echoes a huge line, never work that grows faster than the input.
(Linear time on 50 MB inputs is measured by bench/parsers.py; here only inputs that took
seconds before are bounded.)
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpuinfra.errors import ParseError
from gpuinfra.parsers import PARSERS, parser_for
from gpuinfra_cli.main import main
from tests.conftest import REAL, REPO
from tests.unit.test_parsers_refuse_others import OWN

FIXTURES = REPO / "tests" / "fixtures"


# The kinds whose real captures are elsewhere in tests/fixtures (globs under it; each folder's
# INDEX.md says where they come from).
ELSEWHERE: dict[str, list[str]] = {
    "show-gids": ["show_gids/*.txt"],
    "lspci-vvv": ["lspci-vvv/*.txt"],
    "lsmod": ["lsmod/*.txt", "device/*/proc-modules*.txt"],
    "dmesg": ["dmesg/*.txt", "kernel-log/*.txt", "device/*/dmesg.txt"],
    "cmdline": ["vfio/proc-cmdline-*.txt", "device/*/proc-cmdline.txt"],
    "iommu-groups": ["vfio/iommu-groups-*.txt"],
    "lspci-nnk": ["lspci/*.txt"],
    "virsh-hostdev": ["vfio/virsh-dumpxml-*.xml"],
    "describe-node": ["kubectl/describe-*.txt"],
    "gpu-pods": ["kubectl/pods-*.txt"],
    "pod-runtime": ["kubectl/pod-describe-*.txt", "kubectl/pod-device-plugin-*.yaml"],
    "plugin-log": ["kubectl/device-plugin-log-*.txt"],
}


def own_captures(kind: str) -> list[Path]:
    """The real captures of ``kind``'s command in tests/fixtures."""
    found = [p for folder in sorted(OWN.get(kind, ())) for p in (REAL / folder).iterdir()
             if p.is_file() and not (kind == "nvlink" and _not_status(p))]
    found += [p for pattern in ELSEWHERE.get(kind, ()) for p in FIXTURES.glob(pattern)]
    return sorted(found)


@pytest.mark.parametrize("kind", list(PARSERS))
def test_every_kind_has_real_captures(kind):
    assert own_captures(kind), f"no capture of {kind} in OWN or ELSEWHERE"


def _not_status(path: Path) -> bool:
    return "capabilities" in path.name or "-R-remote" in path.name


def parse(kind: str, text: str):
    return parser_for(kind)(text, mode="r") if kind == "p2p" else parser_for(kind)(text)


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging) when the block runs longer than ``seconds``."""
    def expired(*_):
        raise TimeoutError(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("kind", list(PARSERS))
def test_a_number_of_thousands_of_digits_is_a_parse_error_not_a_crash(kind):
    """Each line's numbers in turn become 5000 digits: ParseError or a result, nothing else."""
    for path in own_captures(kind):
        lines = path.read_text().splitlines()
        for index, line in enumerate(lines):
            if not re.search(r"\d", line):
                continue
            huge = re.sub(r"\d+", "9" * 5000, line)
            text = "\n".join([*lines[:index], huge, *lines[index + 1:]]) + "\n"
            try:
                parse(kind, text)
            except ParseError as exc:
                assert len(str(exc)) < 600, (path.name, index, len(str(exc)))


@pytest.mark.parametrize("kind", list(PARSERS))
def test_a_huge_line_is_cut_in_the_message(kind):
    text = "GPU 0: " + "x" * 1_000_000 + "\n"
    with pytest.raises(ParseError) as exc:
        parse(kind, text)
    assert len(str(exc.value)) < 600


OSC_TITLE = "\x1b]0;root@node: ~\x07"
ESCAPES = (OSC_TITLE, "\x1b]2;title\x1b\\", "\x1b[1m", "\x1b[0m", "\x1b(B", "\x1b=",
           "\x1bP1$r0m\x1b\\")


@pytest.mark.parametrize("kind", list(PARSERS))
def test_every_ansi_escape_family_is_stripped(kind):
    """A `script` capture: title escapes, SGR, charset and DCS sequences around each line."""
    for path in own_captures(kind):
        clean = path.read_text()
        try:
            expected = parse(kind, clean).to_json()
        except ParseError:
            continue  # a capture its parser refuses on purpose
        noisy = "".join(f"{ESCAPES[i % len(ESCAPES)]}{line}\n"
                        for i, line in enumerate(clean.splitlines()))
        assert parse(kind, OSC_TITLE + noisy).to_json() == expected, path.name


def test_topo_behind_a_terminal_title_escape():
    path = REAL / "nvidia-smi-topo-m" / "8x-h100-sxm-nv18-no-nics-spaces.txt"
    text = path.read_text()
    assert parse("topo", OSC_TITLE + text).to_json() == parse("topo", text).to_json()


SLOW_BEFORE = {
    # the nvlink GPU header pattern backtracked over long runs of spaces
    "nvlink": "GPU 0: " + " " * 60_000 + "x\n",
    # ibv_devinfo -v continuation lines were joined by repeated string concatenation
    "ibv": "hca_id: mlx5_0\n\tfw_ver: 1\n\tflags:\n" + "\t\t\tCAPABILITY_FLAG_X\n" * 120_000
           + "\t\tport:\t1\n\t\t\tstate:\tPORT_ACTIVE (4)\n\t\t\tlink_layer:\tEthernet\n",
}


@pytest.mark.parametrize("kind", list(SLOW_BEFORE))
def test_inputs_that_took_seconds_parse_in_well_under_a_second(kind):
    with within(3):
        try:
            parse(kind, SLOW_BEFORE[kind])
        except ParseError:
            pass


def test_nvidia_smi_L_is_refused_as_nvlink_naming_the_command():
    text = (REAL / "nvidia-smi-L" / "hpe-dl380-gen11-2x-a100-pcie-40gb-list-gpus.txt").read_text()
    with pytest.raises(ParseError, match=r"nvidia-smi -L"):
        parse("nvlink", text)


@pytest.mark.parametrize("problem", ["missing", "directory", "not-utf8"])
def test_check_names_the_file_it_cannot_read(tmp_path, capsys, problem):
    path = tmp_path / "topo.txt"
    if problem == "directory":
        path.mkdir()
    elif problem == "not-utf8":
        path.write_bytes(b"\xff\xfe GPU0\n")
    code = main(["check", "--profile", "pcie-only", "--gpus", "2", "--topo", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and str(path) in err and "Traceback" not in err
