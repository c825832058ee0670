"""Plan tests of the `logs` role's option ``logs_forward`` (rsyslog to a site's syslog or
Elasticsearch/OpenSearch), on a head and a worker, per distribution.

Plan-tested only: no site syslog or Elasticsearch in the lab. The rendered file is judged by a
real ``rsyslogd -N1`` in tests/unit/test_logs_forward.py (the same check command the role
runs); here: what each host gets on every distribution, the check before the file goes live,
the restart only on change, a converged host planning nothing, removal, the gate's refusals.
"""

from __future__ import annotations

import pytest
from pyinfra.api.exceptions import PyinfraError

from gpuinfra.logs.forward import FORWARD_CONF, FORWARD_STAGE, forward_conf
from gpuinfra_deploy.ops.checked import digest
from gpuinfra_deploy.templates import text as file_text
from gpuinfra_roles.logs import logs
from tests.plan.harness import FakeHost, load_facts, plan_hosts
from tests.plan.test_logs_plan import DISTROS, GPU, HEAD, SITE, fresh, names, op, uploaded

SYSLOG = {"kind": "syslog", "host": "10.0.0.5", "port": 514, "protocol": "tcp"}
ES = {"kind": "elasticsearch", "url": "https://es.example:9201", "index": "gpuinfra"}
STAGED = f"{FORWARD_STAGE}/60-gpuinfra-forward.conf"


def run(distro: str, head_facts: dict | None = None, gpu_facts: dict | None = None, **data):
    hosts = [FakeHost(HEAD, ("head",), head_facts or fresh(distro), {"ssh_hostname": "10.0.0.1"}),
             FakeHost(GPU, ("workers",), gpu_facts or fresh(distro),
                      {"ssh_hostname": "10.0.0.2"})]
    return plan_hosts(logs, hosts, [HEAD, GPU], {**SITE, **data})


def converged(distro: str, targets: list[dict]) -> dict:
    """A host where rsyslog (with its Elasticsearch output) runs with this forwarding file."""
    facts = load_facts("base-fresh", distro, "common-converged")
    packages = {**load_facts(distro)["deb.DebPackages"],
                "rsyslog": ["8.2302.0-1"], "rsyslog-elasticsearch": ["8.2302.0-1"]}
    return {**facts, "deb.DebPackages": packages,
            "files.Sha256File": {
                f"path={FORWARD_CONF}": digest(file_text(forward_conf(targets))), "*": None},
            "systemd.SystemdStatus": {"*": {"rsyslog.service": True}},
            "systemd.SystemdEnabled": {"*": {"rsyslog.service": True}}}


@pytest.mark.parametrize("distro", DISTROS)
def test_every_node_forwards_its_logs_checked_by_rsyslogd(distro):
    result = run(distro, logs_forward=[SYSLOG, ES])
    for name in (HEAD, GPU):
        plan = result.plans[name]
        install = op(plan, "Install rsyslog (forwarding")
        assert install.commands[-1].endswith("rsyslog rsyslog-elasticsearch")
        conf = uploaded(plan)[STAGED]
        assert 'module(load="omelasticsearch")' in conf
        assert ('type="omfwd"\n       target="10.0.0.5"\n       port="514"\n'
                '       protocol="tcp"') in conf
        assert ('type="omelasticsearch"\n       server="es.example"\n       serverport="9201"\n'
                '       usehttps="on"\n       searchIndex="gpuinfra"') in conf
        checked = op(plan, "checked by rsyslogd -N1").commands
        check = next(c for c in checked if "rsyslogd -N1" in c)
        assert "rsyslogd -N1 -f /etc/rsyslog.d/.gpuinfra-staged/probe/rsyslog.conf" in check
        assert "cp /etc/rsyslog.d/.gpuinfra-staged/60-gpuinfra-forward.conf" in check
        # The live file is written only after the check (checked_files' last command).
        assert checked[-1].startswith(f"cp {STAGED} {FORWARD_CONF}.gpuinfra-new")
        assert checked.index(check) < len(checked) - 1
        restart = op(plan, "Restart rsyslog on its new forwarding file")
        assert restart.commands  # planned: the file changes on a fresh host
        assert plan.ops.index(op(plan, "Run rsyslog (it forwards")) < \
            plan.ops.index(restart)


def test_syslog_only_needs_no_elasticsearch_output():
    udp = {"kind": "syslog", "host": "syslog.site.example", "protocol": "udp"}
    plan = run("debian-12", logs_forward=[udp]).plans[GPU]
    assert op(plan, "Install rsyslog (forwarding").commands[-1].endswith(" rsyslog")
    conf = uploaded(plan)[STAGED]
    assert "omelasticsearch" not in conf
    assert 'target="syslog.site.example"\n       port="514"\n       protocol="udp"' in conf


@pytest.mark.parametrize("distro", DISTROS)
def test_converged_host_plans_nothing(distro):
    targets = [SYSLOG, ES]
    result = run(distro, gpu_facts=converged(distro, targets), logs_enabled=False,
                 logs_forward=targets)
    gpu = result.plans[GPU]
    assert [planned.name for planned in gpu.ops if planned.commands] == []
    # and the converged fixture can fail: another target is a changed file, checked, restarted
    changed = run(distro, gpu_facts=converged(distro, targets), logs_enabled=False,
                  logs_forward=[SYSLOG]).plans[GPU]
    assert [planned.name for planned in changed.ops if planned.commands] == [
        f"logs | {FORWARD_CONF}: the site's log targets, checked by rsyslogd -N1",
        "logs | Restart rsyslog on its new forwarding file"]


def test_forwarding_works_without_central_logs_and_is_off_by_default():
    result = run("debian-12", logs_enabled=False, logs_forward=[SYSLOG])
    assert op(result.plans[GPU], "checked by rsyslogd -N1").commands
    default = run("debian-12")
    for plan in default.plans.values():
        assert not [n for n in names(plan) if "rsyslog" in n and "Restart" not in n
                    and FORWARD_CONF not in n]
        assert not op(plan, f"{FORWARD_CONF}: no forwarding").commands  # no file: nothing


def test_a_forwarding_file_of_an_earlier_deploy_is_removed_and_rsyslog_restarted():
    facts = fresh("debian-12")
    facts["files.File"] = {f"path={FORWARD_CONF}": {"mode": 644, "user": "root",
                                                    "group": "root", "size": 10},
                           "*": None}
    plan = run("debian-12", gpu_facts=facts, logs_enabled=False).plans[GPU]
    assert op(plan, f"{FORWARD_CONF}: no forwarding").commands
    assert op(plan, "Restart rsyslog without the forwarding file").commands == (
        "systemctl try-restart rsyslog.service",)


@pytest.mark.parametrize(("value", "words"), [
    ({"kind": "syslog", "host": "10.0.0.5"}, "must be a list"),
    ([{"kind": "graylog", "host": "x"}], "item 0: kind 'graylog' is not one of"),
    ([{"kind": "syslog"}], "a syslog target needs 'host'"),
    ([{"kind": "syslog", "host": "a b"}], "host: not a host name"),
    ([{"kind": "syslog", "host": "x", "port": "514"}], "port '514': must be an integer"),
    ([{"kind": "syslog", "host": "x", "protocol": "relp"}], "protocol 'relp'"),
    ([{"kind": "syslog", "host": "x", "url": "http://x"}], "unknown field 'url'"),
    ([{"kind": "elasticsearch", "url": "es.example:9200"}], "url: malformed URL"),
    ([{"kind": "elasticsearch", "url": "https://u:p@es.example"}], "url: credentials"),
    ([{"kind": "elasticsearch", "url": "https://es.example/x"}], "url: no path"),
    ([{"kind": "opensearch", "url": "https://os.example", "index": "Logs"}], "index 'Logs'"),
    ([{"kind": "elasticsearch", "url": 'https://es"x'}], "url: malformed URL"),
])
def test_the_gate_refuses_bad_targets(value, words):
    with pytest.raises(PyinfraError, match=f"(?s)no host was touched.*logs_forward.*{words}"):
        run("debian-12", logs_forward=value)
