"""Data keys of the `common` role: default and rule of each (override them in group_data).

The spec gate checks every host's values against these rules before any host is touched.
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import (
    boolean,
    debian_package,
    either,
    host_name,
    integer,
    list_of,
    mapping_of,
    posix_name,
    text,
)

# A sysctl key that lives in a network namespace (net.*), and its value.
_SYSCTL_KEY = text(r"net(\.[A-Za-z0-9_-]+){1,6}", "a net.* sysctl key (per network namespace)")
_SYSCTL_VALUE = either(integer(-(2**31), 2**31 - 1), text(r"[A-Za-z0-9 ._:-]{1,64}",
                                                         "a short sysctl value"))

KNOBS = (
    # Packages every node gets (pciutils: lspci for the GPU facts; kmod: lsmod/modprobe).
    Knob("common_packages", ["ca-certificates", "curl", "gnupg", "pciutils", "kmod", "chrony"],
         list_of(debian_package()), "packages every node gets"),
    # NTP servers; empty keeps the distribution's pool (offline sites set their own).
    Knob("common_ntp_servers", [], list_of(host_name()), "the site's NTP servers for chrony"),
    # Network sysctls for cluster traffic (MTU probing on RDMA/jumbo fabrics, no slow start
    # after idle for bursty collectives, deeper accept queues). Only keys that live in each
    # network namespace, so a lab container never changes its host's kernel. Large fabrics
    # also raise net.ipv4.neigh.default.gc_thresh1..3 (host-wide: set them on real nodes).
    Knob("common_sysctls", {"net.ipv4.tcp_mtu_probing": 1,
                            "net.ipv4.tcp_slow_start_after_idle": 0,
                            "net.core.somaxconn": 8192},
         mapping_of(_SYSCTL_KEY, _SYSCTL_VALUE), "network sysctls {key: value}"),
    # Group for cluster administrators (owns nothing by itself; later roles grant it access).
    Knob("common_admin_group", "gpuadmin", posix_name(), "the cluster administrators' group"),
    # Manage /etc/hosts entries for every node whose address is known (node_address, or an
    # IP in ssh_hostname). Sites with DNS can turn it off.
    Knob("common_manage_hosts", True, boolean(), "list every node in /etc/hosts"),
)

DEFAULTS = defaults(KNOBS)
