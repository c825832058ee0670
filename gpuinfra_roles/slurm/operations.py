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
from pyinfra.api import FactBase, StringCommand, operation

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec.rules import clip, database_name, sql_name
from gpuinfra_deploy.facts._base import quiet
from gpuinfra_deploy.ops.checked import check_script, checked_files

SQL_NAME = sql_name()
DATABASE_NAME = database_name()

STAGE_DIR = "/etc/slurm/.gpuinfra-staged"


# What `slurmd -G` says when it checks, on a host without that node's GPUs (the head), a site
# with shared GRES (mps, shard): the node's GPU lines come from slurm.conf alone, without File=
# (gres.conf is per node; the node checks its own). Slurm 22.05, measured in a lab container:
# one `error:` line, exit 0, when the impersonated node itself shares none.
ELSEWHERE = 'SHARING configuration lacks "File" specification'


def check_command(stage: str, node: str, elsewhere: bool = False) -> str:
    """Shell: Slurm parses the staged config as ``node`` would; exit 1 with its errors if not.

    ``slurmd -G`` exits 0 on some errors (an invalid ``Cores=`` is only an ``error:`` line), so
    error and fatal lines fail the check too. ``elsewhere``: the check runs on another host
    than ``node`` (the head), where :data:`ELSEWHERE` is expected and dropped.
    """
    conf = shlex.quote(f"{stage}/slurm.conf")
    command = f"slurmd -G -f {conf} -N {shlex.quote(node)}"
    if elsewhere:
        inner = (f"out=$({command} 2>&1); rc=$?; printf '%s\\n' \"$out\" | "
                 f"grep -vF {shlex.quote(ELSEWHERE)}; exit $rc")
        command = f"sh -c {shlex.quote(inner)}"
    return check_script(command, "Slurm", stage, fail_pattern="(error|fatal):")


def checked_config(files: Mapping[str, str], check_as: str, elsewhere: bool = False,
                   **kwargs: Any) -> Any:
    """Slurm's configuration ``files`` in place, after Slurm accepted them as a set
    (:func:`gpuinfra_deploy.ops.checked.checked_files`; ``check_as``: node name for ``slurmd -G
    -N``;
    ``elsewhere``: checked on another host than that node, see :func:`check_command`)."""
    return checked_files(files=files, stage=STAGE_DIR,
                         check=check_command(STAGE_DIR, check_as, elsewhere), **kwargs)


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
        return quiet("scontrol show node -o")

    @staticmethod
    def default() -> dict[str, bool]:
        return {"answering": False, "gres_gpu": False}

    def process(self, output: list[str]) -> dict[str, bool]:
        nodes = [line for line in output if line.startswith("NodeName=")]
        return {"answering": bool(nodes), "gres_gpu": any(_GPU_TRES.search(n) for n in nodes)}


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
