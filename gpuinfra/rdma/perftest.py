"""Per-NIC bandwidth check: a parsed ``ib_write_bw`` run against the floor for the NIC's rate.

:func:`judge_ib_write_bw` turns a :class:`gpuinfra.parsers.perftest.IbWriteBw` into a
:class:`gpuinfra.verdicts.Finding`: the lowest BW average at the largest message size reaches
:func:`gpuinfra.knowledge.network.nic_floor`, and the messages were large enough to measure
bandwidth. Each failure carries its cause and fix.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuinfra.knowledge.network import MIN_MESSAGE_BYTES, nic_floor
from gpuinfra.parsers.perftest import IbWriteBw
from gpuinfra.verdicts import Finding

SLOW_CAUSE = ("the NIC path is slower than a healthy NIC of this rate: port trained below its "
              "rate or width (`ibstat`: Rate), the NIC's PCIe link degraded (`lspci -vvv`: "
              "LnkSta below LnkCap, or `dmesg | grep mlx5` 'limited by'), symbol errors on the "
              "cable, or with --use_cuda a GPU-NIC path crossing the CPU (ACS/IOMMU)")
SLOW_FIX = ("`ibstat` and `mlxlink -d <dev> --port_type PCIE` on both ends, `perfquery -x` for "
            "error counters; reseat/replace the cable or transceiver; check the NIC's slot; "
            "rerun with the other end's NIC to tell which side is slow")
SMALL_CAUSE = "the messages are too small to measure bandwidth (latency dominates)"
SMALL_FIX = ("run `ib_write_bw -d <dev> -s 8388608 -F --report_gbits [--use_cuda=<gpu>] "
             "<server>` as Azure's health checks do")


def judge_ib_write_bw(result: IbWriteBw, nic_gbps: float) -> list[Finding]:
    """nic-bandwidth: the lowest BW average at the largest size reaches the NIC floor."""
    floor = nic_floor(nic_gbps, result.largest)
    subject = result.device
    expected = f">= {floor.gbps:g} Gb/s for a {nic_gbps:g} Gb/s NIC ({floor.source})"
    observed = f"{result.lowest_at_largest:g} Gb/s at {result.largest} B ({result.link_type})"
    if result.largest < MIN_MESSAGE_BYTES:
        return [Finding("nic-bandwidth", subject, expected, observed, "fail", SMALL_CAUSE,
                        SMALL_FIX)]
    if result.lowest_at_largest < floor.gbps:
        return [Finding("nic-bandwidth", subject, expected, observed, "fail", SLOW_CAUSE,
                        SLOW_FIX)]
    return [Finding("nic-bandwidth", subject, expected, observed, "ok")]


def judge_runs(runs: Sequence[IbWriteBw], nic_gbps: float) -> list[Finding]:
    """Findings for each NIC's run."""
    return [f for run in runs for f in judge_ib_write_bw(run, nic_gbps)]
