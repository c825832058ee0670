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
from io import BytesIO
from pathlib import Path

import pytest
from pyinfra.api.exceptions import PyinfraError

from gpuinfra.knowledge.packages import SIGNING_KEYS
from gpuinfra.monitoring.alertmanager import ALERTMANAGER_CONFIG
from gpuinfra.monitoring.grafana import (
    GRAFANA_ADMIN_PASSWORD,
    GRAFANA_PROMETHEUS_CA,
    GRAFANA_PROMETHEUS_PASSWORD,
    GRAFANA_SECRETS,
)
from gpuinfra.monitoring.web import (
    EXPORTER_CA_CERT,
    EXPORTER_CA_KEY,
    EXPORTER_DIR,
    EXPORTER_NODES,
    EXPORTER_PASSWORD,
    EXPORTER_PASSWORD_HASH,
    NODE_WEB_DIR,
    WEB_CERT,
    WEB_CONFIG,
    WEB_DIR,
    WEB_KEY,
    WEB_PASSWORD,
    WEB_PASSWORD_HASH,
    node_material_dir,
)
from gpuinfra_roles.monitoring import (
    ALERTMANAGER_STAGE,
    DCGM_PIN_FILE,
    GRAFANA_DB,
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
from gpuinfra.monitoring.jobmap import JOB_MAPPING_DIR  # noqa: E402
from gpuinfra.slurm.conf import JOB_MAPPING_PROGRAMS  # noqa: E402
from gpuinfra_roles.monitoring import (  # noqa: E402
    DCGM_DROPIN,
    GPUJOBS,
    JOB_MAPPING_TMPFILES,
)

ROLE_DIR = Path(__file__).resolve().parents[2] / "roles" / "monitoring"
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
    "openssl": "3.0.20-1~deb12u2", "python3-bcrypt": "3.2.2-1",
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
    """dest -> content of every file the plan uploads (a binary one as upload_text says)."""
    return {dest: upload_text(BytesIO(data)) for dest, data in uploaded_bytes(plan).items()}


def uploaded_bytes(plan) -> dict[str, bytes]:
    """dest -> the bytes of every file the plan uploads (a zip as it is)."""
    out = {}
    for planned in plan.ops:
        for command in planned.raw:
            src = getattr(command, "src", None)
            if hasattr(src, "getvalue"):
                value = src.getvalue()
                out[command.dest] = value if isinstance(value, bytes) else value.encode()
    return out


# ----------------------------------------------------------------------------- fresh hosts

@pytest.mark.parametrize("distro", DISTROS)
def test_head_gets_prometheus_alertmanager_grafana_and_nodes_their_exporters(distro):
    result = run(distro, monitoring_slurm_exporter=EXPORTER)
    head, gpu = result.plans[HEAD], result.plans[GPU]
    install = op(head, "Install Prometheus and Alertmanager").commands[-1]
    assert install.endswith("prometheus prometheus-alertmanager openssl python3-bcrypt")
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
def test_ampere_nodes_also_get_dcgms_proprietary_package_for_the_profiling_metrics(distro):
    """dcgm-exporter README: "for Ampere and earlier generation GPUs, profiling metrics depend
    on the datacenter-gpu-manager-4-proprietary package": an A100 node gets it at DCGM's
    version; the H100 node (Hopper) does not need it."""
    facts = {HEAD: fresh(distro), GPU: fresh(distro, gpu=True)}
    hosts = [FakeHost(HEAD, ("head",), facts[HEAD], HEAD_DATA),
             FakeHost(GPU, ("workers",), facts[GPU],
                      {**GPU_DATA, "gpu_model": "A100-PCIE-80GB", "gpu_topology": "pcie-only"})]
    plan = plan_hosts(monitoring, hosts, [HEAD, GPU], SITE).plans[GPU]
    assert op(plan, "Install DCGM and its exporter").commands[-1].endswith(
        "datacenter-gpu-manager-4-core=1:4.6.0-1 datacenter-gpu-manager-exporter=4.8.3-1 "
        "datacenter-gpu-manager-4-proprietary=1:4.6.0-1")
    hopper = run(distro).plans[GPU]
    assert "proprietary" not in op(hopper, "Install DCGM and its exporter").commands[-1]


@pytest.mark.parametrize("distro", DISTROS)
def test_everything_listens_on_the_cluster_address(distro):
    result = run(distro)
    files = uploaded(result.plans[HEAD]) | uploaded(result.plans[GPU])
    assert ('ARGS="--web.listen-address=10.0.0.1:9090 --storage.tsdb.retention.time=30d '
            '--web.config.file=/etc/prometheus/gpuinfra-web/web.yml"') in \
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


def test_a_node_without_cluster_address_is_refused_at_the_gate():
    hosts = [FakeHost(HEAD, ("head",), fresh("debian-12"), {"ssh_hostname": "head1.example"}),
             FakeHost(GPU, ("workers",), fresh("debian-12", gpu=True), GPU_DATA)]
    with pytest.raises(PyinfraError, match="(?s)no host was touched.*head1.*no cluster-network "
                                           "address"):
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
            states["gpuinfra-slurm-nodes.timer"] = True
            if kind == "systemd.SystemdStatus":  # a oneshot service: inactive between runs
                states["gpuinfra-gpu-metrics.service"] = False
                states["gpuinfra-slurm-nodes.service"] = False
            host[kind] = {"*": states}
        # The collector's (GPU nodes) and the Slurm node states' (the head) group and the
        # textfile directory they may write.
        host["server.Groups"] = [*host["server.Groups"], "gpuinfra-metrics"]
        host["files.Directory"]["path=/var/lib/prometheus/node-exporter"] = {
            **_file(4096), "mode": 775, "group": "gpuinfra-metrics"}
        if name == GPU:  # the GPU job mapping folder (made at boot by tmpfiles.d)
            host["files.Directory"]["path=/run/gpuinfra-gpu-jobs"] = {
                "mode": 755, "user": "root", "group": "root"}
        host["files.File"]["path=/var/lib/apt/periodic/update-success-stamp"] = {
            **_file(0), "mtime": datetime(2026, 11, 22, 3, 30)}
        for dest, body in uploaded_bytes(host_plan).items():
            stage = dest.rsplit("/", 1)[0]
            live = f"{STAGES[stage]}/{dest.rsplit('/', 1)[1]}" if stage in STAGES else dest
            host["files.File"][f"path={live}"] = _file(len(body))
            host["files.Sha1File"][f"path={live}"] = hashlib.sha1(body).hexdigest()
            host["files.Sha256File"][f"path={live}"] = hashlib.sha256(body).hexdigest()
            if live.startswith("/usr/local/sbin/"):  # Slurm's Prolog and Epilog: programs
                host["files.File"][f"path={live}"]["mode"] = 755
            folder = live.rsplit("/", 1)[0]
            host["files.Directory"][f"path={folder}"] = {"mode": 755, "user": "root",
                                                          "group": "root"}
        if name == HEAD:
            _converged_secrets(host)
        for path in ("/usr/share/keyrings/grafana.gpg",
                     "/usr/share/keyrings/cuda-archive-keyring.gpg",
                     "/usr/local/lib/gpuinfra-slurm-exporter/prometheus-slurm-exporter-1.6.0"):
            host["files.File"][f"path={path}"] = _file(100)
        host[KEYRING_KEYS] = pinned_keyrings({
            "/usr/share/keyrings/grafana.gpg": SIGNING_KEYS["grafana"],
            "/usr/share/keyrings/cuda-archive-keyring.gpg": SIGNING_KEYS["cuda"]})
    return facts


def _converged_secrets(host: dict) -> None:
    """The head after a first deploy: its web secrets and Grafana's made (digests only), web.yml
    filled, Grafana's copies equal to their sources, the private files' groups and modes."""
    for path in (WEB_PASSWORD, WEB_PASSWORD_HASH, WEB_KEY, WEB_CERT, GRAFANA_ADMIN_PASSWORD):
        host["files.Sha256File"][f"path={path}"] = hashlib.sha256(path.encode()).hexdigest()
    for src, dest in ((WEB_PASSWORD, GRAFANA_PROMETHEUS_PASSWORD),
                      (WEB_CERT, GRAFANA_PROMETHEUS_CA)):
        host["files.Sha256File"][f"path={dest}"] = host["files.Sha256File"][f"path={src}"]
        host["files.File"][f"path={dest}"] = {**_file(10), "mode": 640, "group": "grafana"}
    for path in (WEB_CONFIG, ALERTMANAGER_CONFIG):
        host["files.File"][f"path={path}"] = {**_file(10), "mode": 640, "group": "prometheus"}
    host["gpuinfra_deploy.ops.made_on_host.FilledDigests"] = {
        "*": {"want": "ab" * 32, "have": "ab" * 32}}
    host["files.Directory"][f"path={WEB_DIR}"] = {"mode": 750, "user": "root",
                                                  "group": "prometheus"}
    host["files.Directory"][f"path={GRAFANA_SECRETS}"] = {"mode": 750, "user": "root",
                                                          "group": "grafana"}
    host["files.File"][f"path={GRAFANA_DB}"] = _file(1 << 20)


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


@pytest.mark.parametrize(("args_file", "config_file", "label"), [
    ("/etc/default/prometheus", "/etc/prometheus/gpuinfra-rules.yml", "Prometheus"),
    ("/etc/default/prometheus-alertmanager", "/etc/prometheus/alertmanager.yml", "Alertmanager"),
])
def test_new_arguments_and_configuration_restart_once_and_never_reload(args_file, config_file,
                                                                        label):
    """A reload (SIGHUP) right after the restart can kill the new process before it handles
    the signal, and systemd takes that death as a clean exit: the daemon stays down
    (gpuinfra_deploy/ops/service.py). Both drifted: one restart, no reload."""
    facts = converged_facts("debian-12", **FULL)
    for path in (args_file, config_file):
        facts[HEAD]["files.Sha1File"][f"path={path}"] = "0" * 40
        facts[HEAD]["files.Sha256File"][f"path={path}"] = "0" * 64
    changed = [o.name for o in run("debian-12", facts, **FULL).plans[HEAD].changing]
    assert any(f"Restart {label} on its new arguments" in n for n in changed), changed
    assert not any(f"Reload {label} on its new configuration" in n for n in changed), changed


# ----------------------------------------------------------------------------- web security

def test_web_secrets_are_made_on_the_head_and_never_leave_it():
    """The password, its hash, the key and the certificate are made by commands on the head
    (umask 077, beside their targets, renamed into place); web.yml is built there from the
    hash and judged by promtool; no upload and no command carries a secret."""
    head = run("debian-12").plans[HEAD]
    password = " ".join(op(head, "web password and its bcrypt hash").commands)
    assert password.startswith("umask 077 && python3 -I -c")
    assert "secrets.token_urlsafe(32)" in password and "bcrypt.gensalt(10)" in password
    assert f"< {WEB_PASSWORD}.gpuinfra-new > {WEB_PASSWORD_HASH}.gpuinfra-new" in password
    assert f"chgrp prometheus {WEB_PASSWORD}.gpuinfra-new" in password
    # A1 (test audit e4dd2f2): the password and its hash are readable by Prometheus's group
    # only, like the key and web.yml
    assert f"chmod 0640 {WEB_PASSWORD}.gpuinfra-new {WEB_PASSWORD_HASH}.gpuinfra-new" in password
    tls = " ".join(op(head, "web TLS key and certificate").commands)
    assert "openssl req -x509 -newkey ec" in tls and "subjectAltName=IP:10.0.0.1" in tls
    assert f"chmod 0640 {WEB_KEY}.gpuinfra-new" in tls
    web = op(head, "web.yml of Prometheus and Alertmanager").commands
    assert any("promtool check web-config /etc/prometheus/.gpuinfra-staged-web/web.yml" in c
               for c in web)
    assert web[-1].endswith(f"chgrp prometheus {WEB_CONFIG}.gpuinfra-new && chmod 0640 "
                            f"{WEB_CONFIG}.gpuinfra-new && mv -f {WEB_CONFIG}.gpuinfra-new "
                            f"{WEB_CONFIG}")
    for command in head.commands:
        assert "/tmp" not in command
    assert not {WEB_PASSWORD, WEB_PASSWORD_HASH, WEB_KEY, WEB_CONFIG} & set(uploaded(head))
    # The secret ops come before the daemons are told to use them.
    order = names(head)
    first_use = min(order.index(n) for n in order if "Prometheus's arguments" in n)
    assert order.index(next(n for n in order if "web.yml of" in n)) < first_use


def test_prometheus_reaches_itself_and_alertmanager_with_the_credentials():
    config = uploaded(run("debian-12").plans[HEAD])[f"{PROMETHEUS_STAGE}/prometheus.yml"]
    assert config.count("scheme: https") == 3  # its own job, Alertmanager's, alerting
    assert config.count(f"password_file: {WEB_PASSWORD}") == 3
    assert config.count(f"ca_file: {WEB_CERT}") == 3
    args = uploaded(run("debian-12").plans[HEAD])["/etc/default/prometheus-alertmanager"]
    assert f"--web.config.file={WEB_CONFIG}" in args


def test_web_security_off_leaves_no_secret_and_plain_http():
    head = run("debian-12", monitoring_web_security=False).plans[HEAD]
    assert not [n for n in names(head) if "web password" in n or "web.yml" in n
                or "Grafana's copy" in n]
    files = uploaded(head)
    assert "--web.config.file" not in files["/etc/default/prometheus"]
    assert "https" not in files[f"{PROMETHEUS_STAGE}/prometheus.yml"]
    datasource = files["/etc/grafana/provisioning/datasources/gpuinfra.yaml"]
    assert "url: http://10.0.0.1:9090" in datasource and "basicAuth" not in datasource


WEB_FOLLOWERS = ["web.yml of Prometheus", f"Grafana's copy of {WEB_PASSWORD}",
                 f"Grafana's copy of {WEB_CERT}", "Restart Grafana"]


@pytest.mark.parametrize(("missing", "expected"), [
    (WEB_PASSWORD, ["web password and its bcrypt hash", *WEB_FOLLOWERS]),
    (WEB_PASSWORD_HASH, ["web password and its bcrypt hash", *WEB_FOLLOWERS]),
    # web.yml names the key and certificate by path, and the daemons read them per request.
    (WEB_KEY, ["web TLS key and certificate", *WEB_FOLLOWERS[1:]]),
    (GRAFANA_ADMIN_PASSWORD, ["Grafana's admin password, made",
                              "existing admin user gets the password"]),
])
def test_a_deleted_secret_is_made_again_with_what_reads_it(missing, expected):
    """Rotation is deleting the files and deploying: the next deploy makes them again, and in
    the same run rebuilds web.yml from the new hash and Grafana's copies (Grafana restarted);
    nothing else changes (the converged secrets are kept on every other run)."""
    facts = converged_facts("debian-12", **FULL)
    facts[HEAD]["files.Sha256File"][f"path={missing}"] = None
    changed = [o.name for o in run("debian-12", facts, **FULL).plans[HEAD].changing]
    assert len(changed) == len(expected), changed
    for words in expected:
        assert any(words in name for name in changed), (words, changed)


def test_grafana_reads_its_admin_password_and_prometheus_credentials_from_the_head():
    head = run("debian-12").plans[HEAD]
    files = uploaded(head)
    dropin = files["/etc/systemd/system/grafana-server.service.d/gpuinfra.conf"]
    assert f"Environment=GF_SECURITY_ADMIN_PASSWORD=$__file{{{GRAFANA_ADMIN_PASSWORD}}}" \
        in dropin
    assert "__FILE" not in dropin  # the Docker image's run.sh only
    datasource = files["/etc/grafana/provisioning/datasources/gpuinfra.yaml"]
    assert "url: https://10.0.0.1:9090" in datasource
    assert f"basicAuthPassword: $__file{{{GRAFANA_PROMETHEUS_PASSWORD}}}" in datasource
    assert f"tlsCACert: $__file{{{GRAFANA_PROMETHEUS_CA}}}" in datasource
    copy = op(head, f"Grafana's copy of {WEB_PASSWORD}").commands
    assert copy == (f"install -m 0640 -o root -g grafana {WEB_PASSWORD} "
                    f"{GRAFANA_PROMETHEUS_PASSWORD}",)
    admin = " ".join(op(head, "Grafana's admin password, made on the head").commands)
    assert "secrets.token_urlsafe(32)" in admin and "chgrp grafana" in admin
    # No Grafana database yet: Grafana creates its admin user with the file's password.
    assert not [n for n in names(head) if "admin user gets" in n]


def test_an_existing_grafana_gets_the_new_admin_password_from_stdin():
    facts = converged_facts("debian-12", **FULL)
    facts[HEAD]["files.Sha256File"][f"path={GRAFANA_ADMIN_PASSWORD}"] = None
    reset = op(run("debian-12", facts, **FULL).plans[HEAD], "admin user gets").commands
    assert reset == ("runuser -u grafana -- grafana-cli admin reset-admin-password "
                     f"--password-from-stdin < {GRAFANA_ADMIN_PASSWORD} >/dev/null",)


@pytest.mark.parametrize(("path", "mode", "group", "step", "follow"), [
    (ALERTMANAGER_CONFIG, 644, "root", f"{ALERTMANAGER_CONFIG}: root:prometheus 0640",
     "Reload Alertmanager"),
    (GRAFANA_PROMETHEUS_PASSWORD, 644, "grafana", f"Grafana's copy of {WEB_PASSWORD}",
     "Restart Grafana"),
    (WEB_CONFIG, 644, "prometheus", "web.yml of Prometheus", None),
])
def test_a_private_file_made_readable_is_made_private_again(path, mode, group, step, follow):
    facts = converged_facts("debian-12", **FULL)
    facts[HEAD]["files.File"][f"path={path}"] = {**_file(10), "mode": mode, "group": group}
    changed = [o.name for o in run("debian-12", facts, **FULL).plans[HEAD].changing]
    assert any(step in name for name in changed), changed
    if follow:
        assert any(follow in name for name in changed), changed


# ----------------------------------------------------------------------------- node_exporter

NODE_WEB = {"monitoring_node_exporter_web_security": True}
NODE_COPY = "node_exporter's key, certificate and web.yml from the head"


def test_node_exporter_web_security_is_off_by_default():
    result = run("debian-12")
    for host_plan in result.plans.values():
        assert not [n for n in names(host_plan) if "exporters'" in n or NODE_COPY in n
                    or "node_exporter's web.yml" in n]
        args = uploaded(host_plan)["/etc/default/prometheus-node-exporter"]
        assert "--web.config.file" not in args
    config = uploaded(result.plans[HEAD])[f"{PROMETHEUS_STAGE}/prometheus.yml"]
    assert EXPORTER_PASSWORD not in config and EXPORTER_CA_CERT not in config


def test_exporter_credentials_are_made_and_judged_on_the_head_before_any_node_copies_them():
    result = run("debian-12", **NODE_WEB)
    head, gpu = result.plans[HEAD], result.plans[GPU]
    password = " ".join(op(head, "exporters' password and its bcrypt hash").commands)
    assert "secrets.token_urlsafe(32)" in password and "bcrypt.gensalt(10)" in password
    assert f"> {EXPORTER_PASSWORD}.gpuinfra-new" in password
    ca = " ".join(op(head, "exporters' CA key and certificate").commands)
    assert ca.startswith("umask 077 && openssl req -x509 -newkey ec")
    assert "basicConstraints=critical,CA:TRUE,pathlen:0" in ca
    for node, address in ((HEAD, "10.0.0.1"), (GPU, "10.0.0.2")):
        folder = node_material_dir(node)
        signed = " ".join(op(head, f"{node}: node_exporter's key and certificate").commands)
        assert f"-CA {EXPORTER_CA_CERT} -CAkey {EXPORTER_CA_KEY}" in signed
        assert f"subjectAltName=IP:{address}" in signed and "CA:FALSE" in signed
        web = op(head, f"{node}: node_exporter's web.yml").commands
        assert any(f"promtool check web-config {folder}/.staged/web.yml" in c for c in web)
        assert any(f"cp {folder}/tls.crt {folder}/tls.key {folder}/.staged/" in c for c in web)
        assert web[-1].endswith(f"chmod 0600 {folder}/web.yml.gpuinfra-new && mv -f "
                                f"{folder}/web.yml.gpuinfra-new {folder}/web.yml")
    # Nothing secret is uploaded or on a command line; nothing goes through /tmp.
    for host_plan in (head, gpu):
        assert not [c for c in host_plan.commands if "/tmp/" in c or c.endswith("/tmp")]
        secret = [dest for dest in uploaded(host_plan)
                  if dest.startswith(EXPORTER_DIR) and not dest.endswith("/address")]
        assert secret == [], secret
    # Each node (the head too) gets its three files from the head, in memory, at execution.
    for node, host_plan in ((HEAD, head), (GPU, gpu)):
        copy = op(host_plan, NODE_COPY)
        assert [type(c).__name__ for c in copy.raw] == ["FunctionCommand"]
        assert [c.dest for c in copy.raw[0].args[1]] == [
            f"{NODE_WEB_DIR}/tls.key", f"{NODE_WEB_DIR}/tls.crt", f"{NODE_WEB_DIR}/web.yml"]
        assert [c.src for c in copy.raw[0].args[1]] == [
            f"{node_material_dir(node)}/{name}" for name in ("tls.key", "tls.crt", "web.yml")]
        args = uploaded(host_plan)["/etc/default/prometheus-node-exporter"]
        assert f"--web.config.file={NODE_WEB_DIR}/web.yml" in args
    # pyinfra runs each operation on every host before the next: the head's last web.yml is
    # judged before the worker's copy runs, and the copy before node_exporter's new arguments.
    assert result.position(HEAD, f"{GPU}: node_exporter's web.yml") < \
        result.position(GPU, NODE_COPY) < result.position(GPU, "node_exporter's arguments")
    config = uploaded(head)[f"{PROMETHEUS_STAGE}/prometheus.yml"]
    node_job = config[config.index("job_name: node"):]
    assert f"password_file: {EXPORTER_PASSWORD}" in node_job
    assert f"ca_file: {EXPORTER_CA_CERT}" in node_job and "insecure_skip_verify" not in config


def _converged_exporters(facts: dict) -> dict:
    """Both hosts after a first deploy with the knob on: the head's exporter secrets and each
    node's files made (digests only), each node's copies equal to the head's."""
    head = facts[HEAD]
    for path in (EXPORTER_PASSWORD, EXPORTER_PASSWORD_HASH, EXPORTER_CA_KEY, EXPORTER_CA_CERT):
        head["files.Sha256File"][f"path={path}"] = hashlib.sha256(path.encode()).hexdigest()
    head["files.Directory"][f"path={EXPORTER_DIR}"] = {"mode": 750, "user": "root",
                                                       "group": "prometheus"}
    head["files.Directory"][f"path={EXPORTER_NODES}"] = {"mode": 700, "user": "root",
                                                         "group": "root"}
    for node in (HEAD, GPU):
        folder = node_material_dir(node)
        head["files.Directory"][f"path={folder}"] = {"mode": 700, "user": "root",
                                                     "group": "root"}
        head["files.File"][f"path={folder}/web.yml"] = {**_file(10), "mode": 600}
        head["files.File"][f"path={folder}/address"] = {
            **head["files.File"][f"path={folder}/address"], "mode": 600}
        host = facts[node]
        host["files.Directory"][f"path={NODE_WEB_DIR}"] = {"mode": 750, "user": "root",
                                                           "group": "prometheus"}
        for name in ("tls.key", "tls.crt", "web.yml"):
            digest = hashlib.sha256(f"{folder}/{name}".encode()).hexdigest()
            head["files.Sha256File"][f"path={folder}/{name}"] = digest
            host["files.Sha256File"][f"path={NODE_WEB_DIR}/{name}"] = digest
            host["files.File"][f"path={NODE_WEB_DIR}/{name}"] = {
                **_file(10), "mode": 644 if name == "tls.crt" else 640, "group": "prometheus"}
    return facts


def converged_with_exporters() -> dict:
    return _converged_exporters(converged_facts("debian-12", **FULL, **NODE_WEB))


def test_converged_exporter_credentials_plan_no_command():
    result = run("debian-12", converged_with_exporters(), **FULL, **NODE_WEB)
    for name, host_plan in result.plans.items():
        assert [o.name for o in host_plan.changing] == [], name


@pytest.mark.parametrize(("name", "mode", "group"), [
    ("web.yml", 640, "prometheus"),  # content drifted (digest below)
    ("tls.key", 644, "prometheus"),  # made readable by everyone
    ("tls.crt", 644, "root"),  # the daemon's group lost
])
def test_a_drifted_node_file_is_copied_again_from_the_head(name, mode, group):
    facts = converged_with_exporters()
    path = f"{NODE_WEB_DIR}/{name}"
    facts[GPU]["files.File"][f"path={path}"] = {**_file(10), "mode": mode, "group": group}
    if name == "web.yml":
        facts[GPU]["files.Sha256File"][f"path={path}"] = "0" * 64
    result = run("debian-12", facts, **FULL, **NODE_WEB)
    assert [o.name for o in result.plans[GPU].changing] == [f"monitoring | {NODE_COPY}"]
    assert [o.name for o in result.plans[HEAD].changing] == []


def test_a_new_ca_signs_every_node_again_and_a_new_address_its_node():
    facts = converged_with_exporters()
    facts[HEAD]["files.Sha256File"][f"path={EXPORTER_CA_KEY}"] = None
    changed = [o.name for o in run("debian-12", facts, **FULL, **NODE_WEB).plans[HEAD].changing]
    assert len(changed) == 5, changed  # the CA, then each node's pair and its web.yml judged
    for node in (HEAD, GPU):
        assert any(f"{node}: node_exporter's key and certificate" in n for n in changed)
        assert any(f"{node}: node_exporter's web.yml" in n for n in changed)
    facts = converged_with_exporters()
    moved = {"ssh_hostname": "10.0.0.2", "node_address": "10.0.0.9"}
    hosts = [FakeHost(HEAD, ("head",), facts[HEAD], HEAD_DATA),
             FakeHost(GPU, ("workers",), facts[GPU], {**GPU_DATA, **moved})]
    plan = plan_hosts(monitoring, hosts, [HEAD, GPU], {**SITE, **FULL, **NODE_WEB})
    changed = [o.name for o in plan.plans[HEAD].changing]
    assert any(f"{GPU}: the address of its certificate" in n for n in changed), changed
    assert any(f"{GPU}: node_exporter's key and certificate" in n for n in changed), changed
    assert not any(f"{HEAD}: node_exporter's key" in n for n in changed), changed


@pytest.mark.parametrize(("distro", "flag"), [
    ("debian-12", "--web.config.file"), ("ubuntu-24.04", "--web.config.file"),
    # node_exporter 1.3.1 knows only --web.config (1.5.0 renamed it): an unknown flag would stop
    # it from starting.
    ("ubuntu-22.04", "--web.config")])
def test_node_exporter_gets_the_web_config_flag_its_version_knows(distro, flag):
    args = uploaded(run(distro, **NODE_WEB).plans[GPU])["/etc/default/prometheus-node-exporter"]
    assert f" {flag}={NODE_WEB_DIR}/web.yml" in args


# -------------------------------------------------------------------- job-aware GPU metrics

@pytest.mark.parametrize("distro", DISTROS)
def test_slurm_gpu_nodes_keep_which_job_holds_each_gpu(distro):
    """A Slurm GPU worker: the Prolog and Epilog programs slurm.conf names
    (gpuinfra.slurm.conf.JOB_MAPPING_PROGRAMS), the folder made at boot, the collector and
    dcgm-exporter reading it; the head asks Slurm for its node states every minute."""
    result = run(distro)
    gpu, head = result.plans[GPU], result.plans[HEAD]
    files = uploaded(gpu)
    for mode, path in JOB_MAPPING_PROGRAMS.items():
        assert files[path].startswith("#!/bin/sh\n")
        assert files[path].endswith(f"exec /usr/bin/python3 -I {GPUJOBS} {mode}\n")
        assert op(gpu, path).commands[-1] == f"chmod 755 {path}"
    assert files[GPUJOBS] == (ROLE_DIR / "gpujobs.py").read_text()
    assert f"d {JOB_MAPPING_DIR} 0755 root root -" in files[JOB_MAPPING_TMPFILES]
    assert f"--jobs {JOB_MAPPING_DIR}" in files[
        f"{UNIT_STAGE}/gpuinfra-gpu-metrics.service"]
    assert f"--hpc-job-mapping-dir {JOB_MAPPING_DIR}" in files[DCGM_DROPIN]
    head_files = uploaded(head)
    assert "slurm_nodes.py --out /var/lib/prometheus/node-exporter/gpuinfra-slurm-nodes.prom" \
        in head_files[f"{UNIT_STAGE}/gpuinfra-slurm-nodes.service"]
    assert not [p for p in head_files if "gpujobs" in p]


def test_job_mapping_off_and_sites_without_slurm_write_none_of_it():
    off = run("debian-12", monitoring_job_mapping=False)
    files = uploaded(off.plans[GPU])
    assert not [p for p in files if "gpujobs" in p or "gpu-jobs" in p]
    assert "--jobs" not in files[f"{UNIT_STAGE}/gpuinfra-gpu-metrics.service"]
    assert "hpc-job-mapping" not in files[DCGM_DROPIN]
    k8s = run("debian-12", schedulers=["kubernetes"])
    for plan in k8s.plans.values():
        assert not [p for p in uploaded(plan) if "gpujobs" in p or "slurm-nodes" in p]


@pytest.mark.parametrize("distro", DISTROS)
def test_kubernetes_gpu_workers_label_dcgm_metrics_with_the_pod(distro):
    """A Kubernetes GPU worker: dcgm-exporter asks the kubelet's pod-resources API which pod
    holds each GPU (--kubernetes, its default socket /var/lib/kubelet/pod-resources/
    kubelet.sock); a Slurm worker does not, nor any worker with monitoring_job_mapping off."""
    k8s = uploaded(run(distro, schedulers=["kubernetes"]).plans[GPU])[DCGM_DROPIN]
    assert "ExecStart=/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv " \
           "-a 10.0.0.2:9400 --kubernetes\n" in k8s
    assert "hpc-job-mapping" not in k8s
    both = uploaded(run(distro, schedulers=["slurm", "kubernetes"],
                        scheduler_sharing="drain").plans[GPU])[DCGM_DROPIN]
    assert f"--hpc-job-mapping-dir {JOB_MAPPING_DIR} --kubernetes\n" in both
    assert "--kubernetes" not in uploaded(run(distro).plans[GPU])[DCGM_DROPIN]
    off = run(distro, schedulers=["kubernetes"], monitoring_job_mapping=False)
    assert "--kubernetes" not in uploaded(off.plans[GPU])[DCGM_DROPIN]


@pytest.mark.parametrize("distro", DISTROS)
def test_a_kubernetes_head_compares_the_gpus_kubernetes_offers_with_the_spec(distro):
    """Issue 48 (KubernetesGpusMissing): the head of a Kubernetes site installs the program,
    the GPUs each worker must offer (rendered from the spec, judged by the program before they
    go live) and a timer whose unit reads the admin kubeconfig as root without capabilities; a
    Slurm site's head installs none of it."""
    from gpuinfra_roles.monitoring.kubernetes_metrics import EXPECTED_STAGE, LIB

    result = run(distro, schedulers=["kubernetes"])
    head = uploaded(result.plans[HEAD])
    assert head[f"{LIB}/kubernetes_nodes.py"] == (ROLE_DIR / "kubernetes_nodes.py").read_text()
    assert json.loads(head[f"{EXPECTED_STAGE}/kubernetes-gpus.json"]) == {
        GPU: {"nvidia.com/gpu": 2}}
    unit = head[f"{UNIT_STAGE}/gpuinfra-kubernetes-nodes.service"]
    assert "CapabilityBoundingSet=\n" in unit and "ProtectSystem=strict\n" in unit
    assert ("kubernetes_nodes.py --out /var/lib/prometheus/node-exporter/"
            "gpuinfra-kubernetes-nodes.prom --expected /etc/gpuinfra/kubernetes-gpus.json "
            "--kubeconfig /etc/kubernetes/admin.conf\n") in unit
    checks = " ".join(str(c) for planned in result.plans[HEAD].ops for c in planned.raw)
    assert (f"/usr/bin/python3 -I {LIB}/kubernetes_nodes.py --check --expected "
            f"{EXPECTED_STAGE}/kubernetes-gpus.json") in checks
    assert not [p for p in uploaded(result.plans[GPU]) if "kubernetes-nodes" in p]
    assert not [p for p in uploaded(run(distro).plans[HEAD]) if "kubernetes" in p]
