"""Data keys of the `nvidia_driver` role: default and rule of each (override them in group_data).

Also read from the cluster spec (group_data/all.py): ``driver_branch`` (default "535"; 550, 570
and 580 too, gpuinfra/knowledge/drivers.py) and
``reboot_policy`` ("never" or "if-needed"). The spec gate checks every host's values against
these rules before any host is touched.
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import (
    boolean,
    debian_package,
    debian_version,
    either,
    http_url,
    integer,
    list_of,
    octal_mode,
    optional,
    posix_name,
)

KNOBS = (
    # Exact driver package version. None: the default for the host's distribution and branch
    # (gpuinfra.knowledge.packages.DRIVER_VERSIONS). Set the version your archive or mirror
    # carries: `apt-cache policy nvidia-smi` (Debian) / `nvidia-utils-535-server` (Ubuntu).
    Knob("nvidia_driver_version", None, optional(debian_version()),
         "the exact driver package version"),
    # Debian only: nvidia-persistenced is versioned apart from the driver (contrib).
    Knob("nvidia_driver_persistenced_version", None, optional(debian_version()),
         "Debian's nvidia-persistenced version"),
    # NVIDIA's open kernel modules. None: what the GPU model needs (Grace Hopper and Blackwell
    # run only with them; Volta only without); True/False forces it (refused where the model
    # cannot run it).
    Knob("nvidia_driver_open_modules", None, optional(boolean()),
         "NVIDIA's open kernel modules (None: as the GPU model needs)"),
    # Debian 12, branches after 535: NVIDIA's CUDA repository (or a site mirror of it), which
    # carries them and Fabric Manager; Debian's archive has 535 only. None: NVIDIA's URL.
    Knob("nvidia_driver_repo_url", None, optional(http_url()),
         "NVIDIA's CUDA repository or its mirror (Debian, branches after 535)"),
    Knob("nvidia_driver_repo_key_url", None, optional(http_url()),
         "the CUDA repository's signing key URL"),
    # Install the distribution's full driver (X/GL stack) instead of the headless set.
    Knob("nvidia_driver_full", False, boolean(), "the full driver instead of the headless set"),
    # Ubuntu: the -server (datacenter) packages; False selects the desktop stream (set
    # nvidia_driver_version to that stream's version too).
    Knob("nvidia_driver_server_stream", True, boolean(), "Ubuntu's -server driver stream"),
    # Kernel headers so DKMS builds the module: True installs the distribution's metapackage
    # (linux-headers-amd64 / linux-headers-generic), a list names the packages instead (e.g.
    # ["linux-headers-generic-hwe-22.04"] on an HWE kernel). Containers (the lab) set False:
    # their kernel is not the distribution's.
    Knob("nvidia_driver_kernel_headers", True, either(boolean(), list_of(debian_package())),
         "kernel headers for DKMS: True, False or package names"),
    # Enable the archive components the packages live in (Debian: contrib non-free
    # non-free-firmware; Ubuntu: restricted multiverse) in the standard source files.
    Knob("nvidia_driver_manage_sources", True, boolean(), "enable the archive components"),
    # Blacklist nouveau (and rebuild the initramfs when that file changes).
    Knob("nvidia_driver_blacklist_nouveau", True, boolean(), "blacklist nouveau"),
    # Run nvidia-persistenced with persistence mode on (drop-in replacing its ExecStart).
    Knob("nvidia_driver_persistence_mode", True, boolean(), "persistence mode on"),
    # Who may use the GPUs: /dev/nvidia* owned by root and this group, with this mode.
    # "video" exists on every Debian and Ubuntu system (base-passwd, gid 44).
    Knob("nvidia_driver_device_group", "video", posix_name(), "the group that may use the GPUs"),
    Knob("nvidia_driver_device_mode", "0660", octal_mode(), "the mode of /dev/nvidia*"),
    # gid for the device group when the role has to create it (None: let groupadd choose,
    # and write the driver options on the next deploy once the gid is known).
    Knob("nvidia_driver_device_gid", None, optional(integer(0, 2**31 - 1)),
         "the device group's gid when the role creates it"),
    # A run that would change the installed driver on a host where GPU compute processes run
    # stops that host before any package change, naming them (gpuinfra/driverchange.py).
    # True changes it under them anyway: for a rolling upgrade that has drained the node, or
    # a deliberate fix; set it per host, never site-wide.
    Knob("nvidia_driver_change_under_processes", False, boolean(),
         "change the driver even while GPU processes run"),
)

DEFAULTS = defaults(KNOBS)
