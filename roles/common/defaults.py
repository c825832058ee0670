"""Data keys of the `common` role, with their defaults (override them in group_data)."""

DEFAULTS = {
    # Packages every node gets (pciutils: lspci for the GPU facts; kmod: lsmod/modprobe).
    "common_packages": ["ca-certificates", "curl", "gnupg", "pciutils", "kmod", "chrony"],
    # NTP servers; empty keeps the distribution's pool (offline sites set their own).
    "common_ntp_servers": [],
    # Network sysctls for cluster traffic (MTU probing on RDMA/jumbo fabrics, no slow start
    # after idle for bursty collectives, deeper accept queues). Only keys that live in each
    # network namespace, so a lab container never changes its host's kernel. Large fabrics
    # also raise net.ipv4.neigh.default.gc_thresh1..3 (host-wide: set them on real nodes).
    "common_sysctls": {
        "net.ipv4.tcp_mtu_probing": 1,
        "net.ipv4.tcp_slow_start_after_idle": 0,
        "net.core.somaxconn": 8192,
    },
    # Group for cluster administrators (owns nothing by itself; later roles grant it access).
    "common_admin_group": "gpuadmin",
    # Manage /etc/hosts entries for every node whose address is known (node_address, or an
    # IP in ssh_hostname). Sites with DNS can turn it off.
    "common_manage_hosts": True,
}
