"""The report's junit fixtures: a real verify run of the lab, with the GPU properties added.

tests/fixtures/report/lab-broken-verify.xml is the junit XML of a real run of the verify suite
(`pytest gpuinfra_verify --inventory inventory/lab.py -n 4 --junitxml`) on the lab started
with `gpuinfra lab up --broken` (lab-head, lab-worker1..3; 188 tests: 134 passed, 7 failed,
47 skipped), taken before test_gpu recorded its matrices. The GPU tests' new properties
(gpuinfra_verify/matrices.py) are added here by the suite's own code on the very captures each
worker replays (gpuinfra_lab/hardware/<profile>/): check_system judges them as the health
check's judge does, and matrices.* encode what test_gpu records. ``healthy=True`` leaves the
broken worker out (the default lab's three hosts; the testsuite's counts recomputed).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from gpuinfra.parsers.fabric import parse_fabric
from gpuinfra.parsers.nvlink import parse_nvlink
from gpuinfra.parsers.p2p import parse_p2p
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.spec import ClusterSpec, HostInput, build_cluster
from gpuinfra.verdicts import check_system
from gpuinfra_lab.profiles import PROFILES, plan_hosts
from gpuinfra_lab.replay import HARDWARE
from gpuinfra_verify import matrices
from gpuinfra_verify.expect import FAMILIES

REAL_RUN = Path(__file__).resolve().parent / "fixtures" / "report" / "lab-broken-verify.xml"
BROKEN = "lab-worker3"
_TESTS = {"test_gpu_count": "gpu-count", "test_nvlink_topology": "nvlink-topology",
          "test_p2p": "p2p", "test_nvlink_links": "nvlink-links"}


def lab_spec(healthy: bool = False) -> ClusterSpec:
    """The lab's spec as inventory/lab.py makes it (the specs of gpuinfra_lab/profiles.py)."""
    hosts = [HostInput(h.name, h.groups, dict(PROFILES[h.profile].spec) if h.profile else {})
             for h in plan_hosts(2, broken=True) if not (healthy and h.name == BROKEN)]
    return build_cluster(hosts)


def _properties(profile: str, test: str) -> dict[str, str]:
    """What test_gpu's ``test`` records on a worker replaying ``profile``'s hardware."""
    folder = HARDWARE / profile
    spec = PROFILES[profile].spec

    def read(name: str) -> str | None:
        path = folder / name
        return path.read_text() if path.is_file() else None

    topo = parse_topo(read("topo-m.txt")) if read("topo-m.txt") else None
    p2p = [parse_p2p(read(f"topo-p2p-{m}.txt"), m) for m in "rw" if read(f"topo-p2p-{m}.txt")]
    nvlink = parse_nvlink(read("nvlink-s.txt")) if read("nvlink-s.txt") else None
    fabric = parse_fabric(read("q.txt")) if read("q.txt") else None
    findings = check_system(spec["gpu_topology"], spec["gpu_count"], spec["gpu_model"],
                            topo=topo, p2p=p2p, nvlink=nvlink, fabric=fabric)
    props: dict[str, str] = {}
    if test == "test_nvlink_topology" and topo is not None:
        seen = matrices.nvlink_seen(topo)
        props[matrices.NVLINK_SEEN] = matrices.dump(seen)
        props[matrices.NVLINK_EXPECTED] = matrices.dump(
            matrices.nvlink_expected(findings, seen["gpus"]))
    if test == "test_p2p" and p2p:
        props[matrices.P2P] = matrices.dump(matrices.p2p_matrix(p2p))
    family = [f for f in findings if f.check in FAMILIES[_TESTS[test]] and f.failed]
    if family:
        props[matrices.FAILED] = matrices.dump(matrices.failed_findings(family))
    return props


def lab_junit(healthy: bool = False) -> str:
    """The junit XML (see the module's text)."""
    root = ET.fromstring(REAL_RUN.read_text())
    profiles = {h.name: h.profile for h in plan_hosts(2, broken=True)}
    for suite in root.iter("testsuite"):
        for case in list(suite.iter("testcase")):
            name = case.get("name", "")
            test, _, host = name.partition("[")
            host = host.rstrip("]")
            if healthy and host == BROKEN:
                suite.remove(case)
                continue
            if case.get("classname") != "gpuinfra_verify.test_gpu" or test not in _TESTS:
                continue
            added = _properties(profiles[host] or "", test)
            if not added:
                continue
            props = case.find("properties")
            if props is None:
                props = ET.Element("properties")
                case.insert(0, props)
            for key, value in added.items():
                ET.SubElement(props, "property", name=key, value=value)
        cases = list(suite.iter("testcase"))
        suite.set("tests", str(len(cases)))
        for attr, kinds in (("failures", ("failure",)), ("errors", ("error",)),
                            ("skipped", ("skipped",))):
            suite.set(attr, str(sum(any(c.find(k) is not None for k in kinds) for c in cases)))
    return ET.tostring(root, encoding="unicode")
