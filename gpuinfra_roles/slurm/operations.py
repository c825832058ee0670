"""The slurm role's own operations: configuration judged by Slurm, and the accounting database.

A bad slurm.conf must never reach a running controller: a restart would take it down. So the
new files go through gpuinfra_deploy/ops/checked.py: staged beside the live ones, judged as a set
by Slurm's own parser (``slurmd -G -f <staged>/slurm.conf -N <node>``: it reads slurm.conf and
gres.conf, loads the plugins they name and prints the node's GRES), and only then moved into place,
each with an atomic rename. A refusal fails the host with Slurm's error lines and touches nothing
live, so the handlers (restart/reconfigure) never run and the daemons keep their configuration.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from pyinfra import host
from pyinfra.api import FactBase, StringCommand, operation

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec.rules import clip, sql_name
from gpuinfra_deploy.ops.checked import check_script, checked_files

SQL_NAME = sql_name()

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
    problem = SQL_NAME.problem(value)
    if problem:
        raise GpuinfraError(f"slurm: {what} = {clip(value)}: {problem} ({SQL_NAME.allowed})")
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
