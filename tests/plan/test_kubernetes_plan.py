"""Plan tests of the `kubernetes` role on a head and two GPU workers: Debian 12, Ubuntu 22.04
and 24.04. No kubeadm or kubelet package is reachable from this project's machines, so these
plans (on recorded distribution facts) and the schema tests are the role's proof until it runs
on a real site: a fresh head plans `kubeadm init`, a fresh worker plans the join, a converged
cluster plans nothing, and no bootstrap token appears anywhere in a plan or its log.

A converged node's facts are the distribution layers (tests/plan/facts) plus what the role
itself wrote on a fresh node (every file it would upload, taken from the fresh plan), the
pinned packages installed and held, the modules and sysctls in effect, and the cluster as the
control plane reports it (nodes labelled, manifests in sync).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
from datetime import datetime
from functools import cache
from typing import Any

import pytest
import yaml
from pyinfra.api import FileUploadCommand, FunctionCommand

from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.knowledge.packages import SIGNING_KEYS
from gpuinfra.kubernetes import kubeadm
from gpuinfra_deploy.ops.apt import keyring_script
from gpuinfra_roles.kubernetes import CLUSTER_OBJECTS, NAMESPACES, STAGE, kubernetes
from gpuinfra_roles.kubernetes.operations import _join
from tests.plan.harness import (
    DEPLOY,
    KEYRING_KEYS,
    REPO,
    FakeHost,
    load_facts,
    pinned_keyrings,
    plan_hosts,
    upload_text,
)
from tests.plan.test_containerd_plan import merge

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
HEAD, GPU1, GPU2 = "k8s-head", "gpu01", "gpu02"
NAMES = [HEAD, GPU1, GPU2]
SITE = {"schedulers": ["kubernetes"], "mig_strategy": "mixed"}
DATA = {
    HEAD: {"node_address": "10.0.0.10"},
    GPU1: {"node_address": "10.0.0.11", "gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
           "gpu_topology": "nvswitch-all-to-all",
           "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 2}}},
    GPU2: {"node_address": "10.0.0.12", "gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
           "gpu_topology": "bridged-pairs",
           "gpu_sharing": {"mode": "time-slicing", "replicas": 4}},
}
GROUPS = {HEAD: ("head",), GPU1: ("workers",), GPU2: ("workers",)}
PACKAGE = k8s.package_version(k8s.DEFAULT_VERSION)
FSTAB = ["UUID=0a1b / ext4 errors=remount-ro 0 1", "/swap.img\tnone\tswap\tsw\t0\t0"]
SWAPS = ["Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority", "/swap.img  file  2097148  0  -2"]
TOKEN = re.compile(r"[a-z0-9]{6}\.[a-z0-9]{16}")
META = {"mode": 644, "size": 100, "user": "root", "group": "root",
        "mtime": datetime.fromisoformat("2026-11-20T10:00:00")}
STAMP = {**META, "mtime": datetime.fromisoformat("2026-11-22T03:30:00")}


def fresh(distro: str) -> dict[str, Any]:
    return merge(load_facts("base-fresh", distro), {
        "files.FileContents": {"path=/etc/fstab": FSTAB, "path=/proc/swaps": SWAPS},
        "files.Sha256File": {"*": None},
        "gpuinfra_deploy.facts.kernel.LoadedModules": {"modules": {}},
        "gpuinfra_deploy.facts.apt.HeldPackages": [],
        "gpuinfra_roles.kubernetes.operations.KubeNodes": {},
        "gpuinfra_roles.kubernetes.operations.ManifestsInSync": {"*": None},
    })


def hosts(facts: dict[str, dict[str, Any]], extra: dict[str, Any] | None = None
          ) -> list[FakeHost]:
    return [FakeHost(n, GROUPS[n], facts[n], {**DATA[n], **(extra or {}).get(n, {})})
            for n in NAMES]


def plan_all(facts: dict[str, dict[str, Any]], site: dict[str, Any] | None = None,
             extra: dict[str, Any] | None = None):
    return plan_hosts(kubernetes, hosts(facts, extra), NAMES, {**SITE, **(site or {})})


def _uploads(result) -> dict[str, str]:
    """Every file the plan uploads: live path -> text (checked files under their live path)."""
    out = {}
    for op in result.ops:
        for command in op.raw:
            if isinstance(command, FileUploadCommand) and hasattr(command.src, "getvalue"):
                dest = command.dest
                if dest.startswith(STAGE + "/"):
                    name = dest.rsplit("/", 1)[1]
                    dest = kubeadm.INIT_CONFIG if name == "kubeadm-init.yaml" else \
                        f"{CLUSTER_OBJECTS.rsplit('/', 1)[0]}/{name}"
                out[dest] = upload_text(command.src)
    return out


def converged(distro: str) -> dict[str, dict[str, Any]]:
    """Every node after the role ran: what it wrote, installed, loaded; the cluster up."""
    return copy.deepcopy(_converged(distro))


@cache
def _converged(distro: str) -> dict[str, dict[str, Any]]:
    first = plan_all({n: fresh(distro) for n in NAMES})
    # The control plane reports each node with the labels its kubelet registered with (the
    # JoinConfiguration's node-labels, as the fresh plan hands them to the join).
    nodes = {name: {"labels": {}, "taints": [], "ready": True, "ready_reason": "",
                    "allocatable": {}, "unschedulable": False} for name in NAMES}
    for name in (GPU1, GPU2):
        nodes[name]["labels"] = first.plans[name].op("Join the cluster").raw[0].args[1]["labels"]
    head_uploads = _uploads(first.plans[HEAD])
    result = {}
    for name in NAMES:
        written = _uploads(first.plans[name])
        facts = fresh(distro)
        merge(facts, {
            "deb.DebPackages": {p: [PACKAGE] for p in k8s.PACKAGES},
            "gpuinfra_deploy.facts.apt.HeldPackages": sorted(k8s.PACKAGES),
            KEYRING_KEYS: pinned_keyrings({k8s.KEYRING: SIGNING_KEYS["kubernetes"]}),
            "files.File": {"path=/var/lib/apt/periodic/update-success-stamp": STAMP,
                           f"path={k8s.KEYRING}": META,
                           **{f"path={p}": META for p in written}},
            "files.Directory": {f"path={d}": {"mode": 755, "user": "root", "group": "root"}
                                for d in {"/etc/apt/keyrings", *(p.rsplit("/", 1)[0]
                                                                 for p in written)}},
            "files.Sha1File": {f"path={p}": hashlib.sha1(t.encode()).hexdigest()
                               for p, t in written.items()},
            "files.Sha256File": {f"path={p}": hashlib.sha256(t.encode()).hexdigest()
                                 for p, t in written.items()},
            "files.FileContents": {"path=/etc/fstab": written["/etc/fstab"].splitlines(),
                                   "path=/proc/swaps": SWAPS[:1]},
            "gpuinfra_deploy.facts.kernel.LoadedModules":
                {"modules": {m: {} for m in kubeadm.KERNEL_MODULES}},
            "server.Sysctl": {f"keys=['{k}']": {k: int(v)} for k, v in kubeadm.SYSCTLS.items()},
            "systemd.SystemdEnabled": {"*": {"kubelet.service": True}},
            "systemd.SystemdStatus": {"*": {"kubelet.service": True}},
        })
        if name == HEAD:
            merge(facts, {
                "files.File": {f"path={kubeadm.ADMIN_CONF}": META},
                "files.FileContents": {f"path={kubeadm.INIT_CONFIG}":
                                       head_uploads[kubeadm.INIT_CONFIG].splitlines()},
                "gpuinfra_roles.kubernetes.operations.KubeNodes": nodes,
                "gpuinfra_roles.kubernetes.operations.ManifestsInSync": {"*": True},
            })
        else:
            merge(facts, {"files.File": {f"path={kubeadm.KUBELET_CONF}": META}})
        result[name] = facts
    return result


# ----------------------------------------------------------------------------- fresh cluster

@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_head_prepares_the_node_and_plans_kubeadm_init(distro):
    head = plan_all({n: fresh(distro) for n in NAMES}).plans[HEAD]
    assert head.op("Swap off, now and at boot").commands[-1] == "swapoff -a"
    fstab = _uploads(head)["/etc/fstab"]
    assert "# swap off for the kubelet (gpuinfra): /swap.img" in fstab
    assert head.op("Load overlay, br_netfilter now").commands == (
        "modprobe -a overlay br_netfilter",)
    assert head.op("signing key").commands == (keyring_script(
        "https://pkgs.k8s.io/core:/stable:/v1.35/deb/Release.key", k8s.KEYRING,
        "DE15B14486CD377B9E876E1A234654DA9A296436"),)
    assert _uploads(head)[k8s.LIST_FILE] == (
        f"deb [signed-by={k8s.KEYRING}] https://pkgs.k8s.io/core:/stable:/v1.35/deb/ /\n")
    install = head.op("Install Kubernetes").commands[-1]
    assert install.endswith(f"kubelet={PACKAGE} kubeadm={PACKAGE} kubectl={PACKAGE}")
    assert head.op("Hold Kubernetes").commands == ("apt-mark hold kubelet kubeadm kubectl",)
    init = head.op("Initialise the control plane").commands
    assert f"kubeadm config validate --config {STAGE}/kubeadm-init.yaml" in init[2]
    assert init[3].endswith(f"mv -f {kubeadm.INIT_CONFIG}.gpuinfra-new {kubeadm.INIT_CONFIG}")
    assert init[4] == f"kubeadm init --config {kubeadm.INIT_CONFIG} --skip-token-print"
    config = _uploads(head)[kubeadm.INIT_CONFIG]
    assert "podSubnet: 10.244.0.0/16" in config and "advertiseAddress: 10.0.0.10" in config
    # The API server and the head's kubelet listen on the head's cluster address only.
    documents = list(yaml.safe_load_all(config))
    assert documents[1]["apiServer"]["extraArgs"] == [{"name": "bind-address",
                                                       "value": "10.0.0.10"}]
    assert {"name": "address", "value": "10.0.0.10"} in \
        documents[0]["nodeRegistration"]["kubeletExtraArgs"]


@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_head_applies_what_the_api_server_accepted_and_labels_gpu_nodes(distro):
    head = plan_all({n: fresh(distro) for n in NAMES}).plans[HEAD]
    objects = head.op("10-cluster.yaml (CNI")
    assert "apply --dry-run=server -f" in objects.commands[2]
    assert "gpuinfra: the Kubernetes API server refused" in objects.commands[2]
    applied = head.op("The cluster holds 10-cluster.yaml").commands
    assert applied[0] == (f"kubectl --kubeconfig {kubeadm.ADMIN_CONF} apply --server-side "
                          f"--field-manager=gpuinfra --force-conflicts -f {CLUSTER_OBJECTS}")
    assert "gpuinfra.io/config notin (mig-mixed,time-slicing-4)" in applied[1]
    assert head.op("The cluster holds 00-namespaces.yaml").commands[0].endswith(NAMESPACES)
    assert head.op("GPU labels and taint of gpu02").commands == (
        f"kubectl --kubeconfig {kubeadm.ADMIN_CONF} label node gpu02 --overwrite "
        "nvidia.com/device-plugin.config=time-slicing-4 nvidia.com/gpu.present=true",)
    assert "GPU labels and taint of k8s-head" not in [op.name for op in head.ops]


@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_worker_plans_the_join_with_the_head(distro):
    result = plan_all({n: fresh(distro) for n in NAMES})
    join = result.plans[GPU2].op("Join the cluster")
    assert len(join.raw) == 1 and isinstance(join.raw[0], FunctionCommand)
    assert join.raw[0].function is _join
    head, settings = join.raw[0].args
    assert head.name == HEAD
    assert settings == {"node_name": GPU2, "address": "10.0.0.12",
                        "api_endpoint": "10.0.0.10:6443", "taints": [],
                        "labels": {"nvidia.com/gpu.present": "true",
                                   "nvidia.com/device-plugin.config": "time-slicing-4"}}
    assert not [op for op in result.plans[GPU2].ops if "kubeadm init" in " ".join(op.commands)]
    # The head initialises before any worker joins; labels and manifests come after the joins.
    for worker in (GPU1, GPU2):
        assert result.position(HEAD, "Initialise the control plane") < \
            result.position(worker, "Join the cluster") < \
            result.position(HEAD, "GPU labels and taint of gpu01")


@pytest.mark.parametrize("distro", DISTROS)
def test_no_token_in_any_plan_or_its_log(distro, caplog):
    with caplog.at_level(logging.DEBUG):
        result = plan_all({n: fresh(distro) for n in NAMES})
    text = "\n".join([*(c for p in result.plans.values() for c in p.commands),
                      *(op.name for p in result.plans.values() for op in p.ops),
                      *_uploads(result.plans[HEAD]).values(), caplog.text])
    assert not TOKEN.search(text)
    init = yaml.safe_load_all(_uploads(result.plans[HEAD])[kubeadm.INIT_CONFIG])
    assert all("token" not in t for t in next(init)["bootstrapTokens"])  # kubeadm makes it


# ----------------------------------------------------------------------------- converged

@pytest.mark.parametrize("distro", DISTROS)
def test_converged_cluster_plans_nothing(distro):
    result = plan_all(converged(distro))
    for name in NAMES:
        assert result.plans[name].commands == [], (name, result.plans[name].changing)


def test_an_initialised_control_plane_is_never_initialised_again():
    facts = converged("debian-12")
    facts[HEAD]["files.Sha256File"] = {"*": None}  # whatever the file's state: admin.conf rules
    del facts[HEAD]["files.FileContents"][f"path={kubeadm.INIT_CONFIG}"]  # made by hand
    head = plan_all(facts).plans[HEAD]
    assert head.op("Initialise the control plane").commands == ()
    assert not [c for c in head.commands if "kubeadm init" in c]


def test_a_joined_worker_is_never_joined_again():
    facts = converged("ubuntu-24.04")
    worker = plan_all(facts).plans[GPU1]
    assert worker.op("Join the cluster").commands == ()


def test_networks_of_a_running_cluster_cannot_change_under_it():
    result = plan_all(converged("debian-12"), site={"kubernetes_pod_cidr": "10.200.0.0/16"})
    refusal = result.plans[HEAD].op("Initialise the control plane").commands
    assert len(refusal) == 1 and "pod_cidr=10.244.0.0/16" in refusal[0]
    assert "kubeadm reset" in refusal[0] and refusal[0].endswith("exit 1")


@pytest.mark.parametrize("distro", DISTROS)
def test_a_new_minor_moves_the_repository_line_then_stops_with_the_upgrade_steps(distro):
    result = plan_all(converged(distro), site={"kubernetes_version": "1.35.8"})
    assert result.plans[GPU1].commands == []
    facts = converged(distro)
    for name in NAMES:
        facts[name]["deb.DebPackages"] = {**facts[name]["deb.DebPackages"],
                                          **{p: ["1.34.3-1.1"] for p in k8s.PACKAGES}}
    result = plan_all(facts)
    for name in NAMES:
        plan = result.plans[name]
        stop = plan.op("Stop: this node runs kubeadm 1.34.3-1.1")
        assert "kubeadm upgrade apply -y v1.35.8" in stop.commands[0]
        assert not [op for op in plan.ops if op.name.endswith("Install Kubernetes 1.35.8 "
                                                              "(kubeadm, kubelet, kubectl)")]
        assert not [op for op in plan.ops if "Join" in op.name or "Initialise" in op.name]


def test_a_cluster_that_drifted_from_its_manifests_gets_them_again():
    facts = converged("debian-12")
    facts[HEAD]["gpuinfra_roles.kubernetes.operations.ManifestsInSync"] = {
        f"path={CLUSTER_OBJECTS}": False, "*": True}
    head = plan_all(facts).plans[HEAD]
    assert [op.name.split(" | ")[1] for op in head.changing] == [
        "The cluster holds 10-cluster.yaml"]


def test_a_changed_sharing_relabels_the_node_and_prunes_the_old_plugin():
    extra = {GPU2: {"gpu_sharing": {"mode": "time-slicing", "replicas": 8}}}
    head = plan_all(converged("debian-12"), extra=extra).plans[HEAD]
    assert "nvidia.com/device-plugin.config=time-slicing-8" in head.op(
        "GPU labels and taint of gpu02").commands[0]
    assert "notin (mig-mixed,time-slicing-8)" in head.op(
        "The cluster holds 10-cluster.yaml").commands[1]


def _cluster_objects(result) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(_uploads(result.plans[HEAD])[CLUSTER_OBJECTS]))


def test_the_health_check_drives_a_node_condition_through_node_problem_detector():
    """On by default: node-problem-detector on the GPU nodes runs gpuinfra-health in the
    host's namespaces every health_check_interval, as the condition GpuinfraUnhealthy."""
    objects = _cluster_objects(plan_all({n: fresh("debian-12") for n in NAMES},
                                        site={"health_check_interval": 120}))
    health = {o["kind"]: o for o in objects if o["metadata"]["name"] == "gpuinfra-health"}
    assert set(health) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                           "DaemonSet"}
    config = json.loads(health["ConfigMap"]["data"]["gpuinfra-health.json"])
    assert config["pluginConfig"]["invoke_interval"] == "120s"
    rule = config["rules"][0]
    assert (rule["type"], rule["condition"]) == ("permanent", "GpuinfraUnhealthy")
    assert [rule["path"], *rule["args"]][-2:] == ["/usr/local/sbin/gpuinfra-health", "check"]
    pod = health["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["hostPID"] is True


@pytest.mark.parametrize("off", [{"health_kubernetes": False}, {"health_enabled": False}])
def test_no_node_problem_detector_when_the_health_check_is_off(off):
    objects = _cluster_objects(plan_all({n: fresh("debian-12") for n in NAMES}, site=off))
    assert objects and not [o for o in objects if o["metadata"]["name"] == "gpuinfra-health"]


TAINT_CONTROLLER = "gpuinfra-health-taint"
HEALTH_TAINT = ["gpuinfra.io/unhealthy", "true", "NoSchedule"]
OPERATOR_TAINT = ["example.com/maintenance", "disk", "NoSchedule"]
PRUNE_CONTROLLER = (
    f"kubectl --kubeconfig {kubeadm.ADMIN_CONF} delete deployment,configmap,serviceaccount "
    "-n kube-system --ignore-not-found -l gpuinfra.io/part=health-taint",
    f"kubectl --kubeconfig {kubeadm.ADMIN_CONF} delete clusterrolebinding,clusterrole "
    "--ignore-not-found -l gpuinfra.io/part=health-taint")


def test_the_taint_controller_is_applied_with_node_problem_detector():
    """On by default: the same file, judged and applied in the same step, holds
    node-problem-detector (the condition) and the controller that taints by it, with the
    repository's own rule in its ConfigMap; nothing of it is pruned."""
    result = plan_all({n: fresh("debian-12") for n in NAMES})
    objects = _cluster_objects(result)
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert ("DaemonSet", "gpuinfra-health") in names
    controller = {o["kind"]: o for o in objects if o["metadata"]["name"] == TAINT_CONTROLLER}
    assert set(controller) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                               "ConfigMap", "Deployment"}
    shipped = controller["ConfigMap"]["data"]["gpuinfra.health.taint.py"]
    assert shipped == (REPO / "gpuinfra" / "health" / "taint.py").read_text()
    pod = controller["Deployment"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    apply = result.plans[HEAD].op("The cluster holds 10-cluster.yaml").commands
    assert apply[0].startswith(f"kubectl --kubeconfig {kubeadm.ADMIN_CONF} apply")
    assert not set(PRUNE_CONTROLLER) & set(apply)


@pytest.mark.parametrize("off", [{"health_kubernetes_taint": False},
                                 {"health_kubernetes": False}, {"health_enabled": False}])
def test_no_taint_controller_when_the_knob_or_the_condition_is_off(off):
    """Off: not in the file, and what an earlier deploy applied of it is deleted with the
    apply; node-problem-detector stays unless the condition itself is off."""
    result = plan_all({n: fresh("debian-12") for n in NAMES}, site=off)
    objects = _cluster_objects(result)
    assert not [o for o in objects if o["metadata"]["name"] == TAINT_CONTROLLER]
    condition = [o for o in objects if o["metadata"]["name"] == "gpuinfra-health"]
    assert bool(condition) == ("health_kubernetes_taint" in off)
    apply = result.plans[HEAD].op("The cluster holds 10-cluster.yaml").commands
    assert apply[-2:] == PRUNE_CONTROLLER


def _with_taints(facts: dict[str, dict[str, Any]], taints: list[list[str]]
                 ) -> dict[str, dict[str, Any]]:
    nodes = facts[HEAD]["gpuinfra_roles.kubernetes.operations.KubeNodes"]
    nodes[GPU1] = {**nodes[GPU1], "taints": taints}
    return facts


def test_the_taint_controller_gets_the_sites_circuit_breaker():
    """Issue 48: the controller's bound is the share and window of health_breaker_share and
    health_breaker_window over the site's Kubernetes GPU nodes (two here: 0.1 of them rounds
    to at least one; 1.0 is both)."""
    def env(site: dict) -> dict[str, str]:
        head = plan_all({n: fresh("debian-12") for n in NAMES}, site=site).plans[HEAD]
        docs = list(yaml.safe_load_all(_uploads(head)[CLUSTER_OBJECTS]))
        deployment = next(d for d in docs if d and d["kind"] == "Deployment"
                          and d["metadata"]["name"] == TAINT_CONTROLLER)
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        return {e["name"]: e["value"] for e in container["env"]}

    assert env({}) == {"GPUINFRA_BREAKER_MOST": "1", "GPUINFRA_BREAKER_WINDOW": "3600"}
    assert env({"health_breaker_share": 1.0, "health_breaker_window": 600}) == {
        "GPUINFRA_BREAKER_MOST": "2", "GPUINFRA_BREAKER_WINDOW": "600"}


def test_the_controller_owns_the_health_taint_while_it_runs():
    """A node the controller tainted is left to the controller: the role plans nothing."""
    facts = _with_taints(converged("debian-12"), [OPERATOR_TAINT, HEALTH_TAINT])
    assert plan_all(facts).plans[HEAD].commands == []


def test_turning_the_taint_off_removes_the_controller_and_its_taint_only():
    """Knob off on a running cluster: the controller is deleted with the apply, and the role
    takes its taint off the GPU nodes (no one else ever would); an operator's taint stays."""
    facts = _with_taints(converged("debian-12"), [OPERATOR_TAINT, HEALTH_TAINT])
    head = plan_all(facts, site={"health_kubernetes_taint": False}).plans[HEAD]
    assert head.op("The cluster holds 10-cluster.yaml").commands[-2:] == PRUNE_CONTROLLER
    assert head.op("GPU labels and taint of gpu01").commands == (
        f"kubectl --kubeconfig {kubeadm.ADMIN_CONF} taint node gpu01 "
        "gpuinfra.io/unhealthy:NoSchedule-",)
    assert head.op("GPU labels and taint of gpu02").commands == ()


def test_the_gpu_taint_when_the_site_asks_for_it():
    head = plan_all(converged("debian-12"), site={"kubernetes_gpu_taint": True}).plans[HEAD]
    assert head.op("GPU labels and taint of gpu01").commands == (
        f"kubectl --kubeconfig {kubeadm.ADMIN_CONF} taint node gpu01 --overwrite "
        "nvidia.com/gpu=present:NoSchedule",)


def test_a_mirror_replaces_pkgs_k8s_io():
    mirror = "http://mirror.example.internal/k8s"
    head = plan_all({n: fresh("debian-12") for n in NAMES},
                    site={"kubernetes_repo_mirror": mirror}).plans[HEAD]
    assert _uploads(head)[k8s.LIST_FILE].endswith(f"{mirror}/core:/stable:/v1.35/deb/ /\n")
    assert f"{mirror}/core:/stable:/v1.35/deb/Release.key" in head.op("signing key").commands[0]


def test_nodes_outside_kubernetes_get_nothing():
    site = {"schedulers": ["slurm", "kubernetes"]}
    extra = {GPU1: {"node_schedulers": ["slurm"]}, GPU2: {"node_schedulers": ["kubernetes"]}}
    result = plan_all({n: fresh("debian-12") for n in NAMES}, site=site, extra=extra)
    assert result.plans[GPU1].commands == []
    assert result.plans[GPU2].op("Join the cluster").commands
    assert "GPU labels and taint of gpu01" not in [op.name for op in result.plans[HEAD].ops]


@pytest.mark.parametrize("containerd, warned", [("1.6.20~ds1-1+deb12u3", True),
                                                ("1.7.24~ds1-6+deb13u1", True),
                                                ("1.7.28-0ubuntu1~24.04.1", False)])
def test_a_containerd_below_the_recommendation_is_warned_about(containerd, warned, caplog):
    facts = converged("debian-12")
    for name in NAMES:
        facts[name]["deb.DebPackages"] = {**facts[name]["deb.DebPackages"],
                                          "containerd": [containerd]}
    with caplog.at_level(logging.WARNING):
        result = plan_all(facts)
    assert result.plans[HEAD].commands == []  # a warning, not a change
    assert ("recommends for Kubernetes 1.35" in caplog.text or
            "not among containerd's recommendations" in caplog.text) is warned


def test_a_failed_head_stops_kubernetes_on_the_workers_in_the_whole_deploy():
    """deploy.py runs the role with _if=site.head_up: no join is attempted against a control
    plane that failed in this run, while the rest of the worker's deploy goes on."""
    unread = {"gpuinfra_roles.containerd.ContainerdDefaultConfig": None}
    facts = {n: merge(fresh("debian-12"), unread)
             for n in (HEAD, "cpu01")}
    nodes = [FakeHost(HEAD, ("head",), facts[HEAD], DATA[HEAD]),
             FakeHost("cpu01", ("workers",), facts["cpu01"], {"node_address": "10.0.0.13"})]
    for failed, planned in (((), True), ((HEAD,), False)):
        plan = plan_hosts(DEPLOY, nodes, ["cpu01"], SITE, failed=failed).plans["cpu01"]
        changing = [op.name for op in plan.changing]
        assert any(n.startswith("kubernetes |") for n in changing) is planned, changing
        assert any(n.startswith("containerd |") for n in changing), changing


# ----------------------------------------------------------------------------- HA control plane

ENDPOINT = "k8s-api.example:6443"
PLANES = {"cp01": "10.0.0.21", "cp02": "10.0.0.22"}


def plan_ha(distro: str = "debian-12"):
    names = [HEAD, *PLANES, GPU1, GPU2]
    every = [FakeHost(n, GROUPS[n], fresh(distro), DATA[n]) for n in (HEAD,)] + \
        [FakeHost(n, ("kubernetes_control_plane",), fresh(distro), {"node_address": a})
         for n, a in PLANES.items()] + \
        [FakeHost(n, GROUPS[n], fresh(distro), DATA[n]) for n in (GPU1, GPU2)]
    return plan_hosts(kubernetes, every, names,
                      {**SITE, "kubernetes_control_plane_endpoint": ENDPOINT})


@pytest.mark.parametrize("distro", DISTROS)
def test_an_ha_site_inits_behind_its_endpoint_and_joins_the_other_control_planes(distro):
    result = plan_ha(distro)
    config = list(yaml.safe_load_all(_uploads(result.plans[HEAD])[kubeadm.INIT_CONFIG]))
    assert config[1]["controlPlaneEndpoint"] == ENDPOINT
    for name, address in PLANES.items():
        join = result.plans[name].op("Join the cluster as a control plane").raw[0]
        assert join.function is _join and join.kwargs == {"control_plane": True}
        head, settings = join.args
        assert head.name == HEAD
        assert settings == {"node_name": name, "address": address, "api_endpoint": ENDPOINT,
                            "taints": [(kubeadm.CONTROL_PLANE_TAINT, "", "NoSchedule")],
                            "labels": {}}
        assert result.position(HEAD, "Initialise the control plane") < \
            result.position(name, "Join the cluster as a control plane")
        # The cluster's objects are the head's to apply, once.
        assert not [op for op in result.plans[name].ops if "10-cluster.yaml" in op.name]
    worker = result.plans[GPU1].op("Join the cluster (kubeadm join").raw[0]
    assert worker.args[1]["api_endpoint"] == ENDPOINT and worker.kwargs == {
        "control_plane": False}


def test_a_running_cluster_cannot_move_to_another_endpoint():
    facts = converged("debian-12")
    result = plan_all(facts, site={"kubernetes_control_plane_endpoint": ENDPOINT})
    refusal = result.plans[HEAD].op("Initialise the control plane").commands
    assert len(refusal) == 1 and "endpoint=10.0.0.10:6443" in refusal[0] and \
        f"endpoint={ENDPOINT}" in refusal[0]


# ----------------------------------------------------------------------------- RDMA in pods

NICS = [{"name": "mlx5_0", "pci": "0000:18:00.0", "ats": True, "link_layer": "infiniband",
         "rate_gbps": 400, "model": "ConnectX-7"}]


def test_a_node_with_rdma_nics_gets_the_rdma_plugin_and_its_label():
    """Issue 46 item 3: the RDMA shared device plugin runs where a GPU node has RDMA NICs,
    selected by the label the node joins with (and keeps); a site without any prunes it."""
    result = plan_all({n: fresh("debian-12") for n in NAMES}, extra={GPU1: {"rdma_nics": NICS}})
    objects = _cluster_objects(result)
    [plugin] = [o for o in objects if o["metadata"]["name"] == "rdma-shared-device-plugin"]
    assert plugin["spec"]["template"]["spec"]["nodeSelector"] == {k8s.LABEL_RDMA: "true"}
    labels = result.plans[GPU1].op("Join the cluster").raw[0].args[1]["labels"]
    assert labels[k8s.LABEL_RDMA] == "true"
    assert k8s.LABEL_RDMA not in result.plans[GPU2].op("Join the cluster").raw[0].args[1][
        "labels"]
    applied = result.plans[HEAD].op("The cluster holds 10-cluster.yaml").commands
    assert not [c for c in applied if "rdma-device-plugin" in c]
    # Without RDMA NICs anywhere: no plugin, and one left from before is deleted.
    plain = plan_all({n: fresh("debian-12") for n in NAMES})
    assert not [o for o in _cluster_objects(plain)
                if o["metadata"]["name"] == "rdma-shared-device-plugin"]
    assert any("delete daemonset,configmap -n kube-system --ignore-not-found -l "
               "gpuinfra.io/part=rdma-device-plugin" in c
               for c in plain.plans[HEAD].op("The cluster holds 10-cluster.yaml").commands)
