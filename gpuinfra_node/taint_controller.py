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
Every node seen is kept, so the circuit breaker's bound (gpuinfra.health.taint.bounded_patch,
GPUINFRA_BREAKER_MOST and GPUINFRA_BREAKER_WINDOW in the environment) counts them all.
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
    Bound,
    bounded_patch,
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


def bound_from(environ: Mapping[str, str]) -> Bound | None:
    """The circuit breaker's bound from the Deployment's environment (GPUINFRA_BREAKER_MOST,
    GPUINFRA_BREAKER_WINDOW: gpuinfra.kubernetes.manifests.health_taint_objects); None
    (unbounded) when absent."""
    most, window = environ.get("GPUINFRA_BREAKER_MOST"), environ.get("GPUINFRA_BREAKER_WINDOW")
    if not most or not window:
        return None
    return Bound(int(most), int(window))


def reconcile(api: Api, node: Mapping[str, Any], say: Log = log,
              known: dict[str, Mapping[str, Any]] | None = None,
              bound: Bound | None = None) -> bool:
    """The rule on one node (within ``bound`` over the ``known`` nodes, when given): True when
    a patch was accepted."""
    name = node["metadata"]["name"]
    if known is not None:
        known[name] = node
    held = ""
    if bound is not None and known is not None:
        ops, held = bounded_patch(node, known.values(), bound, time.time())
    else:
        ops = node_patch(node)
    if ops is None:
        if held:
            say(f"{name}: {CONDITION} True, not tainted: {held}")
        return False
    try:
        api.patch(name, ops)
    except urllib.error.HTTPError as error:
        if error.code in (409, 422):  # the node changed since it was read: the next event
            say(f"{name}: changed while being patched (HTTP {error.code}); read again")
            return False
        raise
    if known is not None:
        known[name] = _patched(node, ops)
    if held:
        say(f"{name}: not tainted: {held}")
        return True
    done = "added" if condition_status(
        (node.get("status") or {}).get("conditions")) == "True" else "removed"
    say(f"{name}: {TAINT} {done} ({_why(node)})")
    return True


def _patched(node: Mapping[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The node as the accepted patch left it (what the next event will show), so the next
    node's count includes it before its watch event arrives."""
    out = json.loads(json.dumps(node))
    for op in ops:
        if op["op"] != "add":
            continue
        path = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = out
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = op["value"]
    return out


def sync(api: Api, say: Log = log, known: dict[str, Mapping[str, Any]] | None = None,
         bound: Bound | None = None) -> str:
    """The rule on every node (every page read first: the bound counts them all); the list's
    resourceVersion."""
    version, nodes = "", []
    for page, page_version in api.pages():
        nodes += page
        version = page_version
    if known is not None:
        known.clear()
        known.update({n["metadata"]["name"]: n for n in nodes})
    for node in nodes:
        reconcile(api, node, say, known, bound)
    return version


def follow(api: Api, version: str, say: Log = log,
           known: dict[str, Mapping[str, Any]] | None = None, bound: Bound | None = None) -> None:
    """The rule on every node that changes, until the watch ends or the server says its
    version is gone (then the caller lists again)."""
    for event in api.watch(version):
        kind = event.get("type")
        if kind in ("ADDED", "MODIFIED"):
            reconcile(api, event["object"], say, known, bound)
        elif kind == "DELETED" and known is not None:
            known.pop((event.get("object") or {}).get("metadata", {}).get("name", ""), None)
        elif kind == "ERROR":
            say(f"watch ended: {(event.get('object') or {}).get('message', 'error')}")
            return


def main() -> None:
    api = in_cluster()
    say = log
    bound = bound_from(os.environ)
    known: dict[str, Mapping[str, Any]] = {}
    say(f"keeping {TAINT} on the nodes whose {CONDITION} is True"
        + (f", on at most {bound.most} within {bound.window_s} s (the circuit breaker)"
           if bound else ""))
    while True:
        try:
            follow(api, sync(api, say, known, bound), say, known, bound)
        except (OSError, ValueError, KeyError) as error:
            say(f"{type(error).__name__}: {error}; again in {RETRY_S} s")
            time.sleep(RETRY_S)


if __name__ == "__main__":
    main()
