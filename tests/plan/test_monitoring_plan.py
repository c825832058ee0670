"""Plan tests of the `monitoring` role on a head and a GPU node, per distribution.

Debian's Prometheus, Alertmanager and node_exporter and the GPU collector run for real in the
lab (molecule's default scenario). What the lab cannot reach is covered here: DCGM (NVIDIA's
CUDA repository), Grafana (its own repository), the Slurm exporter (a GitHub release), Ubuntu.

The converged host is built from the fresh plan itself: every file the role uploads recorded
with its content's hash, every package installed, every service running; the role must then
plan no command at all, and each of its checks goes red once on a broken variant.
"""

from __future__ import annotations

import hashlib
import json
from copy import deepcopy
from datetime import datetime
from functools import cache

import pytest

from gpuinfra.knowledge.packages import SIGNING_KEYS
from gpuinfra_roles.monitoring import (
    ALERTMANAGER_STAGE,
    DCGM_PIN_FILE,
    GRAFANA_PIN_FILE,
    PROMETHEUS_STAGE,
    UNIT_STAGE,
    monitoring,
)
from tests.plan.harness import (
    KEYRING_KEYS,
    FakeHost,
    load_facts,
    pinned_keyrings,
    plan_hosts,
    upload_text,
)

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
HEAD, GPU = "head1", "gpu01"
HEAD_DATA = {"ssh_hostname": "10.0.0.1"}
GPU_DATA = {"ssh_hostname": "10.0.0.2", "gpu_model": "H100-PCIE-80GB", "gpu_count": 2,
            "gpu_topology": "bridged-pairs"}
SITE = {"schedulers": ["slurm"]}
EXPORTER = {"version": "1.6.0", "sha256": "ab" * 32}
STAGES = {PROMETHEUS_STAGE: "/etc/prometheus", ALERTMANAGER_STAGE: "/etc/prometheus",
          UNIT_STAGE: "/etc/systemd/system"}
PACKAGES = {
    "prometheus": "2.42.0+ds-5+deb12u1", "prometheus-alertmanager": "0.25.0-1+b4",
    "prometheus-node-exporter": "1.5.0-1+b6", "dbus": "1.14.10-1~deb12u1",
    "python3": "3.11.2-1+b1", "datacenter-gpu-manager-4-core": "1:4.6.0-1",
    "datacenter-gpu-manager-exporter": "4.8.3-1", "grafana": "12.1.1",
}
SERVICES = ("prometheus-node-exporter", "prometheus", "prometheus-alertmanager",
            "gpuinfra-gpu-metrics", "nvidia-dcgm", "nvidia-dcgm-exporter", "grafana-server",
            "prometheus-slurm-exporter")


def fresh(distro: str, gpu: bool = False) -> dict:
    layers = ["base-fresh", distro, "monitoring-fresh"]
    if gpu:
        layers += ["gpu-fresh", f"gpu-{distro}"]
    return load_facts(*layers)


def run(distro: str, facts=None, **data):
    facts = facts or {HEAD: fresh(distro), GPU: fresh(distro, gpu=True)}
    hosts = [FakeHost(HEAD, ("head",), facts[HEAD], HEAD_DATA),
             FakeHost(GPU, ("workers",), facts[GPU], GPU_DATA)]
    return plan_hosts(monitoring, hosts, [HEAD, GPU], {**SITE, **data})


def names(plan) -> list[str]:
    return [op.name for op in plan.ops]


def op(plan, words: str):
    found = [o for o in plan.ops if words in o.name]
    assert len(found) == 1, (words, names(plan))
    return found[0]


def uploaded(plan) -> dict[str, str]:
    """dest -> content of every file the plan uploads."""
    out = {}
    for planned in plan.ops:
        for command in planned.raw:
            src = getattr(command, "src", None)
            if hasattr(src, "getvalue"):
                out[command.dest] = upload_text(src)
    return out


# ----------------------------------------------------------------------------- fresh hosts

@pytest.mark.parametrize("distro", DISTROS)
def test_head_gets_prometheus_alertmanager_grafana_and_nodes_their_exporters(distro):
    result = run(distro, monitoring_slurm_exporter=EXPORTER)
    head, gpu = result.plans[HEAD], result.plans[GPU]
    install = op(head, "Install Prometheus and Alertmanager").commands[-1]
    assert install.endswith("prometheus prometheus-alertmanager")
    assert "promtool check config /etc/prometheus/.gpuinfra-staged/prometheus.yml" in \
        " ".join(op(head, "checked by promtool").commands)
    assert "amtool check-config" in " ".join(op(head, "checked by amtool").commands)
    assert op(head, "Install Grafana").commands[-1].endswith("grafana=12.1.1")
    assert SIGNING_KEYS["grafana"] in op(head, "Grafana's signing key").commands[0]
    assert op(head, "Slurm exporter 1.6.0").commands
    # GPU nodes: the collector and DCGM; no Prometheus, no Grafana.
    assert op(gpu, "Install DCGM and its exporter").commands[-1].endswith(
        "datacenter-gpu-manager-4-core=1:4.6.0-1 datacenter-gpu-manager-exporter=4.8.3-1")
    assert op(gpu, "collector units, checked by systemd-analyze").commands
    assert not [n for n in names(gpu) if "Prometheus" in n or "Grafana" in n]
    assert not [n for n in names(head) if "DCGM" in n or "GPU collector" in n]


@pytest.mark.parametrize("distro", DISTROS)
def test_everything_listens_on_the_cluster_address(distro):
    result = run(distro)
    files = uploaded(result.plans[HEAD]) | uploaded(result.plans[GPU])
    assert 'ARGS="--web.listen-address=10.0.0.1:9090 --storage.tsdb.retention.time=30d"' in \
        files["/etc/default/prometheus"]
    assert "--web.listen-address=10.0.0.2:9100 " in files["/etc/default/prometheus-node-exporter"]
    assert "Environment=GF_SERVER_HTTP_ADDR=10.0.0.1" in \
        files["/etc/systemd/system/grafana-server.service.d/gpuinfra.conf"]
    assert "-a 10.0.0.2:9400" in \
        files["/etc/systemd/system/nvidia-dcgm-exporter.service.d/gpuinfra.conf"]
    config = files[f"{PROMETHEUS_STAGE}/prometheus.yml"]
    assert "10.0.0.2:9400" in config and "rule_files:\n- gpuinfra-rules.yml" in config


def test_every_daemon_waits_for_the_network_at_boot():
    result = run("debian-12", monitoring_slurm_exporter=EXPORTER)
    dropins = {host: {dest.split("/")[4]: text for dest, text in uploaded(plan).items()
                      if dest.endswith("/gpuinfra-boot.conf")}
               for host, plan in result.plans.items()}
    assert sorted(dropins[HEAD]) == [
        "grafana-server.service.d", "prometheus-alertmanager.service.d",
        "prometheus-node-exporter.service.d", "prometheus-slurm-exporter.service.d",
        "prometheus.service.d"]
    assert sorted(dropins[GPU]) == ["nvidia-dcgm-exporter.service.d",
                                    "prometheus-node-exporter.service.d"]
    for text in (*dropins[HEAD].values(), *dropins[GPU].values()):
        assert "After=network-online.target\nWants=network-online.target\n" in text
        assert "Restart=on-failure" in text


def test_dcgm_comes_from_the_distributions_cuda_repository_or_the_mirror():
    listed = uploaded(run("ubuntu-24.04").plans[GPU])["/etc/apt/sources.list.d/gpuinfra-cuda.list"]
    assert "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64" in listed
    mirror = "http://mirror.example.internal/cuda"
    listed = uploaded(run("debian-12", monitoring_dcgm_repo_url=mirror).plans[GPU])[
        "/etc/apt/sources.list.d/gpuinfra-cuda.list"]
    assert mirror in listed
    pins = uploaded(run("debian-12").plans[GPU])[DCGM_PIN_FILE]
    assert "Package: datacenter-gpu-manager-exporter\nPin: version 4.8.3-1" in pins


def test_slurm_exporter_is_fetched_only_with_its_checksum():
    commands = op(run("debian-12", monitoring_slurm_exporter=EXPORTER).plans[HEAD],
                  "Slurm exporter 1.6.0").commands
    fetch = next(c for c in commands if c.startswith("curl"))
    assert ("https://github.com/rivosinc/prometheus-slurm-exporter/releases/download/v1.6.0/"
            "prometheus-slurm-exporter_1.6.0_linux_amd64.tar.gz") in fetch
    check = next(c for c in commands if "sha256sum -c" in c)
    assert "ab" * 32 in check and "exit 1" in check
    assert commands.index(check) < next(i for i, c in enumerate(commands) if "tar -xzf" in c)


def test_off_switches():
    result = run("debian-12", monitoring_enabled=False)
    assert all(not planned.commands for p in result.plans.values() for planned in p.ops)
    lean = run("debian-12", monitoring_dcgm=False, monitoring_grafana=False)
    assert not [n for p in lean.plans.values() for n in names(p)
                if "DCGM" in n or "Grafana" in n or "Slurm exporter" in n]


def test_a_node_without_cluster_address_stops_the_plan():
    hosts = [FakeHost(HEAD, ("head",), fresh("debian-12"), {"ssh_hostname": "head1.example"}),
             FakeHost(GPU, ("workers",), fresh("debian-12", gpu=True), GPU_DATA)]
    with pytest.raises(Exception, match="no cluster-network address for head1"):
        plan_hosts(monitoring, hosts, [HEAD, GPU], SITE)


# ----------------------------------------------------------------------------- converged hosts

def _file(size: int) -> dict:
    return {"mode": 644, "size": size, "user": "root", "group": "root",
            "mtime": datetime(2026, 11, 22, 3, 0)}


def converged_facts(distro: str, **data) -> dict:
    """Each host as the fresh plan leaves it: files with their content, packages, services
    (a fresh copy: tests may break it)."""
    return deepcopy(_converged(distro, json.dumps(data, sort_keys=True)))


@cache
def _converged(distro: str, data_json: str) -> dict:
    data = json.loads(data_json)
    plan = run(distro, **data)
    facts = {HEAD: fresh(distro), GPU: fresh(distro, gpu=True)}
    for name, host_plan in plan.plans.items():
        host = facts[name] = deepcopy(facts[name])
        for key in ("files.File", "files.Sha1File", "files.Sha256File", "files.Directory"):
            host.setdefault(key, {"*": None})
        host.setdefault("deb.DebPackages", {}).update(
            {p: [v] for p, v in PACKAGES.items()})
        held = set(host.get("gpuinfra_deploy.facts.apt.HeldPackages", []))
        host["gpuinfra_deploy.facts.apt.HeldPackages"] = sorted(held | {
            "grafana", "datacenter-gpu-manager-4-core", "datacenter-gpu-manager-exporter"})
        for kind in ("systemd.SystemdStatus", "systemd.SystemdEnabled"):
            states = dict(host.get(kind, {}).get("*", {}))
            states.update({f"{s}.service": True for s in SERVICES})
            states["gpuinfra-gpu-metrics.timer"] = True
            if kind == "systemd.SystemdStatus":  # a oneshot service: inactive between runs
                states["gpuinfra-gpu-metrics.service"] = False
            host[kind] = {"*": states}
        host["files.File"]["path=/var/lib/apt/periodic/update-success-stamp"] = {
            **_file(0), "mtime": datetime(2026, 11, 22, 3, 30)}
        for dest, text in uploaded(host_plan).items():
            stage = dest.rsplit("/", 1)[0]
            live = f"{STAGES[stage]}/{dest.rsplit('/', 1)[1]}" if stage in STAGES else dest
            body = text.encode()
            host["files.File"][f"path={live}"] = _file(len(body))
            host["files.Sha1File"][f"path={live}"] = hashlib.sha1(body).hexdigest()
            host["files.Sha256File"][f"path={live}"] = hashlib.sha256(body).hexdigest()
            folder = live.rsplit("/", 1)[0]
            host["files.Directory"][f"path={folder}"] = {"mode": 755, "user": "root",
                                                          "group": "root"}
        for path in ("/usr/share/keyrings/grafana.gpg",
                     "/usr/share/keyrings/cuda-archive-keyring.gpg",
                     "/usr/local/lib/gpuinfra-slurm-exporter/prometheus-slurm-exporter-1.6.0"):
            host["files.File"][f"path={path}"] = _file(100)
        host[KEYRING_KEYS] = pinned_keyrings({
            "/usr/share/keyrings/grafana.gpg": SIGNING_KEYS["grafana"],
            "/usr/share/keyrings/cuda-archive-keyring.gpg": SIGNING_KEYS["cuda"]})
    return facts


FULL = {"monitoring_slurm_exporter": EXPORTER}


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_hosts_plan_no_command(distro):
    result = run(distro, converged_facts(distro, **FULL), **FULL)
    for name, host_plan in result.plans.items():
        assert [o.name for o in host_plan.changing] == [], name


@pytest.mark.parametrize(("host", "path", "step"), [
    (HEAD, "/etc/prometheus/gpuinfra-rules.yml", "checked by promtool"),
    (HEAD, "/etc/prometheus/alertmanager.yml", "checked by amtool"),
    (HEAD, "/etc/default/prometheus", "Prometheus's arguments"),
    (GPU, "/etc/systemd/system/gpuinfra-gpu-metrics.timer", "checked by systemd-analyze"),
    (GPU, "/usr/local/lib/gpuinfra-gpu-metrics/collect.py", "GPU collector: /usr/local/lib/"
     "gpuinfra-gpu-metrics/collect.py"),
    (HEAD, GRAFANA_PIN_FILE, "Pin Grafana"),
    (HEAD, "/etc/systemd/system/prometheus.service.d/gpuinfra-boot.conf",
     "prometheus.service: boot order"),
])
def test_each_drifted_file_is_put_back_and_its_daemon_told(host, path, step):
    facts = converged_facts("debian-12", **FULL)
    facts[host]["files.Sha1File"][f"path={path}"] = "0" * 40
    facts[host]["files.Sha256File"][f"path={path}"] = "0" * 64
    changed = [o.name for o in run("debian-12", facts, **FULL).plans[host].changing]
    assert any(step in name for name in changed), changed
    follow = {"checked by promtool": "Reload Prometheus", "checked by amtool":
              "Reload Alertmanager", "Prometheus's arguments": "Restart Prometheus",
              "checked by systemd-analyze": "systemd reads the collector's units",
              "GPU collector: ": "Collect GPU metrics now",
              "boot order": "Reload systemd units (boot order drop-ins)"}
    for words, handler in follow.items():
        if words in step:
            assert any(handler in name for name in changed), changed


def test_a_stopped_collector_timer_is_started():
    facts = converged_facts("debian-12")
    status = facts[GPU]["systemd.SystemdStatus"]["*"]
    status["gpuinfra-gpu-metrics.timer"] = False
    changed = [o.name for o in run("debian-12", facts).plans[GPU].changing]
    assert len(changed) == 1 and "Run the GPU collector every minute" in changed[0], changed
