"""The monitoring files built from a spec, judged by their consumers: promtool (config, rules and
the rules' unit tests, each alert firing and not firing), amtool (Alertmanager's routes), and
the spec gate for the role's knobs.

promtool and amtool come from Debian's packages (`python -m gpuinfra_lab.tools`, run by `make test`,
which also sets GPUINFRA_REQUIRE_TOOLS=1 so that a missing tool fails instead of skipping).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuinfra.monitoring.alertmanager import NO_RECEIVER, alertmanager_config
from gpuinfra.monitoring.alerts import ALERT_NAMES, alerts, rules
from gpuinfra.monitoring.alerts_tests import rule_tests
from gpuinfra.monitoring.gpumetrics import Output, metrics_text, parse_xids
from gpuinfra.monitoring.grafana import grafana_dashboard, grafana_datasource
from gpuinfra.monitoring.scrape import (
    RULES_PATH,
    alertmanager_args,
    node_exporter_args,
    prometheus_args,
    prometheus_config,
)
from gpuinfra.monitoring.settings import Monitoring
from gpuinfra.spec import ClusterSpec, HostInput, SpecInvalid
from gpuinfra_deploy.run.inventory import load_hosts
from gpuinfra_deploy.run.knobs import build_spec
from gpuinfra_lab.tools import tool_path
from gpuinfra_roles.monitoring import alertmanager_check, prometheus_check, prometheus_files
from gpuinfra_roles.monitoring.defaults import DEFAULTS

REPO = Path(__file__).resolve().parents[2]
KERNEL_LOG = REPO / "tests" / "fixtures" / "kernel-log"


def _tool(name: str) -> str:
    path = tool_path(name)
    if path is None:
        message = f"{name} not found: run `.venv/bin/python -m gpuinfra_lab.tools` (make test does)"
        if os.environ.get("GPUINFRA_REQUIRE_TOOLS"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def promtool_path() -> str:
    return _tool("promtool")


def site(name: str) -> ClusterSpec:
    hosts, duplicates = load_hosts(str(REPO / "inventory" / f"{name}.py"))
    return build_spec(hosts, duplicates)


SITES = ("lab", "example", "k8s")
EXPORTER = {"version": "1.6.0", "sha256": "0" * 64}


def monitoring_of(spec: ClusterSpec) -> Monitoring:
    return Monitoring.from_settings(spec.head[0].settings)


def monitoring_with(**knobs) -> Monitoring:
    """The settings of the role's knob defaults, with ``knobs`` (``monitoring_*``) over them."""
    return Monitoring.from_settings({**DEFAULTS, **knobs})


def write(folder: Path, name: str, data) -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, cwd=cwd)


# ---------------------------------------------------------------------------- the rules

@pytest.mark.parametrize("name", SITES)
def test_rules_load_and_each_alert_fires_and_stays_quiet(name, tmp_path):
    """`promtool test rules`: on the healthy site no alert fires (each value just on the safe
    side of its threshold); in each alert's own cases exactly that alert fires."""
    spec = site(name)
    mon = monitoring_of(spec)
    write(tmp_path, "rules.yml", rules(spec, mon))
    check = run(promtool_path(), "check", "rules", "rules.yml", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    write(tmp_path, "tests.yml", rule_tests(spec, mon, "rules.yml"))
    tested = run(promtool_path(), "test", "rules", "tests.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


@pytest.mark.parametrize("name", SITES)
def test_every_alert_has_a_quiet_case_and_a_firing_case(name):
    spec = site(name)
    mon = monitoring_of(spec)
    tests = rule_tests(spec, mon, "rules.yml")["tests"]
    alerts = {rule["alert"] for group in rules(spec, mon)["groups"]
              for rule in group["rules"]}
    quiet = {t["alertname"] for t in tests[0]["alert_rule_test"] if t["exp_alerts"] == []}
    firing = {t["alertname"] for test in tests[1:] for t in test["alert_rule_test"]
              if t["exp_alerts"]}
    assert quiet == firing == alerts
    assert alerts <= set(ALERT_NAMES)
    # Every alert of the project is on some site here: the lab and the example have Slurm
    # and GPUs (the backup controller's: the example, a lab up with --backup), the k8s site
    # the taint's.
    assert alerts == set(ALERT_NAMES) - _no_backup(spec)


def test_the_rule_tests_go_red_when_a_rule_is_wrong(tmp_path):
    """Rules built with a higher temperature limit than their tests expect, and a NodeDown
    that never fires: promtool names both failures."""
    spec = site("lab")
    mon = monitoring_of(spec)
    wrong = rules(spec, monitoring_with(
        monitoring_gpu_temperature_max=mon.gpu_temperature_max + 10))
    for group in wrong["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == "NodeDown":
                rule["expr"] = 'up{job="node"} == 2'
    write(tmp_path, "rules.yml", wrong)
    write(tmp_path, "tests.yml", rule_tests(spec, mon, "rules.yml"))
    tested = run(promtool_path(), "test", "rules", "tests.yml", cwd=tmp_path)
    assert tested.returncode != 0
    assert "GpuTemperatureHigh fires" in tested.stdout + tested.stderr
    assert "NodeDown fires" in tested.stdout + tested.stderr


@pytest.mark.parametrize("log, fires", [
    # Xid 62, Xid 154 (GPU Reset Required), then Xid 45: the last XID is 45.
    ("nvidia-forum-364958-xid62-then-154.txt", [{"xid": "154"}]),
    # Xid 120 (GSP error), then Xid 154: the last XID is 154.
    ("nvidia-forum-364958-xid120-then-154.txt", [{"xid": "120"}, {"xid": "154"}]),
    # Xid 79 alone (a driver without Xid 154).
    ("nvsentinel-155-xid79-line.txt", [{"xid": "79"}]),
])
def test_fatal_xid_fires_on_what_the_collector_makes_of_a_real_log(log, fires, tmp_path):
    """The collector's metric text of a real kernel log, served as a node would, against the
    site's rules: GpuFatalXid fires whatever XID came last (it judged only the last one
    before, and stayed silent on R565+ drivers, which log Xid 154 after the fatal one)."""
    spec = site("lab")
    text = metrics_text({}, None, Output(True, text=(KERNEL_LOG / log).read_text()), 0)
    series = []
    for line in text.splitlines():
        if line.startswith(("gpuinfra_gpu_xid", "gpuinfra_gpu_last_xid",
                            "gpuinfra_gpu_recovery_action")):
            name, value = line.rsplit(" ", 1)
            series.append({"series": name.replace("{", '{job="node",instance="lab-worker1",', 1),
                           "values": f"{value}x15"})
    mon = monitoring_of(spec)
    write(tmp_path, "rules.yml", rules(spec, mon))
    # An address nvidia-smi does not list: Prometheus drops the empty gpu and uuid labels.
    labels = {"job": "node", "instance": "lab-worker1", "pci_bus_id": parse_xids_address(log)}
    alert = next(a for a in alerts(spec, mon) if a.name == "GpuFatalXid")
    expected = [{"exp_labels": {**labels, **f, "severity": "critical"},
                 "exp_annotations": {
                     "summary": re.sub(r"\{\{ \$labels\.(\w+) \}\}",
                                       lambda m, f=f: {**labels, **f}.get(m[1], ""),
                                       alert.summary),
                     "description": alert.description}} for f in fires]
    write(tmp_path, "tests.yml", {"rule_files": ["rules.yml"], "evaluation_interval": "1m",
                                  "tests": [{"interval": "1m", "input_series": series,
                                             "alert_rule_test": [{
                                                 "eval_time": "14m", "alertname": "GpuFatalXid",
                                                 "exp_alerts": expected}]}]})
    tested = run(promtool_path(), "test", "rules", "tests.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def parse_xids_address(log: str) -> str:
    """The PCI address (``0000:01:00``) the XIDs of fixture ``log`` name."""
    event = parse_xids((KERNEL_LOG / log).read_text())[0]
    return "{:04x}:{:02x}:{:02x}".format(*event.address)


def test_gpu_alerts_follow_the_spec():
    spec = site("lab")
    by_name = {r["alert"]: r for g in rules(spec, monitoring_of(spec))["groups"]
               for r in g["rules"]}
    # lab-worker1: 8x H100 SXM (18 links each); lab-worker2: a bridged H100 PCIe pair (12).
    assert "count by (instance) (gpuinfra_gpu_info{instance=\"lab-worker1\"}) < 8" in \
        by_name["GpuMissing"]["expr"]
    assert "(gpuinfra_gpu_info{instance=\"lab-worker2\"}) < 2" in by_name["GpuMissing"]["expr"]
    assert 'instance="lab-worker1",gpu=~"0|1|2|3|4|5|6|7"} < 18' in by_name["NvlinkDown"]["expr"]
    assert 'instance="lab-worker2",gpu=~"0|1"} < 12' in by_name["NvlinkDown"]["expr"]
    assert "< 26.552" in by_name["NvlinkDegraded"]["expr"]
    # A1b (test audit e4dd2f2), without promtool: one node's links down fires alone. PromQL's
    # `and` matches on labels, so the per-node terms are joined with `or`, never `and`.
    for name in ("NvlinkDown", "NvlinkDegraded"):
        terms = by_name[name]["expr"].split(" or ")
        assert len(terms) == 2 and all(" and " not in t for t in terms), by_name[name]["expr"]


# ---------------------------------------------------------------------------- prometheus.yml

@pytest.mark.parametrize("name", SITES)
def test_prometheus_config_and_its_rules_pass_promtool_as_the_role_stages_them(name, tmp_path):
    """The role's own check (roles/monitoring: prometheus_check) on the files it would
    stage:
    the rule file is named relative to the config, so promtool reads the staged rules."""
    spec = site(name)
    for path, text in prometheus_files(spec, monitoring_of(spec)).items():
        (tmp_path / Path(path).name).write_text(text)
    check = subprocess.run(["sh", "-c", prometheus_check(str(tmp_path))], capture_output=True,
                           text=True, check=False,
                           env={**os.environ, "PATH": f"{Path(promtool_path()).parent}:"
                                f"{os.environ['PATH']}"})
    assert check.returncode == 0, check.stderr
    # A broken rule under a valid config: the same check refuses it (promtool check config
    # checks each rule file the config names, as `promtool check rules` does).
    rules_file = tmp_path / Path(RULES_PATH).name
    rules_file.write_text(rules_file.read_text().replace("expr: ", "expr: sum by (", 1))
    refused = subprocess.run(["sh", "-c", prometheus_check(str(tmp_path))],
                             capture_output=True, text=True, check=False,
                             env={**os.environ, "PATH": f"{Path(promtool_path()).parent}:"
                                  f"{os.environ['PATH']}"})
    assert refused.returncode == 1
    assert "gpuinfra-rules.yml" in refused.stderr and "parse error" in refused.stderr
    assert "gpuinfra: promtool refused the new configuration" in refused.stderr
    (tmp_path / "prometheus.yml").write_text("global:\n  scrape_interval: 30 seconds\n")
    refused = subprocess.run(["sh", "-c", prometheus_check(str(tmp_path))],
                             capture_output=True, text=True, check=False,
                             env={**os.environ, "PATH": f"{Path(promtool_path()).parent}:"
                                  f"{os.environ['PATH']}"})
    assert refused.returncode == 1
    assert "gpuinfra: promtool refused the new configuration" in refused.stderr


def test_every_node_scraped_by_name_on_its_cluster_address():
    spec = build_spec(_hosts())
    mon = monitoring_of(spec)
    config = prometheus_config(spec, mon)
    node_job = next(j for j in config["scrape_configs"] if j["job_name"] == "node")
    seen = {c["labels"]["instance"]: c["targets"][0] for c in node_job["static_configs"]}
    assert set(seen) == {n.short_name for n in spec.nodes}
    for node in spec.nodes:
        assert seen[node.short_name] == f"{node.address}:9100"
    assert seen == {"head1": "10.0.0.1:9100", "gpu01": "10.0.0.2:9100"}
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == [
        f"{spec.head[0].address}:9093"]
    assert config["rule_files"] == [RULES_PATH]
    # DCGM on by default (GPU nodes only); no Slurm exporter unless the site names one.
    assert [j["job_name"] for j in config["scrape_configs"]] == ["prometheus", "alertmanager",
                                                                  "node", "dcgm"]


def test_daemons_listen_on_the_cluster_address_only():
    spec = build_spec(_hosts())
    mon = monitoring_with(monitoring_retention="90d")
    head = spec.head[0]
    assert prometheus_args(spec, mon) == (
        f"--web.listen-address={head.address}:9090 --storage.tsdb.retention.time=90d "
        "--web.config.file=/etc/prometheus/gpuinfra-web/web.yml")
    plain = monitoring_with(monitoring_web_security=False)
    assert "--web.config.file" not in prometheus_args(spec, plain) + alertmanager_args(spec, plain)
    assert alertmanager_args(spec, mon).endswith(
        "--cluster.listen-address= --web.config.file=/etc/prometheus/gpuinfra-web/web.yml")
    worker = spec.workers[0]
    args = node_exporter_args(worker, mon, "/var/lib/prometheus/node-exporter")
    assert args.startswith(f"--web.listen-address={worker.address}:9100 ")
    assert "\\" not in args and '"' not in args
    assert "0.0.0.0" not in alertmanager_args(spec, mon)


def test_dcgm_and_slurm_exporter_jobs_where_enabled():
    spec = site("example")
    mon = monitoring_with(monitoring_dcgm=True, monitoring_slurm_exporter=EXPORTER)
    jobs = {j["job_name"]: j for j in prometheus_config(spec, mon)["scrape_configs"]}
    assert {c["labels"]["instance"] for c in jobs["dcgm"]["static_configs"]} == {
        n.short_name for n in spec.gpu_nodes}
    assert jobs["slurm"]["static_configs"][0]["targets"][0].endswith(":9092")


# ---------------------------------------------------------------------------- alertmanager

def test_alertmanager_routes_from_data_pass_amtool(tmp_path):
    spec = site("lab")
    receivers = (
        {"name": "ops", "webhook_url": "http://hooks.example.internal:5001/x",
         "severities": ["critical"]},
        {"name": "mail", "email_to": "ops@example.org", "email_from": "am@example.org",
         "smarthost": "mail.example.org:25", "alerts": ["GpuMissing", "NodeDown"]},
    )
    config = alertmanager_config(spec, monitoring_with(monitoring_alert_receivers=receivers))
    routes = config["route"]["routes"]
    assert routes[0] == {"receiver": "ops", "matchers": ['severity=~"critical"'],
                         "continue": True}
    assert routes[1]["matchers"][1] == 'alertname=~"GpuMissing|NodeDown"'
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "PATH": f"{Path(_tool('amtool')).parent}:{os.environ['PATH']}"}
    check = subprocess.run(["sh", "-c", alertmanager_check(str(tmp_path))],
                           capture_output=True, text=True, check=False, env=env)
    assert check.returncode == 0, check.stderr
    broken = {**config, "route": {**config["route"], "receiver": "nobody"}}
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(broken))
    refused = subprocess.run(["sh", "-c", alertmanager_check(str(tmp_path))],
                             capture_output=True, text=True, check=False, env=env)
    assert refused.returncode == 1
    assert "gpuinfra: amtool refused the new configuration" in refused.stderr


def test_no_receiver_keeps_every_alert_unsent():
    config = alertmanager_config(site("example"), monitoring_with())
    assert config["route"]["receiver"] == NO_RECEIVER
    assert "routes" not in config["route"]
    assert config["receivers"] == [{"name": NO_RECEIVER}]


# ---------------------------------------------------------------------------- grafana

def test_dashboard_reads_the_provisioned_datasource_and_the_spec():
    spec = site("example")
    mon = monitoring_with(monitoring_dcgm=True)
    board = grafana_dashboard(spec, mon)
    json.dumps(board)
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    uid = grafana_datasource(spec, mon)["datasources"][0]["uid"]
    assert {p["datasource"]["uid"] for p in board["panels"]} == {uid}
    seen_vs_spec = board["panels"][0]["targets"][1]["expr"]
    for node in spec.gpu_nodes:
        assert f'vector({node.gpus.count}), "instance", "{node.short_name}"' in seen_vs_spec
    assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" in json.dumps(board)
    assert grafana_datasource(spec, mon)["datasources"][0]["url"] == (
        f"https://{spec.head[0].address}:9090")


# ---------------------------------------------------------------------------- the gate

def _hosts(**data) -> list[HostInput]:
    base = {"ssh_hostname": "10.0.0.1"}
    return [HostInput("head1", ("head",), {**base, **data}),
            HostInput("gpu01", ("workers",), {"ssh_hostname": "10.0.0.2",
                                               "gpu_model": "H100-SXM5-80GB", "gpu_count": 8,
                                               "gpu_topology": "nvswitch-all-to-all",
                                               **data})]


@pytest.mark.parametrize(("key", "value", "words"), [
    ("monitoring_retention", "30 days", "not a Prometheus duration"),
    ("monitoring_scrape_interval", "0s", "not a Prometheus duration"),
    ("monitoring_prometheus_port", 80, "out of range"),
    ("monitoring_alert_receivers", [{"name": "ops"}], "exactly one of 'webhook_url'"),
    ("monitoring_alert_receivers", [{"name": "ops", "webhook_url": "http://x/'; rm"}],
     "webhook_url"),
    ("monitoring_alert_receivers", [{"name": "m", "email_to": "a@b.org"}],
     "needs 'email_from' and 'smarthost'"),
    ("monitoring_alert_receivers", [{"name": "ops", "webhook_url": "http://x/",
                                     "alerts": ["GpuMisisng"]}], "not one of the site's alerts"),
    ("monitoring_slurm_exporter", {"version": "1.6.0", "sha256": "abc"}, "needs 'sha256'"),
    ("monitoring_slurm_exporter", {"version": "latest", "sha256": "a" * 64}, "needs 'version'"),
    ("monitoring_dcgm", "yes", "True or False"),
    ("monitoring_web_security", "off", "True or False"),
])
def test_gate_refuses_bad_monitoring_values(key, value, words):
    with pytest.raises(SpecInvalid) as caught:
        build_spec(_hosts(**{key: value}))
    found = [e for e in caught.value.errors if e.field == key]
    assert found and words in found[0].problem, caught.value.errors


def test_gate_accepts_good_monitoring_values():
    spec = build_spec(_hosts(
        monitoring_retention="1y", monitoring_alert_receivers=[
            {"name": "ops", "webhook_url": "http://hooks:5001/", "severities": ["critical"]}],
        monitoring_slurm_exporter=EXPORTER))
    assert spec.head[0].settings["monitoring_retention"] == "1y"


# ---------------------------------------------------------------------------- web.yml

# A bcrypt hash in the form python3-bcrypt writes ($2b$, cost 10); its password is irrelevant
# here: promtool parses the hash, it does not log in.
HASH = "$2b$10$8E4pYQ1b6D0bEw7jKxq4fO1sO3m0kXq2m0b2Jd2Yw0n8z7w2Qe0nW"


def _web_on_disk(tmp_path: Path, hash_text: str) -> tuple[Path, str]:
    """web.yml as the head builds it, in ``tmp_path``: the role's own certificate command
    (group: this user's), the role's template filled by the role's own filler, staged."""
    import grp

    from gpuinfra.monitoring import web
    from gpuinfra_deploy.ops.made_on_host import filler
    from gpuinfra_roles.monitoring import tls_command, web_check, yaml_with_header

    key, cert = tmp_path / "tls.key", tmp_path / "tls.crt"
    group = grp.getgrgid(os.getgid()).gr_name
    node = build_spec(_hosts()).head[0]
    made = run("sh", "-c", tls_command(node, str(key), str(cert), group), cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    assert oct(key.stat().st_mode & 0o777) == "0o640"
    (tmp_path / "hash").write_text(hash_text)
    template = yaml_with_header(web.web_config()).replace(web.WEB_KEY, str(key)).replace(
        web.WEB_CERT, str(cert))
    stage = tmp_path / "stage"
    stage.mkdir()
    fill = filler("write", str(tmp_path / "web.yml"), template,
                  {web.HASH_TOKEN: str(tmp_path / "hash")})
    filled = run("sh", "-c", f"{fill} > {stage}/web.yml", cwd=tmp_path)
    assert filled.returncode == 0, filled.stderr
    return stage, web_check(str(stage))


def test_web_config_filled_on_the_head_passes_promtool(tmp_path):
    stage, check = _web_on_disk(tmp_path, HASH + "\n")
    text = (stage / "web.yml").read_text()
    assert f'gpuinfra: "{HASH}"' in text and "GPUINFRA_BCRYPT" not in text
    env = {**os.environ, "PATH": f"{Path(promtool_path()).parent}:{os.environ['PATH']}"}
    judged = subprocess.run(["sh", "-c", check], capture_output=True, text=True, check=False,
                            env=env)
    assert judged.returncode == 0, judged.stderr


def test_web_config_with_a_broken_hash_is_refused_by_promtool(tmp_path):
    stage, check = _web_on_disk(tmp_path, "not-a-bcrypt-hash")
    env = {**os.environ, "PATH": f"{Path(promtool_path()).parent}:{os.environ['PATH']}"}
    judged = subprocess.run(["sh", "-c", check], capture_output=True, text=True, check=False,
                            env=env)
    assert judged.returncode == 1
    assert "bcrypt" in judged.stderr
    assert "gpuinfra: promtool refused the new configuration" in judged.stderr


def test_the_filler_digest_is_the_written_files_and_says_when_a_secret_is_missing(tmp_path):
    import hashlib

    from gpuinfra_deploy.ops.made_on_host import filler

    (tmp_path / "secret").write_text("s3cret\n")
    dest = tmp_path / "out.yml"
    template = "user: TOKEN\n"
    fills = {"TOKEN": str(tmp_path / "secret")}
    written = run("sh", "-c", filler("write", str(dest), template, fills), cwd=tmp_path)
    assert written.stdout == 'user: "s3cret"\n'
    digest = run("sh", "-c", filler("digest", str(dest), template, fills), cwd=tmp_path)
    want = hashlib.sha256(written.stdout.encode()).hexdigest()
    assert digest.stdout.split() == [want, "-"]
    dest.write_text(written.stdout)
    assert run("sh", "-c", filler("digest", str(dest), template, fills),
               cwd=tmp_path).stdout.split() == [want, want]
    gone = {"TOKEN": str(tmp_path / "missing")}
    assert run("sh", "-c", filler("digest", str(dest), template, gone),
               cwd=tmp_path).stdout.split() == ["-", want]
    refused = run("sh", "-c", filler("write", str(dest), template, gone), cwd=tmp_path)
    assert refused.returncode != 0 and "is missing" in refused.stderr
    # The secret is never among the command's words.
    assert "s3cret" not in filler("write", str(dest), template, fills)


# ---------------------------------------------------------------------------- thresholds
# The promtool cases above are built from the same values as the rules, so they cannot see a
# threshold or default moved: these pin each one to its source.

H100_CAPTURES = (REPO / "gpuinfra_lab" / "hardware" / "8x-h100-sxm-nvswitch" / "q.txt",
                 REPO / "tests" / "fixtures" / "device" / "h100-80gb-hbm3-vm-drv580.159.04"
                 / "nvidia-smi-q.txt")


def test_gpu_temperature_default_is_where_a_captured_h100_reaches_its_limit():
    """`monitoring_gpu_temperature_max` = 85 C: the lowest core temperature at which a real H100
    reaches its max operating limit (`nvidia-smi -q`: GPU Current Temp + GPU T.Limit Temp, the
    margin to that limit, with "GPU Max Operating T.Limit Temp : 0 C"): 29 + 56 on GPU 0 of the
    HGX capture; 85..87 over the nine GPUs captured."""
    at_limit = []
    for path in H100_CAPTURES:
        text = path.read_text()
        current = [int(t) for t in re.findall(r"GPU Current Temp\s+: (\d+) C", text)]
        margin = [int(t) for t in re.findall(r"GPU T\.Limit Temp\s+: (\d+) C", text)]
        assert current and len(current) == len(margin)
        at_limit += [c + m for c, m in zip(current, margin, strict=True)]
    assert min(at_limit) == 85
    assert DEFAULTS["monitoring_gpu_temperature_max"] == min(at_limit)


def test_disk_free_default_is_the_kubelets_hard_eviction_threshold():
    """10%: the kubelet's default hard eviction threshold `nodefs.available<10%`
    (https://kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction/, "Hard
    eviction thresholds"): warn before the kubelet starts evicting pods on a Kubernetes node."""
    assert DEFAULTS["monitoring_disk_free_min_percent"] == 10


# alert -> (the threshold text in its expression, `for`, severity) with the site defaults.
# Sources: 85 and 10 above; 300 s = Prometheus' 5-minute lookback
# (https://prometheus.io/docs/prometheus/latest/querying/basics/#staleness: a collector silent
# longer than that has no current series left); 26.552 = the H100's 26.562 GB/s per link (the
# lab's nvlink --status capture, gpuinfra/knowledge/gpus.py link_gbytes_per_s) less 0.01; the XID
# codes: NVIDIA's Xid catalog (gpuinfra/monitoring/alerts.py FATAL_XIDS). The `for` durations
# and severities are the project's own choices, pinned so that a change is deliberate.
PINNED = {
    "NodeDown": ('up{job="node"} == 0', "2m", "critical"),
    "DiskAlmostFull": ("node_filesystem_size_bytes"
                       '{fstype!~"tmpfs|overlay|squashfs|ramfs|devtmpfs|nsfs|fuse.lxcfs"} < 10',
                       "10m", "warning"),
    "SlurmctldDown": ("} == 0", "2m", "critical"),
    "SlurmctldBackupDown": ('instance=~"lab-head2"} == 0', "5m", "warning"),
    "SlurmdDown": ("} == 0", "2m", "critical"),
    "SlurmNodesDrained": ('{state=~"drain.*|down.*|fail.*"}) > 0 or '
                          "count(gpuinfra_health_drained == 1) > 0", "5m", "warning"),
    "GpuMissing": ('count by (instance) (gpuinfra_gpu_info{instance="lab-worker1"}) < 8',
                   "2m", "critical"),
    "GpuXidErrors": ("gpuinfra_gpu_xid_errors > 0", "0m", "warning"),
    "GpuFatalXid": ('gpuinfra_gpu_xid_errors_by_code{xid=~"48|64|74|79|95|119|120|140"}'
                    ' > 0 or label_replace(gpuinfra_gpu_recovery_action > 0, "xid", "154", "",'
                    ' "")', "0m", "critical"),
    "GpuDriverFailure": ("gpuinfra_gpu_driver_failures > 0", "0m", "critical"),
    "GpuUncorrectableEcc": ("gpuinfra_gpu_ecc_uncorrected_volatile_errors > 0", "0m",
                            "critical"),
    "GpuMemoryNeedsReset": ("gpuinfra_gpu_retired_pages_pending == 1 or "
                            "gpuinfra_gpu_remapped_rows_pending == 1", "0m", "warning"),
    "GpuRetiredPagesOrRemapFailure": ("gpuinfra_gpu_remapped_rows_failure == 1 or "
                                      "gpuinfra_gpu_retired_pages_double_bit > 0", "0m",
                                      "critical"),
    "GpuTemperatureHigh": ("gpuinfra_gpu_temperature_celsius > 85", "5m", "warning"),
    "NvlinkDown": ('{instance="lab-worker1",gpu=~"0|1|2|3|4|5|6|7"} < 18', "2m", "critical"),
    "NvlinkDegraded": ('gpuinfra_gpu_nvlink_link_min_gbytes_per_second{instance="lab-worker1"} '
                       '< 26.552',
                       "5m", "warning"),
    "GpuMetricsStale": ("time() - gpuinfra_gpu_collector_last_run_timestamp_seconds > 300",
                        "5m", "warning"),
    "NodeDrainedByHealthCheck": ("gpuinfra_health_drained == 1", "0m", "warning"),
    "HealthBreakerTripped": ("gpuinfra_health_breaker_tripped == 1", "0m", "critical"),
    "RollStalled": ("time() - gpuinfra_roll_last_step_timestamp_seconds > 3600", "5m",
                    "warning"),
    "NodeHealthCheckFailed": ("gpuinfra_health_ok == 0", "5m", "warning"),
    "NodeTaintedByHealthCheck": ('gpuinfra_health_ok{instance=~"k8s-gpu01|k8s-gpu02|k8s-gpu03"}'
                                 " == 0", "5m", "warning"),
    "FabricManagerDown": ('name="nvidia-fabricmanager.service",state="active"', "2m",
                          "critical"),
    "DcgmExporterDown": ('name="nvidia-dcgm-exporter.service",state="active"', "5m", "warning"),
    "KubeletDown": ('name="kubelet.service",state="active",instance=~"k8s-cp01|k8s-cp02|'
                    'k8s-cp03|k8s-gpu01|k8s-gpu02|k8s-gpu03"} == 0', "5m", "critical"),
    "InfinibandPortDown": ('node_infiniband_state_id{instance="k8s-gpu01",device=~"mlx5_0|mlx5_1|'
                           'mlx5_2|mlx5_3|mlx5_4|mlx5_5|mlx5_6|mlx5_7",port="1"} != 4', "2m",
                           "critical"),
    # 400 Gb/s is 5e10 bytes/s (node_exporter's rate from sysfs: 40 Gb/s = 5e9).
    "InfinibandRateDegraded": ('node_infiniband_rate_bytes_per_second{instance="k8s-gpu01",'
                               'device="mlx5_0",port="1"} < 5e+10', "5m", "warning"),
    "InfinibandLinkErrors": ("increase(node_infiniband_link_downed_total[15m]) > 0", "0m",
                             "warning"),
    # A device plugin restarts in seconds and a MIG layout is applied in minutes: ten.
    "KubernetesGpusMissing": ("gpuinfra_kubernetes_node_gpus_ok == 0 or label_replace("
                              "label_replace(gpuinfra_kubernetes_nodes_query_ok == 0", "10m",
                              "critical"),
    # Twice health_check_interval (300 s by default: roles/health/defaults.py).
    "NodeHealthCheckStale": ("time() - gpuinfra_health_last_run_timestamp_seconds > 600",
                             "5m", "warning"),
    # Every node logs a heartbeat every 2 minutes (roles/logs).
    "NodeLogsStale": ("time() - gpuinfra_logs_last_entry_timestamp_seconds > 600", "5m",
                      "warning"),
}


def test_every_alert_threshold_duration_and_severity_is_pinned():
    """The lab site with the role's defaults: each alert's threshold, `for` and severity (the
    health check's interval at its default, not the lab's 10 s)."""
    spec = _lab_with(health_check_interval=300)
    built = {r["alert"]: r for g in rules(spec, monitoring_with())["groups"]
             for r in g["rules"]}
    k8s = site("k8s")  # the taint's alert: a Kubernetes site's
    built.update({r["alert"]: r for g in rules(k8s, monitoring_of(k8s))["groups"]
                  for r in g["rules"] if r["alert"] not in built})
    assert set(built) == set(PINNED) == set(ALERT_NAMES)
    for name, (threshold, duration, severity) in PINNED.items():
        assert threshold in built[name]["expr"], name
        assert (built[name]["for"], built[name]["labels"]["severity"]) == (duration, severity), \
            name


def _lab_with(**data) -> ClusterSpec:
    """The lab site with ``data`` over every host's, and its backup controller (`lab up
    --backup`) whether the lab running here has one or not."""
    hosts, duplicates = load_hosts(str(REPO / "inventory" / "lab.py"))
    shared = {"slurm_state_save_location": "/srv/slurm/state"}
    if not any("slurm_backup" in h.groups for h in hosts):
        hosts = [*hosts, HostInput("lab-head2", ("slurm_backup",),
                                   {**hosts[0].data, "node_address": "10.89.0.9"})]
    return build_spec([HostInput(h.name, h.groups, {**h.data, **shared, **data})
                       for h in hosts], duplicates)


def _no_backup(spec: ClusterSpec) -> set[str]:
    """The alerts of what ``spec`` lacks: a backup controller; Slurm (its alerts, a drain by
    the health check); Kubernetes nodes the health check taints; nodes it does not."""
    from gpuinfra.monitoring.alerts import health_nodes, tainting_nodes

    checked = health_nodes(spec)
    tainting = tainting_nodes(checked)
    from gpuinfra.monitoring.k8snodes import expected as k8s_expected
    from gpuinfra.monitoring.stack_alerts import (
        dcgm_nodes,
        fabric_manager_nodes,
        kubelet_nodes,
        rdma_ports,
    )

    ports = rdma_ports(spec)
    stack = {"FabricManagerDown": fabric_manager_nodes(spec),
             "DcgmExporterDown": dcgm_nodes(spec, monitoring_of(spec)),
             "KubeletDown": kubelet_nodes(spec), "InfinibandPortDown": ports,
             "InfinibandLinkErrors": ports,
             "InfinibandRateDegraded": [p for p in ports if p[2] is not None]}
    return {name for name, there in stack.items() if not there} | (
        {"SlurmctldBackupDown"} if not spec.backup_controllers else set()) | (
        {"SlurmctldDown", "SlurmdDown", "SlurmNodesDrained", "NodeDrainedByHealthCheck"}
        if "slurm" not in spec.schedulers else set()) | (
        {"HealthBreakerTripped"} if "slurm" not in spec.schedulers and not tainting
        else set()) | (
        {"NodeTaintedByHealthCheck"} if not tainting else set()) | (
        {"KubernetesGpusMissing"} if not k8s_expected(spec) else set()) | (
        {"NodeHealthCheckFailed"} if len(tainting) == len(checked) else set())


def test_the_health_check_alerts_follow_its_knobs(tmp_path):
    """health_check_interval moves the stale limit (and its tests with it, promtool green);
    health_enabled False drops the health alerts and SlurmNodesDrained's health part."""
    spec = _lab_with(health_check_interval=60)
    mon = monitoring_of(spec)
    built = {r["alert"]: r for g in rules(spec, mon)["groups"] for r in g["rules"]}
    assert built["NodeHealthCheckStale"]["expr"].endswith("> 120")
    write(tmp_path, "rules.yml", rules(spec, mon))
    write(tmp_path, "tests.yml", rule_tests(spec, mon, "rules.yml"))
    tested = run(promtool_path(), "test", "rules", "tests.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr

    off = _lab_with(health_enabled=False)
    names = {a.name for a in alerts(off, monitoring_of(off))}
    assert not names & {"NodeDrainedByHealthCheck", "NodeHealthCheckFailed",
                        "NodeHealthCheckStale"}
    drained = next(a for a in alerts(off, monitoring_of(off)) if a.name == "SlurmNodesDrained")
    assert "gpuinfra_health" not in drained.expr


def test_the_ecc_alert_and_the_health_check_share_one_threshold(tmp_path):
    """Issue 48: health_gpu_ecc_max is GpuUncorrectableEcc's threshold and the check's
    (gpuinfra.health.thresholds); promtool: quiet at it, firing above it."""
    from gpuinfra.health.expectation import from_node

    spec = _lab_with(health_gpu_ecc_max=5, health_gpu_ecc="drain")
    mon = monitoring_of(spec)
    built = {r["alert"]: r for g in rules(spec, mon)["groups"] for r in g["rules"]}
    assert built["GpuUncorrectableEcc"]["expr"] == \
        "gpuinfra_gpu_ecc_uncorrected_volatile_errors > 5"
    worker = next(n for n in spec.nodes if n.gpus is not None)
    expect = from_node(worker, worker.settings, None)
    assert (expect.ecc_max, expect.ecc_action) == (5, "drain")
    assert expect.temperature_max == mon.gpu_temperature_max
    write(tmp_path, "rules.yml", rules(spec, mon))
    write(tmp_path, "tests.yml", rule_tests(spec, mon, "rules.yml"))
    tested = run(promtool_path(), "test", "rules", "tests.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_slurm_nodes_drained_fires_without_the_slurm_exporter(tmp_path):
    """The default configuration (no Slurm exporter, so no slurm_node_count_per_state at all):
    a node the health check drained fires SlurmNodesDrained and NodeDrainedByHealthCheck,
    the latter with the drain reason as a label."""
    spec = site("lab")
    mon = monitoring_of(spec)
    assert not mon.slurm_exporter
    tests = rule_tests(spec, mon, "rules.yml")
    case = next(t for t in tests["tests"] if t["name"] == "SlurmNodesDrained fires (case 3)")
    case["input_series"] = [s for s in case["input_series"]
                            if not s["series"].startswith("slurm_node_count_per_state")]
    reason = next(s["series"] for s in case["input_series"]
                  if s["series"].startswith("gpuinfra_health_drained"))
    assert 'reason="gpuinfra: ' in reason
    drained = next(t for t in tests["tests"]
                   if t["name"] == "NodeDrainedByHealthCheck fires (case 1)")
    assert drained["alert_rule_test"][0]["exp_alerts"][0]["exp_labels"]["reason"].startswith(
        "gpuinfra: ")
    tests["tests"] = [case, drained]
    write(tmp_path, "rules.yml", rules(spec, mon))
    write(tmp_path, "tests.yml", tests)
    tested = run(promtool_path(), "test", "rules", "tests.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_slurm_nodes_drained_fires_from_the_heads_own_node_states(tmp_path):
    """The default configuration, with neither the Slurm exporter nor the health check's
    series: a node an operator drained, as the head's sinfo metrics say
    (gpuinfra.monitoring.slurmnodes: the very text it writes for that sinfo line), fires
    SlurmNodesDrained after its 5 minutes; the same site with the node idle does not."""
    from gpuinfra.health.collect import Output
    from gpuinfra.monitoring.slurmnodes import node_states_text

    spec = site("lab")
    mon = monitoring_of(spec)
    head, worker = spec.head[0].short_name, spec.workers[0].short_name
    text = node_states_text(Output(True, 0, f"{worker}|drained|gpu:8|proof\n"), 0)
    sample = next(line for line in text.splitlines()
                  if line.startswith("gpuinfra_slurm_node_state{"))
    labels = sample[len("gpuinfra_slurm_node_state{"):sample.index("}")]
    series = f'gpuinfra_slurm_node_state{{job="node",instance="{head}",{labels}}}'
    alert = next(a for a in alerts(spec, mon) if a.name == "SlurmNodesDrained")

    def test(values: str, fires: bool) -> dict:
        return {"name": f"drained {values}", "interval": "1m",
                "input_series": [{"series": series, "values": values}],
                "alert_rule_test": [{"eval_time": "14m", "alertname": alert.name,
                                     "exp_alerts": [{"exp_labels": {"severity": "warning"},
                                                     "exp_annotations": {
                                                         "summary": alert.summary,
                                                         "description": alert.description}}]
                                     if fires else []}]}

    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m",
             "tests": [test("1x15", True)]}
    write(tmp_path, "rules.yml", rules(spec, mon))
    write(tmp_path, "tests.yml", tests)
    tested = run(promtool_path(), "test", "rules", "tests.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    idle = series.replace('state="drained"', 'state="idle"')
    tests["tests"] = [{**test("1x15", False),
                       "input_series": [{"series": idle, "values": "1x15"}]}]
    write(tmp_path, "tests.yml", tests)
    tested = run(promtool_path(), "test", "rules", "tests.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_health_alerts_read_the_series_the_health_check_writes():
    """Every gpuinfra_health_* name of the rules is one the check's metrics text has (a
    drained node's, so that gpuinfra_health_drained is there), or the head's circuit-breaker
    series (gpuinfra.monitoring.slurmnodes.breaker_text of a tripped breaker)."""
    from gpuinfra.health.collect import Output
    from gpuinfra.health.judge import Verdict
    from gpuinfra.health.metrics import metrics_text as health_text
    from gpuinfra.monitoring.slurmnodes import breaker_text

    spec = site("lab")
    text = health_text(Verdict("lab-worker1"), "gpuinfra: cause", 0.5, 1.0e9)
    head = breaker_text(Output(True, 0, "lab-worker2|idle|gpu:h100:2|none|gpuinfra-breaker: "
                                        "tripped 100: 1 of 2|\n"))
    assert 'gpuinfra_health_breaker_tripped{held="lab-worker2"} 1' in head
    written = set(re.findall(r"^(gpuinfra_health_\w+)", text + head, re.MULTILINE))
    read = {name for rule in (r for g in rules(spec, monitoring_of(spec))["groups"]
                              for r in g["rules"])
            for name in re.findall(r"gpuinfra_health_\w+", rule["expr"])}
    assert read and read <= written
    assert 'gpuinfra_health_drained{reason="gpuinfra: cause"} 1' in text


# ---------------------------------------------------------------------------- node_exporter

def _node_web_on_disk(tmp_path: Path, hash_text: str = HASH + "\n") -> dict[str, Any]:
    """The exporters' CA and a worker's key, certificate and web.yml as the head makes them
    (the role's own commands and template, in ``tmp_path``), and the check the head runs."""
    from gpuinfra.monitoring import web
    from gpuinfra_deploy.ops.made_on_host import filler
    from gpuinfra_roles.monitoring import (
        exporter_ca_command,
        node_cert_command,
        node_web_check,
        yaml_with_header,
    )

    spec = build_spec(_hosts())
    worker = next(n for n in spec.nodes if not n.is_head)
    ca_key, ca_cert = tmp_path / "ca.key", tmp_path / "ca.crt"
    made = run("sh", "-c", exporter_ca_command(spec, str(ca_key), str(ca_cert)), cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    folder = tmp_path / worker.short_name
    folder.mkdir()
    made = run("sh", "-c", node_cert_command(worker, str(folder), str(ca_key), str(ca_cert)),
               cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    (tmp_path / "hash").write_text(hash_text)
    stage = folder / ".staged"
    stage.mkdir()
    fill = filler("write", str(folder / "web.yml"), yaml_with_header(web.exporter_web_config()),
                  {web.EXPORTER_HASH_TOKEN: str(tmp_path / "hash")})
    filled = run("sh", "-c", f"{fill} > {stage}/web.yml", cwd=tmp_path)
    assert filled.returncode == 0, filled.stderr
    return {"worker": worker, "ca_key": ca_key, "ca_cert": ca_cert, "folder": folder,
            "stage": stage, "check": node_web_check(str(folder), str(stage))}


def _promtool_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(promtool_path()).parent}:{os.environ['PATH']}"}


def test_a_nodes_exporter_files_made_on_the_head_pass_promtool_and_verify(tmp_path):
    made = _node_web_on_disk(tmp_path)
    text = (made["stage"] / "web.yml").read_text()
    assert f'gpuinfra-scrape: "{HASH}"' in text and "GPUINFRA_BCRYPT" not in text
    assert "cert_file: tls.crt" in text and "key_file: tls.key" in text  # beside web.yml
    judged = subprocess.run(["sh", "-c", made["check"]], capture_output=True, text=True,
                            check=False, env=_promtool_env())
    assert judged.returncode == 0, judged.stderr
    folder, worker = made["folder"], made["worker"]
    assert oct((folder / "tls.key").stat().st_mode & 0o777) == "0o600"
    assert oct(made["ca_key"].stat().st_mode & 0o777) == "0o600"
    # Signed by the exporters' CA, for the worker's address, as a server, and no CA itself.
    verified = run("openssl", "verify", "-CAfile", str(made["ca_cert"]), "-purpose", "sslserver",
                   str(folder / "tls.crt"), cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    shown = run("openssl", "x509", "-noout", "-text", "-in", str(folder / "tls.crt"),
                cwd=tmp_path).stdout
    assert f"IP Address:{worker.address}" in shown and "CA:FALSE" in shown
    assert f"Subject: CN = {worker.short_name}" in shown
    ca = run("openssl", "x509", "-noout", "-text", "-in", str(made["ca_cert"]),
             cwd=tmp_path).stdout
    assert "CA:TRUE, pathlen:0" in ca


def test_a_nodes_web_config_with_another_nodes_key_is_refused_by_promtool(tmp_path):
    """The head judges each node's pair: a key that is not the certificate's is refused."""
    made = _node_web_on_disk(tmp_path)
    other = tmp_path / "other.key"
    run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-out", str(other), cwd=tmp_path)
    (made["folder"] / "tls.key").write_bytes(other.read_bytes())
    judged = subprocess.run(["sh", "-c", made["check"]], capture_output=True, text=True,
                            check=False, env=_promtool_env())
    assert judged.returncode == 1, judged.stdout
    assert "gpuinfra: promtool refused the new configuration" in judged.stderr


def test_a_certificate_a_node_signs_is_not_trusted(tmp_path):
    """A node's root holds its key: a certificate it signs for another address must not verify
    against the exporters' CA (the node's certificate is CA:FALSE)."""
    made = _node_web_on_disk(tmp_path)
    folder = made["folder"]
    forged = run("sh", "-c", f"openssl req -x509 -newkey ec -pkeyopt "
                 f"ec_paramgen_curve:prime256v1 -nodes -keyout f.key -out f.crt -days 1 "
                 f"-subj /CN=head1 -CA {folder}/tls.crt -CAkey {folder}/tls.key "
                 f"-addext subjectAltName=IP:10.0.0.1", cwd=tmp_path)
    assert forged.returncode == 0, forged.stderr
    chain = tmp_path / "chain.pem"
    chain.write_text((folder / "tls.crt").read_text())
    verified = run("openssl", "verify", "-CAfile", str(made["ca_cert"]), "-untrusted",
                   str(chain), "-purpose", "sslserver", str(tmp_path / "f.crt"), cwd=tmp_path)
    assert verified.returncode != 0
    assert "invalid CA certificate" in verified.stdout + verified.stderr


def test_node_exporter_args_serve_its_web_config_only_when_on():
    from gpuinfra.monitoring.web import NODE_WEB_DIR

    spec = build_spec(_hosts(monitoring_node_exporter_web_security=True))
    worker = next(n for n in spec.nodes if not n.is_head)
    mon = Monitoring.from_settings(worker.settings)
    args = node_exporter_args(worker, mon, "/var/lib/prometheus/node-exporter")
    assert args.endswith(f" --web.config.file={NODE_WEB_DIR}/web.yml")
    off = Monitoring.from_settings(build_spec(_hosts()).head[0].settings)
    assert "--web.config.file" not in node_exporter_args(worker, off, "/x")


def test_prometheus_scrapes_node_exporters_over_https_with_their_own_credentials():
    from gpuinfra.monitoring.web import EXPORTER_CA_CERT, EXPORTER_PASSWORD, WEB_PASSWORD

    spec = build_spec(_hosts(monitoring_node_exporter_web_security=True))
    jobs = {j["job_name"]: j for j in prometheus_config(spec, monitoring_of(spec))[
        "scrape_configs"]}
    assert jobs["node"]["scheme"] == "https"
    assert jobs["node"]["basic_auth"] == {"username": "gpuinfra-scrape",
                                          "password_file": EXPORTER_PASSWORD}
    # Verified against the exporters' CA (the node's address in its certificate), never skipped.
    assert jobs["node"]["tls_config"] == {"ca_file": EXPORTER_CA_CERT}
    # A node holds the exporters' hash and receives their password: never the API's.
    assert EXPORTER_PASSWORD != WEB_PASSWORD
    assert jobs["prometheus"]["basic_auth"]["password_file"] == WEB_PASSWORD
    off = prometheus_config(build_spec(_hosts()), monitoring_of(build_spec(_hosts())))
    node_job = next(j for j in off["scrape_configs"] if j["job_name"] == "node")
    assert "scheme" not in node_job and "basic_auth" not in node_job


# The PromQL the READMEs give operators to paste (a backticked expression with a vector
# match): each must be one Prometheus parses. The job join once read `x > 0 * on(...) ...`,
# which Prometheus refuses ("vector matching only allowed between instant vectors").
DOCUMENTED_PROMQL = [REPO / "README.md", REPO / "roles" / "monitoring" / "README.md"]


def documented_queries() -> list[tuple[str, str]]:
    found = []
    for path in DOCUMENTED_PROMQL:
        for query in re.findall(r"`([^`\n]*\bon\([^`\n]*\)[^`\n]*)`", path.read_text()):
            found.append((path.relative_to(REPO).as_posix(), query))
    return found


def test_the_documented_job_join_is_found():
    assert [q for _, q in documented_queries() if "group_left(job_id, user)" in q]


@pytest.mark.parametrize("where,query", documented_queries())
def test_documented_promql_parses(where, query, tmp_path):
    rules_file = tmp_path / "documented.yml"
    rules_file.write_text(yaml.safe_dump(
        {"groups": [{"name": "documented", "rules": [{"record": "documented:query",
                                                       "expr": query}]}]}))
    done = subprocess.run([promtool_path(), "check", "rules", str(rules_file)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{where}: `{query}`: {done.stdout}{done.stderr}"


@pytest.mark.parametrize("name", SITES)
def test_the_severity_table_is_the_rules(name):
    from gpuinfra.monitoring.alertmanager import ALERT_SEVERITIES

    spec = site(name)
    assert {a.name: a.severity for a in alerts(spec, monitoring_of(spec))} == {
        k: v for k, v in ALERT_SEVERITIES.items() if k not in _no_backup(spec)}


def test_alerts_that_reach_no_one_are_said_at_validation():
    """Issue 45 item 7: no receiver, or receivers that leave some alerts out, is said with the
    alerts left; receivers covering every alert say nothing."""
    from gpuinfra.monitoring.alertmanager import unrouted_alerts
    from gpuinfra.spec import HostInput
    from gpuinfra_deploy.run.knobs import build_spec

    def warned(receivers):
        hosts = [HostInput("head01", ("head",), {"node_address": "10.0.0.1",
                                                  "monitoring_alert_receivers": receivers}),
                 HostInput("w1", ("workers",), {"node_address": "10.0.0.2",
                                                 "monitoring_alert_receivers": receivers})]
        return [w.message for w in build_spec(hosts).warnings
                if w.field == "monitoring_alert_receivers"]

    assert "no alert reaches a person" in warned([])[0]
    critical = [{"name": "ops", "webhook_url": "http://ops:9/hook", "severities": ["critical"]}]
    assert unrouted_alerts(critical) and "GpuTemperatureHigh" in warned(critical)[0]
    assert "NodeDown" not in unrouted_alerts(critical)
    assert warned([{"name": "ops", "webhook_url": "http://ops:9/hook"}]) == []


def test_the_fatal_xid_alert_follows_the_sites_xid_policy(tmp_path):
    """Issue 48 item 2: health_xid_policy moves GpuFatalXid's codes as it moves the health
    check's; promtool still finds every case right."""
    spec = _lab_with(health_xid_policy={94: "drain", 74: "warn"})
    [rule] = [r for g in rules(spec, monitoring_with())["groups"] for r in g["rules"]
              if r["alert"] == "GpuFatalXid"]
    assert 'xid=~"48|64|79|94|95|119|120|140"' in rule["expr"]
    write(tmp_path, "rules.yml", rules(spec, monitoring_with()))
    write(tmp_path, "tests.yml", rule_tests(spec, monitoring_with(), "rules.yml"))
    tested = run(promtool_path(), "test", "rules", "tests.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
