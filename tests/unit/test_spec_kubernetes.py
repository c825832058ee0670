"""The Kubernetes part of the spec: a valid site builds; each bad input is refused before any
host is touched, by host, field and fix (unsupported versions, networks that overlap each other
or a node, a pod network Flannel cannot split, sharing modes the device plugin refuses together,
a worker in Slurm and Kubernetes at once)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.spec import HostInput, SpecInvalid, build_cluster, validate
from gpuinfra_deploy.run.knobs import knobs_of

HGX = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}
PCIE = {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "bridged-pairs"}


def site() -> dict[str, tuple[tuple[str, ...], dict[str, Any]]]:
    return {
        "k8s-head": (("head",), {"node_address": "10.0.0.10"}),
        "gpu01": (("workers",), {**HGX, "node_address": "10.0.0.11"}),
        "gpu02": (("workers",), {**PCIE, "node_address": "10.0.0.12"}),
    }


def hosts(s, **everywhere) -> list[HostInput]:
    return [HostInput(name, groups, {"schedulers": ["kubernetes"], **data, **everywhere})
            for name, (groups, data) in s.items()]


def test_a_kubernetes_site_builds():
    spec = build_cluster(hosts(site()))
    assert spec.schedulers == ("kubernetes",)
    assert spec.kubernetes.version == k8s.DEFAULT_VERSION and spec.kubernetes.minor == "1.35"
    assert spec.kubernetes.pause_image == "registry.k8s.io/pause:3.10.1"
    assert [n.name for n in spec.members("kubernetes")] == ["k8s-head", "gpu01", "gpu02"]
    assert spec.partitions == ()  # no Slurm


def test_both_schedulers_split_by_node():
    s = site()
    s["gpu01"][1]["node_schedulers"] = ["slurm"]
    s["gpu02"][1]["node_schedulers"] = ["kubernetes"]
    spec = build_cluster(hosts(s, schedulers=["slurm", "kubernetes"]))
    assert [n.name for n in spec.workers_of("slurm")] == ["gpu01"]
    assert [n.name for n in spec.workers_of("kubernetes")] == ["gpu02"]
    assert spec.partitions[0].nodes == ("gpu01",)
    assert spec.node("k8s-head").schedulers == ("slurm", "kubernetes")


def test_a_shared_worker_is_accepted_when_the_site_says_how():
    spec = build_cluster(hosts(site(), schedulers=["slurm", "kubernetes"],
                               scheduler_sharing="drain"))
    assert spec.node("gpu01").schedulers == ("slurm", "kubernetes")


def _set(host: str, **values: Any):
    return lambda s: s[host][1].update(values)


def _planes(count: int, **everywhere: Any):
    """``count`` control planes beside the head (cp01...), and ``everywhere`` on every host."""
    def mutate(s):
        for i in range(1, count + 1):
            s[f"cp0{i}"] = (("kubernetes_control_plane",), {"node_address": f"10.0.0.2{i}"})
        _all(**everywhere)(s)
    return mutate


def _all(**values: Any):
    def mutate(s):
        for _, data in s.values():
            data.update(values)
    return mutate


BAD = [
    ("unsupported-minor", _all(kubernetes_version="1.36.2"), "cluster", "kubernetes_version",
     "not supported"),
    ("old-minor", _all(kubernetes_version="1.30.14"), "cluster", "kubernetes_version",
     "not supported"),
    ("malformed-version", _all(kubernetes_version="v1.35"), "cluster", "kubernetes_version",
     "not a Kubernetes version"),
    ("pod-and-service-overlap", _all(kubernetes_pod_cidr="10.96.0.0/16"), "cluster",
     "kubernetes_pod_cidr/kubernetes_service_cidr", "overlap"),
    ("pod-cidr-holds-a-node", _all(kubernetes_pod_cidr="10.0.0.0/16"), "gpu01",
     "kubernetes_pod_cidr", "gpu01 10.0.0.11"),
    ("service-cidr-holds-the-head", _all(kubernetes_service_cidr="10.0.0.0/24"), "k8s-head",
     "kubernetes_service_cidr", "k8s-head 10.0.0.10"),
    ("pod-cidr-host-bits", _all(kubernetes_pod_cidr="10.244.0.1/16"), "cluster",
     "kubernetes_pod_cidr", "host bits set"),
    ("pod-cidr-not-a-string", _all(kubernetes_pod_cidr=16), "cluster", "kubernetes_pod_cidr",
     "must be a string"),
    ("pod-cidr-ipv6-for-flannel", _all(kubernetes_pod_cidr="fd00:10:244::/56"), "cluster",
     "kubernetes_pod_cidr", "IPv4"),
    ("pod-cidr-too-small-for-flannel", _all(kubernetes_pod_cidr="10.244.0.0/24"), "cluster",
     "kubernetes_pod_cidr", "must be larger than /24"),
    ("pod-cidr-too-few-node-subnets", _all(kubernetes_pod_cidr="10.244.0.0/23"), "cluster",
     "kubernetes_pod_cidr", "holds 2 node subnets (/24) for 3 Kubernetes nodes"),
    ("service-cidr-too-large", _all(kubernetes_service_cidr="10.96.0.0/11"), "cluster",
     "kubernetes_service_cidr", "kubeadm refuses"),
    ("unknown-cni", _all(kubernetes_cni="calico"), "cluster", "kubernetes_cni",
     "not a CNI the kubernetes role deploys"),
    ("old-device-plugin", _all(kubernetes_device_plugin_version="v0.14.5"), "cluster",
     "kubernetes_device_plugin_version", "config format"),
    ("device-plugin-without-v", _all(kubernetes_device_plugin_version="0.17.1"), "cluster",
     "kubernetes_device_plugin_version", "config format"),
    ("bad-image-repository", _all(kubernetes_image_repository="https://registry.example"),
     "cluster", "kubernetes_image_repository", "not an image repository"),
    ("control-plane-without-address", _set("k8s-head", node_address=None), "k8s-head",
     "node_address", "control plane needs its address"),
    ("two-control-planes", lambda s: s.update({"k8s-head2": (("head",), {})}), "cluster",
     "group 'head'", "2 control-plane hosts in 'head'"),
    ("ha-without-endpoint", _planes(2), "cluster", "kubernetes_control_plane_endpoint",
     "3 control planes (k8s-head, cp01, cp02) and no endpoint"),
    ("even-etcd", _planes(1, kubernetes_control_plane_endpoint="k8s-api.example"), "cluster",
     "kubernetes_control_plane", "2 control planes (k8s-head, cp01): each runs an etcd"),
    ("four-etcd", _planes(3, kubernetes_control_plane_endpoint="k8s-api.example"), "cluster",
     "kubernetes_control_plane", "4 control planes"),
    ("endpoint-is-a-control-plane", _planes(2, kubernetes_control_plane_endpoint="10.0.0.21"),
     "cluster", "kubernetes_control_plane_endpoint", "is cp01's own address"),
    ("bad-endpoint", _all(kubernetes_control_plane_endpoint="https://k8s-api:6443"), "cluster",
     "kubernetes_control_plane_endpoint", "not an address"),
    ("endpoint-port-out-of-range", _all(kubernetes_control_plane_endpoint="k8s-api:70000"),
     "cluster", "kubernetes_control_plane_endpoint", "not an address"),
    ("control-plane-that-is-a-worker", lambda s: (
        _planes(2, kubernetes_control_plane_endpoint="k8s-api.example")(s),
        s.update({"gpu01": (("workers", "kubernetes_control_plane"), s["gpu01"][1])})),
     "gpu01", "group", "a worker's CPUs and memory are its pods'"),
    ("control-plane-without-address", lambda s: (
        _planes(2, kubernetes_control_plane_endpoint="k8s-api.example")(s),
        s["cp02"][1].pop("node_address")), "cp02", "node_address",
     "a control plane needs its address"),
    ("control-plane-in-slurm", lambda s: (
        _planes(2, kubernetes_control_plane_endpoint="k8s-api.example")(s),
        s["cp01"][1].update(node_schedulers=["slurm"])), "cp01", "node_schedulers",
     "Kubernetes' (a control plane, with etcd)"),
    ("gpu-worker-without-toolkit", _set("gpu01", container_toolkit_enabled=False), "gpu01",
     "container_toolkit_enabled", "a Kubernetes GPU node with no container toolkit"),
    ("gpu-worker-toolkit-without-containerd",
     _set("gpu02", container_toolkit_runtimes=["docker"]), "gpu02",
     "container_toolkit_runtimes", "leaves containerd without the nvidia runtime"),
    ("time-slicing-with-mig", _set("gpu01", gpu_sharing={"mode": "mig", "replicas": 4,
                                                         "mig_layout": {"1g.10gb": 7}}),
     "gpu01", "gpu_sharing['replicas']", "time-slicing MIG devices is not deployed"),
    ("mps-on-mig", _set("gpu01", gpu_sharing={"mode": "mps", "clients": 4,
                                              "mig_layout": {"1g.10gb": 7}}),
     "gpu01", "gpu_sharing['mig_layout']", "MPS is not supported on MIG-enabled GPUs"),
    ("mixed-mig-under-single", _set("gpu01", gpu_sharing={"mode": "mig", "mig_layout": {
        "3g.40gb": 1, "1g.10gb": 2}}), "gpu01", "gpu_sharing['mig_layout']",
     "mixed MIG layout under mig_strategy 'single'"),
    ("worker-in-both", _all(schedulers=["slurm", "kubernetes"]), "gpu01", "node_schedulers",
     "in Slurm and in Kubernetes"),
    ("unknown-sharing-policy", _all(schedulers=["slurm", "kubernetes"],
                                    scheduler_sharing="timeshare"), "cluster",
     "scheduler_sharing", "unknown way"),
    ("node-scheduler-the-site-lacks", _set("gpu01", node_schedulers=["slurm"]), "gpu01",
     "node_schedulers", "which the site does not run"),
    ("partition-with-a-kubernetes-node", lambda s: (
        _all(schedulers=["slurm", "kubernetes"],
             slurm_partitions=[{"name": "gpu", "nodes": ["gpu01"]}])(s),
        _set("gpu01", node_schedulers=["kubernetes"])(s),
        _set("gpu02", node_schedulers=["slurm"])(s)),
     "gpu01", "slurm_partitions[0]['nodes']", "not a Slurm node"),
]


@pytest.mark.parametrize(("mutate", "host", "field", "words"), [c[1:] for c in BAD],
                         ids=[c[0] for c in BAD])
def test_bad_kubernetes_input_is_named(mutate, host, field, words):
    s = copy.deepcopy(site())
    mutate(s)
    errors = validate(hosts(s), knobs=knobs_of())  # the roles' knobs judged too
    matching = [e for e in errors if host in (*e.host.split(", "), "every host")
                and e.field.startswith(field)
                and words in e.problem]
    assert matching, f"expected [{host}] {field}: ...{words}...; got:\n" + "\n".join(
        map(str, errors))
    assert matching[0].allowed and matching[0].fix
    with pytest.raises(SpecInvalid):
        build_cluster(hosts(s), knobs=knobs_of())


def test_an_ha_site_builds_with_its_endpoint():
    s = copy.deepcopy(site())
    _planes(2, kubernetes_control_plane_endpoint="k8s-api.example")(s)
    spec = build_cluster(hosts(s), knobs=knobs_of())
    assert [n.name for n in spec.control_planes] == ["k8s-head", "cp01", "cp02"]
    assert spec.kubernetes.endpoint == "k8s-api.example:6443"
    assert spec.node("cp01").schedulers == ("kubernetes",)
    assert [n.name for n in spec.workers_of("kubernetes")] == ["gpu01", "gpu02"]
    assert validate(hosts(s, kubernetes_control_plane_endpoint="[fd00::5]")) == []
    assert build_cluster(hosts(s, kubernetes_control_plane_endpoint="fd00::5")
                         ).kubernetes.endpoint == "[fd00::5]:6443"


def test_a_control_plane_on_a_slurm_site_is_refused():
    s = copy.deepcopy(site())
    _planes(2)(s)
    found = [e for e in validate(hosts(s, schedulers=["slurm"])) if e.host == "cp01"]
    assert any("a Kubernetes control plane on a site without Kubernetes" in e.problem
               for e in found), found


def test_cidrs_are_checked_only_for_kubernetes_sites():
    """A Slurm site never runs kubeadm: its defaults' networks are not judged against nodes."""
    s = site()
    spec = build_cluster([HostInput(n, g, {**d, "schedulers": ["slurm"],
                                           "kubernetes_pod_cidr": "10.0.0.0/16"})
                          for n, (g, d) in s.items()])
    assert spec.schedulers == ("slurm",)


@pytest.mark.parametrize("version, containerd, words", [
    ("1.35.8", "1.6.20~ds1-1+deb12u3", "not among containerd's recommendations"),
    ("1.35.8", "1.7.24~ds1-6+deb13u1", "older than the 1.7.28+"),
    ("1.35.8", "1.7.28-0ubuntu1~24.04.1", None),
    ("1.33.5", "1.6.36~ds1-1", None),
    ("1.35.8", "2.2.1-1", None),
    ("1.35.8", "", "unknown"),
    # containerd RELEASES.md's 1.34 row: 2.1.3+, 2.0.6+, 1.7.28+, 1.6.39+.
    ("1.34.2", "1.7.27-1", "older than the 1.7.28+"),
    ("1.34.2", "2.0.5-1", "older than the 2.0.6+"),
    ("1.34.2", "2.1.2-1", "older than the 2.1.3+"),
    ("1.34.2", "1.6.39-1", None),
    ("1.34.2", "1.6.38-1", "older than the 1.6.39+"),
    ("1.34.2", "1.7.28-0ubuntu1~24.04.1", None),
])
def test_containerd_against_its_recommendation(version, containerd, words):
    why = k8s.containerd_recommended(version, containerd)
    assert (why is None) if words is None else (words in why)


def test_a_network_over_every_node_is_one_problem():
    """A pod network over the whole node subnet is one problem naming the nodes, not one per
    node (the operator review's E13: the same block four times)."""
    s = copy.deepcopy(site())
    _all(kubernetes_pod_cidr="10.0.0.0/16")(s)
    found = [e for e in validate(hosts(s)) if e.field == "kubernetes_pod_cidr"]
    assert len(found) == 1, found
    assert "3 node(s)" in found[0].problem and "k8s-head 10.0.0.10" in found[0].problem
