"""RDMA on the hosts with rdma_nics (the `rdma` role), against the spec.

Each NIC is present with its link layer; its port ACTIVE/LinkUp at the spec's rate (a lower
rate is its own failure); ATS enabled in the firmware's Current value and on the PCIe
function (`ATSCtl: Enable+`); on GPU nodes the GPUDirect RDMA path (nvidia-peermem loaded, or
DMA-BUF), ACS off on the bridges between each GPU and its NIC, and the GPU-NIC affinity of
`nvidia-smi topo -m`; an `ib_write_bw` to the next RDMA host above a floor. In the lab these run
on two QEMU guests with Soft-RoCE (rxe) on a private segment: real verbs devices, real traffic,
emulated speed (gpuinfra_lab/README.md); firmware and GPU checks skip there, said why.
"""

from __future__ import annotations

import shlex
import warnings
from collections.abc import Callable

import pytest
from testinfra.host import Host

from gpuinfra.errors import ParseError
from gpuinfra.knowledge.packages import open_modules_for
from gpuinfra.parsers.mlxconfig import parse_mlxconfig
from gpuinfra.parsers.pcisysfs import PCI_SYSFS_COMMAND, parse_pci_sysfs
from gpuinfra.parsers.pcitree import (
    NIC_ADDRESSES_COMMAND,
    PCI_PATHS_COMMAND,
    acs_control_command,
    parse_acs_control,
    parse_nic_addresses,
    parse_pci_paths,
)
from gpuinfra.parsers.perftest import IbWriteBw, parse_ib_write_bw
from gpuinfra.parsers.system import parse_proc_modules
from gpuinfra.parsers.topo import parse_topo
from gpuinfra.rdma.node import (
    ATS,
    acs_bridges,
    ancestors_of,
    gid_index,
    gpudirect_path,
    nearest_pairs,
)
from gpuinfra.rdma.verdicts import (
    PORTS_COMMAND,
    Port,
    acs_findings,
    affinity_findings,
    ats_findings,
    ats_lspci_findings,
    bandwidth_findings,
    gpudirect_findings,
    message,
    port_findings,
    ports_from_sysfs,
    presence_findings,
    rate_findings,
)
from gpuinfra.spec import NodeSpec
from gpuinfra.verdicts import Finding
from gpuinfra.vfio import binding
from gpuinfra_verify import matrices
from gpuinfra_verify.expect import SiteUnderTest
from gpuinfra_verify.failure import fail

VERIFY_NODES = "rdma"
Note = Callable[[str, object], None]
BW_SECONDS = 5  # perftest -D: seconds of traffic
PERFTEST_PORT = 18515  # perftest's default TCP port for the connection exchange
LISTEN_WAIT_S = 30


def _measured(text: str) -> bool:
    """Whether ``text`` holds a complete ib_write_bw result (banner and result rows)."""
    try:
        parse_ib_write_bw(text)
    except ParseError:
        return False
    return True


@pytest.fixture(scope="module")
def ports(host: Host) -> dict[str, Port]:
    return ports_from_sysfs(host.check_output(PORTS_COMMAND))


def _judge(node: NodeSpec, findings: list[Finding], note: Note) -> None:
    failures = [f for f in findings if f.failed]
    for found in findings:
        if found.severity == "warn":
            warnings.warn(message(node.name, [found]), stacklevel=2)
            note("warning", found.what)
    if failures:
        fail(note, message(node.name, failures))


def _gpu_node(node: NodeSpec) -> None:
    if node.gpus is None:
        pytest.skip("no GPUs in the spec: no GPUDirect RDMA to check")


def _real_nics(node: NodeSpec) -> None:
    if node.soft_roce:
        pytest.skip("Soft-RoCE (soft_roce): no firmware, no PCI function")


def test_nics_present(node: NodeSpec, ports: dict[str, Port], note: Note) -> None:
    note("devices", ", ".join(sorted(ports)))
    _judge(node, presence_findings(node.rdma_nics, ports), note)


def test_ports_active(node: NodeSpec, ports: dict[str, Port], note: Note) -> None:
    note(matrices.RDMA_PORTS, matrices.dump(matrices.rdma_ports(node.rdma_nics, ports)))
    _judge(node, port_findings(node.rdma_nics, ports), note)


def test_port_rate(node: NodeSpec, ports: dict[str, Port], note: Note) -> None:
    note("rates", ", ".join(f"{p.device} {p.rate_gbps:g}" for p in ports.values()
                            if p.rate_gbps is not None))
    _judge(node, rate_findings(node.rdma_nics, ports), note)


def test_ats_in_firmware(host: Host, node: NodeSpec, note: Note) -> None:
    _real_nics(node)
    found_at = parse_nic_addresses(host.check_output(NIC_ADDRESSES_COMMAND))
    findings = []
    for nic in node.rdma_nics:
        pci = nic.pci or found_at.get(nic.name)
        if pci is None:
            continue  # test_nics_present says it is missing
        out = host.run(f"mstconfig -d {shlex.quote(pci)} -e query {ATS}")
        query = parse_mlxconfig(out.stdout) if out.rc == 0 and out.stdout.strip() else None
        findings += ats_findings(nic, query)
        if nic.ats:
            findings += ats_lspci_findings(nic, host.run(f"lspci -vvv -s {pci}").stdout)
    _judge(node, findings, note)


def test_gpudirect(host: Host, site: SiteUnderTest, node: NodeSpec, note: Note) -> None:
    _gpu_node(node)
    assert node.gpus is not None
    path = gpudirect_path(site.spec.rdma_stack,
                          open_modules_for(node.gpus.model,
                                           node.settings["nvidia_driver_open_modules"]),
                          node.settings["rdma_peermem"])
    note("gpudirect", path.path)
    modules = parse_proc_modules(host.file("/proc/modules").content_string).modules
    _judge(node, gpudirect_findings(path, modules), note)


def test_acs_off(host: Host, node: NodeSpec, note: Note) -> None:
    _gpu_node(node)
    _real_nics(node)
    if not node.settings["rdma_acs_disable"]:
        pytest.skip("rdma_acs_disable is False")
    pci = parse_pci_sysfs(host.check_output(PCI_SYSFS_COMMAND))
    paths = parse_pci_paths(host.check_output(PCI_PATHS_COMMAND))
    found_at = parse_nic_addresses(host.check_output(NIC_ADDRESSES_COMMAND))
    gpus = [f.address for f in pci.functions
            if f.vendor_id == "10de" and f.class_code[:4] in ("0300", "0302")]
    protected: set[str] = set()
    if node.vfio is not None:
        passed = binding(node.vfio.addresses, node.vfio.ids, pci).functions
        protected, gpus = ancestors_of(passed, paths), [g for g in gpus if g not in passed]
    nics = [a for a in (n.pci or found_at.get(n.name) for n in node.rdma_nics) if a]
    bridges = acs_bridges(nearest_pairs(gpus, nics, paths), protected)
    if not bridges:
        pytest.skip("no bridge between a GPU and its NIC (separate root ports)")
    control = parse_acs_control(host.check_output(acs_control_command(bridges)))
    note("bridges", ", ".join(bridges))
    _judge(node, acs_findings(bridges, control), note)


def test_gpu_nic_affinity(host: Host, node: NodeSpec, note: Note) -> None:
    _gpu_node(node)
    _real_nics(node)
    topo = parse_topo(host.check_output("nvidia-smi topo -m"))
    _judge(node, affinity_findings(node.rdma_nics, topo), note)


def _peer(site: SiteUnderTest, node: NodeSpec) -> NodeSpec:
    """The next host with rdma_nics (cyclic): every RDMA host is a client once."""
    rdma = [n for n in site.spec.nodes if n.rdma_nics]
    if len(rdma) < 2:
        pytest.skip("one RDMA host: no peer for ib_write_bw")
    return rdma[(rdma.index(node) + 1) % len(rdma)]


def _address(peer_host: Host, peer: NodeSpec) -> str:
    """The peer's address for perftest's connection: its first NIC's netdev, else its node
    address."""
    netdev = peer.rdma_nics[0].netdev
    if netdev:
        out = peer_host.check_output(f"ip -4 -o addr show dev {shlex.quote(netdev)}")
        if out.split():
            return out.split()[3].split("/")[0]
    if peer.address is None:
        pytest.skip(f"no address for {peer.name}: set node_address or the NIC's netdev")
    return peer.address


def test_ib_write_bw(host: Host, site: SiteUnderTest, node: NodeSpec, note: Note,
                     reach: Callable[[str], Host]) -> None:
    peer = _peer(site, node)
    peer_host = reach(peer.name)
    nic, peer_nic = node.rdma_nics[0], peer.rdma_nics[0]
    common = ["-F", "--report_gbits", "-D", str(BW_SECONDS)]
    index = gid_index(node.rdma_nics)
    if index is not None:
        common += ["-x", str(index)]
    # GPU memory where both ends have GPUs and perftest was built with CUDA (the
    # distributions' perftest is not: then host memory, said in the test's properties).
    has_cuda = "ib_write_bw --help 2>&1 | grep -q -- --use_cuda"
    cuda = ["--use_cuda=0"] if (node.gpus is not None and peer.gpus is not None
                                and host.run(has_cuda).rc == 0
                                and peer_host.run(has_cuda).rc == 0) else []
    note("memory", "GPU (--use_cuda=0)" if cuda else "host")
    server = ["timeout", str(BW_SECONDS + 60), "ib_write_bw", "-d", peer_nic.name, *common,
              *cuda]

    def measure() -> IbWriteBw:
        # No server left from an earlier run holds perftest's port on either end.
        for end in (host, peer_host):
            end.run("pkill -x ib_write_bw; true")
        peer_host.run("sh -c " + shlex.quote(" ".join(map(shlex.quote, server))
                                             + " </dev/null >/dev/null 2>&1 &"))
        # Until the server listens (seconds on a slow emulated guest), not a fixed pause.
        peer_host.run(f"for i in $(seq {LISTEN_WAIT_S * 2}); do "
                      f"ss -ltn | grep -q ':{PERFTEST_PORT} ' && break; sleep 0.5; done")
        client = ["timeout", str(BW_SECONDS + 50), "ib_write_bw", "-d", nic.name, *common, *cuda,
                  _address(peer_host, peer)]
        out = host.run(" ".join(map(shlex.quote, client)))
        if out.rc == 124 and _measured(out.stdout):
            # The run measured and printed its result, then hung closing the connection (seen on
            # Soft-RoCE under emulation) until timeout killed it: the measurement stands.
            note("client", "printed its result, then was stopped by timeout while closing")
        elif out.rc != 0:
            fail(note, message(node.name, [Finding(
                f"ib_write_bw from {nic.name} to {peer.name}/{peer_nic.name} failed (exit "
                f"{out.rc}): {(out.stderr or out.stdout).strip()[-300:]}",
                "no RDMA connection: a port down, the peer unreachable on its address, a wrong "
                "GID index (RoCE), or perftest missing", "`ibv_devinfo`, `rdma link`, ping the "
                "peer; on RoCE `show_gids` for the index")]))
        return parse_ib_write_bw(out.stdout)

    result = measure()
    if node.soft_roce and result.lowest_at_largest == 0:
        # Soft-RoCE between emulated guests can stall for a whole run (seen once in CI on
        # 2026-11-26: 0 Gb/s, no completion in 5 s; the scenario rerun measured normally).
        # Lab only: a real NIC that measures 0 fails at once.
        note("retried", "the first run measured 0 Gb/s (a Soft-RoCE stall): measured again")
        result = measure()
    note("ib_write_bw_gbps", result.lowest_at_largest)
    _judge(node, bandwidth_findings(result, nic, node.soft_roce), note)
