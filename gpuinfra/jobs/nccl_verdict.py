"""The NCCL all-reduce verdict: a parsed ``all_reduce_perf`` run against its busbw floor.

:func:`judge_all_reduce` turns a :class:`gpuinfra.parsers.nccl.AllReduceResult` into
:class:`gpuinfra.verdicts.Finding` s against a :class:`gpuinfra.knowledge.nccl.BusbwThreshold`:
the log's shape is the run asked for (ranks, nodes, GPUs on each node), no wrong values, the
sweep reached large sizes, busbw at the largest size above the floor, RDMA used between nodes.
:func:`check_shape` is that first check alone, for a caller that must know the shape before it
can name a floor (`gpuinfra nccl check`: a floor for 4 nodes says nothing about a 2-node log).
DeepOps' check only asserts "out of bounds = 0"; a slow fabric passes it. Each failure carries
its cause and fix.
"""

from __future__ import annotations

from dataclasses import replace

from gpuinfra.knowledge.nccl import PLATEAU_MIN_BYTES, BusbwThreshold
from gpuinfra.parsers.nccl import AllReduceResult, size_text
from gpuinfra.verdicts import Finding

DATA_CAUSE = ("NCCL returned wrong values: data corruption in GPU memory, on NVLink or on the "
              "network (failing HBM, a flaky link, NIC or cable), or a broken NCCL/driver build")
DATA_FIX = ("rerun to see if it repeats; on every node `nvidia-smi -q -d ECC,ROW_REMAPPER`, "
            "`dmesg | grep -i xid`, `nvidia-smi nvlink -e`; bisect with single-node runs; check "
            "NCCL and driver versions match on all nodes")
RANKS_CAUSE = ("the job ran on a different number of GPUs than expected: srun started fewer "
               "tasks, a node hides a GPU, or nccl-tests was built without MPI=1 (each task then "
               "runs its own single-GPU test)")
RANKS_FIX = ("`nvidia-smi -L` on each node, `scontrol show job` for the task layout, rebuild "
             "nccl-tests with `make MPI=1 MPI_HOME=...`, and pass the right --nodes/--gpus")
UNEVEN_CAUSE = ("the nodes ran different numbers of ranks: a node hides a GPU (fallen off the "
                "bus, `nvidia-smi -L` shorter there), or the task layout was uneven (srun "
                "without --ntasks-per-node, mpirun without -npernode)")
NOT_JUDGED = ("the log is not the run that was asked for, so its busbw says nothing about the "
              "floor of the asked shape")
NOT_JUDGED_FIX = "judge the log of the run you meant, or pass the --nodes/--gpus it really had"
DERIVED_FIX = ("for a strict check pass --min-busbw (90 % of a known-good run of this fabric) "
               "and check every NIC alone with `gpuinfra perftest check`; add the run to "
               "NETWORK_MEASURED in gpuinfra/knowledge/nccl.py with its source")
SIZES_CAUSE = ("the sweep stopped before the sizes where busbw reaches its plateau (the job hit "
               "its time limit, ran out of GPU memory at the larger sizes, or -e was lowered): "
               "busbw of small messages measures latency, not bandwidth")
SIZES_FIX = "run the sweep to 8 GiB (`-b 8 -e 8G -f 2`, as the generated script does)"
SOCKET_CAUSE = ("NCCL used TCP sockets between nodes (NET/Socket) instead of InfiniBand/RoCE: "
                "no usable RDMA device, or NCCL_IB_HCA names devices that do not exist")
SOCKET_FIX = ("`ibv_devinfo` (PORT_ACTIVE) and `ibstat` on every node; check NCCL_IB_HCA against "
              "`ibv_devices`; NCCL_DEBUG=INFO shows why NET/IB was not used")
NVLS_CAUSE = ("NCCL could not use NVLink SHARP (\"NVLS multicast support is not available\" or "
              "NCCL_NVLS_ENABLE=0): on an NVSwitch board with Fabric Manager up it should be "
              "available (NCCL >= 2.17, multicast-capable driver, not disabled by a VM or a "
              "container without the IMEX/multicast devices); busbw is judged against the ring "
              "floor instead")
NVLS_FIX = ("unset NCCL_NVLS_ENABLE, check `systemctl status nvidia-fabricmanager` and the NCCL "
            "version; where NVLS is unavailable by design, the ring floor is the right one")
EXCLUSIVE = "; or other jobs shared the nodes (the generated script asks for --exclusive)"
BUSBW_CAUSES: dict[str, str] = {
    "nvswitch-all-to-all": "the NVSwitch path is degraded: Fabric Manager down, NVLinks down or "
    "trained slow, or ACS/IOMMU blocking P2P (NCCL then goes through PCIe/host memory)",
    "direct-all-to-all": "NVLinks down or trained slow between some GPUs, or ACS/IOMMU "
    "blocking P2P",
    "bridged-pairs": "an NVLink bridge not seated or links down, PCIe between the pairs trained "
    "below x16/its generation, or ACS/IOMMU blocking P2P",
    "fixed-mesh": "a GPU's NVLinks down or trained slow (the mesh then routes through PCIe), "
    "Fabric Manager down on a switched mesh, or ACS/IOMMU blocking P2P",
    "nvlink-domain": "a GPU not registered with the rack's NVLink domain (fabric State/Status in "
    "`nvidia-smi -q`), NVLinks down or trained slow",
    "pcie-only": "a GPU's PCIe link trained below x16 or its generation, P2P blocked by ACS/IOMMU "
    "or BIOS, or GPUs across sockets",
    "network": "the network between nodes is slower than this fabric's floor: NCCL fell back "
    "to TCP sockets (no IB/GPUDirect RDMA: the NCCL_DEBUG=INFO lines say NET/Socket instead of "
    "NET/IB), nvidia-peermem not loaded (no GPUDirect RDMA), an IB link down or trained slow, "
    "NCCL_IB_HCA naming the wrong devices, or ACS/IOMMU blocking GPU-to-NIC P2P",
}
BUSBW_FIXES: dict[str, str] = {
    "intra-node": "`systemctl status nvidia-fabricmanager` (NVSwitch systems), "
    "`nvidia-smi nvlink --status`, `nvidia-smi topo -p2p r`, `lspci -vvv | grep -e LnkSta -e "
    "ACSCtl`; then `gpuinfra check --profile ... --nvlink ... --topo ...` for the cause",
    "network": "`grep -E 'NET/(IB|Socket)|GDR' LOG`, `lsmod | grep nvidia_peermem` (else "
    "`modprobe nvidia-peermem`), `ibstat` on every node (State: Active, Rate as expected), "
    "`lspci -vvv | grep ACSCtl`; run one node alone to split NVLink from network",
}


def judge_all_reduce(
    result: AllReduceResult, threshold: BusbwThreshold, expected_max_bytes: int | None = None
) -> list[Finding]:
    """Findings for one run, passes included: ranks, data-errors, sizes, transport, busbw.

    expected_max_bytes: the sweep's intended largest size (the script's 8 GiB); when None only
    the 1 GiB plateau minimum is required (logs from other sweeps).
    """
    findings = [check_shape(result, threshold.nodes, threshold.gpus_per_node),
                _check_data(result), _check_sizes(result, expected_max_bytes)]
    if threshold.derived:
        findings.append(Finding("floor", "job", f"a measured floor for {threshold.nodes} nodes x "
                                f"{threshold.gpus_per_node} {threshold.model}",
                                f"none: derived from the NICs, {threshold.min_busbw:g} GB/s",
                                "warn", threshold.derived, DERIVED_FIX))
    if threshold.nodes > 1:
        findings.append(_check_transport(result, threshold))
    if threshold.condition and threshold.ring_floor is not None:
        findings.append(_check_nvls(result, threshold))
    if result.largest.size < PLATEAU_MIN_BYTES and expected_max_bytes and \
            result.largest.size >= expected_max_bytes:
        # a sweep stopped where the operator asked, below the plateau: the floors are for the
        # plateau, so busbw there is said, not judged
        row = result.largest
        findings.append(Finding(
            "busbw", "job", f"busbw judged at >= {size_text(PLATEAU_MIN_BYTES)}",
            f"{row.busbw:.2f} GB/s at {size_text(row.size)}: not judged", "warn",
            "the sweep ends below the sizes where busbw reaches its plateau (--max-size "
            f"{size_text(expected_max_bytes)}): the floor does not apply there",
            "run the sweep to 8 GiB (`-e 8G`) to judge the bandwidth"))
        return findings
    findings.append(_check_busbw(result, _applicable(result, threshold)))
    return findings


def _applicable(result: AllReduceResult, threshold: BusbwThreshold) -> BusbwThreshold:
    """The threshold itself, or its ring floor when the log shows NVLink SHARP off."""
    if result.nvls is not False or threshold.ring_floor is None:
        return threshold
    return replace(threshold, min_busbw=threshold.ring_floor, source=threshold.ring_source,
                   condition="")


def _check_nvls(result: AllReduceResult, threshold: BusbwThreshold) -> Finding:
    expected = f"{threshold.condition} (the {threshold.min_busbw:g} GB/s floor assumes it)"
    if result.nvls is None:
        return Finding("nvls", "job", expected, "the log does not say (NCCL_DEBUG unset)", "warn",
                       "NVLink SHARP use cannot be told from this log: judged as on",
                       "run with NCCL_DEBUG=INFO (the generated script sets it)")
    if result.nvls:
        return Finding("nvls", "job", expected, "NVLS multicast support is available", "ok")
    return Finding("nvls", "job", expected,
                   f"NVLS off: judged against the ring floor {threshold.ring_floor:g} GB/s",
                   "warn", NVLS_CAUSE, NVLS_FIX)


def check_shape(result: AllReduceResult, nodes: int | None,
                gpus_per_node: int | None) -> Finding:
    """The log's ranks, nodes and ranks per node against the run asked for (None: not asked).

    Fails naming both shapes when they differ, or when the log's nodes ran unequal numbers of
    ranks; warns when the log has no rank lines (trimmed).
    """
    if nodes and gpus_per_node:
        expected = f"{nodes * gpus_per_node} ranks on {nodes} node(s), {gpus_per_node} per node"
    elif nodes or gpus_per_node:
        expected = f"{nodes} node(s)" if nodes else f"{gpus_per_node} per node"
    else:
        expected = "any shape (none asked)"
    if not result.ranks:
        return Finding("ranks", "job", expected, "no '# Using devices' lines in the log", "warn",
                       "the log was trimmed: the GPU count cannot be checked",
                       "keep the whole all_reduce_perf output")
    per_host = {host: sum(1 for r in result.ranks if r.host == host) for host in result.hosts}
    counts = set(per_host.values())
    each = (f"{counts.pop()} per node" if len(counts) == 1 else
            ", ".join(f"{host} {n}" for host, n in per_host.items()))
    observed = f"{len(result.ranks)} ranks on {len(result.hosts)} node(s), {each}"
    if len(set(per_host.values())) > 1:
        return Finding("ranks", "job", expected, observed, "fail", UNEVEN_CAUSE, RANKS_FIX)
    if (nodes and nodes != len(result.hosts)) or (
            gpus_per_node and any(n != gpus_per_node for n in per_host.values())):
        return Finding("ranks", "job", expected, observed, "fail", RANKS_CAUSE, RANKS_FIX)
    return Finding("ranks", "job", expected, observed, "ok")


def unjudged(result: AllReduceResult, shape: Finding) -> list[Finding]:
    """Findings for a log whose shape is not the one asked for: busbw is not judged."""
    row = result.largest
    return [shape, _check_data(result),
            Finding("busbw", "job", "not judged", f"{row.busbw:.2f} GB/s at "
                    f"{size_text(row.size)}", "warn", NOT_JUDGED, NOT_JUDGED_FIX)]


def _check_data(result: AllReduceResult) -> Finding:
    wrong_rows = [row for row in result.rows if row.wrong]
    observed = f"out of bounds {result.out_of_bounds}, #wrong {sum(r.wrong for r in wrong_rows)}"
    if result.out_of_bounds or wrong_rows:
        sizes = ", ".join(size_text(row.size) for row in wrong_rows[:5])
        observed += f" (at {sizes})" if sizes else ""
        return Finding("data-errors", "job", "0 wrong values", observed, "fail",
                       DATA_CAUSE, DATA_FIX)
    if not result.checked:
        return Finding("data-errors", "job", "0 wrong values", "#wrong N/A (run with -c 0)",
                       "warn", "results were not checked", "run without -c 0")
    return Finding("data-errors", "job", "0 wrong values", observed, "ok")


def _check_sizes(result: AllReduceResult, expected_max_bytes: int | None) -> Finding:
    # The operator's own --max-size is what the sweep must reach (issue 47: a sweep stopped at
    # the size asked failed as "stopped before plateau"); without one, the plateau minimum.
    need = expected_max_bytes if expected_max_bytes else PLATEAU_MIN_BYTES
    largest = result.largest.size
    observed = f"{len(result.rows)} sizes, {size_text(min(r.size for r in result.rows))} .. " \
               f"{size_text(largest)}"
    expected = f"largest size >= {size_text(need)}"
    if largest < need:
        return Finding("sizes", "job", expected, observed, "fail", SIZES_CAUSE, SIZES_FIX)
    return Finding("sizes", "job", expected, observed, "ok")


def _check_transport(result: AllReduceResult, threshold: BusbwThreshold) -> Finding:
    want = "Socket" if threshold.network == "socket" else "IB"
    expected = f"NCCL network {want}" + ("" if want == "Socket" else " (or another RDMA plugin)")
    if not result.networks:
        return Finding("transport", "job", expected, "no 'Using network' line (NCCL_DEBUG unset)",
                       "warn", "the log does not say which network NCCL used",
                       "run with NCCL_DEBUG=INFO (the generated script sets it)")
    observed = ", ".join(result.networks)
    if want == "IB" and all(net == "Socket" for net in result.networks):
        return Finding("transport", "job", expected, observed, "fail", SOCKET_CAUSE, SOCKET_FIX)
    return Finding("transport", "job", expected, observed, "ok")


def _check_busbw(result: AllReduceResult, threshold: BusbwThreshold) -> Finding:
    row = result.largest
    condition = f"; with {threshold.condition}" if threshold.condition else ""
    expected = (f">= {threshold.min_busbw:g} GB/s ({threshold.bound}: {threshold.source}"
                f"{condition})")
    observed = (f"{row.busbw:.2f} GB/s at {size_text(row.size)} (out-of-place {row.oop_busbw:g}, "
                f"in-place {row.ip_busbw:g})")
    if row.busbw >= threshold.min_busbw:
        return Finding("busbw", "job", expected, observed, "ok")
    return Finding("busbw", "job", expected, observed, "fail", _busbw_cause(threshold),
                   _busbw_fix(threshold))


def _busbw_cause(threshold: BusbwThreshold) -> str:
    intra = BUSBW_CAUSES[threshold.profile]
    if threshold.bound == "network" and threshold.derived:  # the floor holds for both paths
        return f"inside a node: {intra}; between nodes: {BUSBW_CAUSES['network']}{EXCLUSIVE}"
    if threshold.bound == "network":
        return BUSBW_CAUSES["network"] + EXCLUSIVE
    if threshold.nodes > 1:
        return f"inside a node: {intra}; between nodes: {BUSBW_CAUSES['network']}{EXCLUSIVE}"
    return intra + EXCLUSIVE


def _busbw_fix(threshold: BusbwThreshold) -> str:
    if threshold.bound == "network" and not threshold.derived:
        return BUSBW_FIXES["network"]
    if threshold.nodes > 1:
        return f"{BUSBW_FIXES['intra-node']}; between nodes: {BUSBW_FIXES['network']}"
    return BUSBW_FIXES["intra-node"]
