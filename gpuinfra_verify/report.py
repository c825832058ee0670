"""The verify suite's report: a short per-node account of a finished run's junit XML.

Per node: its groups, the GPUs the spec expects and those nvidia-smi listed, the topology
verdict (with the first failed check and its cause), the base role's checks and the chrony/sshd
service states. Everything comes from the suite's junit XML (outcomes, and the properties the
tests record), so the report says no more than the tests proved. `gpuinfra report` prints it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra_verify.expect import NO_HOST

# Test module -> its line in the report, in this order (other modules follow, by their name).
SECTIONS = {"test_gpu": "topology", "test_common": "base role"}
_ORDER = list(SECTIONS)


@dataclass(frozen=True)
class Case:
    """One test of the junit XML, on one node."""

    node: str
    module: str  # e.g. "test_gpu"
    test: str  # e.g. "test_p2p"
    outcome: str  # "passed", "failed" or "skipped"
    message: str = ""
    props: dict[str, str] = field(default_factory=dict)


def read_junit(text: str) -> list[Case]:
    """The node-parametrized test cases of a pytest junit XML (others are left out)."""
    cases = []
    for element in ET.fromstring(text).iter("testcase"):
        name = element.get("name", "")
        if "[" not in name:
            continue
        test, node = name.split("[", 1)
        node = node.split("]", 1)[0]
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            child = element.find(kind)
            if child is not None:
                outcome = "skipped" if kind == "skipped" else "failed"
                message = (child.get("message") or child.text or "").strip()
                break
        props = {p.get("name", ""): p.get("value", "") for p in element.iter("property")}
        module = element.get("classname", "").rsplit(".", 1)[-1]
        cases.append(Case(node, module, test, outcome, message, props))
    return cases


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _section(cases: Sequence[Case]) -> str:
    failed = [c for c in cases if c.outcome == "failed"]
    passed = sum(c.outcome == "passed" for c in cases)
    if not failed:
        skipped = len(cases) - passed
        return f"pass ({passed} checks{f', {skipped} skipped' if skipped else ''})"
    first = failed[0]
    reason = first.props.get("failure") or f"{first.test}: {_first_line(first.message)}"
    text = f"FAIL {reason}"
    others = [c.test for c in failed[1:]]
    if others:
        text += f"\n{'':13}also failed: {', '.join(others)}"
    return text


def _gpus(node: NodeSpec, cases: Sequence[Case]) -> str:
    if node.gpus is None:
        return "none in the spec"
    expected = f"{node.gpus.count}x {node.gpus.model.key} ({node.gpus.topology.name})"
    seen = next((c.props["gpus_seen"] for c in cases if "gpus_seen" in c.props), "?")
    return f"expected {expected}, seen {seen}"


def _node_report(node: NodeSpec, cases: Sequence[Case]) -> list[str]:
    lines = [f"{node.name} ({', '.join(node.groups) or 'no group'})",
             f"  {'GPUs':<11}{_gpus(node, cases)}"]
    if not cases:
        return [*lines, "  not verified: no test results for this node"]
    modules = sorted({c.module for c in cases},
                     key=lambda m: (_ORDER.index(m) if m in SECTIONS else len(_ORDER), m))
    for module in modules:
        label = SECTIONS.get(module, module.removeprefix("test_"))
        lines.append(f"  {label:<11}{_section([c for c in cases if c.module == module])}")
    props = {k: v for c in cases for k, v in c.props.items()}
    services = "; ".join(f"{name} {props.get(name, '?')}" for name in ("chrony", "sshd"))
    lines.append(f"  {'services':<11}{services}")
    return lines


def render(spec: ClusterSpec, cases: Sequence[Case], source: str) -> tuple[str, int]:
    """(the report text, exit code: 0 no failure, 1 any failure)."""
    counts = {k: sum(c.outcome == k for c in cases) for k in ("passed", "failed", "skipped")}
    total = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    lines = [f"gpuinfra report: {len(spec.nodes)} nodes, {len(cases)} checks: "
             f"{total or 'none run'} ({source})"]
    for node in spec.nodes:
        lines += _node_report(node, [c for c in cases if c.node == node.name])
    unknown = sorted({c.node for c in cases} - {n.name for n in spec.nodes} - {NO_HOST})
    if unknown:
        lines.append(f"results for nodes not in the inventory: {', '.join(unknown)}")
    verdict = "FAILED" if counts["failed"] else "all checks passed"
    lines.append(f"verdict: {verdict}")
    return "\n".join(lines), 1 if counts["failed"] else 0
