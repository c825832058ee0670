"""Slurm accounting associations from the spec: the cluster, the site's accounts, its users.

Pure functions; the slurm role runs :func:`sacctmgr_script` on the head when
``slurm_accounting`` is on and something the site asks for is missing
(roles/slurm/operations.py ``accounting_associations``).

- ``slurm_accounts``: account names, each made under Slurm's ``root`` account;
- ``slurm_users``: ``{user: default account}``; the user is associated with that account
  (made too when not listed) on the cluster, and it is the user's ``DefaultAccount``.

Idempotent: the script lists what slurmdbd has (``sacctmgr -n -P list ...``) and adds only what
is missing (``sacctmgr -i add ...``, sacctmgr(1): ``-i`` commits without asking); it never
changes or removes an association it did not make. No secret is involved: sacctmgr
authenticates through MUNGE as root on the head.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence

from gpuinfra.spec.rules import list_of, mapping_of, posix_name, text

# sacctmgr(1): account names are stored in lower case; letters, digits, '_', '-', '.'.
ACCOUNT = text(r"[a-z0-9_][a-z0-9_.-]{0,63}", "an account name: lower-case letters, digits, "
               "'_', '.' or '-' (max 64)", "a Slurm account name")
ACCOUNTS = list_of(ACCOUNT, "a list of account names, e.g. ['ml', 'vision']")
USERS = mapping_of(posix_name(), ACCOUNT, "{user: default account}, e.g. {'alice': 'ml'}")
WAIT_S = 60  # slurmdbd answering sacctmgr after its (re)start


def wanted(accounts: Sequence[str],
           users: Mapping[str, str]) -> tuple[list[str], list[tuple[str, str]]]:
    """(accounts, (user, account) pairs) the site asks for: the listed accounts, then the
    users' default accounts not listed, each once."""
    names = list(dict.fromkeys([*accounts, *users.values()]))
    return names, sorted(users.items())


def missing(have: Iterable[Sequence[str]], cluster: str, accounts: Sequence[str],
            users: Mapping[str, str]) -> list[str]:
    """What slurmdbd lacks, from its associations (``cluster|account|user`` rows of
    ``sacctmgr -n -P list associations format=cluster,account,user``): ``cluster``,
    ``account <name>``, ``user <name> <account>``; [] when nothing is missing."""
    rows = [tuple(r) for r in have if len(r) >= 3]
    out = [] if any(r[0] == cluster for r in rows) else ["cluster"]
    names, pairs = wanted(accounts, users)
    for name in names:
        if (cluster, name, "") not in rows:
            out.append(f"account {name}")
    for user, account in pairs:
        if (cluster, account, user) not in rows:
            out.append(f"user {user} {account}")
    return out


def sacctmgr_script(cluster: str, accounts: Sequence[str], users: Mapping[str, str],
                    wait_s: int = WAIT_S) -> str:
    """A shell script (``set -e``) that waits for slurmdbd, then adds the cluster, each
    account and each user association that ``sacctmgr list`` does not show."""
    c = shlex.quote(cluster)
    names, pairs = wanted(accounts, users)
    lines = [
        "set -e",
        f"for i in $(seq {wait_s}); do sacctmgr -n -P list cluster format=cluster "
        ">/dev/null 2>&1 && break; sleep 1; done",
        f"sacctmgr -n -P list cluster format=cluster | grep -qx {c} || "
        f"sacctmgr -i add cluster {c}",
    ]
    for name in names:
        a = shlex.quote(name)
        lines.append(f"sacctmgr -n -P list associations cluster={c} account={a} format=user "
                     f"| grep -qx '' || sacctmgr -i add account {a} cluster={c} "
                     f"description={a} organization={c}")
    for user, account in pairs:
        u, a = shlex.quote(user), shlex.quote(account)
        lines.append(f"sacctmgr -n -P list associations cluster={c} account={a} user={u} "
                     f"format=user | grep -qx {u} || sacctmgr -i add user {u} account={a} "
                     f"defaultaccount={a} cluster={c}")
    return "\n".join(lines)
