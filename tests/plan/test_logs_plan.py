"""Plan tests of the `logs` role on a head and a worker, per distribution.

Debian 12's packages run for real in the lab (gpuinfra_lab/central_logs.py: lines arrive, once,
across a receiver restart; a foreign certificate is refused; a second deploy changes nothing).
Here: what each host gets on every distribution, the order between the head's credentials and
the nodes' copies, the disk check, the off switch and the gate's refusals.
"""

from __future__ import annotations

from io import BytesIO

import pytest
from pyinfra.api.exceptions import PyinfraError

from gpuinfra.logs.journal import (
    RECEIVER_DROPIN,
    REMOTE_CONF,
    SOCKET_DROPIN,
    TUNNEL_CONF,
    UPLOAD_CONF,
    UPLOAD_DROPIN,
)
from gpuinfra_roles.logs import VACUUM_STAGE, logs
from tests.plan.harness import FakeHost, load_facts, plan_hosts, upload_text

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
HEAD, GPU = "head1", "gpu01"
SITE = {"schedulers": ["slurm"]}
DISK = "gpuinfra_roles.logs.LogDiskBytes"


def fresh(distro: str, **facts) -> dict:
    return {**load_facts("base-fresh", distro), **facts}


def run(distro: str, head_facts: dict | None = None, **data):
    hosts = [FakeHost(HEAD, ("head",), head_facts or fresh(distro), {"ssh_hostname": "10.0.0.1"}),
             FakeHost(GPU, ("workers",), fresh(distro), {"ssh_hostname": "10.0.0.2"})]
    return plan_hosts(logs, hosts, [HEAD, GPU], {**SITE, **data})


def names(plan) -> list[str]:
    return [op.name for op in plan.ops]


def op(plan, words: str):
    found = [o for o in plan.ops if words in o.name]
    assert len(found) == 1, (words, names(plan))
    return found[0]


def uploaded(plan) -> dict[str, str]:
    out = {}
    for planned in plan.ops:
        for command in planned.raw:
            src = getattr(command, "src", None)
            if hasattr(src, "getvalue"):
                value = src.getvalue()
                out[command.dest] = upload_text(BytesIO(value if isinstance(value, bytes)
                                                        else value.encode()))
    return out


def staged(files: dict[str, str], live: str) -> str:
    """The text of ``live`` as checked_files stages it (beside it, in .gpuinfra-staged)."""
    folder, name = live.rsplit("/", 1)
    return files[f"{folder}/.gpuinfra-staged/{name}"]


@pytest.mark.parametrize("distro", DISTROS)
def test_head_receives_behind_stunnel_and_the_node_uploads(distro):
    result = run(distro)
    head, gpu = result.plans[HEAD], result.plans[GPU]
    assert op(head, "Install systemd-journal-remote, openssl and stunnel").commands[-1] \
        .endswith("systemd-journal-remote openssl stunnel4")
    ca = " ".join(op(head, "The logs CA's key").commands)
    assert "umask 077 && openssl req -x509" in ca and "CA:TRUE,pathlen:0" in ca
    server = " ".join(op(head, "The receiver's key and certificate").commands)
    assert "subjectAltName=IP:10.0.0.1" in server
    assert "openssl verify -CAfile /etc/gpuinfra/logs/ca.crt" in server
    client = " ".join(op(head, "gpu01: its log client key").commands)
    assert "/etc/gpuinfra/logs/nodes/gpu01/client.key" in client and "/CN=gpu01" in client
    assert "openssl verify -CAfile" in client
    files = uploaded(head)
    assert "accept = 10.0.0.1:19532\nconnect = 127.0.0.1:19532" in files[TUNNEL_CONF]
    assert "verifyChain = yes\nrequireCert = yes" in files[TUNNEL_CONF]
    assert "ListenStream=\nListenStream=127.0.0.1:19532" in staged(files, SOCKET_DROPIN)
    assert "--listen-http=-3 --output=/var/log/journal/remote/" in staged(files,
                                                                           RECEIVER_DROPIN)
    assert "--vacuum-size=4G --vacuum-time=30days" in \
        files[f"{VACUUM_STAGE}/gpuinfra-logs-vacuum.service"]
    assert "systemd-analyze verify" in " ".join(op(head, "socket: gpuinfra's drop-in").commands)
    # The node: no CA, no receiver; its key from the head, its uploader pointed there.
    node_files = uploaded(gpu)
    assert "URL=https://10.0.0.2" not in node_files[UPLOAD_CONF]
    assert "URL=https://10.0.0.1:19532\nServerKeyFile=/etc/gpuinfra/logs/client.key" in \
        node_files[UPLOAD_CONF]
    dropin = staged(node_files, UPLOAD_DROPIN)
    assert "SupplementaryGroups=gpuinfra-logs-upload" in dropin
    assert "Restart=always" in dropin and "StartLimitIntervalSec=0" in dropin
    assert op(gpu, "log client key and certificates from the head").commands
    assert not [n for n in names(gpu) if "CA's key" in n or "stunnel" in n or "cap" in n]


def test_size_keys_only_where_journal_remote_knows_them():
    """journal-remote.conf(5): MaxUse=/MaxFileSize= from systemd 253 on (Ubuntu 24.04)."""
    assert "MaxUse=4G" in uploaded(run("ubuntu-24.04").plans[HEAD])[REMOTE_CONF]
    for distro in ("debian-12", "ubuntu-22.04"):
        assert "MaxUse" not in uploaded(run(distro).plans[HEAD])[REMOTE_CONF]


def test_the_node_copies_its_key_after_the_head_made_it():
    result = run("debian-12")
    assert result.position(HEAD, "gpu01: its log client key") < \
        result.position(GPU, "log client key and certificates from the head")


def test_a_cap_that_does_not_fit_the_heads_disk_is_refused_when_planned():
    small = fresh("debian-12", **{DISK: 4 * 1024 ** 3})  # a 4 GiB file system
    with pytest.raises(Exception, match=r"logs_max_use = '4G' does not fit the head's disk: "
                                        r"the file system holding /var/log/journal/remote is "
                                        r"4.0 GiB"):
        run("debian-12", head_facts=small)
    assert run("debian-12", head_facts=small, logs_max_use="1G").plans[HEAD].ops


def test_what_the_stale_logs_alert_reads():
    """NodeLogsStale (gpuinfra.monitoring.alerts): a heartbeat on each node, and on the head
    each node's newest entry in node_exporter's textfile directory; none without monitoring."""
    result = run("debian-12")
    head, gpu = uploaded(result.plans[HEAD]), uploaded(result.plans[GPU])
    script = head["/usr/local/lib/gpuinfra-logs/last-entry.sh"]
    assert "for node in gpu01; do" in script
    assert "/var/lib/prometheus/node-exporter/gpuinfra-logs.prom" in script
    assert "OnUnitActiveSec=1min" in \
        head["/etc/systemd/system/.gpuinfra-staged-logs-age/gpuinfra-logs-age.timer"]
    assert "/usr/bin/logger -t gpuinfra-logs-heartbeat alive" in \
        gpu["/etc/systemd/system/.gpuinfra-staged-logs-heartbeat/gpuinfra-logs-heartbeat.service"]
    quiet = run("debian-12", monitoring_enabled=False)
    assert not [n for p in quiet.plans.values() for n in names(p)
                if "heartbeat" in n or "newest journal entry" in n]


def test_off_switch():
    result = run("debian-12", logs_enabled=False)
    assert all(not planned.commands for p in result.plans.values() for planned in p.ops)


@pytest.mark.parametrize(("key", "value", "words"), [
    ("logs_max_use", "lots", "not a size like 4G or 512M"),
    ("logs_max_use", "4GB", "not a size like 4G or 512M"),
    ("logs_retention", "30", "not a time like 30d, 12h or 8w"),
    ("logs_port", 80, "1024"),
])
def test_the_gate_refuses_bad_values(key, value, words):
    with pytest.raises(PyinfraError, match=f"(?s)no host was touched.*{key}.*{words}"):
        run("debian-12", **{key: value})


def test_the_uploaders_start_after_the_heads_receiver():
    """An uploader started before the head listens fails and waits 10 s: a second deploy
    would find it stopped and start it again (seen in the lab before this order)."""
    result = run("debian-12")
    assert result.position(HEAD, "stunnel: TLS for the nodes' logs") < \
        result.position(GPU, "Send this node's journal to the head")
    assert result.position(HEAD, "Receive the nodes' logs on the loopback") < \
        result.position(GPU, "Send this node's journal to the head")
