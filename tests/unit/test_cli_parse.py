"""`gpuinfra parse` for every capture `gpuinfra check` judges from a file (issue 24): each KIND
on a real capture in tests/fixtures (the folders' INDEX.md say where each comes from), a bad
file of each giving one line naming the file, and `check`'s kinds all in `parse`'s table."""

from __future__ import annotations

import argparse
import json

import pytest

from gpuinfra.parsers import ALIASES, PARSERS
from gpuinfra_cli import check_host, check_virt
from gpuinfra_cli.main import build_parser, main
from tests.conftest import REAL, REPO

FIX = REPO / "tests" / "fixtures"
H100_VM = FIX / "device" / "h100-80gb-hbm3-vm-drv580.159.04"


def parsed(capsys, kind: str, path, *extra: str):
    """(JSON printed, standard error) of `gpuinfra parse KIND PATH`, which must exit 0."""
    code = main(["parse", kind, str(path), *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out), out.err


def refused(capsys, kind: str, path) -> str:
    """The one line `gpuinfra parse KIND PATH` exits 2 with."""
    code = main(["parse", kind, str(path)])
    out = capsys.readouterr()
    assert code == 2 and out.out == "", out
    assert "Traceback" not in out.err and out.err.count("\n") == 1, out.err
    assert out.err.startswith(f"gpuinfra: {path}: "), out.err
    return out.err


# ---------------------------------------------------------------------------- real captures

def test_show_gids(capsys):
    out, err = parsed(capsys, "show-gids",
                      FIX / "show_gids" / "connectx6-mlx5_0-ens1f0-6-gids-spectrumscale-pr4.txt")
    assert [g["index"] for g in out["gids"]] == [0, 1, 2, 3, 4, 5] and out["cuts"] == []
    assert out["gids"][5] == {"device": "mlx5_0", "port": 1, "index": 5,
                              "gid": "0000:0000:0000:0000:0000:ffff:ac13:003c",
                              "ipv4": "172.19.0.60", "version": "v2", "netdev": "ens1f0"}
    assert err == ""


def test_lspci_vvv_grepped_and_excerpt(capsys):
    out, _ = parsed(capsys, "lspci-vvv", FIX / "lspci-vvv" /
                    "h200-vm-connectx7-grep-ats-enable-plus-nccl-tests-256.txt")
    assert len(out["devices"]) == 7  # 7 ATS blocks, rows without their device line
    assert all(d["ats"] is True and d["address"] is None for d in out["devices"])
    out, _ = parsed(capsys, "lspci-vvv", FIX / "lspci-vvv" /
                    "plx-pex8725-switch-acs-on-excerpt-rockchip-pcie-devices-6.txt")
    # SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+: bits 0, 2, 3, 4
    assert out["devices"][0]["acs_control"] == 0b11101
    assert out["devices"][1]["address"] == "0000:02:08.0"
    assert out["devices"][1]["description"].startswith("PCI bridge: PLX Technology")


def test_lsmod_grepped_says_so(capsys):
    path = FIX / "lsmod" / "h100-peermem-loaded-grep-gpud-pr39.txt"
    out, err = parsed(capsys, "lsmod", path)
    assert list(out["modules"]) == ["nvidia_peermem", "ib_core", "nvidia"]
    assert out["modules"]["ib_core"]["size"] == 434176
    assert "nvidia_peermem" in out["modules"]["ib_core"]["used_by"]
    assert out["header"] is False and "Module Size Used by" in out["cuts"][0]
    assert err.startswith(f"gpuinfra: {path}: read in part (1 cut(s)") and err.count("\n") == 1


def test_dmesg(capsys):
    out, _ = parsed(capsys, "dmesg",
                    FIX / "dmesg" / "gb300-nvidia-peermem-unknown-symbol-gpu-operator-2868.txt")
    assert out["lines"] == 8 and out["xids"] == []
    assert out["peermem_symbols"] == ["ib_register_peer_memory_client",
                                      "ib_unregister_peer_memory_client"]
    out, _ = parsed(capsys, "dmesg", FIX / "kernel-log" / "nvidia-forum-364958-xid120-then-154.txt")
    assert out["xids"] == [
        {"pci": "0000:01:00", "xid": 120, "recovery_action": None, "caused_by": None,
         "cleared": False},
        {"pci": "0000:01:00", "xid": 154, "recovery_action": 1, "caused_by": None,
         "cleared": False}]
    out, _ = parsed(capsys, "dmesg", FIX / "dmesg" /
                    "intel-dmar-iommu-enabled-gtx1660s-kubevirt-gpu-device-plugin-45.txt")
    assert out["iommu_on"] == ["[    0.019620] DMAR: IOMMU enabled"] and out["iommu_off"] == []


def test_cmdline(capsys):
    out, _ = parsed(capsys, "cmdline", H100_VM / "proc-cmdline.txt")
    assert out["args"][:3] == ["mitigations=auto,no_guest_host,no_guest_guest", "console=ttyS0",
                               "quiet"]
    assert "pci=realloc=off" in out["args"] and len(out["args"]) == 31 and out["cuts"] == []
    out, _ = parsed(capsys, "cmdline", FIX / "vfio" / "proc-cmdline-lab-hv-converged.txt")
    assert out["args"][-2:] == ["intel_iommu=on", "iommu=pt"]


def test_iommu_groups(capsys):
    out, _ = parsed(capsys, "iommu-groups",
                    FIX / "vfio" / "iommu-groups-rtx3070ti-with-root-port-sgpupt-28.txt")
    assert out["grouped"] is True and out["cuts"] == [] and len(out["functions"]) == 6
    gpu = out["functions"][2]
    assert (gpu["address"], gpu["group"], gpu["pci_id"], gpu["class_code"]) == (
        "0000:01:00.0", 1, "10de:2482", "0300")
    assert [f["group"] for f in out["functions"]] == [0, 1, 1, 1, 2, 2]


def test_lspci_nnk(capsys):
    out, _ = parsed(capsys, "lspci-nnk",
                    FIX / "lspci" / "nvidia-gpu-operator-kata-docs-1x-a10-lspci-nnk-vfio-pci.txt")
    [a10] = out["functions"]
    assert (a10["address"], a10["pci_id"], a10["driver"], a10["drivers_shown"]) == (
        "0000:65:00.0", "10de:2236", "vfio-pci", True)
    assert out["grouped"] is False


def test_virsh_hostdev(capsys):
    out, _ = parsed(capsys, "virsh-hostdev",
                    FIX / "vfio" / "virsh-dumpxml-hostdev-source-0c-nixvirt-76.xml")
    assert out["hostdevs"] == [{"address": "0000:0c:00.0", "managed": True, "line": 1}]
    assert out["whole_domain"] is False and out["domain"] is None


def test_describe_node(capsys):
    out, err = parsed(capsys, "describe-node",
                      FIX / "kubectl" / "describe-capacity-80-allocatable-70-hami-477.txt")
    assert out["name"] == "gpu-000-001"
    assert (out["capacity"], out["allocatable"], out["allocated"]) == (
        {"nvidia.com/gpu": 80}, {"nvidia.com/gpu": 70}, {"nvidia.com/gpu": 5})
    assert out["complete"] == ["Allocatable", "Allocated resources", "Capacity"]
    assert out["cuts"] == [] and err == ""


def test_describe_node_cut_says_so(capsys):
    path = FIX / "kubectl" / "describe-mig-mixed-a100-80gb-allocatable-gpu-operator-637.txt"
    out, err = parsed(capsys, "describe-node", path)
    assert out["allocatable"] == {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 6,
                                  "nvidia.com/mig-2g.20gb": 4, "nvidia.com/mig-3g.40gb": 0}
    assert out["cuts"] == ["the capture ends inside Allocatable: it may be cut"]
    assert err == (f"gpuinfra: {path}: read in part (1 cut(s), under \"cuts\" in the JSON): "
                   "the capture ends inside Allocatable: it may be cut\n")


def test_gpu_pods(capsys):
    out, _ = parsed(capsys, "gpu-pods",
                    FIX / "kubectl" / "pods-device-plugin-crashloop-gpu-operator-35.txt")
    assert out["header"] is True and out["cuts"] == [] and len(out["pods"]) == 12
    crashing = {p["name"]: p["restarts"] for p in out["pods"]
                if p["waiting"] == "CrashLoopBackOff"}
    assert crashing == {"nvidia-device-plugin-daemonset-5crlk": 12,
                        "nvidia-device-plugin-daemonset-6ccx4": 13,
                        "nvidia-device-plugin-daemonset-kljrg": 6}
    assert out["pods"][0] == {"namespace": "", "name": "nvidia-container-toolkit-daemonset-2s5nq",
                              "node": "", "phase": "Running", "ready": True, "restarts": 0,
                              "waiting": "", "labels": {}}


def test_plugin_log(capsys):
    out, _ = parsed(capsys, "plugin-log", FIX / "kubectl" /
                    "device-plugin-log-no-devices-found-k8s-device-plugin-414.txt")
    [message] = out["messages"]
    assert message["line"] == 5
    assert message["text"] == "2023/06/12 09:21:25 No devices found. Waiting indefinitely."
    assert "sees no GPU" in message["cause"] and out["registered"] == [] and out["lines"] == 5
    out, _ = parsed(capsys, "plugin-log",
                    FIX / "kubectl" / "device-plugin-log-registered-bottlerocket-4250.txt")
    assert out["messages"] == []
    assert out["registered"] == ["Registered device plugin for 'nvidia.com/gpu' with Kubelet"]


def test_check_names_of_existing_kinds(capsys):
    """vm-topo, ibv-devinfo and smi-q: `check`'s names of topo, ibv and fabric."""
    out, _ = parsed(capsys, "vm-topo", H100_VM / "topo-m.txt")  # an H100 VM, one GPU
    assert out["gpus"] == ["GPU0"] and out["cpu_affinity"] == {"GPU0": "0-15"}
    assert parsed(capsys, "topo", H100_VM / "topo-m.txt")[0] == out
    path = REAL / "ibv_devinfo" / "igx-orin-connectx7-p3740-1-eth-1-ib-port.txt"
    out, _ = parsed(capsys, "ibv-devinfo", path)
    assert {n: d["ports"]["1"]["link_layer"] for n, d in out.items()} == {
        "mlx5_0": "Ethernet", "mlx5_1": "InfiniBand"}
    out, _ = parsed(capsys, "smi-q", REAL / "nvidia-smi-q" /
                    "8x-h100-80gb-hbm3-bare-metal-drv535.161.08-full-q.txt")
    assert len(out) == 8 and out["GPU0"]["bus_id"] == "00000000:19:00.0"
    assert out["GPU0"]["fabric"]["state"] == "Completed"


# ---------------------------------------------------------------------------- bad files

IBSTAT = REAL / "ibstat" / "h100-node-8x-cx7-400g-roce-plus-4x-cx6dx-100g-all-active.txt"
NVLINK = REAL / "nvidia-smi-nvlink" / "hpe-dl380a-2x-h100-pcie-nvlink-s-12-of-18-active.txt"


@pytest.mark.parametrize(("kind", "path", "words"), [
    ("show-gids", IBSTAT, "show_gids: not a show_gids line: \"CA 'mlx5_0'\" (line 1)"),
    ("lsmod", IBSTAT, "lsmod: not a module row: \"CA 'mlx5_0'\" (line 1)"),
    ("vm-topo", NVLINK, "nvidia-smi topo -m: "),
    ("ibv-devinfo", IBSTAT, "ibv_devinfo: expected 'key: value'"),
    ("smi-q", IBSTAT, "not `nvidia-smi -q` output"),
])
def test_another_commands_output_is_refused_naming_the_file(capsys, kind, path, words):
    assert words in refused(capsys, kind, path)


def test_a_cut_capture_is_refused_saying_where(capsys):
    path = FIX / "ibv_devinfo" / "cx7-ndr-mlx5_0-port-down-lid-65535-cut-deepep-60.txt"
    assert refused(capsys, "ibv-devinfo", path) == (
        f"gpuinfra: {path}: ibv_devinfo: mlx5_1: no 'port:' block (truncated output?) "
        "(line 28)\n")


EXCERPT_KINDS = [k for k, parser in PARSERS.items() if parser.excerpts]
NOT_BLANK = [k for k in [*PARSERS, *ALIASES] if not PARSERS[ALIASES.get(k, k)].blank]


@pytest.mark.parametrize("kind", NOT_BLANK)
def test_an_empty_capture_is_refused(capsys, tmp_path, kind):
    path = tmp_path / "capture.txt"
    path.write_text("\n  \n")
    err = refused(capsys, kind, path)
    assert "empty" in err


def test_blank_nvlink_is_a_gpu_without_links(capsys):
    """`nvidia-smi nvlink --status` prints nothing for GPUs without NVLink (the A10 VM's)."""
    out, _ = parsed(capsys, "nvlink", REAL / "nvidia-smi-nvlink" /
                    "kvm-vm-1x-a10-nvlink-status-empty-output.txt")
    assert out == {}


@pytest.mark.parametrize("kind", EXCERPT_KINDS)
def test_a_huge_line_is_refused_naming_the_file_and_line(capsys, tmp_path, kind):
    path = tmp_path / "capture.txt"
    path.write_text("ok\n" + "x" * 70_000 + "\n")
    err = refused(capsys, kind, path)
    assert "a line of 70000 characters" in err and "(line 2)" in err


@pytest.mark.parametrize("kind", ["plugin-log", "show-gids"])
def test_unreadable_files_are_named(capsys, tmp_path, kind):
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe DEV PORT\n")
    assert "not UTF-8 text" in refused(capsys, kind, binary)
    assert "cannot be read" in refused(capsys, kind, tmp_path / "missing.txt")


# ---------------------------------------------------------------------------- the two lists

# Options of `gpuinfra check` that are not a capture: the expectation and the output form.
NOT_CAPTURES = {"help", "profile", "gpus", "model", "min-links", "json", "inventory", "host",
                "group-data", "no-group-data", "nic", "device", "gpudirect", "iommu", "acs-off",
                "bridge", "hypervisor", "rdma", "cpu-vendor", "matrix"}


def _sub(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def check_options_and_kinds() -> tuple[set[str], set[str]]:
    """The long options of `gpuinfra check` and its KIND sub-commands, as its parser has them."""
    check = _sub(build_parser()).choices["check"]
    options = {a.option_strings[-1].removeprefix("--") for a in check._actions
               if a.option_strings}
    return options, set(_sub(check).choices)


def test_every_check_capture_has_a_parse_kind():
    options, kinds = check_options_and_kinds()
    assert NOT_CAPTURES <= options, NOT_CAPTURES - options  # no stale name hides a capture
    captures = (options - NOT_CAPTURES) | kinds
    # what the two tables of `check` hold, and its nvidia-smi options
    assert captures >= {k.replace("_", "-") for k in check_host.KINDS} | set(check_virt.KINDS) \
        | {"topo", "p2p", "nvlink", "smi-q"}
    assert captures - set(PARSERS) - set(ALIASES) == set()


def test_aliases_name_kinds_and_shadow_none():
    assert set(ALIASES.values()) <= set(PARSERS) and not set(ALIASES) & set(PARSERS)
