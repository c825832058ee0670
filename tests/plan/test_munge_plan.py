"""Plan tests of the `munge` role on a head and a worker: Debian 12, Ubuntu 22.04 and 24.04.

The worker reads the head's MungeKeyState, so the role is planned in a two-host inventory
(tests/plan/harness.py, plan_hosts). Fixture layers (tests/plan/facts/): base-fresh, <distro>,
munge-fresh make a node before the role; slurm-fresh, slurm-converged,
slurm-converged-<distro> and slurm-converged-head|worker make one the munge and slurm roles
converged (the same key digest on every node).
"""

from __future__ import annotations

import base64
from types import SimpleNamespace

import pytest
from pyinfra.api import FunctionCommand
from pyinfra.api.exceptions import PyinfraError

from gpuinfra.errors import GpuinfraError
from gpuinfra_roles.munge import KEY, READ_KEY, ROTATION_FILE, MungeKeyState, _copy_key, munge
from gpuinfra_roles.munge.defaults import DEFAULTS
from tests.plan.harness import FakeHost, MissingFact, load_facts, plan_cluster, plan_hosts

DISTROS = ["debian-12", "ubuntu-22.04", "ubuntu-24.04"]
HEAD, WORKER = "lab-head", "lab-worker1"
HGX = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}
HEAD_KEY_OP = "The cluster's MUNGE key on the head"
COPY_OP = "The head's MUNGE key on this node"
RESTART_OP = "Restart munged on the new key"
OTHER_DIGEST = "0" * 64


def fresh(distro: str) -> dict:
    return load_facts("base-fresh", distro, "munge-fresh")


def converged(distro: str, role: str) -> dict:
    return load_facts("base-fresh", distro, "munge-fresh", "slurm-fresh", "slurm-converged",
                      f"slurm-converged-{distro}", f"slurm-converged-{role}")


def cluster(head: dict, worker: dict) -> list[FakeHost]:
    return [FakeHost(HEAD, ("head",), head, {"ssh_hostname": "10.0.0.10"}),
            FakeHost(WORKER, ("workers",), worker, {**HGX, "ssh_hostname": "10.0.0.11"})]


def with_key(facts: dict, digest: str | None, rotation: str | None = None) -> dict:
    facts["gpuinfra_roles.munge.MungeKeyState"] = {"digest": digest, "rotation": rotation}
    return facts


def head_digest(distro: str) -> str:
    return converged(distro, "head")["gpuinfra_roles.munge.MungeKeyState"]["digest"]


# ----------------------------------------------------------------------------- the head

@pytest.mark.parametrize("distro", DISTROS)
def test_fresh_head_creates_the_key_with_mungekey(distro):
    result = plan_cluster(munge, cluster(fresh(distro), fresh(distro)), HEAD)
    bits = DEFAULTS["munge_key_bits"]
    assert result.op(HEAD_KEY_OP).commands == (
        f"mungekey --create --force --bits={bits} --keyfile={KEY}",
        f"chown munge:munge {KEY} && chmod 0400 {KEY}")
    assert result.op("Install munge").commands[-1].endswith(
        "install --no-install-recommends munge")
    assert not [op for op in result.ops if COPY_OP in op.name]


@pytest.mark.parametrize("distro", DISTROS)
def test_no_command_of_the_head_moves_key_material(distro):
    """Only mungekey, chown, chmod (and files.file's touch) name the key; nothing reads it."""
    result = plan_cluster(munge, cluster(fresh(distro), fresh(distro)), HEAD)
    naming_key = [c for c in result.commands if KEY in c]
    assert naming_key
    for command in naming_key:
        programs = {part.split()[0] for part in command.split("&&")}
        assert programs <= {"mungekey", "chown", "chmod", "touch", "mkdir"}, command
    assert not any(isinstance(c, FunctionCommand) for op in result.ops for c in op.raw)


@pytest.mark.parametrize("distro", DISTROS)
def test_head_with_a_key_keeps_it(distro):
    head = with_key(fresh(distro), head_digest(distro))
    result = plan_cluster(munge, cluster(head, fresh(distro)), HEAD)
    assert result.op(HEAD_KEY_OP).commands == ()
    assert not any("mungekey" in c for c in result.commands)
    assert result.op(RESTART_OP).commands == ()


# ----------------------------------------------------------------------------- the workers

@pytest.mark.parametrize("distro", DISTROS)
def test_worker_whose_key_differs_copies_the_heads(distro):
    head = converged(distro, "head")
    worker = with_key(converged(distro, "worker"), OTHER_DIGEST)
    result = plan_cluster(munge, cluster(head, worker), WORKER)
    copy = result.op(COPY_OP)
    assert len(copy.raw) == 1 and isinstance(copy.raw[0], FunctionCommand)
    assert copy.raw[0].function is _copy_key
    assert [h.name for h in copy.raw[0].args] == [HEAD]
    assert result.op(RESTART_OP).commands == ("systemctl restart munge.service",)
    assert [op.name for op in result.changing] == [f"munge | {COPY_OP}", f"munge | {RESTART_OP}"]


@pytest.mark.parametrize("distro", DISTROS)
def test_worker_with_the_heads_key_plans_nothing(distro):
    hosts = cluster(converged(distro, "head"), converged(distro, "worker"))
    both = plan_hosts(munge, hosts, [HEAD, WORKER])
    for name in (HEAD, WORKER):
        assert both.plans[name].commands == [], (name, both.plans[name].changing)


def test_worker_without_a_key_copies_the_head_key_created_in_the_same_run():
    both = plan_hosts(munge, cluster(fresh("debian-12"), fresh("debian-12")), [HEAD, WORKER])
    assert both.plans[HEAD].op(HEAD_KEY_OP).commands[0].startswith("mungekey --create")
    assert both.plans[WORKER].op(COPY_OP).commands
    # pyinfra runs operation by operation: the copy reads the key once the head has made it.
    assert both.position(HEAD, HEAD_KEY_OP) < both.position(WORKER, COPY_OP)


def test_the_worker_needs_the_heads_facts():
    head = converged("debian-12", "head")
    del head["gpuinfra_roles.munge.MungeKeyState"]
    with pytest.raises(MissingFact, match="lab-head"):
        plan_cluster(munge, cluster(head, converged("debian-12", "worker")), WORKER)


# ----------------------------------------------------------------------------- rotation

@pytest.mark.parametrize("distro", DISTROS)
def test_new_rotation_token_regenerates_on_the_head_and_copies_in_the_same_run(distro):
    hosts = cluster(converged(distro, "head"), converged(distro, "worker"))
    both = plan_hosts(munge, hosts, [HEAD, WORKER], {"munge_key_rotation": "2026-11-22"})
    head, worker = both.plans[HEAD], both.plans[WORKER]
    assert head.op(HEAD_KEY_OP).commands == (
        f"mungekey --create --force --bits={DEFAULTS['munge_key_bits']} --keyfile={KEY}",
        f"chown munge:munge {KEY} && chmod 0400 {KEY}",
        f"mkdir -p /var/lib/gpuinfra && printf '%s\\n' 2026-11-22 > {ROTATION_FILE}")
    assert head.op(RESTART_OP).commands == ("systemctl restart munge.service",)
    assert isinstance(worker.op(COPY_OP).raw[0], FunctionCommand)
    assert worker.op(RESTART_OP).commands == ("systemctl restart munge.service",)
    assert both.position(HEAD, HEAD_KEY_OP) < both.position(WORKER, COPY_OP)


@pytest.mark.parametrize("distro", DISTROS)
def test_rotation_token_already_applied_changes_nothing(distro):
    digest = head_digest(distro)
    head = with_key(converged(distro, "head"), digest, "2026-11-22")
    worker = with_key(converged(distro, "worker"), digest)
    both = plan_hosts(munge, cluster(head, worker), [HEAD, WORKER],
                      {"munge_key_rotation": "2026-11-22"})
    assert both.plans[HEAD].commands == [] and both.plans[WORKER].commands == []


def test_a_different_token_than_the_last_applied_rotates_again():
    digest = head_digest("debian-12")
    head = with_key(converged("debian-12", "head"), digest, "2026-11-22")
    worker = with_key(converged("debian-12", "worker"), digest)
    both = plan_hosts(munge, cluster(head, worker), [HEAD, WORKER],
                      {"munge_key_rotation": "2026-12-01"})
    assert "printf '%s\\n' 2026-12-01" in both.plans[HEAD].op(HEAD_KEY_OP).commands[-1]
    assert both.plans[WORKER].op(COPY_OP).commands


def test_a_rotation_token_is_quoted_in_the_command():
    result = plan_cluster(munge, cluster(fresh("debian-12"), fresh("debian-12")), HEAD,
                          {"munge_key_rotation": "q4:2026_a"})
    assert result.op(HEAD_KEY_OP).commands[-1].endswith(
        f"printf '%s\\n' q4:2026_a > {ROTATION_FILE}")
    with pytest.raises(PyinfraError, match="munge_key_rotation = 'a b;c': not a rotation token"):
        plan_cluster(munge, cluster(fresh("debian-12"), fresh("debian-12")), HEAD,
                     {"munge_key_rotation": "a b;c"})  # refused by the gate, before any op


# ----------------------------------------------------------------------------- handlers

@pytest.mark.parametrize("host", [HEAD, WORKER])
def test_first_run_restarts_munged_after_writing_the_cluster_key(host):
    result = plan_cluster(munge, cluster(fresh("debian-12"), fresh("debian-12")), host)
    assert any("restart" in c for c in result.op(RESTART_OP).commands)


# ----------------------------------------------------------------------------- the head's place

def test_the_key_comes_from_the_one_host_of_the_head_group():
    """No head, or two: the gate refuses the site before the role runs (the key's source
    must be one host)."""
    facts = fresh("debian-12")
    no_head = [FakeHost(WORKER, ("workers",), facts, HGX)]
    with pytest.raises(PyinfraError, match="no Slurm controller"):
        plan_cluster(munge, no_head, WORKER)
    two = [*cluster(facts, facts), FakeHost("lab-head2", ("head",), facts)]
    with pytest.raises(PyinfraError, match="2 Slurm controllers"):
        plan_cluster(munge, two, WORKER)


# ----------------------------------------------------------------------------- the fact

def test_key_state_fact_reads_digest_and_rotation_never_the_key():
    fact = MungeKeyState()
    assert "sha256sum" in fact.command() and "cat /etc/munge/munge.key" not in fact.command()
    assert fact.process(["ab" * 32, "2026-11-22"]) == {"digest": "ab" * 32,
                                                       "rotation": "2026-11-22"}
    assert fact.process(["-", "-"]) == {"digest": None, "rotation": None}
    assert fact.process(["ab" * 32, "-"]) == {"digest": "ab" * 32, "rotation": None}
    assert fact.process([]) == {"digest": None, "rotation": None}


# ----------------------------------------------------------------------------- the copy itself

class FakeConnection:
    """What _copy_key may use of a pyinfra Host: run_shell_command only. pyinfra's file
    transfer (get_file/put_file) stages files in /tmp under sudo: using it fails the test."""

    def __init__(self, name: str, key: bytes | None = None, command_ok: bool = True):
        self.name, self.key, self.command_ok = name, key, command_ok
        self.data = {}
        self.state = SimpleNamespace(config=SimpleNamespace(SUDO=True))
        self.commands: list[str] = []
        self.stdin: list[str] = []

    def get_file(self, *args, **kwargs):
        raise AssertionError("the key went through pyinfra's file transfer (/tmp under sudo)")

    put_file = get_file

    def run_shell_command(self, command, **kwargs):
        assert kwargs.get("_sudo") is True and kwargs.get("print_output") is False
        self.commands.append(command.get_raw_value())
        if command is READ_KEY:
            if self.key is None:
                return False, SimpleNamespace(stdout="", stderr="No such file")
            return True, SimpleNamespace(stdout=base64.b64encode(self.key).decode() + "\n",
                                         stderr="")
        self.stdin.append(kwargs.get("_stdin"))
        return self.command_ok, SimpleNamespace(stdout="", stderr="mv: cannot move")


def test_copy_moves_the_key_through_command_input_and_output_only():
    key = bytes(range(128))
    head, worker = FakeConnection(HEAD, key), FakeConnection(WORKER)
    _copy_key(None, worker, head)
    staged = f"{KEY}.gpuinfra-new"
    assert head.commands == [f"base64 -w0 {KEY}"]
    assert worker.commands == [f"umask 0277 && base64 -d > {staged} && chown munge:munge "
                               f"{staged} && mv -f {staged} {KEY}"]
    assert [base64.b64decode(s) for s in worker.stdin] == [key]
    encoded = base64.b64encode(key).decode()
    assert not any(encoded in c or key.hex() in c for c in head.commands + worker.commands)


@pytest.mark.parametrize("source_key, ok, problem", [
    (None, True, "cannot read"),
    (b"short", True, "too short"),
    (bytes(64), False, "installing the key on lab-worker1 failed"),
])
def test_copy_failures_name_the_host(source_key, ok, problem):
    head, worker = FakeConnection(HEAD, source_key), FakeConnection(WORKER, command_ok=ok)
    with pytest.raises(GpuinfraError, match=problem):
        _copy_key(None, worker, head)
    if source_key is None or len(source_key) < 32:
        assert worker.commands == []
