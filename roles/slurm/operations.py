"""The slurm role's own operations: configuration judged by Slurm, and the accounting database.

A bad slurm.conf must never reach a running controller: a restart would take it down. So the
new files go through gpuinfra_deploy/ops/checked.py: staged beside the live ones, judged as a set
by Slurm's own parser (``slurmd -G -f <staged>/slurm.conf -N <node>``: it reads slurm.conf and
gres.conf, loads the plugins they name and prints the node's GRES), and only then moved into place,
each with an atomic rename. A refusal fails the host with Slurm's error lines and touches nothing
live, so the handlers (restart/reconfigure) never run and the daemons keep their configuration.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from pyinfra import host
from pyinfra.api import FactBase, FileUploadCommand, StringCommand, operation
from pyinfra.facts.files import Sha256File

from gpuinfra.errors import GpuinfraError
from gpuinfra.slurm.accounting import missing, sacctmgr_script
from gpuinfra.spec.rules import clip, database_name, sql_name
from gpuinfra_deploy.facts._base import when_up
from gpuinfra_deploy.ops.checked import (
    check_script,
    checked_files,
    digest,
    overrides_named,
    upload_source,
)
from gpuinfra_deploy.ops.slurm_trial import ELSEWHERE, controller_trial_command

SQL_NAME = sql_name()
DATABASE_NAME = database_name()

STAGE_DIR = "/etc/slurm/.gpuinfra-staged"


def check_command(stage: str, node: str, elsewhere: bool = False) -> str:
    """Shell: Slurm parses the staged config as ``node`` would; exit 1 with its errors if not.

    ``slurmd -G`` exits 0 on some errors (an invalid ``Cores=`` is only an ``error:`` line), so
    error and fatal lines fail the check too. ``elsewhere``: the check runs on another host
    than ``node`` (the head), where :data:`ELSEWHERE` is expected and dropped.
    """
    conf = shlex.quote(f"{stage}/slurm.conf")
    command = f"slurmd -G -f {conf} -N {shlex.quote(node)}"
    if elsewhere:
        # A copy of the staged slurm.conf and cgroup.conf with an empty gres.conf.
        copy = (f"cp {shlex.quote(stage)}/slurm.conf {shlex.quote(stage)}/cgroup.conf "
                f"\"$d\"/ && : > \"$d/gres.conf\" && "
                f"slurmd -G -f \"$d/slurm.conf\" -N {shlex.quote(node)}")
        inner = (f"d=$(mktemp -d) || exit 1; out=$({copy} 2>&1); rc=$?; rm -rf \"$d\"; "
                 f"printf '%s\\n' \"$out\" | grep -vF {shlex.quote(ELSEWHERE)}; exit $rc")
        command = f"sh -c {shlex.quote(inner)}"
    return check_script(command, "Slurm", stage, fail_pattern="(error|fatal):")


# What slurmctld's topology/tree plugin says of a bad topology.conf, measured with 22.05.8 in a
# lab container: a fatal line ("Switch configuration is not a tree", "... has invalid child", a
# duplicate switch, an unknown key) or an error line naming a node it cannot find, a node on
# two leaves, or nodes on no switch; and topology/block's (24.11.5, block_record.c): fatal lines,
# and the warnings for nodes in no block and names it does not know.
TOPOLOGY_REFUSED = ("fatal:|_find_node_record|switches lack access|Multiple leaf switches|"
                    "blocks lack access|Invalid hostnames in block|gpuinfra: slurmctld did not")


def topology_check_command(stage: str) -> str:
    """Shell: slurmctld reads the staged slurm.conf and topology.conf; exit 1 with its lines
    about the topology when it refuses them (:data:`TOPOLOGY_REFUSED`)."""
    return controller_trial_command(stage, TOPOLOGY_REFUSED, "slurmctld (topology.conf)")


def checked_config(files: Mapping[str, str], check_as: str, **kwargs: Any) -> Any:
    """The controller's configuration ``files`` in place, after Slurm accepted slurm.conf
    (:func:`gpuinfra_deploy.ops.checked.checked_files`; ``check_as``: a node name for ``slurmd
    -G -N``). The head has none of the nodes' GPU device files that gres.conf names, so it
    judges slurm.conf and cgroup.conf with an empty gres.conf beside them; each node judges
    its own gres.conf lines with its devices (:func:`checked_here`)."""
    check = check_command(STAGE_DIR, check_as, elsewhere=True)
    if any(path.endswith("/topology.conf") for path in files):
        check += "; " + topology_check_command(STAGE_DIR)
    return checked_files(files=files, stage=STAGE_DIR, check=check, **kwargs)


def check_sql_name(value: str, what: str) -> str:
    """``value`` when it is safe as a MariaDB identifier in the role's SQL (the rule the spec
    gate applies to slurm_db_name/slurm_db_user); raises GpuinfraError naming ``what``."""
    rule = DATABASE_NAME if what == "database" else SQL_NAME
    problem = rule.problem(value)
    if problem:
        raise GpuinfraError(f"slurm: {what} = {clip(value)}: {problem} ({rule.allowed})")
    return value


class MariaDbAccounting(FactBase):
    """Whether MariaDB has the accounting database and its user:
    ``{"database": True, "user": True}`` (both False when MariaDB is absent or down)."""

    def command(self, database: str, user: str) -> str:
        query = (f"SELECT (SELECT COUNT(*) FROM information_schema.schemata WHERE "
                 f"schema_name='{database}'), (SELECT COUNT(*) FROM mysql.user WHERE "
                 f"user='{user}' AND host='localhost')")
        return f"mysql -N -B -e {shlex.quote(query)} 2>/dev/null || echo '0 0'"

    def process(self, output: list[str]) -> dict[str, bool]:
        words = (output[-1] if output else "0 0").split()
        return {"database": words[:1] == ["1"], "user": words[1:2] == ["1"]}


@operation()
def accounting_db(database: str, user: str):
    """The accounting database, and a MariaDB user for it authenticated by unix socket.

    + database: database name (letters, digits, '_')
    + user: the OS user slurmdbd runs as; MariaDB lets it in through the local socket
    """
    check_sql_name(database, "database")
    check_sql_name(user, "user")
    have = host.get_fact(MariaDbAccounting, database=database, user=user)
    if have["database"] and have["user"]:
        host.noop(f"database {database} and user {user} already there")
        return
    sql = (f"CREATE DATABASE IF NOT EXISTS {database}; "
           f"CREATE USER IF NOT EXISTS '{user}'@'localhost' IDENTIFIED VIA unix_socket; "
           f"GRANT ALL ON {database}.* TO '{user}'@'localhost';")
    yield StringCommand("mysql", "-e", shlex.quote(sql))


# slurmctld learns the id of a TRES that is not built in (gres/gpu, from slurm.conf's
# AccountingStorageTRES) from slurmdbd. At a first start it races slurmdbd: measured in the lab,
# it exits twice ("we have no TRES from it") before slurmdbd answers, then logs "Couldn't find
# tres gres/gpu in the database, creating." Once in about ten CI runs it then ran without the
# id: jobs were recorded as cpu/mem/billing only (sacct AllocTRES without gres/gpu). Its nodes'
# CfgTRES shows the list it really holds: gres/gpu=N appears there only when the TRES is known.
_GPU_TRES = re.compile(r"CfgTRES=\S*gres/gpu=")


class SlurmctldTres(FactBase):
    """What slurmctld's own TRES list holds, read from its nodes' CfgTRES (``scontrol show
    node -o``): ``{"answering": bool, "gres_gpu": bool}``; both False when slurmctld is absent
    or not answering."""

    def command(self) -> str:
        # Waited for while slurmctld is active but not answering yet (just rebooted).
        return when_up("slurmctld", "scontrol show node -o")

    @staticmethod
    def default() -> dict[str, bool]:
        return {"answering": False, "gres_gpu": False}

    def process(self, output: list[str]) -> dict[str, bool]:
        nodes = [line for line in output if line.startswith("NodeName=")]
        return {"answering": bool(nodes), "gres_gpu": any(_GPU_TRES.search(n) for n in nodes)}


GRES_MARK = "#--gpuinfra: gres.conf--"


class RunningSlurmConf(FactBase):
    """The head's live slurm.conf and gres.conf: ``{"slurm.conf": text, "gres.conf": text}``
    (empty texts where a file is absent: a first deploy)."""

    def command(self) -> str:
        return (f"cat {STAGE_DIR.rsplit('/', 1)[0]}/slurm.conf 2>/dev/null; echo '{GRES_MARK}'; "
                f"cat {STAGE_DIR.rsplit('/', 1)[0]}/gres.conf 2>/dev/null; true")

    def process(self, output: list[str]) -> dict[str, str]:
        at = output.index(GRES_MARK) if GRES_MARK in output else len(output)
        return {"slurm.conf": "\n".join(output[:at]), "gres.conf": "\n".join(output[at + 1:])}


CHECKED_MARK = "/etc/slurm/.gpuinfra-checked"


@operation()
def checked_here(files: Mapping[str, str], check_as: str):
    """The worker's judgement of the cluster's configuration, which it does not keep (the head
    serves it: configless): ``files`` staged, ``slurmd -G`` as ``check_as`` (this node, with its
    own GPU device files), the stage removed. What was accepted is remembered by its digest
    (:data:`CHECKED_MARK`), so an unchanged configuration is not checked again."""
    mark = "".join(f"{path} {digest(text)}\n" for path, text in sorted(files.items()))
    if host.get_fact(Sha256File, path=CHECKED_MARK) == digest(mark):
        host.noop("this configuration was already accepted here")
        return
    stage = f"{STAGE_DIR}-check"
    yield StringCommand("rm", "-rf", stage, "&&", "install", "-d", "-m", "0700", stage)
    for path, text in files.items():
        yield FileUploadCommand(upload_source(text), f"{stage}/{path.rsplit('/', 1)[1]}")
    yield StringCommand(overrides_named(check_command(stage, check_as), list(files.values())))
    yield StringCommand("rm", "-rf", stage)
    yield StringCommand(f"printf %s {shlex.quote(mark)} > {CHECKED_MARK}")


def reconfigure_script(wait_s: int = 60) -> str:
    """Shell: wait (bounded) until slurmctld answers (it may have just restarted), then
    `scontrol reconfigure`: slurmctld re-reads its files and each slurmd fetches them."""
    return (f"i=0; until scontrol ping >/dev/null 2>&1; do i=$((i+1)); "
            f"if [ $i -ge {wait_s} ]; then echo 'gpuinfra: slurmctld does not answer "
            f"after {wait_s} s; `systemctl status slurmctld`, /var/log/slurm/slurmctld.log' >&2; "
            "exit 1; fi; sleep 1; done; scontrol reconfigure")


def removal_guard(nodes: list[str]) -> str:
    """Shell: exit 1, saying what to do, unless each of ``nodes`` (leaving slurm.conf: no
    longer in the inventory) is drained and runs no job. slurmctld restarted without a node
    that still runs jobs loses them; the node is drained first (docs/day2.md)."""
    names = ",".join(nodes)
    quoted = shlex.quote(names)
    fix = (f"gpuinfra: {names} left the inventory but Slurm still schedules on it: drain it "
           f"first (`scontrol update nodename={names} state=drain reason=\"leaving the "
           f"cluster\"`), wait until `squeue -w {names}` lists no job, then deploy again; "
           "nothing was changed")
    return (f"jobs=$(squeue -h -w {quoted} -o %i 2>/dev/null | paste -sd, -); "
            f"undrained=$(sinfo -h -N -n {quoted} -o '%N %T' 2>/dev/null | "
            "grep -v -e drain -e down | cut -d' ' -f1 | paste -sd, -); "
            "if [ -n \"$jobs$undrained\" ]; then "
            "echo \"jobs running: ${jobs:-none}; not drained: ${undrained:-none}\" >&2; "
            f"echo {shlex.quote(fix)} >&2; exit 1; fi")


WAIT_S, RESTART_WAIT_S = 60, 90


def gpu_tres_script() -> str:
    """Shell: wait (bounded) until slurmctld's nodes show gres/gpu in their CfgTRES; if they do
    not, restart slurmctld once (it then reads the TRES from slurmdbd) and wait again; exit 1
    naming what to look at when it still does not."""
    check = "scontrol show node -o 2>/dev/null | grep -q 'CfgTRES=[^ ]*gres/gpu='"
    restart = ("gpuinfra: slurmctld lists no gres/gpu TRES after "
               f"{WAIT_S} s (it started before slurmdbd knew the TRES): restarting it once")
    give_up = ("gpuinfra: slurmctld still lists no gres/gpu TRES: jobs would be recorded "
               "without their GPUs. On the head: sacctmgr show tres; "
               "journalctl -u slurmctld -u slurmdbd; then systemctl restart slurmctld")
    return (f"for i in $(seq {WAIT_S}); do {check} && exit 0; sleep 1; done; "
            f"echo {shlex.quote(restart)} >&2; systemctl restart slurmctld; "
            f"for i in $(seq {RESTART_WAIT_S}); do {check} && exit 0; sleep 1; done; "
            f"echo {shlex.quote(give_up)} >&2; exit 1")


@operation()
def controller_counts_gpus():
    """slurmctld holds the gres/gpu TRES, so accounting records each job's GPUs.

    Planned only where the fact does not already show it (a converged head plans nothing);
    then waits for slurmctld, restarting it once if it came up without the TRES.
    """
    state = host.get_fact(SlurmctldTres)
    if state["answering"] and state["gres_gpu"]:
        host.noop("slurmctld counts gres/gpu in its TRES")
        return
    yield StringCommand(gpu_tres_script())


class SlurmAssociations(FactBase):
    """slurmdbd's associations as ``sacctmgr`` lists them: ``{"answering": bool, "rows":
    [[cluster, account, user], ...]}`` (user "" for an account's own association); not
    answering when sacctmgr is absent or slurmdbd down (a first deploy)."""

    def command(self) -> str:
        # Waited for while slurmdbd is active but not answering yet (just rebooted).
        return when_up("slurmdbd", "sacctmgr -n -P list associations "
                       "format=cluster,account,user", down="'#not-answering'")

    def process(self, output: list[str]) -> dict[str, Any]:
        if any(line.strip() == "#not-answering" for line in output):
            return {"answering": False, "rows": []}
        return {"answering": True,
                "rows": [line.split("|")[:3] for line in output if line.count("|") >= 2]}


@operation()
def accounting_associations(cluster: str, accounts: list[str], users: dict[str, str]):
    """The cluster, the site's accounts and its users (with their default account) in
    slurmdbd: listed first, only the missing ones added (gpuinfra/slurm/accounting.py); nothing when
    slurmdbd already has them all. The script itself lists again before each add, so it is
    safe on a first deploy, when nothing could be listed while planning."""
    have = host.get_fact(SlurmAssociations)
    if have["answering"]:
        gaps = missing(have["rows"], cluster, accounts, users)
        if not gaps:
            host.noop("slurmdbd has the cluster, the accounts and the users")
            return
    yield sacctmgr_script(cluster, accounts, users)


# The file the head keeps in the shared StateSaveLocation: a backup controller that does not
# see it there would take over from another folder's state (none: every job lost).
STATE_MARK = "gpuinfra-controllers"


def state_mark_text(cluster: str, head: str) -> str:
    """What the head writes in the state folder (:data:`STATE_MARK`): the cluster and itself."""
    return (f"cluster={cluster} primary={head}\n"
            "# gpuinfra: every Slurm controller (SlurmctldHost) must see this file in "
            "StateSaveLocation\n")


def state_shared_script(state: str, head: str, want: str, backup: str,
                        wait_s: int = 60) -> str:
    """Shell, on a backup controller: wait (bounded) until the head's mark in ``state`` has the
    digest ``want``; exit 1 saying what to do when it never does."""
    mark = shlex.quote(f"{state}/{STATE_MARK}")
    fix = (f"gpuinfra: {backup} does not see {head}'s file {state}/{STATE_MARK}: "
           f"slurm_state_save_location ({state}) is not one folder shared by the controllers, "
           f"and a takeover would start from other state (every job lost). Mount the shared "
           f"filesystem at {state} on {head} and on {backup} (slurm.conf(5) StateSaveLocation: "
           "readable and writable by both), then deploy again (this deploy stopped here "
           "before slurmctld)")
    return (f"i=0; until [ \"$(sha256sum {mark} 2>/dev/null | cut -c1-64)\" = {want} ]; do "
            f"i=$((i+1)); if [ $i -ge {wait_s} ]; then echo {shlex.quote(fix)} >&2; exit 1; fi; "
            "sleep 1; done")


@operation()
def state_shared(state: str, head: str, text: str, backup: str):
    """On a backup controller: the head's mark (:func:`state_mark_text`) is in ``state`` here,
    so both read and write one folder. Planned only when the fact does not already show it."""
    want = digest(text)
    if host.get_fact(Sha256File, path=f"{state}/{STATE_MARK}") == want:
        host.noop(f"{head}'s state is in {state} here too")
        return
    yield StringCommand(state_shared_script(state, head, want, backup))
