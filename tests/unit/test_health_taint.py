"""The taint that follows the health condition (gpuinfra.health.taint): the rule on every
state a node can be in, an operator's taints kept, and the controller that applies it
(gpuinfra_node.taint_controller) speaking HTTP to a stand-in API server."""

from __future__ import annotations

import ast
import copy
import json
import re
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuinfra.health.taint import (
    TAINT,
    TAINTED_AT,
    TRIPPED,
    Bound,
    bounded_patch,
    condition_status,
    node_patch,
    wanted_taints,
)
from gpuinfra_node import taint_controller
from tests.conftest import REPO

OURS = {"key": "gpuinfra.io/unhealthy", "value": "true", "effect": "NoSchedule"}
GPU = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
# What an operator set by hand: other keys, and our key with another effect.
MAINTENANCE = {"key": "example.com/maintenance", "value": "disk", "effect": "NoExecute",
               "timeAdded": "2026-11-20T10:00:00Z"}
CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
OUR_KEY_EVICTING = {"key": "gpuinfra.io/unhealthy", "value": "drain", "effect": "NoExecute"}


def node(status: str | None, taints: list | None = None, name: str = "gpu01",
         version: str = "41") -> dict:
    conditions = [{"type": "Ready", "status": "True"}]
    if status is not None:
        conditions.append({"type": "GpuinfraUnhealthy", "status": status,
                           "reason": "GpuinfraCheckFailed" if status == "True" else
                           "GpuinfraHealthy",
                           "message": "gpuinfra: GPU3 missing: 7 of 8 GPUs, want 8"})
    obj = {"metadata": {"name": name, "resourceVersion": version}, "spec": {},
           "status": {"conditions": conditions}}
    if taints is not None:
        obj["spec"]["taints"] = taints
    return obj


def test_the_taint_is_a_valid_taint_with_a_fixed_value():
    """Taint values follow the label-value syntax (at most 63 characters, alphanumerics and
    -_. inside, alphanumeric at both ends); the cause stays in the condition's message."""
    label_value = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
    assert re.fullmatch(label_value, TAINT["value"])
    assert TAINT == OURS


@pytest.mark.parametrize("conditions, status", [
    (None, None), ([], None), ([{"type": "Ready", "status": "True"}], None),
    ([{"type": "GpuinfraUnhealthy", "status": "True"}], "True"),
    ([{"type": "Ready", "status": "True"}, {"type": "GpuinfraUnhealthy", "status": "False"}],
     "False"),
    ([{"type": "GpuinfraUnhealthy", "status": "Unknown"}], "Unknown"),
])
def test_condition_status(conditions, status):
    assert condition_status(conditions) == status


# ---------------------------------------------------------------------------- the rule

@pytest.mark.parametrize("taints", [None, [], [GPU], [GPU, MAINTENANCE, CORDON]],
                         ids=["no-field", "none", "gpu-taint", "operator-taints"])
def test_an_unhealthy_node_gets_the_taint_and_keeps_every_other(taints):
    assert wanted_taints("True", taints) == [*(taints or []), OURS]


@pytest.mark.parametrize("taints", [[OURS], [GPU, OURS, MAINTENANCE]])
def test_an_unhealthy_node_already_tainted_needs_nothing(taints):
    assert wanted_taints("True", taints) is None
    assert node_patch(node("True", taints)) is None


def test_a_node_back_to_healthy_loses_only_our_taint():
    """An operator's taints, the GPU taint, a cordon and even our key with another effect
    stay exactly as they were, in their order."""
    taints = [GPU, MAINTENANCE, OURS, CORDON, OUR_KEY_EVICTING]
    assert wanted_taints("False", taints) == [GPU, MAINTENANCE, CORDON, OUR_KEY_EVICTING]


@pytest.mark.parametrize("taints", [None, [], [GPU, MAINTENANCE, OUR_KEY_EVICTING]])
def test_a_healthy_node_without_our_taint_needs_nothing(taints):
    assert wanted_taints("False", taints) is None
    assert node_patch(node("False", taints)) is None


@pytest.mark.parametrize("status", ["Unknown", None])
@pytest.mark.parametrize("taints", [[], [OURS], [GPU, OURS, MAINTENANCE]])
def test_unknown_or_no_condition_leaves_the_taints_alone(status, taints):
    """The check could not judge (exit 2), or node-problem-detector has not reported: no
    taint is added, none is removed."""
    assert wanted_taints(status, taints) is None
    assert node_patch(node(status, taints)) is None


def test_our_taint_with_another_value_is_set_back_to_ours():
    hand_made = {**OURS, "value": "gpu3"}
    assert wanted_taints("True", [GPU, hand_made]) == [GPU, OURS]
    assert wanted_taints("True", [OURS, OURS]) == [OURS]
    assert wanted_taints("False", [GPU, hand_made]) == [GPU]


def test_the_patch_is_conditional_on_the_version_read():
    """The patch tests the resourceVersion first: a node an operator changed after it was read
    makes the API server refuse the whole patch (HTTP 422) instead of losing their taint."""
    assert node_patch(node("True", [MAINTENANCE], version="41")) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
        {"op": "add", "path": "/spec/taints", "value": [MAINTENANCE, OURS]}]
    assert node_patch(node("False", [OURS], version="42")) == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
        {"op": "add", "path": "/spec/taints", "value": []}]


def test_the_rule_module_needs_only_the_standard_library():
    """It is shipped alone into the controller's pod
    (gpuinfra.kubernetes.manifests.health_taint_objects):
    an import of anything else would fail there."""
    tree = ast.parse((REPO / "gpuinfra" / "health" / "taint.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= sys.stdlib_module_names | {"__future__"}, imported


# ---------------------------------------------------------------------------- the controller

class FakeApiServer:
    """A stand-in for the API server: nodes to list, watch events to stream, and the JSON
    patches it received, applied the way the API server applies them (a failed test op is a
    422 and changes nothing)."""

    def __init__(self, nodes: list[dict], events: list[dict]) -> None:
        self.nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}
        self.events = events
        self.requests: list[tuple[str, str, str | None, object]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                server.requests.append(("GET", self.path, None, None))
                url = urllib.parse.urlsplit(self.path)
                if urllib.parse.parse_qs(url.query).get("watch") == ["true"]:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    for event in server.events:
                        if event["type"] == "MODIFIED":  # the node changed, then was sent
                            obj = event["object"]
                            server.nodes[obj["metadata"]["name"]] = copy.deepcopy(obj)
                        self.wfile.write(json.dumps(event).encode() + b"\n")
                    return
                # Pages as the API server cuts them: limit, and a continue token.
                query = urllib.parse.parse_qs(url.query)
                start = int(query.get("continue", ["0"])[0])
                end = start + int(query["limit"][0])
                items = list(server.nodes.values())
                meta = {"resourceVersion": "100",
                        **({"continue": str(end)} if end < len(items) else {})}
                self._send(200, {"kind": "NodeList", "metadata": meta,
                                 "items": items[start:end]})

            def do_PATCH(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                name = urllib.parse.unquote(self.path.rsplit("/", 1)[1])
                server.requests.append(("PATCH", self.path, self.headers["Content-Type"], body))
                current = server.nodes[name]
                for op in body:
                    if op["op"] == "test" and \
                            current["metadata"]["resourceVersion"] != op["value"]:
                        self._send(422, {"kind": "Status", "code": 422})
                        return
                for op in body:  # "add" at its path (RFC 6902 4.1, RFC 6901 "~1" = "/")
                    if op["op"] == "add":
                        *parents, last = [p.replace("~1", "/") for p in
                                          op["path"].split("/")[1:]]
                        target = current
                        for part in parents:
                            target = target.setdefault(part, {})
                        target[last] = op["value"]
                self._send(200, current)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def __enter__(self) -> taint_controller.Api:
        self.thread.start()
        return taint_controller.Api(f"http://127.0.0.1:{self.http.server_address[1]}")

    def __exit__(self, *exc) -> None:
        self.http.shutdown()
        self.http.server_close()

    def patches(self) -> list[tuple[str, object]]:
        return [(path, body) for method, path, _, body in self.requests if method == "PATCH"]


def test_the_controller_taints_and_untaints_through_the_api(monkeypatch):
    """One list in two pages (a sick node tainted, a recovered one untainted, a healthy one
    left alone), then a watch (the healthy node falls sick); every operator taint survives."""
    monkeypatch.setattr(taint_controller, "PAGE", 2)
    sick = node("True", [MAINTENANCE], name="gpu01")
    recovered = node("False", [GPU, OURS, CORDON], name="gpu02")
    healthy = node("False", [GPU], name="gpu03")
    falls_sick = node("True", [GPU], name="gpu03", version="101")
    fake = FakeApiServer([sick, recovered, healthy],
                         [{"type": "MODIFIED", "object": falls_sick},
                          {"type": "ERROR", "object": {"message": "too old resource version"}}])
    said: list[str] = []
    with fake as api:
        version = taint_controller.sync(api, said.append)
        taint_controller.follow(api, version, said.append)
    assert fake.patches() == [
        ("/api/v1/nodes/gpu01", node_patch(sick)),
        ("/api/v1/nodes/gpu02", node_patch(recovered)),
        ("/api/v1/nodes/gpu03", node_patch(falls_sick))]
    assert {t for m, _, t, _ in fake.requests if m == "PATCH"} == {"application/json-patch+json"}
    assert fake.nodes["gpu01"]["spec"]["taints"] == [MAINTENANCE, OURS]
    assert fake.nodes["gpu02"]["spec"]["taints"] == [GPU, CORDON]
    assert fake.nodes["gpu03"]["spec"]["taints"] == [GPU, OURS]
    lists = [p for m, p, _, _ in fake.requests if m == "GET" and "watch" not in p]
    assert lists == ["/api/v1/nodes?limit=2", "/api/v1/nodes?limit=2&continue=2"]
    watch = [p for m, p, _, _ in fake.requests if m == "GET" and "watch=true" in p]
    assert watch and "resourceVersion=100" in watch[0]
    assert said[0].startswith("gpu01: gpuinfra.io/unhealthy=true:NoSchedule added "
                              "(GpuinfraUnhealthy True: gpuinfra: GPU3 missing")
    assert said[1].startswith("gpu02: gpuinfra.io/unhealthy=true:NoSchedule removed")
    assert said[-1] == "watch ended: too old resource version"


def test_a_node_changed_meanwhile_is_not_overwritten():
    """The operator tainted gpu01 after the controller read it: the patch is refused (422),
    their taint stays, and the controller waits for the next event instead of failing."""
    seen = node("True", [], name="gpu01", version="41")
    fake = FakeApiServer([seen], [])
    said: list[str] = []
    with fake as api:
        fake.nodes["gpu01"] = node("True", [MAINTENANCE], name="gpu01", version="42")
        assert taint_controller.reconcile(api, seen, said.append) is False
    assert fake.nodes["gpu01"]["spec"]["taints"] == [MAINTENANCE]
    assert said == ["gpu01: changed while being patched (HTTP 422); read again"]


# ---------------------------------------------------------------- the circuit breaker (issue 48)

NOW = 1796640000.0


def annotated(obj: dict, **annotations: str) -> dict:
    obj["metadata"]["annotations"] = {**obj["metadata"].get("annotations", {}), **annotations}
    return obj


def test_taints_stop_at_the_breakers_share_and_the_trip_holds_every_later_one():
    """At most ``most`` GPU nodes tainted within the window: the first sick node is tainted
    and stamped, the next is held untainted with the trip annotation, a third is held by the
    trip; a node tainted before the window does not count; untainting is never held."""
    bound = Bound(most=1, window_s=3600)
    first = node("True", [GPU], name="gpu01")
    ops, why = bounded_patch(first, [first], bound, NOW)
    assert why == "" and ops[-1] == {"op": "add", "path": "/metadata/annotations",
                                     "value": {TAINTED_AT: str(int(NOW))}}
    assert ops[:-1] == node_patch(first)
    tainted = annotated(node("True", [GPU, OURS], name="gpu01"), **{TAINTED_AT: str(int(NOW))})
    second = annotated(node("True", [], name="gpu02"), owner="ops")
    ops, why = bounded_patch(second, [tainted, second], bound, NOW)
    assert why.startswith("the breaker trips: 1 GPU nodes tainted within 3600 s (gpu01), the "
                          "most allowed is 1; gpu02 held untainted")
    assert ops[0]["op"] == "test" and ops[1]["path"] == "/metadata/annotations/gpuinfra.io~1" \
        "breaker-tripped" and ops[1]["value"].startswith(f"{int(NOW)}: 1 GPU nodes tainted")
    assert len(ops) == 2  # no taint
    held = annotated(node("True", [], name="gpu02"), **{TRIPPED: "1: why"})
    third = node("True", [], name="gpu03")
    ops, why = bounded_patch(third, [tainted, held, third], bound, NOW)
    assert ops is None and why.startswith("the breaker is tripped (gpu02: 1: why)")
    # The held node itself is not tainted again while tripped; a recovered one is untainted.
    assert bounded_patch(held, [tainted, held], bound, NOW)[0] is None
    recovered = node("False", [GPU, OURS], name="gpu01")
    assert bounded_patch(recovered, [recovered, held], bound, NOW)[0] == node_patch(recovered)
    # Tainted and untainted more than a window ago: not counted.
    old = annotated(node("False", [GPU], name="gpu01"), **{TAINTED_AT: str(int(NOW) - 3601)})
    ops, why = bounded_patch(third, [old, third], bound, NOW)
    assert why == "" and ops[-1]["path"] == "/metadata/annotations"


def test_the_controller_taints_one_of_three_sick_nodes_with_a_bound_of_one():
    """Every node failing at once (a check bug): through the API, one node tainted, one held
    with the trip annotation, the third left alone; the log says which and why."""
    sick = [node("True", [GPU], name=f"gpu0{i}") for i in (1, 2, 3)]
    fake = FakeApiServer(sick, [])
    said: list[str] = []
    with fake as api:
        taint_controller.sync(api, said.append, {}, Bound(most=1, window_s=3600))
    assert fake.nodes["gpu01"]["spec"]["taints"] == [GPU, OURS]
    assert TAINTED_AT in fake.nodes["gpu01"]["metadata"]["annotations"]
    assert fake.nodes["gpu02"]["spec"]["taints"] == [GPU]
    assert "1 GPU nodes tainted" in fake.nodes["gpu02"]["metadata"]["annotations"][TRIPPED]
    assert fake.nodes["gpu03"]["spec"]["taints"] == [GPU]
    assert "annotations" not in fake.nodes["gpu03"]["metadata"]
    assert said[1].startswith("gpu02: not tainted: the breaker trips")
    assert said[2].startswith("gpu03: GpuinfraUnhealthy True, not tainted: the breaker is "
                              "tripped (gpu02: ")
    assert taint_controller.bound_from({"GPUINFRA_BREAKER_MOST": "1",
                                        "GPUINFRA_BREAKER_WINDOW": "3600"}) == Bound(1, 3600)
    assert taint_controller.bound_from({}) is None
