"""Data keys of the `rdma` role: default and rule of each (override them in group_data).

Also read from the cluster spec: ``rdma_nics`` and ``soft_roce`` (per host, checked by
gpuinfra/spec/rdma.py), ``rdma_stack`` ("inbox" or "doca-ofed", site-wide) and
``reboot_policy``.
"""

from gpuinfra.knowledge.repositories import DOCA_KEY_ID
from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean, http_url, optional, text

# The long key id of NVIDIA's (Mellanox's) repository signing key, GPG-KEY-Mellanox.pub: the
# pinned fingerprint must end with it (apt_keyring checks the whole fingerprint). Why no full
# fingerprint ships: gpuinfra/knowledge/repositories.py.
MELLANOX_KEY_ID = DOCA_KEY_ID

KNOBS = (
    # DOCA-OFED (rdma_stack = "doca-ofed"): the release, which is also the repository's path
    # (https://linux.mellanox.com/public/repo/doca/<release>/<distro>/x86_64/): one release per
    # site, as one driver branch.
    Knob("rdma_doca_version", "2.9.1", text(r"\d+\.\d+\.\d+", "a DOCA release such as '2.9.1'"),
         "the DOCA-OFED release (its repository path)", site_wide=True),
    # The site's mirror of https://linux.mellanox.com/public/repo/doca (None: NVIDIA's).
    Knob("rdma_doca_mirror", None, optional(http_url()),
         "a mirror of linux.mellanox.com/public/repo/doca", site_wide=True),
    # The full fingerprint of GPG-KEY-Mellanox.pub as you checked it (`gpg --show-keys`);
    # required with rdma_stack = "doca-ofed" (no default: it was not verifiable from here).
    Knob("rdma_doca_key_fingerprint", None,
         optional(text(r"[0-9A-F]{24}" + MELLANOX_KEY_ID,
                       f"40 upper-case hex digits ending in {MELLANOX_KEY_ID}")),
         "the DOCA repository's signing key fingerprint", site_wide=True),
    # GPU nodes: load nvidia-peermem (GPUDirect RDMA through PeerDirect) where the stack exports
    # PeerDirect (DOCA-OFED). False: leave GPUDirect RDMA to DMA-BUF (see README).
    Knob("rdma_peermem", True, boolean(), "nvidia-peermem on GPU nodes with DOCA-OFED"),
    # Disable ACS on the PCIe bridges between each GPU and its NIC at every boot.
    Knob("rdma_acs_disable", True, boolean(), "ACS off on the GPU-NIC bridges at boot"),
)

DEFAULTS = defaults(KNOBS)
