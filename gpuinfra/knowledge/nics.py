"""RDMA NIC models and the link rates each link layer can have.

What the spec gate and the verify suite need to know about a NIC, each fact with its source:

- Link rates (Gb/s) a port trains to. InfiniBand: EDR 4x and HDR100 2x = 100, HDR = 200,
  NDR = 400, XDR = 800 (IBTA speed names; ``ibstat`` prints ``Rate: 400`` for an NDR port,
  fixtures/real/ibstat/h100-node-8x-cx7-ndr-ib-plus-bluefield3-bond-spaces.txt). Ethernet
  (RoCE): 25, 50, 100, 200, 400, 800 GbE (ibstat prints ``Rate: 100`` for a 100 GbE ConnectX-6
  Dx, fixtures/real/ibstat/h100-node-8x-cx7-400g-roce-plus-4x-cx6dx-100g-all-active.txt).
- Soft-RoCE (``rdma_rxe``, the lab): the rate is derived from the netdev's ethtool speed by
  ``ib_get_eth_speed()`` (drivers/infiniband/core/verbs.c): a netdev with an unknown speed
  (QEMU's virtio-net without ``speed=``) counts as 1000 Mb/s, which is width 1X at SDR: the
  port reports 2.5 Gb/s. Faster netdevs map to 10 (1X FDR10), 20 (4X DDR), 25 (1X EDR),
  40 (4X FDR10) and 100 (4X EDR) Gb/s.
- ATS: ``ATS_ENABLED`` is a firmware parameter of ConnectX-5 and later (the ConnectX-5 query in
  fixtures/real/mlxconfig shows ``ATS_ENABLED False(0)``; mstflint 4.13 added it to mstconfig;
  NVIDIA's NIC configuration operator manages it on ConnectX-6/7 and BlueField-3).
  Soft-RoCE has no firmware and no PCI function: no ATS.
- ``vendor_part_id`` as ``ibv_devinfo`` prints it: 4119 ConnectX-5, 4123 ConnectX-6 (KAUST
  capture), 4125 ConnectX-6 Dx, 4129 ConnectX-7 (IGX Orin capture), 4131 ConnectX-8,
  41692 BlueField-3 (ibstat ``CA type: MT41692``).
"""

from __future__ import annotations

from dataclasses import dataclass

INFINIBAND, ETHERNET = "infiniband", "ethernet"

LINK_RATES: dict[str, tuple[float, ...]] = {
    INFINIBAND: (100, 200, 400, 800),
    ETHERNET: (25, 50, 100, 200, 400, 800),
}
SOFT_ROCE_RATES: tuple[float, ...] = (2.5, 10, 20, 25, 40, 100)
# What an rxe device on a netdev of unknown speed reports (the lab's virtio-net NICs).
SOFT_ROCE_UNKNOWN_SPEED_GBPS = 2.5
SOFT_ROCE = "soft-roce"


@dataclass(frozen=True)
class NicModel:
    """One NIC model: its ``vendor_part_id``s, fastest port, link layers and ATS support."""

    key: str
    part_ids: tuple[int, ...]
    max_gbps: float
    link_layers: tuple[str, ...]
    ats: bool


_VPI = (INFINIBAND, ETHERNET)
NIC_MODELS: dict[str, NicModel] = {m.key: m for m in (
    NicModel("ConnectX-5", (4119,), 100, _VPI, True),
    NicModel("ConnectX-6", (4123,), 200, _VPI, True),
    NicModel("ConnectX-6 Dx", (4125,), 200, (ETHERNET,), True),
    NicModel("ConnectX-7", (4129,), 400, _VPI, True),
    NicModel("ConnectX-8", (4131,), 800, _VPI, True),
    NicModel("BlueField-3", (41692,), 400, _VPI, True),
    NicModel(SOFT_ROCE, (), 100, (ETHERNET,), False),
)}


def nic_model(key: str) -> NicModel | None:
    return NIC_MODELS.get(key)


def rates_for(link_layer: str, soft_roce: bool = False) -> tuple[float, ...]:
    """The rates (Gb/s) a port of ``link_layer`` can report (Soft-RoCE: what rxe derives)."""
    return SOFT_ROCE_RATES if soft_roce else LINK_RATES.get(link_layer, ())


def format_rate(gbps: float) -> str:
    return f"{gbps:g}"
