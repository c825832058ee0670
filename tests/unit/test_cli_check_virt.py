"""`gpuinfra check KIND FILE` for the VFIO and Kubernetes kinds, through the CLI, on real
captures (tests/fixtures/vfio/, tests/fixtures/kubectl/, tests/fixtures/real/lspci/: each in
its INDEX.md), whole and cut inside the test (a `...` line, a grep, a last block cut mid-way,
a header missing): a cut capture can fail, never pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuinfra.captures.kubernetes import PLUGIN_LOG_CAUSES, UNHEALTHY
from gpuinfra.captures.vfio import (
    GROUP_CAUSE,
    HOST_DRIVER_CAUSE,
    HOSTDEV_CAUSE,
    SHARED_CARDS_CAUSE,
)
from gpuinfra_cli.main import main
from tests.conftest import REAL, REPO

FIX = Path(__file__).resolve().parents[1] / "fixtures"
VFIO, KUBE, LSPCI = FIX / "vfio", FIX / "kubectl", REAL / "lspci"
GROUPS = VFIO / "iommu-groups-rtx3070ti-with-root-port-sgpupt-28.txt"
ONELINE = VFIO / "iommu-groups-oneline-gtx1060-ich10-group10-vmra1n-4.txt"
HOSTDEV = VFIO / "virsh-dumpxml-hostdev-source-0c-nixvirt-76.xml"
CRASH = KUBE / "pods-device-plugin-crashloop-gpu-operator-35.txt"
RUNNING = KUBE / "pods-device-plugin-running-k8s-device-plugin-1400.txt"
INCOMPLETE = "incomplete: "


def check(capsys, kind: str, path: Path | str, *options: str) -> tuple[int, dict]:
    """The exit code and the capture's own verdict (the envelope's "captures")."""
    rc = main(["check", kind, str(path), "--json", *options])
    env = json.loads(capsys.readouterr().out)
    [capture] = env["captures"]
    assert env["verdict"] == {"pass": "pass", "fail": "fail"}.get(capture["verdict"],
                                                                  "not-checked")
    return rc, capture


def cut_copy(tmp_path: Path, source: Path, lines: slice | None = None, insert: dict | None = None,
             keep: str | None = None, tail_chars: int = 0) -> Path:
    """A copy of a real capture, cut the way pastes are: some lines, an elision, a grep, or
    its last line cut mid-way (``tail_chars`` characters removed)."""
    rows = source.read_text().splitlines()
    if lines is not None:
        rows = rows[lines]
    for at, text in sorted((insert or {}).items(), reverse=True):
        rows[at:at] = [text]
    if keep is not None:
        rows = [r for r in rows if keep in r]
    text = "\n".join(rows) + "\n"
    if tail_chars:
        text = text.rstrip("\n")[:-tail_chars]
    out = tmp_path / f"cut-{source.name}"
    out.write_text(text)
    return out


def fails_with(result: dict, cause: str) -> bool:
    return result["verdict"] == "fail" and any(f["severity"] == "fail" and f["cause"] == cause
                                               and f["fix"] for f in result["findings"])


# ---------------------------------------------------------------------------- iommu-groups

def test_iommu_groups_gpu_with_its_root_port_passes(capsys):
    rc, out = check(capsys, "iommu-groups", GROUPS)
    assert rc == 0 and out["verdict"] == "pass"
    assert out["kind"] == "iommu-groups" and out["expectation"]["devices"] == ["0000:01:00.0"]


def test_iommu_groups_gpu_left_with_the_host_fails(capsys):
    """The root port given to a VM without the GPU behind it: the GPU stays with the host in
    the same group (the same rule as the verify suite's test_iommu_groups_whole)."""
    rc, out = check(capsys, "iommu-groups", GROUPS, "--device", "00:01.0", "--host", "hv1")
    assert rc == 1 and fails_with(out, GROUP_CAUSE) and out["host"] == "hv1"
    assert "0000:01:00.0" in out["findings"][0]["observed"]


SHARED = REAL / "iommu-groups" / ("z370-i7-8086k-rtx2080ti-and-rtx2060-share-group1-with-root-"
                                  "ports.txt")


def test_iommu_groups_two_gpus_in_one_group_fail_unless_one_vm_takes_both(capsys):
    """A Z370 desktop: the CPU root ports have no ACS, so the RTX 2080 Ti and the RTX 2060 and
    both root ports are IOMMU group 1. Named by no one, each card is meant for a VM of its own:
    that fails; one card named for a VM fails on the other (the host keeps it); both named go
    to one VM together and pass."""
    rc, out = check(capsys, "iommu-groups", SHARED)
    assert rc == 1 and fails_with(out, SHARED_CARDS_CAUSE)
    assert "cards 0000:01:00, 0000:02:00 share it" in [f["observed"] for f in out["findings"]]
    rc, out = check(capsys, "iommu-groups", SHARED, "--device", "02:00.0")
    assert rc == 1 and fails_with(out, GROUP_CAUSE) and "0000:01:00.0" in str(out["findings"])
    rc, out = check(capsys, "iommu-groups", SHARED, "--device", "01:00.0", "--device", "02:00.0")
    assert (rc, out["verdict"]) == (0, "pass")


def test_iommu_groups_gaps_make_it_incomplete_never_pass(capsys):
    rc, out = check(capsys, "iommu-groups", ONELINE)
    assert rc == 3 and out["verdict"].startswith(INCOMPLETE)
    assert any("groups 1-9" in c for c in out["cuts"])


def test_iommu_groups_last_line_cut_mid_way(capsys, tmp_path):
    cut = cut_copy(tmp_path, GROUPS, lines=slice(0, 5), tail_chars=30)
    rc, out = check(capsys, "iommu-groups", cut)
    assert rc == 3 and out["verdict"].startswith(INCOMPLETE)
    assert "0000:01:00.0" not in [f["subject"] for f in out["findings"] if f["severity"] == "ok"]


def test_iommu_groups_elided_group_is_not_judged_but_others_fail(capsys, tmp_path):
    cut = cut_copy(tmp_path, GROUPS, insert={7: "..."})  # inside group 2
    rc, out = check(capsys, "iommu-groups", cut, "--device", "00:01.0")
    assert rc == 1 and fails_with(out, GROUP_CAUSE)  # group 1 is whole: it still fails
    cut = cut_copy(tmp_path, GROUPS, insert={6: "..."})  # inside group 1: not judged
    rc, out = check(capsys, "iommu-groups", cut, "--device", "00:01.0")
    assert rc == 3 and any("group 1 is cut" in c for c in out["cuts"])


def test_iommu_groups_a_cut_beside_the_named_cards_group_does_not_hide_its_verdict(
        capsys, tmp_path):
    """Issue 47 item 2: group 1 (the GPU's) is whole; the capture stops inside group 2. With
    the card named, its verdict stands; with nothing named (a cut part could hold another
    card) or the group itself cut, it stays incomplete."""
    cut = cut_copy(tmp_path, GROUPS, lines=slice(0, 8), tail_chars=20)
    rc, out = check(capsys, "iommu-groups", cut, "--device", "01:00.0")
    assert (rc, out["verdict"], out["cuts"]) == (0, "pass", [])
    assert out["expectation"]["cut elsewhere (not needed)"]
    rc, out = check(capsys, "iommu-groups", cut, "--device", "00:01.0")
    assert rc == 1 and fails_with(out, GROUP_CAUSE)
    rc, out = check(capsys, "iommu-groups", cut)
    assert rc == 3 and out["verdict"].startswith(INCOMPLETE)
    inside = cut_copy(tmp_path, GROUPS, insert={6: "..."})
    rc, out = check(capsys, "iommu-groups", inside, "--device", "01:00.0")
    assert rc == 3 and any("group 1 is cut" in c for c in out["cuts"])


def test_iommu_groups_rows_without_their_header_are_not_guessed(capsys, tmp_path):
    cut = cut_copy(tmp_path, GROUPS, lines=slice(3, None))  # "IOMMU Group 1:" cut off
    rc, out = check(capsys, "iommu-groups", cut)
    assert rc == 3 and any("IOMMU group is not in the capture" in c for c in out["cuts"])


def test_iommu_groups_grep_of_the_one_line_form_is_still_incomplete(capsys, tmp_path):
    cut = cut_copy(tmp_path, ONELINE, keep="NVIDIA")
    rc, out = check(capsys, "iommu-groups", cut)
    assert rc == 3 and out["verdict"].startswith(INCOMPLETE)


# ---------------------------------------------------------------------------- lspci-nnk

def test_lspci_nnk_all_on_vfio_passes(capsys):
    rc, out = check(capsys, "lspci-nnk",
                    LSPCI / "dgx-8x-v100-sxm2-10de-1db1-lspci-nnk-vfio-pci.txt")
    assert rc == 0 and out["verdict"] == "pass" and out["blocks_judged"] == 8


def test_lspci_nnk_gpu_on_nvidia_fails_with_cause(capsys):
    rc, out = check(capsys, "lspci-nnk", LSPCI / "openshift-node-l40s-e1-00.0-lspci-k-nvidia.txt",
                    "--device", "e1:00.0")
    assert rc == 1 and fails_with(out, HOST_DRIVER_CAUSE)


def test_lspci_nnk_cut_block_still_judges_the_complete_ones(capsys, tmp_path):
    source = LSPCI / "dgx-8x-v100-sxm2-10de-1db1-lspci-nnk-vfio-pci.txt"
    cut = cut_copy(tmp_path, source, lines=slice(0, 9), tail_chars=10)
    rc, out = check(capsys, "lspci-nnk", cut, "--device", "08:00.0", "--device", "8b:00.0")
    assert rc == 3 and out["verdict"].startswith(INCOMPLETE)
    assert any("8b:00.0" in c for c in out["cuts"])


def test_lspci_nnk_driver_lines_without_device_are_not_attributed(capsys, tmp_path):
    source = LSPCI / "dgx-8x-v100-sxm2-10de-1db1-lspci-nnk-vfio-pci.txt"
    cut = cut_copy(tmp_path, source, lines=slice(1, 8))  # the first device line cut off
    rc, out = check(capsys, "lspci-nnk", cut, "--device", "08:00.0")
    assert rc == 3 and any("without the line above" in c for c in out["cuts"])


# ---------------------------------------------------------------------------- plugin-log

LOGS = {
    "device-plugin-log-incompatible-strategy-k8s-device-plugin-1220.txt": "Incompatible",
    "device-plugin-log-no-devices-found-k8s-device-plugin-414.txt": "No devices found",
    "device-plugin-log-nvml-not-loadable-gpu-operator-250.txt": "could not load NVML",
    "device-plugin-log-mig-single-on-mixed-layout-gpu-operator-460.txt": "More than one MIG",
    # issue 47: a GPU marked unhealthy on a critical XID gave no verdict
    "device-plugin-log-xid69-device-marked-unhealthy-k8s-device-plugin-189.txt":
        "XidCriticalError",
    # issue 47 item 4: NVML cannot watch the GPU, and the plugin marks it unhealthy
    "device-plugin-log-too-old-healthchecking-k8s-device-plugin-33.txt": "too old",
}


@pytest.mark.parametrize("name", sorted(LOGS))
def test_plugin_log_known_failure_fails_with_its_own_cause(capsys, name):
    rc, out = check(capsys, "plugin-log", KUBE / name)
    expected = next(c for p, c, _ in PLUGIN_LOG_CAUSES if p.split("|")[0].replace("\\", "")
                    .startswith(LOGS[name].split()[0]))
    assert rc == 1 and fails_with(out, expected)


def test_plugin_log_causes_are_distinct():
    assert len({c for _, c, _ in PLUGIN_LOG_CAUSES}) == len(PLUGIN_LOG_CAUSES)


def test_plugin_log_registered_passes(capsys):
    rc, out = check(capsys, "plugin-log",
                    KUBE / "device-plugin-log-registered-bottlerocket-4250.txt")
    assert rc == 0 and out["verdict"] == "pass"


def test_plugin_log_unknown_is_no_verdict_never_pass(capsys):
    rc, out = check(capsys, "plugin-log",
                    KUBE / "device-plugin-log-registration-unimplemented-k8s-device-plugin-156.txt")
    assert rc == 3 and out["verdict"] == "no verdict"


def test_plugin_log_cut_before_the_failure_is_no_verdict(capsys, tmp_path):
    source = KUBE / "device-plugin-log-no-devices-found-k8s-device-plugin-414.txt"
    rc, out = check(capsys, "plugin-log", cut_copy(tmp_path, source, lines=slice(0, 4)))
    assert rc == 3 and out["verdict"] == "no verdict"


# ---------------------------------------------------------------------------- gpu-pods

def test_pods_running_pass(capsys):
    rc, out = check(capsys, "gpu-pods", RUNNING)
    assert rc == 0 and out["verdict"] == "pass" and out["blocks_judged"] == 4


def test_pods_crashloop_fails_naming_each_pod(capsys):
    rc, out = check(capsys, "gpu-pods", CRASH)
    failed = [f["subject"] for f in out["findings"] if f["severity"] == "fail"]
    assert rc == 1 and out["verdict"] == "fail" and len(failed) == 3
    assert all("log" in f["cause"] for f in out["findings"] if f["severity"] == "fail")


def test_pods_grep_without_header_read_and_still_fail(capsys, tmp_path):
    rc, out = check(capsys, "gpu-pods", cut_copy(tmp_path, CRASH, keep="device-plugin"))
    assert rc == 1 and out["verdict"] == "fail"
    assert any("no header" in c for c in out["cuts"])


def test_pods_grep_of_healthy_rows_is_incomplete(capsys, tmp_path):
    rc, out = check(capsys, "gpu-pods", cut_copy(tmp_path, RUNNING, keep="Running"))
    assert rc == 3 and out["verdict"].startswith(INCOMPLETE)


def test_pods_last_row_cut_mid_way(capsys, tmp_path):
    rc, out = check(capsys, "gpu-pods", cut_copy(tmp_path, RUNNING, tail_chars=12))
    assert rc == 3 and out["verdict"].startswith(INCOMPLETE) and out["blocks_judged"] == 3


def test_pods_without_a_device_plugin_fail_when_whole(capsys, tmp_path):
    rows = slice(0, 3)  # header and the two dcgm-exporter pods
    rc, out = check(capsys, "gpu-pods", cut_copy(tmp_path, RUNNING, lines=rows))
    assert rc == 1 and out["verdict"] == "fail"


# ---------------------------------------------------------------------------- describe-node

DESCRIBE_12 = KUBE / "describe-time-slicing-replicas-12-allocatable-12-gpu-operator-684.txt"
DESCRIBE_1 = KUBE / "describe-time-slicing-4-not-applied-capacity-1-k8s-device-plugin-990.txt"
DESCRIBE_70 = KUBE / "describe-capacity-80-allocatable-70-hami-477.txt"


def test_describe_allocatable_as_expected_is_judged(capsys):
    rc, out = check(capsys, "describe-node", DESCRIBE_12, "--gpus", "12")
    assert out["findings"][0]["severity"] == "ok"
    # the excerpt ends inside Allocatable: never a plain pass
    assert rc == 3 and out["verdict"].startswith(INCOMPLETE)


def test_describe_capacity_short_of_the_spec_fails(capsys):
    rc, out = check(capsys, "describe-node", DESCRIBE_1, "--expect", "nvidia.com/gpu=4")
    assert rc == 1 and out["verdict"] == "fail"
    assert "another config" in out["findings"][0]["cause"]


def test_describe_wrong_allocatable_fails(capsys):
    rc, out = check(capsys, "describe-node", DESCRIBE_12, "--gpus", "8")
    assert rc == 1 and out["verdict"] == "fail"


def test_describe_capacity_above_allocatable_fails_as_unhealthy(capsys):
    """HAMi#477's node: Capacity 80, Allocatable 70, both sections whole (the poster cut the
    other sections): a GPU withdrawn by the plugin, with or without an expectation."""
    rc, out = check(capsys, "describe-node", DESCRIBE_70)
    assert rc == 1 and fails_with(out, UNHEALTHY.cause)
    assert [f["observed"] for f in out["findings"]] == ["capacity 80, allocatable 70"]
    rc, out = check(capsys, "describe-node", DESCRIBE_70, "--gpus", "80")
    assert rc == 1 and {f["check"] for f in out["findings"]} == {"k8s-allocatable",
                                                                 "k8s-unhealthy"}
    assert "expected 80, allocatable 70" in out["findings"][0]["observed"]


RESTARTED = REAL / ("kubectl-describe-node/microk8s-tesla-t4-capacity-1-allocatable-0-device-"
                    "plugin-restarting-UNRESOLVED-SOURCE.txt")


def test_describe_allocatable_zero_just_after_a_plugin_restart_says_so(capsys, tmp_path):
    """microk8s, one Tesla T4: Capacity 1, Allocatable 0, the device plugin pod 6s old. It
    fails (no GPU can be scheduled now), naming the restart and when to look again; with an
    old plugin pod the same counts are a GPU withdrawn as unhealthy."""
    rc, out = check(capsys, "describe-node", RESTARTED, "--gpus", "1")
    assert rc == 1 and {f["check"] for f in out["findings"]} == {"k8s-allocatable",
                                                                 "k8s-unhealthy"}
    [unhealthy] = [f for f in out["findings"] if f["check"] == "k8s-unhealthy"]
    assert unhealthy["cause"].startswith("the device plugin pod started 6s before")
    assert "again after a minute" in unhealthy["fix"]
    old = RESTARTED.read_text().replace("0 (0%)         6s", "0 (0%)         141m")
    aged = tmp_path / "aged.txt"
    aged.write_text(old)
    rc, out = check(capsys, "describe-node", aged)
    assert rc == 1 and fails_with(out, UNHEALTHY.cause)


def test_describe_grep_rows_are_capacity_then_allocatable(capsys, tmp_path):
    """Issue 47 item 3: `describe node | grep nvidia.com/gpu` keeps two rows of a resource,
    Capacity then Allocatable (kubectl's order): judged, never guessed from one row."""
    rows = DESCRIBE_12.read_text().splitlines()
    body = [r for r in rows if r.startswith(" ")]
    cut = tmp_path / "rows.txt"
    cut.write_text("\n".join(body) + "\n")
    rc, out = check(capsys, "describe-node", cut, "--gpus", "12")
    assert rc == 3 and any("read from two rows without their headers" in c
                           for c in out["cuts"])
    rc, out = check(capsys, "describe-node", cut, "--gpus", "8")
    assert rc == 1 and any(f["check"] == "k8s-allocatable" and f["severity"] == "fail"
                           for f in out["findings"])
    hami = KUBE / "describe-capacity-80-allocatable-70-hami-477.txt"
    grep = tmp_path / "grep.txt"  # DERIVED: the real capture through `grep 'nvidia.com/gpu:'`
    grep.write_text("".join(line + "\n" for line in hami.read_text().splitlines()
                            if "nvidia.com/gpu:" in line))
    rc, out = check(capsys, "describe-node", grep)
    assert rc == 1 and fails_with(out, UNHEALTHY.cause)
    one = tmp_path / "one.txt"
    one.write_text(grep.read_text().splitlines()[0] + "\n")
    rc, out = check(capsys, "describe-node", one, "--gpus", "8")
    assert rc == 3 and any("not read" in c for c in out["cuts"])


def test_describe_allocated_rows_are_judged() -> None:
    """Issue 47 item 5: the pods' requests against allocatable."""
    from gpuinfra.captures.kubernetes import judge_describe_node
    from gpuinfra.parsers.kubectl_text import DescribedNode

    def judged(requested: int) -> list:
        node = DescribedNode(capacity={"nvidia.com/gpu": 8}, allocatable={"nvidia.com/gpu": 8},
                             allocated={"nvidia.com/gpu": requested},
                             complete={"Capacity", "Allocatable", "Allocated resources"})
        verdict = judge_describe_node(node, {"nvidia.com/gpu": 8}, "gpu1", {})
        return [(f.check, f.severity) for f in verdict.findings if f.check == "k8s-allocated"]
    assert judged(3) == []
    assert judged(8) == [("k8s-allocated", "warn")]
    assert judged(9) == [("k8s-allocated", "fail")]


def test_help_lists_every_kind(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = capsys.readouterr().out
    for kind in ("iommu-groups", "lspci-nnk", "virsh-hostdev", "vm-topo", "describe-node",
                 "gpu-pods", "plugin-log"):
        assert kind in text


def test_nvlink_check_without_kind_still_needs_profile(capsys):
    assert main(["check", "--topo", "x"]) == 2
    assert "--profile" in capsys.readouterr().err


def test_hostdev_of_the_vm_device_passes(capsys):
    rc, out = check(capsys, "virsh-hostdev", HOSTDEV, "--device", "0c:00.0")
    assert rc == 0 and out["verdict"] == "pass"


def test_hostdev_of_the_wrong_address_fails(capsys):
    rc, out = check(capsys, "virsh-hostdev", HOSTDEV, "--device", "0b:00.0")
    assert rc == 1 and fails_with(out, HOSTDEV_CAUSE)


def test_hostdev_cut_before_its_source_is_incomplete(capsys, tmp_path):
    rc, out = check(capsys, "virsh-hostdev", cut_copy(tmp_path, HOSTDEV, lines=slice(0, 2)),
                    "--device", "0c:00.0")
    assert rc == 3 and out["verdict"].startswith(INCOMPLETE) and out["cuts"]


# ---------------------------------------------------------------------------- vm-topo

TOPO = REAL / "nvidia-smi-topo-m"


def test_vm_topo_bridged_pairs_in_a_vm_pass(capsys):
    """4x A100 PCIe in two NV12 pairs, PCI domains 1-4 (a Hyper-V VM; source unresolved)."""
    name = "4x-a100-80gb-pcie-2-nvlink-bridged-pairs-nv12-4numa-UNRESOLVED-SOURCE.txt"
    rc, out = check(capsys, "vm-topo", TOPO / name,
                    "--profile", "bridged-pairs", "--gpus", "4", "--model", "A100-PCIE-80GB")
    assert rc == 0 and out["verdict"] == "pass"


def test_vm_topo_pair_without_nvlink_fails(capsys):
    rc, out = check(capsys, "vm-topo", TOPO / "autodl-2x-rtx2080ti-pcie-pix-container-drv550.txt",
                    "--profile", "bridged-pairs", "--gpus", "2")
    assert rc == 1 and out["verdict"] == "fail"
    assert any(f["cause"] for f in out["findings"] if f["severity"] == "fail")


def test_every_kind_answers_in_one_shape(capsys, tmp_path):
    """`check --json` gives the same keys for an RDMA capture and a VFIO one, and the one
    verdict rule (gpuinfra/captures/__init__.py): a cut wins over "nothing judged"."""
    from gpuinfra.captures import verdict_of

    rc, out = check(capsys, "virsh-hostdev", cut_copy(tmp_path, HOSTDEV, lines=slice(0, 2)),
                    "--device", "0c:00.0")
    code = main(["check", "--cmdline", str(REPO / "tests/fixtures/vfio/"
                                           "proc-cmdline-lab-hv-converged.txt"),
                 "--hypervisor", "--cpu-vendor", "GenuineIntel", "--json"])
    [host] = json.loads(capsys.readouterr().out)["captures"]
    assert code == 0 and set(out) == set(host) >= {"host", "kind", "expectation", "verdict",
                                                    "blocks_judged", "cuts", "findings"}
    assert verdict_of(False, False, ["cut"], 0).startswith("incomplete")
    assert verdict_of(False, False, [], 0) == "no verdict"
    assert verdict_of(True, False, ["cut"], 0) == "fail"
    assert verdict_of(False, True, [], 3) == "pass"


def test_describe_poster_marker_after_a_short_allocatable_fails(capsys, tmp_path):
    """Issue 47: a paste cut inside Allocatable, the poster's `<=== here` after the GPU row:
    allocatable 0 under capacity 1 is shown, so it fails (it was read as "cut")."""
    rows = RESTARTED.read_text().splitlines()
    at = rows.index("Allocatable:") + 6
    assert rows[at].strip() == "nvidia.com/gpu:     0"
    pasted = tmp_path / "marked.txt"
    pasted.write_text("\n".join(rows[:at] + [rows[at] + "     <=== here"]) + "\n")
    rc, out = check(capsys, "describe-node", pasted, "--gpus", "1")
    assert rc == 1 and out["verdict"] == "fail"
    assert "capacity 1, allocatable 0" in [f["observed"] for f in out["findings"]]


def test_plugin_log_unknown_panic_fails_as_a_crash(capsys, tmp_path):
    """Issue 47: a panic the rules do not name gave no verdict; gpu-operator#460's panic with
    its message cut away is still a crash (with the message, its own cause comes first)."""
    source = KUBE / "device-plugin-log-mig-single-on-mixed-layout-gpu-operator-460.txt"
    text = source.read_text().replace(": More than one MIG device type present on node", "")
    unknown = tmp_path / "panic.txt"
    unknown.write_text(text)
    crash = next(c for p, c, _ in PLUGIN_LOG_CAUSES if p.startswith("^panic"))
    rc, out = check(capsys, "plugin-log", unknown)
    assert rc == 1 and fails_with(out, crash)
    rc, out = check(capsys, "plugin-log", source)
    assert rc == 1 and not fails_with(out, crash)


# ---------------------------------------------------------------------------- pod-runtime

POD_YAML = KUBE / "pod-device-plugin-no-runtime-class-crashloop-CONSTRUCTED.yaml"
DESCRIBE_RUNC = KUBE / "pod-describe-device-plugin-no-runtime-class-CONSTRUCTED.txt"
DESCRIBE_NVIDIA = KUBE / "pod-describe-device-plugin-runtime-class-nvidia-CONSTRUCTED.txt"


@pytest.mark.parametrize("capture", [POD_YAML, DESCRIBE_RUNC])
def test_a_device_plugin_pod_without_a_runtime_class_runs_under_runc(capsys, capture):
    rc, result = check(capsys, "pod-runtime", capture)
    assert rc == 1 and result["verdict"] == "fail"
    [finding] = result["findings"]
    assert finding["subject"] == "kube-system/nvidia-device-plugin-daemonset-2h9rh"
    assert "runs under runc" in finding["observed"] and "crash-loops" in finding["observed"]
    assert finding["fix"].startswith("runs under runc: set runtimeClassName nvidia")
    assert "make nvidia containerd's default" in finding["fix"]
    # Where the site made nvidia containerd's default runtime, no class is right.
    rc, result = check(capsys, "pod-runtime", capture, "--nvidia-default")
    assert rc == 0 and result["verdict"] == "pass"


def test_a_device_plugin_pod_under_runtime_class_nvidia_passes(capsys):
    rc, result = check(capsys, "pod-runtime", DESCRIBE_NVIDIA)
    assert rc == 0 and result["verdict"] == "pass"
    assert result["findings"][0]["observed"] == "runtimeClassName nvidia"


def test_another_runtime_class_fails_and_names_it(capsys, tmp_path):
    other = tmp_path / "pod.yaml"
    other.write_text(POD_YAML.read_text().replace("spec:\n", "spec:\n  runtimeClassName: kata\n",
                                                  1))
    rc, result = check(capsys, "pod-runtime", other)
    assert rc == 1 and "runtime class 'kata'" in result["findings"][0]["observed"]


def test_a_describe_cut_above_node_cannot_say_and_a_pod_without_gpus_is_not_judged(
        capsys, tmp_path):
    cut = cut_copy(tmp_path, DESCRIBE_RUNC, lines=slice(0, 4))
    rc, result = check(capsys, "pod-runtime", cut)
    assert rc == 3 and result["verdict"].startswith(INCOMPLETE), result["verdict"]
    assert result["findings"] == [] and "cut before 'Node:'" in result["cuts"][0]
    plain = tmp_path / "plain.yaml"
    plain.write_text(POD_YAML.read_text().replace("nvcr.io/nvidia/k8s-device-plugin",
                                                  "docker.io/library/nginx"))
    rc, result = check(capsys, "pod-runtime", plain)
    assert rc == 3 and result["verdict"] == "no verdict"
