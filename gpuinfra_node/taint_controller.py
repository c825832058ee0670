"""The taint controller: keeps ``gpuinfra.io/unhealthy=true:NoSchedule`` on the nodes whose
``GpuinfraUnhealthy`` condition is True, and takes it off when the condition is False again
(the rule: gpuinfra.health.taint.node_patch; every other taint is left alone).

It runs in the Deployment ``gpuinfra-health-taint`` on the control plane
(gpuinfra.kubernetes.manifests.health_taint_objects), in the Python image pinned in
gpuinfra.knowledge.kubernetes, with only this file and gpuinfra/health/taint.py mounted beside
it: Python's standard library only. It speaks to the API server over HTTPS as the pod's
service account (the in-cluster address, token and CA the kubelet gives every pod), which may
list, watch and patch nodes and nothing else.

The loop: list every node (a page at a time) and apply the rule to each; then watch the nodes
from that list's version and apply the rule to each change, until the server ends the watch
(WATCH_S); list again. A failed request is logged and the loop starts over after RETRY_S.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gpuinfra.health.taint import (
    CONDITION,
    TAINT_EFFECT,
    TAINT_KEY,
    TAINT_VALUE,
    condition_status,
    node_patch,
)

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
NODES = "/api/v1/nodes"
PAGE = 100
WATCH_S = 300  # the server ends each watch after this; the loop then lists again
RETRY_S = 10
TAINT = f"{TAINT_KEY}={TAINT_VALUE}:{TAINT_EFFECT}"

Log = Callable[[str], None]


def log(line: str) -> None:
    print(f"gpuinfra-health-taint: {line}", file=sys.stderr, flush=True)


class Api:
    """The few requests the controller makes. ``server``: ``https://host:port``; the bearer
    token is read from ``token_file`` at every request (the kubelet rotates it)."""

    def __init__(self, server: str, token_file: str | None = None,
                 context: ssl.SSLContext | None = None) -> None:
        self.server = server.rstrip("/")
        self.token_file = token_file
        self.context = context

    def _open(self, method: str, path: str, body: Any = None, content_type: str | None = None,
              timeout: float = 30):
        headers = {"Accept": "application/json"}
        if self.token_file:
            with open(self.token_file) as token:
                headers["Authorization"] = f"Bearer {token.read().strip()}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type or "application/json"
        request = urllib.request.Request(self.server + path, data=data, headers=headers,
                                         method=method)
        return urllib.request.urlopen(request, timeout=timeout, context=self.context)

    def pages(self) -> Iterator[tuple[list[dict[str, Any]], str]]:
        """Every node, PAGE at a time (a large cluster's node list is tens of megabytes), each
        page with the list's resourceVersion (where the watch starts)."""
        token = None
        while True:
            query = {"limit": PAGE, **({"continue": token} if token else {})}
            with self._open("GET", f"{NODES}?{urllib.parse.urlencode(query)}") as response:
                listed = json.load(response)
            yield listed.get("items") or [], listed["metadata"]["resourceVersion"]
            token = listed["metadata"].get("continue")
            if not token:
                return

    def watch(self, version: str) -> Iterator[dict[str, Any]]:
        """The node events after ``version``, one JSON object a line, until the server ends
        the watch."""
        query = urllib.parse.urlencode({"watch": "true", "resourceVersion": version,
                                        "timeoutSeconds": WATCH_S})
        with self._open("GET", f"{NODES}?{query}", timeout=WATCH_S + 30) as response:
            for line in response:
                if line.strip():
                    yield json.loads(line)

    def patch(self, name: str, ops: list[dict[str, Any]]) -> None:
        path = f"{NODES}/{urllib.parse.quote(name, safe='')}"
        with self._open("PATCH", path, ops, "application/json-patch+json"):
            pass


def in_cluster() -> Api:
    """The API server as the pod sees it (the Kubernetes service's environment variables)."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    host = f"[{host}]" if ":" in host else host
    context = ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")
    return Api(f"https://{host}:{port}", f"{ACCOUNT}/token", context)


def _why(node: Mapping[str, Any]) -> str:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == CONDITION:
            return f"{CONDITION} {condition.get('status')}: {condition.get('message', '')}"
    return CONDITION


def reconcile(api: Api, node: Mapping[str, Any], say: Log = log) -> bool:
    """The rule on one node: True when a patch was accepted."""
    ops = node_patch(node)
    if ops is None:
        return False
    name = node["metadata"]["name"]
    try:
        api.patch(name, ops)
    except urllib.error.HTTPError as error:
        if error.code in (409, 422):  # the node changed since it was read: the next event
            say(f"{name}: changed while being patched (HTTP {error.code}); read again")
            return False
        raise
    done = "added" if condition_status(
        (node.get("status") or {}).get("conditions")) == "True" else "removed"
    say(f"{name}: {TAINT} {done} ({_why(node)})")
    return True


def sync(api: Api, say: Log = log) -> str:
    """The rule on every node; the list's resourceVersion."""
    version = ""
    for nodes, page_version in api.pages():
        for node in nodes:
            reconcile(api, node, say)
        version = page_version
    return version


def follow(api: Api, version: str, say: Log = log) -> None:
    """The rule on every node that changes, until the watch ends or the server says its
    version is gone (then the caller lists again)."""
    for event in api.watch(version):
        kind = event.get("type")
        if kind in ("ADDED", "MODIFIED"):
            reconcile(api, event["object"], say)
        elif kind == "ERROR":
            say(f"watch ended: {(event.get('object') or {}).get('message', 'error')}")
            return


def main() -> None:
    api = in_cluster()
    say = log
    say(f"keeping {TAINT} on the nodes whose {CONDITION} is True")
    while True:
        try:
            follow(api, sync(api, say), say)
        except (OSError, ValueError, KeyError) as error:
            say(f"{type(error).__name__}: {error}; again in {RETRY_S} s")
            time.sleep(RETRY_S)


if __name__ == "__main__":
    main()
