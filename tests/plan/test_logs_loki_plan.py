"""Plan tests of the `logs` role's option ``logs_loki`` (Loki on the head, Alloy on every node)
and of the Grafana data source and dashboard the monitoring role adds for it, per distribution.

Plan-tested only: Grafana's repository is not reachable from the project's machines, so neither
binary runs here or in the lab. What is checked: the repository and its pinned key, the pinned
packages, each file staged and judged by its own binary (``loki -verify-config``, ``alloy
validate``) before the live copy, the services enabled and restarted only on change, a converged
host planning nothing, the gate's refusals. The rendered files themselves: tests/unit/
test_logs_loki.py.
"""

from __future__ import annotations

import hashlib
import json
from copy import deepcopy
from datetime import datetime

import pytest
import yaml
from pyinfra.api.exceptions import PyinfraError

from gpuinfra.knowledge.packages import SIGNING_KEYS
from gpuinfra.knowledge.repositories import GRAFANA_KEYRING, GRAFANA_LIST
from gpuinfra.logs.loki import (
    ALLOY_CONFIG,
    ALLOY_STAGE,
    DATASOURCE_FILE,
    DATASOURCE_UID,
    LOKI_CONFIG,
    LOKI_GATE,
    LOKI_STAGE,
    PIN_FILE,
)
from gpuinfra_roles.logs import logs
from gpuinfra_roles.monitoring import GRAFANA_DASHBOARDS, monitoring
from tests.plan.harness import KEYRING_KEYS, FakeHost, load_facts, pinned_keyrings, plan_hosts
from tests.plan.test_logs_plan import DISTROS, GPU, HEAD, SITE, names, op, uploaded

LOKI = {"logs_loki": True}
LOKI_STAGED = f"{LOKI_STAGE}/config.yml"
ALLOY_STAGED = f"{ALLOY_STAGE}/config.alloy"
CHECK_LOKI = f"/usr/local/bin/loki -verify-config -config.file={LOKI_STAGED}"
CHECK_ALLOY = f"alloy validate {ALLOY_STAGED}"


def fresh(distro: str) -> dict:
    return load_facts("base-fresh", distro, "monitoring-fresh")


def run(distro: str, facts: dict | None = None, role=logs, **data):
    facts = facts or {HEAD: fresh(distro), GPU: fresh(distro)}
    hosts = [FakeHost(HEAD, ("head",), facts[HEAD], {"ssh_hostname": "10.0.0.1"}),
             FakeHost(GPU, ("workers",), facts[GPU], {"ssh_hostname": "10.0.0.2"})]
    return plan_hosts(role, hosts, [HEAD, GPU], {**SITE, "logs_enabled": False, **data})


def commands(plan, words: str) -> list[str]:
    return [str(c) for c in op(plan, words).commands]


@pytest.mark.parametrize("distro", DISTROS)
def test_loki_on_the_head_and_alloy_everywhere_each_checked_before_it_goes_live(distro):
    result = run(distro, **LOKI)
    for name in (HEAD, GPU):
        plan = result.plans[name]
        files = uploaded(plan)
        # Grafana's repository, its key pinned by fingerprint, the packages pinned.
        key = " ".join(commands(plan, "Add Grafana's signing key"))
        assert "https://apt.grafana.com/gpg.key" in key and SIGNING_KEYS["grafana"] in key
        assert files[GRAFANA_LIST] == \
            f"deb [signed-by={GRAFANA_KEYRING}] https://apt.grafana.com stable main\n"
        install = commands(plan, "Install Alloy, and Loki on the head")[-1]
        pins = files[PIN_FILE]
        assert "alloy=1.12.2" in install and "Package: alloy\nPin: version 1.12.2" in pins
        assert ("loki=3.6.0" in install) == (name == HEAD)
        assert ("Package: loki\nPin: version 3.6.0" in pins) == (name == HEAD)
        # Alloy: staged, judged by alloy validate, only then copied live; then the service.
        alloy = commands(plan, f"{ALLOY_CONFIG}: this node's journal")
        check = next(c for c in alloy if CHECK_ALLOY in c)
        assert alloy.index(check) < len(alloy) - 1
        assert alloy[-1].startswith(f"cp {ALLOY_STAGED} {ALLOY_CONFIG}.gpuinfra-new")
        text = files[ALLOY_STAGED]
        assert f'labels = {{host = "{name}"}}' in text
        assert 'url = "http://10.0.0.1:3100/loki/api/v1/push"' in text
        assert commands(plan, "Run Alloy") == ["systemctl start alloy.service",
                                               "systemctl enable alloy.service"]
        assert op(plan, "Restart Alloy on its new").commands  # a fresh host: new file
    head, gpu = result.plans[HEAD], result.plans[GPU]
    loki = commands(head, f"{LOKI_CONFIG}: Loki on the head's cluster address")
    check = next(c for c in loki if CHECK_LOKI in c)
    assert loki.index(check) < len(loki) - 1
    assert loki[-1].startswith(f"cp {LOKI_STAGED} {LOKI_CONFIG}.gpuinfra-new")
    config = yaml.safe_load(uploaded(head)[LOKI_STAGED])
    assert config["server"]["http_listen_address"] == "10.0.0.1"
    assert config["server"]["http_listen_port"] == 3100
    assert config["limits_config"]["retention_period"] == "720h"  # logs_retention 30d
    assert commands(head, "Run Loki") == ["systemctl start loki.service",
                                          "systemctl enable loki.service"]
    assert op(head, "loki.service: boot order").commands
    assert head.ops.index(op(head, "Run Loki")) < head.ops.index(op(head, "Restart Loki"))
    assert not [n for n in names(gpu) if "Loki (" in n or LOKI_CONFIG in n]
    # The package starts Loki on its default file (every address) when it is installed: the
    # start gate is in place before the install, and opens only once the judged file is live.
    gate, install = op(head, "Loki starts only on its judged file"), \
        op(head, "Install Alloy, and Loki on the head")
    assert head.ops.index(gate) < head.ops.index(install)
    assert "[Unit]\nConditionPathExists=/etc/loki/.gpuinfra-judged\n" in \
        uploaded(head)[LOKI_GATE]
    marker = op(head, "Loki's judged file is live")
    config_op = op(head, f"{LOKI_CONFIG}: Loki on the head's cluster address")
    assert head.ops.index(config_op) < head.ops.index(marker) < head.ops.index(op(head, "Run Loki"))
    assert not [n for n in names(gpu) if "start gate" in n or "judged file" in n]


def test_retention_and_port_come_from_the_logs_knobs():
    result = run("debian-12", logs_retention="8w", logs_loki_port=3200, **LOKI)
    config = yaml.safe_load(uploaded(result.plans[HEAD])[LOKI_STAGED])
    assert config["limits_config"]["retention_period"] == "1344h"
    assert config["server"]["http_listen_port"] == 3200
    assert 'url = "http://10.0.0.1:3200/loki/api/v1/push"' in \
        uploaded(result.plans[GPU])[ALLOY_STAGED]


def test_off_by_default_and_independent_of_the_journal_copy():
    for plan in run("debian-12").plans.values():
        assert not [n for n in names(plan) if "Loki" in n or "Alloy" in n]
    both = run("debian-12", logs_enabled=True, **LOKI, role=logs)
    assert op(both.plans[GPU], "checked by alloy validate").commands


# ----------------------------------------------------------------------------- converged hosts

def _file(size: int) -> dict:
    return {"mode": 644, "size": size, "user": "root", "group": "root",
            "mtime": datetime(2026, 11, 22, 3, 0)}


def converged(distro: str) -> dict:
    """Each host as the fresh plan leaves it (files, packages held, services running)."""
    plan = run(distro, **LOKI)
    facts = {}
    stages = {LOKI_STAGE: "/etc/loki", ALLOY_STAGE: "/etc/alloy"}
    for name, host_plan in plan.plans.items():
        host = facts[name] = deepcopy(fresh(distro))
        for key in ("files.File", "files.Sha1File", "files.Sha256File", "files.Directory"):
            host.setdefault(key, {"*": None})
        versions = {"alloy": "1.12.2", **({"loki": "3.6.0"} if name == HEAD else {})}
        host.setdefault("deb.DebPackages", {}).update({p: [v] for p, v in versions.items()})
        host["gpuinfra_deploy.facts.apt.HeldPackages"] = sorted(versions)
        for kind in ("systemd.SystemdStatus", "systemd.SystemdEnabled"):
            states = dict(host.get(kind, {}).get("*", {}))
            states.update({"alloy.service": True, "loki.service": True})
            host[kind] = {"*": states}
        host["files.File"]["path=/var/lib/apt/periodic/update-success-stamp"] = {
            **_file(0), "mtime": datetime(2026, 11, 22, 3, 30)}
        for dest, text in uploaded(host_plan).items():
            body = text.encode()
            stage = dest.rsplit("/", 1)[0]
            live = f"{stages[stage]}/{dest.rsplit('/', 1)[1]}" if stage in stages else dest
            host["files.File"][f"path={live}"] = _file(len(body))
            host["files.Sha1File"][f"path={live}"] = hashlib.sha1(body).hexdigest()
            host["files.Sha256File"][f"path={live}"] = hashlib.sha256(body).hexdigest()
            host["files.Directory"][f"path={live.rsplit('/', 1)[0]}"] = {
                "mode": 755, "user": "root", "group": "root"}
        host["files.Directory"]["path=/var/lib/loki"] = {"mode": 750, "user": "loki",
                                                        "group": "nogroup"}
        host["files.File"][f"path={GRAFANA_KEYRING}"] = _file(100)
        host[KEYRING_KEYS] = pinned_keyrings({GRAFANA_KEYRING: SIGNING_KEYS["grafana"]})
    return facts


@pytest.mark.parametrize("distro", DISTROS)
def test_a_converged_host_plans_nothing_and_a_changed_file_is_checked_and_restarted(distro):
    facts = converged(distro)
    result = run(distro, deepcopy(facts), **LOKI)
    for name, plan in result.plans.items():
        assert [o.name for o in plan.changing] == [], name
    # The fixture can fail: a new retention is a changed file, judged, then Loki restarted.
    changed = run(distro, deepcopy(facts), logs_retention="10d", **LOKI).plans
    assert [o.name for o in changed[HEAD].changing] == [
        f"logs | {LOKI_CONFIG}: Loki on the head's cluster address, checked by loki "
        "-verify-config",
        "logs | Restart Loki on its new configuration or package"]
    assert [o.name for o in changed[GPU].changing] == []


# ----------------------------------------------------------------------------- the gate

@pytest.mark.parametrize(("data", "words"), [
    ({"logs_loki": "yes"}, "logs_loki.*must be True or False"),
    ({"logs_loki": True, "logs_retention": "12h"},
     "logs_retention.*'12h'.*Loki keeps logs at least 24h.*logs_retention = '1d' or longer"),
    ({"logs_loki": True, "logs_loki_port": 3000},
     "monitoring_grafana_port, logs_loki_port.*3000.*Grafana and Loki"),
    ({"logs_loki_version": "3.6.0 bad"}, "logs_loki_version"),
])
def test_the_gate_refuses_what_cannot_deploy(data, words):
    with pytest.raises(PyinfraError, match=f"(?s)no host was touched.*{words}"):
        run("debian-12", **data)


def test_a_head_without_a_cluster_address_is_refused_with_loki_on():
    hosts = [FakeHost(HEAD, ("head",), fresh("debian-12"), {"ssh_hostname": "head1.example"}),
             FakeHost(GPU, ("workers",), fresh("debian-12"), {"ssh_hostname": "10.0.0.2"})]
    data = {**SITE, "logs_enabled": False, "monitoring_enabled": False, **LOKI}
    with pytest.raises(PyinfraError, match="(?s)no host was touched.*head1.*node_address.*"
                                           "logs_loki is on: Loki listens"):
        plan_hosts(logs, hosts, [HEAD, GPU], data)
    plan_hosts(logs, hosts, [HEAD, GPU], {**data, "logs_loki": False})  # off: no refusal


# ----------------------------------------------------------------------------- Grafana

def grafana_files(**data) -> dict[str, str]:
    facts = {HEAD: load_facts("base-fresh", "debian-12", "monitoring-fresh"),
             GPU: load_facts("base-fresh", "debian-12", "monitoring-fresh")}
    plan = run("debian-12", facts, role=monitoring, **data).plans[HEAD]
    return {path: text for path, text in uploaded(plan).items() if "grafana" in path}


def test_grafana_gets_the_loki_data_source_and_the_node_logs_dashboard():
    files = grafana_files(**LOKI)
    source = yaml.safe_load(files[DATASOURCE_FILE])["datasources"][0]
    assert (source["type"], source["uid"], source["url"]) == \
        ("loki", DATASOURCE_UID, "http://10.0.0.1:3100")
    board = json.loads(files[f"{GRAFANA_DASHBOARDS}/node-logs.json"])
    panel = board["panels"][0]
    assert (panel["type"], panel["datasource"]["uid"]) == ("logs", DATASOURCE_UID)
    assert panel["targets"][0]["expr"] == '{host=~"${node:regex}", host!=""}'
    nodes = board["templating"]["list"][0]["query"]["query"]
    assert 'up{job="node"} == 0' in nodes  # a node that stopped answering
    assert 'gpuinfra_slurm_node_state{state=~"drain.*|down.*|fail.*"}' in nodes  # drained
    # Without logs_loki Grafana has neither.
    plain = grafana_files()
    assert DATASOURCE_FILE not in plain and f"{GRAFANA_DASHBOARDS}/node-logs.json" not in plain
