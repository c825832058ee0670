"""MUNGE on every node of a Slurm site: one key everywhere, munged up, credentials that decode
across nodes (a credential made on the node decodes on the head, and the other way round)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from testinfra.host import Host

from gpuinfra.spec import NodeSpec
from gpuinfra_verify.expect import problem
from gpuinfra_verify.failure import fail

Note = Callable[[str, object], None]
pytestmark = pytest.mark.usefixtures("slurm_site")
VERIFY_SCHEDULER = "slurm"
KEY = "/etc/munge/munge.key"




@pytest.fixture(scope="session")
def head_key_digest(controller: Host) -> str:
    result = controller.run(f"sha256sum {KEY}")
    return result.stdout.split()[0] if result.rc == 0 else ""


def test_munged_running(host: Host, node: NodeSpec, note: Note) -> None:
    if not host.service("munge").is_running:
        fail(note, problem(node.name, "munged is not running",
                            "munge not installed, or munged refused to start (bad key mode or "
                            "owner: it wants munge:munge 0400/0600 in a 0700 /etc/munge)",
                            "deploy (munge role); `journalctl -u munge` on the node"))


def test_munge_key_file(host: Host, node: NodeSpec, note: Note) -> None:
    key, folder = host.file(KEY), host.file("/etc/munge")
    seen = (f"{key.user}:{key.group} {key.mode:04o}" if key.exists else "missing",
            f"{folder.user}:{folder.group} {folder.mode:04o}" if folder.exists else "missing")
    if seen != ("munge:munge 0400", "munge:munge 0700"):
        fail(note, problem(node.name, f"{KEY} {seen[0]}, /etc/munge {seen[1]} (expected "
                            "munge:munge 0400, munge:munge 0700)",
                            "the key or its folder was changed by hand or by a package",
                            "deploy (munge role) to restore owner and modes"))


def test_same_key_as_head(host: Host, node: NodeSpec, head_key_digest: str, note: Note) -> None:
    result = host.run(f"sha256sum {KEY}")
    mine = result.stdout.split()[0] if result.rc == 0 else ""
    if not head_key_digest or mine != head_key_digest:
        fail(note, problem(node.name, "this node's MUNGE key differs from the head's "
                            f"(sha256 {mine[:12] or 'none'} vs {head_key_digest[:12] or 'none'})",
                            "the key was replaced on one node (a package reinstall creates a new "
                            "one), or the deploy stopped before copying it",
                            "deploy (munge role): the head's key is copied to every node"))


def test_credentials_decode_across_nodes(host: Host, controller: Host, node: NodeSpec,
                                         note: Note) -> None:
    failures = []
    for maker, reader, way in ((host, controller, "node -> head"),
                               (controller, host, "head -> node")):
        cred = maker.run("munge -n")
        decoded = reader.run(f"echo {cred.stdout.strip()} | unmunge") if cred.rc == 0 else cred
        if cred.rc != 0 or decoded.rc != 0:
            said = (decoded.stderr or decoded.stdout).strip().splitlines()
            failures.append(f"{way}: {said[-1] if said else 'failed'}")
    if failures:
        fail(note, problem(node.name, "MUNGE credentials do not decode: " + "; ".join(failures),
                            "different keys (Invalid credential), clocks apart (Expired/Rewound "
                            "credential) or munged down", "deploy (munge role); check chrony "
                            "(`chronyc tracking`) on both nodes"))
