"""What one healthy RDMA NIC delivers in perftest's ``ib_write_bw``, per link rate.

A per-NIC check needs no assumption about how all-reduce traffic spreads over the NICs (the
premise that sank the old inter-node NCCL floor, see nccl.py): each NIC is measured alone,
point to point, and compared with what a healthy NIC of its rate reaches.

Floors (Gb/s, ``BW average`` of ``ib_write_bw --report_gbits``), from Azure HPC health checks
(github.com/Azure/azurehpc-health-checks; customTests/azure_ib_write_bw_gdr.nhc runs
``ib_write_bw -s 8388608 -x 0 -F --report_gbits --perform_warm_up --use_cuda=<GPU>`` per NIC and
fails below the conf's value). The conf files changed over time; the floor is the lowest value
of the versions read (a value Azure lowered was too strict for healthy NICs):

- 400 Gb/s (NDR): 360, conf/nd128isr_ndr_gb200_v6.conf ``check_ib_bw_gdr 360`` (@215c644, with
  ``check_hw_ib 400`` on the same NICs; knowledge audit 9735030 row 49); the ND H100 v5 conf
  has 375 (@0611432) and 380 (@7e6ac77);
- 200 Gb/s (HDR): 180, conf/nd96asr_v4.conf ``check_ib_bw_gdr 180.0`` (@7e6ac77; 185.0 @4bfa9a7);
- 100 Gb/s (EDR): 78, conf/nd40rs_v2.conf ``check_ib_bw_non_gdr 78 65536`` (@120820b, 64 KiB
  messages, host memory; 90 @47f8731).

Other rates: 0.90 of the rate (inferred: the 400 and 200 Gb/s floors are 0.90 to 0.94 of theirs).
The rate is the NIC's usable rate: a NIC behind fewer PCIe lanes than its port needs (DGX
Spark's ConnectX-7 rails reach ~92-97 Gb/s, NVIDIA/dgx-spark-playbooks) is judged on that.
"""

from __future__ import annotations

from dataclasses import dataclass

_AZ = "Azure HPC health checks conf/"
NIC_FLOORS: dict[float, tuple[float, str]] = {
    400: (360.0, _AZ + "nd128isr_ndr_gb200_v6.conf check_ib_bw_gdr 360"),
    200: (180.0, _AZ + "nd96asr_v4.conf check_ib_bw_gdr 180.0"),
    100: (78.0, _AZ + "nd40rs_v2.conf check_ib_bw_non_gdr 78 65536"),
}
DEFAULT_FRACTION = 0.90  # inferred (module docstring)
MIN_MESSAGE_BYTES = 65536  # perftest's default size (DEF_SIZE_BW); smaller ones measure latency


@dataclass(frozen=True)
class NicFloor:
    gbps: float
    source: str


# The floors measured with messages of at most this size (the 100 Gb/s one: Azure's 64 KiB
# host-memory check): a run with larger messages is held to DEFAULT_FRACTION of the rate, as the
# 400 and 200 Gb/s floors (8 MiB messages) are (issue 47: 81 Gb/s at 8 MiB on a 100 Gb/s link
# passed the 78 Gb/s floor).
SMALL_MESSAGE_FLOORS: dict[float, int] = {100: 65536}


def nic_floor(nic_gbps: float, largest_bytes: int | None = None) -> NicFloor:
    """The ``ib_write_bw`` floor (Gb/s) for one healthy NIC of ``nic_gbps``, for a run whose
    largest message is ``largest_bytes`` (None: the table's own)."""
    limit = SMALL_MESSAGE_FLOORS.get(nic_gbps)
    if nic_gbps in NIC_FLOORS and (limit is None or largest_bytes is None
                                   or largest_bytes <= limit):
        return NicFloor(*NIC_FLOORS[nic_gbps])
    if limit is not None:
        return NicFloor(round(nic_gbps * DEFAULT_FRACTION, 1),
                        f"{DEFAULT_FRACTION} of {nic_gbps:g} Gb/s for messages over {limit} B "
                        f"(the {NIC_FLOORS[nic_gbps][0]:g} Gb/s floor is for {limit} B ones)")
    return NicFloor(round(nic_gbps * DEFAULT_FRACTION, 1),
                    f"inferred: {DEFAULT_FRACTION} of {nic_gbps:g} Gb/s")
