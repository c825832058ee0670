"""The cluster spec: a valid site builds; each bad input is named by host, field and fix.

Every case below starts from the same valid site and breaks exactly one thing, so each test
proves that its check goes red for its own reason (and the valid-site test proves the checks
stay green when nothing is wrong).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gpuinfra.spec import HostInput, SpecInvalid, build_cluster, validate

Site = dict[str, tuple[tuple[str, ...], dict[str, Any]]]


def valid_site() -> Site:
    return {
        "head01": (("head",), {}),
        "hgx01": (("workers",), {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
                                 "gpu_topology": "nvswitch-all-to-all"}),
        "pcie01": (("workers",), {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
                                  "gpu_topology": "bridged-pairs"}),
        "cpu01": (("workers",), {}),
    }


def hosts_of(site: Site) -> list[HostInput]:
    return [HostInput(name, groups, data) for name, (groups, data) in site.items()]


def everywhere(site: Site, **values: Any) -> None:
    for _, data in site.values():
        data.update(values)


def test_valid_site_builds_typed_spec():
    spec = build_cluster(hosts_of(valid_site()))
    assert [n.name for n in spec.head] == ["head01"]
    hgx = spec.node("hgx01")
    assert hgx.gpus.model.key == "H100-SXM5-80GB" and hgx.gpus.count == 8
    assert hgx.gpus.needs_fabric_manager
    assert not spec.node("pcie01").gpus.needs_fabric_manager
    assert spec.node("cpu01").gpus is None
    assert spec.driver_branch == "535" and spec.schedulers == ("slurm",)
    # Default partition: every worker; not a GPU partition because cpu01 has none.
    assert spec.partitions[0].nodes == ("hgx01", "pcie01", "cpu01")
    assert spec.partitions[0].gpu is False


def test_valid_sharing_modes_and_mirrors_build():
    site = valid_site()
    site["hgx01"][1]["gpu_sharing"] = {"mode": "mig", "mig_layout": {"1g.10gb": 7}}
    site["pcie01"][1]["gpu_sharing"] = {"mode": "mps", "clients": 48, "thread_percentage": 50}
    everywhere(site, offline=True, apt_mirror={"debian": "http://m.example/debian"},
               nvidia_repo_mirror="https://m.example/nvidia", apt_proxy="http://p.example:3128",
               mig_strategy="single")
    spec = build_cluster(hosts_of(site))
    assert spec.node("hgx01").sharing.mig_layout[0] == {"1g.10gb": 7}
    assert spec.node("pcie01").sharing.mps_clients == 48
    assert spec.apt_mirror == {"debian": "http://m.example/debian"}


def test_mps_clients_above_16_refused_below_compute_capability_7_5():
    """The device plugin's MPS daemon allows 48 clients only from compute capability 7.5 on
    (NVIDIA/k8s-device-plugin cmd/mps-control-daemon/mps/device.go, maxClients): a V100 (7.0)
    with 17 is refused at validate, 16 passes; an H100 keeps 48."""
    site = valid_site()
    site["pcie01"][1].update(gpu_model="V100-PCIE-32GB", gpu_topology="pcie-only",
                             gpu_sharing={"mode": "mps", "clients": 17})
    problems = [str(p) for p in validate(hosts_of(site))]
    assert any("gpu_sharing['clients']" in p and "compute capability 7.5" in p
               and "between 2 and 16" in p for p in problems), problems
    site["pcie01"][1]["gpu_sharing"] = {"mode": "mps", "clients": 16}
    assert build_cluster(hosts_of(site)).node("pcie01").sharing.mps_clients == 16
    site = valid_site()
    site["pcie01"][1]["gpu_sharing"] = {"mode": "mps", "clients": 48}
    assert build_cluster(hosts_of(site)).node("pcie01").sharing.mps_clients == 48


def test_mixed_layout_is_fine_under_mixed_strategy():
    site = valid_site()
    site["hgx01"][1]["gpu_sharing"] = {"mode": "mig", "mig_layout": {"3g.40gb": 1, "2g.20gb": 1,
                                                                      "1g.10gb": 2}}
    everywhere(site, mig_strategy="mixed")
    assert validate(hosts_of(site)) == []


def _set(host: str, **values: Any) -> Callable[[Site], None]:
    def mutate(site: Site) -> None:
        site[host][1].update(values)
    return mutate


def _all(**values: Any) -> Callable[[Site], None]:
    return lambda site: everywhere(site, **values)


def _mig(layout: Any, host: str = "hgx01") -> Callable[[Site], None]:
    return _set(host, gpu_sharing={"mode": "mig", "mig_layout": layout})


def _a100_40(site: Site) -> None:
    site["hgx01"][1].update(gpu_model="A100-SXM4-40GB",
                            gpu_sharing={"mode": "mig", "mig_layout": {"1g.20gb": 4}})


def _h200(site: Site) -> None:
    site["hgx01"][1].update(gpu_model="H200-SXM-141GB",
                            gpu_sharing={"mode": "mig", "mig_layout": {"2g.25gb": 3}})


def _no_head(site: Site) -> None:
    site["head01"] = ((), {})


def _two_heads(site: Site) -> None:
    site["head02"] = (("head",), {})


def _partition_to_cpu_host(site: Site) -> None:
    everywhere(site, slurm_partitions=[{"name": "gpu", "nodes": ["hgx01", "cpu01"], "gpu": True}])


def _differs(site: Site) -> None:
    site["hgx01"][1]["cluster_name"] = "other"


def _same_short_name(site: Site) -> None:
    site["hgx01.rack1"] = site.pop("cpu01")
    site["hgx01.rack1"][1].clear()


# (id, mutation, expected host, expected field (prefix), words expected in the problem)
BAD_INPUTS = [
    ("unknown-gpu-model", _set("hgx01", gpu_model="H100-SXM9"), "hgx01", "gpu_model",
     "unknown GPU model"),
    ("gpu-model-wrong-type", _set("hgx01", gpu_model=8), "hgx01", "gpu_model", "unknown GPU"),
    ("count-not-matching-nvswitch", _set("hgx01", gpu_count=4), "hgx01", "gpu_count/gpu_topology",
     "hold 8 GPUs, not 4"),
    ("odd-count-bridged-pairs", _set("pcie01", gpu_count=3), "pcie01", "gpu_count/gpu_topology",
     "even number"),
    ("nvswitch-profile-on-pcie-model", _set("pcie01", gpu_topology="nvswitch-all-to-all"),
     "pcie01", "gpu_count/gpu_topology", "not built into NVSwitch"),
    ("bridge-on-model-without-nvlink", _set("pcie01", gpu_model="L40S"), "pcie01",
     "gpu_count/gpu_topology", "no NVLink bridge"),
    ("unknown-topology-profile", _set("hgx01", gpu_topology="nvswitch-all2all"), "hgx01",
     "gpu_topology", "unknown topology profile"),
    ("topology-missing-for-nvlink-model", _set("pcie01", gpu_topology=None), "pcie01",
     "gpu_topology", "required"),
    ("gpu-count-as-string", _set("hgx01", gpu_count="8"), "hgx01", "gpu_count",
     "without quotes"),
    ("gpu-count-zero", _set("hgx01", gpu_count=0), "hgx01", "gpu_count", "out of range"),
    ("gpu-count-without-model", _set("cpu01", gpu_count=2), "cpu01", "gpu_count",
     "without gpu_model"),
    ("mig-2g.25gb-on-h200", _h200, "hgx01", "gpu_sharing['mig_layout']",
     "no MIG profile '2g.25gb'"),
    ("mig-1g.20gb-on-a100-40gb", _a100_40, "hgx01", "gpu_sharing['mig_layout']",
     "no MIG profile '1g.20gb'"),
    ("mig-on-gpu-without-mig", _set("cpu01", gpu_model="L40S", gpu_count=2,
                                    gpu_sharing={"mode": "mig", "mig_layout": {"1g.10gb": 1}}),
     "cpu01", "gpu_sharing['mode']", "does not support MIG"),
    ("mixed-mig-under-single", _mig({"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}), "hgx01",
     "gpu_sharing['mig_layout']", "mixed MIG layout"),
    ("mig-disabled-gpu-under-single", _mig([{"1g.10gb": 7}] * 7 + [{}]), "hgx01",
     "gpu_sharing['mig_layout']", "mixed MIG layout"),
    ("mig-too-many-instances", _mig({"3g.40gb": 3}), "hgx01", "gpu_sharing['mig_layout']",
     "at most 2"),
    ("mig-layout-overflows-gpu", _mig({"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}), "hgx01",
     "gpu_sharing['mig_layout']", "compute"),
    ("mig-layout-wrong-gpu-count", _mig([{"1g.10gb": 7}] * 3), "hgx01",
     "gpu_sharing['mig_layout']", "lists 3 GPUs"),
    ("mps-clients-too-many", _set("pcie01", gpu_sharing={"mode": "mps", "clients": 49}), "pcie01",
     "gpu_sharing['clients']", "out of range"),
    ("mps-clients-too-few", _set("pcie01", gpu_sharing={"mode": "mps", "clients": 1}), "pcie01",
     "gpu_sharing['clients']", "out of range"),
    ("mps-thread-percentage", _set("pcie01", gpu_sharing={"mode": "mps", "clients": 4,
                                                          "thread_percentage": 150}),
     "pcie01", "gpu_sharing['thread_percentage']", "out of range"),
    ("mps-and-mig-together", _set("pcie01", gpu_sharing={"mode": "mps", "clients": 4,
                                                         "mig_layout": {"1g.10gb": 7}}),
     "pcie01", "gpu_sharing['mig_layout']", "MPS is not supported on MIG-enabled GPUs"),
    ("time-slicing-replicas-zero", _set("pcie01", gpu_sharing={"mode": "time-slicing",
                                                               "replicas": 0}),
     "pcie01", "gpu_sharing['replicas']", "out of range"),
    ("unknown-sharing-mode", _set("pcie01", gpu_sharing={"mode": "vgpu"}), "pcie01",
     "gpu_sharing['mode']", "unknown"),
    ("no-slurm-controller", _no_head, "cluster", "group 'head'", "no Slurm controller"),
    ("two-slurm-controllers", _two_heads, "cluster", "group 'head'", "2 Slurm controllers"),
    ("worker-in-slurm-and-kubernetes", _all(schedulers=["slurm", "kubernetes"]), "hgx01",
     "node_schedulers", "in Slurm and in Kubernetes"),
    ("hypervisor-passes-nothing", lambda s: s.__setitem__(
        "hgx01", (("workers", "hypervisors"), s["hgx01"][1])), "hgx01", "vfio_devices",
     "passes nothing through"),
    ("group-typo", lambda s: s.__setitem__("cpu01", (("worker",), {})), "cpu01", "group",
     "did you mean 'workers'"),
    ("upper-case-spec-key", _set("cpu01", GPU_MODEL="H100-SXM5-80GB"), "cpu01", "GPU_MODEL",
     "did you mean 'gpu_model'"),
    ("gpu-partition-with-cpu-host", _partition_to_cpu_host, "cpu01", "slurm_partitions[0]",
     "without GPUs"),
    ("partition-unknown-host", _all(slurm_partitions=[{"name": "gpu", "nodes": ["hgx99"]}]),
     "cluster", "slurm_partitions[0]", "not in the inventory"),
    ("two-default-partitions", _all(slurm_partitions=[
        {"name": "a", "nodes": ["hgx01"], "default": True},
        {"name": "b", "nodes": ["pcie01"], "default": True}]),
     "cluster", "slurm_partitions", "more than one default"),
    ("unknown-driver-branch", _all(driver_branch="999"), "cluster", "driver_branch",
     "unknown NVIDIA driver branch"),
    ("unsupported-driver-branch", _all(driver_branch="470"), "cluster", "driver_branch",
     "cannot install"),
    ("malformed-mirror-url", _all(apt_mirror="deb.example.com/debian"), "cluster", "apt_mirror",
     "malformed URL"),
    ("mirror-url-with-space", _all(apt_mirror={"debian": "http://m .example/debian"}), "cluster",
     "apt_mirror['debian']", "malformed URL"),
    ("proxy-without-port", _all(apt_proxy="http://proxy.example"), "cluster", "apt_proxy",
     "needs a port"),
    ("offline-without-mirror", _all(offline=True), "cluster", "apt_mirror", "offline site"),
    ("unknown-scheduler", _all(schedulers=["pbs"]), "cluster", "schedulers", "unknown scheduler"),
    ("scheduler-as-string", _all(schedulers="slurm"), "cluster", "schedulers", "not a string"),
    ("bad-mig-strategy", _all(mig_strategy="balanced"), "cluster", "mig_strategy", "unknown"),
    ("bad-reboot-policy", _all(reboot_policy="always"), "cluster", "reboot_policy", "unknown"),
    ("bad-cluster-name", _all(cluster_name="My Cluster"), "cluster", "cluster_name",
     "not a valid cluster name"),
    ("cluster-value-differs", _differs, "cluster", "cluster_name", "differs between hosts"),
    ("typo-in-key", _set("hgx01", gpu_modle="H100-SXM5-80GB"), "hgx01", "gpu_modle",
     "did you mean 'gpu_model'"),
    ("rdma-nic-bad-pci", _set("hgx01", rdma_nics=[{"name": "mlx5_0", "pci": "17:00"}]), "hgx01",
     "rdma_nics[0]['pci']", "malformed PCI address"),
    ("rdma-nic-ats-not-bool", _set("hgx01", rdma_nics=[{"name": "mlx5_0", "ats": "yes"}]),
     "hgx01", "rdma_nics[0]['ats']", "True or False"),
    ("rdma-nic-link-layer", _set("hgx01", rdma_nics=[{"name": "mlx5_0", "link_layer": "roce"}]),
     "hgx01", "rdma_nics[0]['link_layer']", "unknown link layer"),
    ("short-name-clash", _same_short_name, "hgx01", "host name", "share the short name"),
    ("invalid-host-name", lambda s: s.update({"bad_host!": (("workers",), {})}), "bad_host!",
     "host name", "not a valid host name"),
]


@pytest.mark.parametrize(("mutate", "host", "field", "words"),
                         [case[1:] for case in BAD_INPUTS], ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_is_named(mutate, host, field, words):
    site = copy.deepcopy(valid_site())
    mutate(site)
    errors = validate(hosts_of(site))
    matching = [e for e in errors if host in (*e.host.split(", "), "every host")
                and e.field.startswith(field)
                and words in e.problem]
    assert matching, f"expected [{host}] {field}: ...{words}...; got:\n" + "\n".join(
        map(str, errors))
    err = matching[0]
    assert err.allowed and err.fix, "every error says what is allowed and how to fix it"
    with pytest.raises(SpecInvalid) as raised:
        build_cluster(hosts_of(site))
    assert str(err) in str(raised.value)


def test_enough_distinct_bad_inputs():
    assert len({case[0] for case in BAD_INPUTS}) >= 25


def test_duplicate_host_names_reported():
    errors = validate(hosts_of(valid_site()), duplicate_names=["hgx01"])
    assert any(e.host == "hgx01" and "more than once" in e.problem for e in errors)


def test_every_problem_listed_at_once():
    site = valid_site()
    site["hgx01"][1]["gpu_model"] = "nope"
    site["pcie01"][1]["gpu_sharing"] = {"mode": "mps", "clients": 99}
    everywhere(site, driver_branch="1")
    fields = {e.field for e in validate(hosts_of(site))}
    assert {"gpu_model", "gpu_sharing['clients']", "driver_branch"} <= fields


# Values that are valid for a key (absent, empty, a NIC named "8"): accepted, not garbage.
VALID_THERE = {("gpu_sharing", "None"), ("rdma_nics", "None"), ("apt_mirror", "None"),
               ("slurm_partitions", "None"), ("rdma_nics", "[]"), ("schedulers", "[]"),
               ("rdma_nics", "['8']")}


@pytest.mark.parametrize("garbage", [None, [], "x", 3.5, {"a": object()}, ["8"], {"mode": 1}])
def test_garbage_values_never_crash(garbage):
    for key in ("gpu_model", "gpu_count", "gpu_topology", "gpu_sharing", "rdma_nics",
                "schedulers", "apt_mirror", "slurm_partitions", "offline", "driver_branch"):
        site = valid_site()
        everywhere(site, **{key: garbage}) if key in ("schedulers", "apt_mirror",
                                                      "slurm_partitions", "offline",
                                                      "driver_branch") \
            else site["hgx01"][1].update({key: garbage})
        errors = validate(hosts_of(site))  # problems, never an exception
        if (key, repr(garbage)) in VALID_THERE:
            assert errors == [], errors
            continue
        assert errors, f"{key} = {garbage!r} was accepted"
        assert all(e.problem and e.fix for e in errors), errors
