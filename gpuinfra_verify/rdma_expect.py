"""The RDMA checks' judgements, for the verify suite: they live in the pure library
(:mod:`gpuinfra.rdma_verdicts`) so that `gpuinfra check` judges a pasted capture with the
same code, verdicts, causes and fixes as the suite judges a live node."""

from gpuinfra.rdma_verdicts import (
    PORTS_COMMAND,
    SOFT_ROCE_FLOOR_GBPS,
    Finding,
    Port,
    acs_findings,
    affinity_findings,
    ats_findings,
    ats_lspci_findings,
    bandwidth_findings,
    gpudirect_findings,
    message,
    port_findings,
    ports_from_ibstat,
    ports_from_sysfs,
    presence_findings,
    rate_findings,
)

__all__ = [
    "PORTS_COMMAND", "SOFT_ROCE_FLOOR_GBPS", "Finding", "Port", "acs_findings",
    "affinity_findings", "ats_findings", "ats_lspci_findings", "bandwidth_findings",
    "gpudirect_findings", "message", "port_findings", "ports_from_ibstat", "ports_from_sysfs",
    "presence_findings", "rate_findings",
]
