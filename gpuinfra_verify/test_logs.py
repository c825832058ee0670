"""Central logs on a site with ``logs_enabled``: the head receives (stunnel in front of
systemd-journal-remote), every other node uploads its journal, the TLS files are root's with
the right modes, and the head holds each node's journal (the query the role documents)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from testinfra.host import Host

from gpuinfra.logs.journal import (
    CA_CERT,
    CA_KEY,
    CLIENT_CERT,
    CLIENT_KEY,
    REMOTE_DIR,
    REMOTE_SOCKET,
    SERVER_KEY,
    TUNNEL_SERVICE,
    UPLOAD_GROUP,
    UPLOAD_SERVICE,
)
from gpuinfra.spec import NodeSpec
from gpuinfra_verify.expect import problem
from gpuinfra_verify.failure import fail

Note = Callable[[str, object], None]


@pytest.fixture(scope="module", autouse=True)
def logs_on(node: NodeSpec) -> None:
    if not node.settings.get("logs_enabled"):
        pytest.skip("logs_enabled is False")


def _seen(host: Host, path: str) -> str:
    f = host.file(path)
    return f"{f.user}:{f.group} {f.mode:04o}" if f.exists else "missing"


def test_daemons_running(host: Host, node: NodeSpec, note: Note) -> None:
    units = (REMOTE_SOCKET, TUNNEL_SERVICE) if node.is_head else (UPLOAD_SERVICE,)
    down = [u for u in units if not host.service(u).is_running]
    if down:
        fail(note, problem(node.name, f"not running: {', '.join(down)}",
                           "the logs role did not run here, or the daemon failed (a bad key, "
                           "the address not up)",
                           f"deploy (logs role); `journalctl -u {down[0]}` on the node"))


def test_tls_files(host: Host, node: NodeSpec, note: Note) -> None:
    want = ({CA_KEY: "root:root 0600", SERVER_KEY: "root:root 0600"} if node.is_head else
            {CLIENT_KEY: f"root:{UPLOAD_GROUP} 0640", CLIENT_CERT: "root:root 0644",
             CA_CERT: "root:root 0644"})
    bad = [f"{path} {_seen(host, path)} (expected {mode})" for path, mode in want.items()
           if _seen(host, path) != mode]
    if bad:
        fail(note, problem(node.name, "; ".join(bad),
                           "a key or certificate changed by hand, or the deploy stopped "
                           "before copying it", "deploy (logs role)"))


def test_head_holds_this_nodes_journal(controller: Host, node: NodeSpec, note: Note) -> None:
    if node.is_head:
        pytest.skip("the head keeps its own journal")
    query = f"journalctl --directory {REMOTE_DIR} _HOSTNAME={node.short_name} -n 1 -o cat"
    result = controller.run(query)
    if result.rc != 0 or not result.stdout.strip():
        fail(note, problem(node.name, f"the head has no journal entry of {node.short_name} in "
                                      f"{REMOTE_DIR}",
                           "the uploader cannot reach the head's receiver (URL, certificate, "
                           "stunnel), or never ran",
                           f"`journalctl -u {UPLOAD_SERVICE}` on the node; deploy (logs "
                           "role)"))
