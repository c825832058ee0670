"""gpuinfra_verify/batch.py: a node's read-only commands in one SSH round trip, answered
byte for byte as if each had been sent alone; anything else goes live."""

from __future__ import annotations

import re
import subprocess
from collections import Counter

import pytest

from gpuinfra.shell_batch import BatchUnreadable, batch_script, parse_batch
from gpuinfra_deploy.run.learned import file_name
from gpuinfra_verify.batch import AGAIN_S, Batches, HostBatch, read_only


@pytest.mark.parametrize("command", [
    "systemctl is-active chrony", "systemctl is-enabled 'nvidia-persistenced'",
    "systemctl show -p MainPID --value slurmctld", "systemctl --version",
    "cat -- /etc/hosts", "test -e /run/gpuinfra/reboot-required", "hostname",
    "sysctl -n net.core.rmem_max", "dpkg-query -f '${Status} ${Version}' -W chrony",
    "getent group gpuinfra-admin", "nvidia-smi --query-gpu=index,driver_version --format=csv",
    "nvidia-smi topo -m", "nvidia-smi mig -lgi", "nvidia-smi nvlink --status",
    "nvidia-smi -i 0 --query-gpu=mig.mode.current --format=csv,noheader", "nvidia-smi -q",
    "stat -c '%U:%G %a' /etc/munge/munge.key",
    "lsmod | grep -c nouveau", "ls /dev/nvidia* 2>/dev/null || true",
    "sudo /bin/sh -c 'cat /etc/slurm/slurm.conf'", "containerd config dump", "ctr plugins ls",
    "cd /run/slurm/conf && sha256sum slurm.conf gres.conf",
    "slurmd -G -f /run/slurm/conf/slurm.conf 2>&1",
    "sinfo -N -h -o '%N|%T|%G|%E' -n lab-fleet1", "scontrol show config", "munge -n",
    "ls /dev/nvidia* 2>/dev/null", "grep -c x /proc/modules 2>&1 | head -1",
    "/usr/local/sbin/gpuinfra-health reading",
    "LC_ALL=C systemctl status munge", "command -v systemctl",
])
def test_commands_that_only_read_are_read_only(command):
    assert read_only(command)


@pytest.mark.parametrize("command", [
    "systemctl restart slurmd", "systemctl start chrony", "nvidia-smi -pm 1",
    "nvidia-smi -i 0 -r", "nvidia-smi mig -cgi 9", "sysctl -w vm.swappiness=1",
    "ctr run --rm x y", "kubectl apply -f -", "ib_write_bw -d rxe0", "rm -f /tmp/x",
    "cat /etc/hosts > /tmp/copy", "echo $(reboot)", "echo `reboot`", "sed -i s/a/b/ f",
    "find / -delete", "cat x; touch y", "cat <<EOF\nx\nEOF", "sudo reboot",
    "sudo /bin/sh -c 'systemctl stop munge'", "xargs rm", "'unterminated",
    "gpuinfra-health check", "/usr/local/sbin/gpuinfra-health drain", "ctr run --rm i c",
    "cd /tmp; rm -f x", "slurmd -D", "containerd --config x",
    "scontrol update nodename=x state=resume", "sacctmgr -i add user x", "munge -n -s x",
    "sinfo -o '%N|%T' > /tmp/states", "cat x 2>/tmp/err", "sysctl vm.swappiness=1",
    "echo x &", "cat x >> /etc/hosts",
])
def test_commands_that_may_change_the_node_go_live(command):
    assert not read_only(command)


# Issue 44: each command the old allow list (by first word) called read-only, beside its
# read-only twin. Every rule of the classifier has a row here: remove one and a row goes red.
TWINS = [
    ("env rm -rf /tmp/x", "env LC_ALL=C cat /etc/hosts"),
    ("command rm -rf /x", "command -v systemctl"),
    ("awk 'BEGIN{system(\"reboot\")}'", "awk '{print $1}' /proc/modules"),
    ("awk '{print > \"/etc/x\"}' /etc/hosts", "awk -F: '{print $1}' /etc/passwd"),
    ("ip link set eth0 down", "ip -j link show"),
    ("ip addr add 10.0.0.1/24 dev eth0", "ip -br addr"),
    ("dpkg -i x.deb", "dpkg -l"),
    ("dpkg --purge slurmd", "dpkg -s slurmd"),
    ("mount /dev/sda1 /mnt", "mount"),
    ("date -s 2020-01-01", "date +%s"),
    ("date 010100002020", "date -u"),
    ("sort -o /etc/passwd /etc/hosts", "sort /etc/hosts"),
    ("sort -uo /etc/passwd /etc/hosts", "sort -u /etc/hosts"),
    ("find / -fprint0 /etc/x", "find /etc -name '*.conf'"),
    ("find / -fls /etc/x", "find /sys/class -maxdepth 1"),
    ("find /tmp -exec rm {} +", "find /tmp -type f"),
    ("sed -n w/etc/x /etc/hosts", "sed -n 's/a/b/p' /etc/hosts"),
    ("sed -n 's/a/b/w /etc/x' /etc/hosts", "sed -n 1p /etc/hosts"),
    ("sed 1e\\ reboot /etc/hosts", "sed -n '/^x/p' /etc/hosts"),
    ("tail -f /var/log/syslog", "tail -n 5 /var/log/syslog"),
    ("tail -nF 5 /var/log/syslog", "tail -c 100 /var/log/syslog"),
    ("journalctl -f -u slurmd", "journalctl -u slurmd -n 20 --no-pager"),
    ("journalctl --vacuum-time=1s", "journalctl -k -b"),
    ("xargs rm", "xargs echo"),
    ("xargs -n 1 rm -f", "xargs -n 1 cat"),
    ("nice -n 5 rm -f /x", "nice -n 5 cat /etc/hosts"),
    ("timeout 5 reboot", "timeout 5 cat /etc/hosts"),
    ("timeout -s KILL 5 systemctl stop munge", "timeout -s KILL 5 systemctl is-active munge"),
    ("hostname evil", "hostname -f"),
    ("hostnamectl set-hostname evil", "hostnamectl status"),
    ("uniq /etc/hosts /etc/passwd", "uniq /etc/hosts"),
    ("ss -K dst 10.0.0.1", "ss -tlnp"),
    ("rdma link add rxe0 type rxe netdev eth0", "rdma link show"),
    ("watch cat /etc/hosts", "cat /etc/hosts"),
    ("sysctl -p", "sysctl -n vm.swappiness"),
    ("env -S 'rm -rf /x'", "env"),
    ("nohup rm -rf /x", "nohup cat /etc/hosts"),
    ("stdbuf -o0 rm -rf /x", "stdbuf -o0 cat /etc/hosts"),
    ("ionice -c 3 rm -rf /x", "ionice -c 3 cat /etc/hosts"),
    ("xargs sudo -u root rm -rf /x", "xargs sudo -u root cat"),
    # the test audit of e4dd2f2 (V1 and its list)
    ("cat /etc/hosts > /dev/sda", "cat /etc/hosts > /dev/null"),
    ("echo 1 > /dev/watchdog", "echo 1 2>/dev/null"),
    ("mount -o remount,rw /", "mount -l"),
    ("ip addr flush dev eth0", "ip addr show dev eth0"),
    ("nvidia-smi --query-gpu=x --format=csv -pm 1", "nvidia-smi --query-gpu=x --format=csv"),
    ("nvidia-smi -i 0 -r", "nvidia-smi -i 0 -q -d ECC"),
    ("nvidia-smi -q -f /etc/x", "nvidia-smi topo -p2p r"),
    ("dmesg -C", "dmesg -T"),
    ("mlxconfig -d mlx5_0 -y set ATS_ENABLED=1", "mlxconfig -d mlx5_0 q"),
    ("mstconfig -d 17:00.0 reset", "mstconfig -d 17:00.0 -e query ATS_ENABLED"),
]


@pytest.mark.parametrize(("changes", "reads"), TWINS, ids=[c for c, _ in TWINS])
def test_the_classifier_is_not_fooled(changes, reads):
    """Deny by default: the program and its arguments must be a known reading form; a
    wrapper is judged by what it runs; what may never end is not read-only."""
    assert not read_only(changes), changes
    assert read_only(reads), reads


def _rules():
    from gpuinfra_verify import batch

    return ([("judge", k) for k in batch._ARGUMENT_JUDGES]
            + [("form", k) for k in ("dpkg", "mount", "hostname", "hostnamectl")]
            + [("wrapper", k) for k in batch._WRAPPER_VALUES])


@pytest.mark.parametrize(("kind", "name"), _rules(), ids=lambda v: str(v))
def test_each_rule_is_held_by_a_row(kind, name, monkeypatch):
    """Every rule removed (its program let through whatever its arguments) turns a row of
    TWINS red: no rule is there without a test that needs it."""
    from gpuinfra_verify import batch

    if kind == "judge":
        monkeypatch.setitem(batch._ARGUMENT_JUDGES, name, lambda args: True)
    elif kind == "form":
        monkeypatch.setitem(batch.READ_ONLY_FORMS, name, re.compile(""))
    else:
        monkeypatch.delitem(batch._WRAPPER_VALUES, name)
        monkeypatch.setattr(batch, "READ_ONLY_COMMANDS", batch.READ_ONLY_COMMANDS | {name})
    batch.read_only.cache_clear()
    try:
        assert [c for c, _ in TWINS if batch.read_only(c)], f"{kind} {name}: no row needs it"
    finally:
        batch.read_only.cache_clear()


COMMANDS = ["printf 'a\\nb'", "echo out; echo err >&2; exit 3", "printf '\\000\\377'",
            "cat /nonexistent", "true", "read x; echo \"[$x]\""]


def run_here(script: str) -> bytes:
    return subprocess.run(["sh", "-c", script], capture_output=True, check=True).stdout


def test_the_batch_answers_each_command_as_if_it_ran_alone():
    """The script run by a real shell: each command's exit code, stdout and stderr byte for
    byte as `sh -c` gives them alone (stdin closed, as over an SSH exec)."""
    answers = parse_batch(run_here(batch_script(COMMANDS)), len(COMMANDS))
    alone = [subprocess.run(["bash", "-c", c], capture_output=True, stdin=subprocess.DEVNULL)
             for c in COMMANDS]
    assert answers == [(a.returncode, a.stdout, a.stderr) for a in alone]
    assert answers[1] == (3, b"out\n", b"err\n")
    assert answers[2][1] == b"\x00\xff"


def test_the_batch_prints_its_answers_at_once_at_the_end(tmp_path):
    """Nothing is printed while the commands run (each answer's small writes went to sshd as
    SSH packets of their own): the second command sees the batch's output file still empty,
    and the answers all come after the last command."""
    out = tmp_path / "out"
    commands = ["echo first", f"wc -c < {out}", "echo last"]
    with out.open("wb") as stdout:
        subprocess.run(["sh", "-c", batch_script(commands)], stdout=stdout, check=True)
    answers = parse_batch(out.read_bytes(), len(commands))
    assert answers[0][1] == b"first\n"
    assert answers[1][1] == b"0\n"
    assert answers[2][1] == b"last\n"


@pytest.mark.parametrize("cut", [
    lambda out: out[: len(out) // 2],  # the output cut mid-way
    lambda out: out.replace(b"gpuinfra-batch 1 ", b"gpuinfra-batch 7 ", 1),
    lambda out: out.replace(b"\n", b"\n!", 1),  # a line that is no base64
    lambda out: b"",
])
def test_an_answer_that_is_not_the_scripts_is_refused(cut):
    out = run_here(batch_script(COMMANDS))
    with pytest.raises(BatchUnreadable):
        parse_batch(cut(out), len(COMMANDS))


class Node:
    """A node that runs what it is sent with a real shell, and counts the round trips."""

    def __init__(self, state: str = "a") -> None:
        self.state = state
        self.sent: list[bytes] = []

    def send(self, command: bytes) -> tuple[int, bytes, bytes]:
        self.sent.append(command)
        text = command.decode()
        if text == "change":
            self.state = "b"
            return 0, b"", b""
        done = subprocess.run(["sh", "-c", text], capture_output=True,
                              env={"STATE": self.state, "PATH": "/usr/bin:/bin"})
        return done.returncode, done.stdout, done.stderr


READS = [b"echo one", b"echo $STATE", b"cat /nonexistent"]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def in_test(monkeypatch, name: str) -> None:
    monkeypatch.setenv("PYTEST_CURRENT_TEST", f"gpuinfra_verify/test_x.py::{name} (call)")


def test_learned_reads_take_one_round_trip(monkeypatch):
    in_test(monkeypatch, "test_a")
    node, sent = Node(), Counter()
    host = HostBatch("n1", "kind", learned=list(READS))
    answers = [host.run(c, node.send, sent) for c in READS]
    assert [a[1] for a in answers] == [b"one\n", b"a\n", b""]
    assert answers[2][0] != 0 and b"nonexistent" in answers[2][2]
    assert sent["n1"] == 1 and len(node.sent) == 1  # one round trip for the three


def test_a_check_asking_again_later_sees_the_node_now_another_check_gets_the_answer_held(
        monkeypatch):
    in_test(monkeypatch, "test_a")
    node, sent, clock = Node(), Counter(), Clock()
    host = HostBatch("n1", "kind", learned=list(READS), clock=clock)
    assert host.run(b"echo $STATE", node.send, sent)[1] == b"a\n"
    node.state = "c"
    # the same expression reading it twice (testinfra's is_running): the same answer
    clock.now += AGAIN_S / 2
    assert host.run(b"echo $STATE", node.send, sent)[1] == b"a\n"
    assert sent["n1"] == 1
    # another check: the answer held
    in_test(monkeypatch, "test_b")
    assert host.run(b"echo $STATE", node.send, sent)[1] == b"a\n"
    # the first check asks again a second later (it waits for a change): live
    in_test(monkeypatch, "test_a")
    clock.now += 1
    assert host.run(b"echo $STATE", node.send, sent)[1] == b"c\n"
    assert sent["n1"] == 2
    # and a later check gets that fresher answer
    in_test(monkeypatch, "test_c")
    assert host.run(b"echo $STATE", node.send, sent)[1] == b"c\n"
    assert sent["n1"] == 2


def test_a_reading_ends_at_a_change_and_the_change_drops_what_was_read_before_it(monkeypatch):
    in_test(monkeypatch, "test_a")
    node, sent = Node(), Counter()
    host = HostBatch("n1", "kind",
                     learned=[b"echo one", b"echo $STATE", b"change", b"echo x", b"echo y"])
    assert host.run(b"echo one", node.send, sent)[1] == b"one\n"
    # the reading held the commands up to the change, none after it
    assert set(host.answers) == {b"echo one", b"echo $STATE"}
    assert host.run(b"change", node.send, sent) == (0, b"", b"")  # live, never batched
    assert host.answers == {}
    # what the first reading held for `echo $STATE` was "a": read again, it is "b" now, in
    # one round trip with what the last run asked after the change
    in_test(monkeypatch, "test_b")
    assert host.run(b"echo x", node.send, sent)[1] == b"x\n"
    assert host.run(b"echo y", node.send, sent)[1] == b"y\n"
    assert sent["n1"] == 3 and b"change" in node.sent
    assert host.run(b"echo $STATE", node.send, sent)[1] == b"b\n"  # not held: live
    assert sent["n1"] == 4


def test_a_reading_the_node_cannot_give_falls_back_to_one_command_at_a_time():
    sent = Counter()

    def broken(command: bytes) -> tuple[int, bytes, bytes]:
        if command.startswith(b"d=$(mktemp"):
            return 127, b"", b"sh: 1: mktemp: not found"
        return Node().send(command)

    host = HostBatch("n1", "kind", learned=list(READS))
    assert [host.run(c, broken, sent)[1] for c in READS] == [b"one\n", b"a\n", b""]
    assert "mktemp: not found" in host.problem and sent["n1"] == 4


def test_learned_lists_are_kept_per_host_and_borrowed_by_a_host_of_the_same_kind(tmp_path):
    node = Node()
    tmp_path = tmp_path / "learned"
    first = Batches(tmp_path)
    one = first.host("n1", "gpu-worker")
    for command in [*READS, b"change"]:
        one.run(command, node.send, first.sent)
    first.save()
    kept = tmp_path / file_name("n1")
    assert kept.exists()
    import stat  # the commands a host was sent are the user's own: private
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700
    later = Batches(tmp_path)
    # in the order asked, the change too (it ends a reading's window; it is never batched)
    assert later.host("n1", "gpu-worker").learned == [*READS, b"change"]
    assert later.host("n2", "gpu-worker").learned == [*READS, b"change"]  # borrowed
    assert later.host("n3", "head").learned == []
    two = later.host("n2", "gpu-worker")
    for command in READS:
        two.run(command, node.send, later.sent)
    assert later.sent["n2"] == 1


def test_without_a_folder_every_command_goes_on_its_own_and_is_counted():
    """--no-batch: testinfra's way, each command a round trip of its own, none held."""
    node, batches = Node(), Batches(None)
    host = batches.host("n1", "kind")
    for command in [*READS, *READS]:
        host.run(command, node.send, batches.sent)
    assert node.sent == [*READS, *READS] and batches.sent["n1"] == 6
    assert host.answers == {} and not host.asked


def test_a_learned_list_another_user_may_write_is_not_run_by_the_verify_suite(tmp_path):
    """The suite's learned commands run on the node too: the deploy's trust rule holds."""
    node, folder = Node(), tmp_path / "learned"
    first = Batches(folder)
    for command in READS:
        first.host("n1", "gpu-worker").run(command, node.send, first.sent)
    first.save()
    assert Batches(folder).host("n1", "gpu-worker").learned == list(READS)
    (folder / file_name("n1")).chmod(0o664)
    later = Batches(folder)
    assert later.host("n1", "gpu-worker").learned == []
    assert later.host("n2", "gpu-worker").learned == []  # not borrowed either
    said = list(later.problems())
    assert len(said) == 1 and "is not yours alone" in said[0] and "fix: delete it" in said[0]
