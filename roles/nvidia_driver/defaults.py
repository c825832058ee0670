"""Data keys of the `nvidia_driver` role, with their defaults (override them in group_data).

Also read from the cluster spec (group_data/all.py): ``driver_branch`` (default "535") and
``reboot_policy`` ("never" or "if-needed").
"""

DEFAULTS = {
    # Exact driver package version. None: the default for the host's distribution and branch
    # (gpuinfra.knowledge.packages.DRIVER_VERSIONS). Set the version your archive or mirror
    # carries: `apt-cache policy nvidia-smi` (Debian) / `nvidia-utils-535-server` (Ubuntu).
    "nvidia_driver_version": None,
    # Debian only: nvidia-persistenced is versioned apart from the driver (contrib).
    "nvidia_driver_persistenced_version": None,
    # Install the distribution's full driver (X/GL stack) instead of the headless set.
    "nvidia_driver_full": False,
    # Ubuntu: the -server (datacenter) packages; False selects the desktop stream (set
    # nvidia_driver_version to that stream's version too).
    "nvidia_driver_server_stream": True,
    # Kernel headers so DKMS builds the module: True installs the distribution's metapackage
    # (linux-headers-amd64 / linux-headers-generic), a list names the packages instead (e.g.
    # ["linux-headers-generic-hwe-22.04"] on an HWE kernel). Containers (the lab) set False:
    # their kernel is not the distribution's.
    "nvidia_driver_kernel_headers": True,
    # Enable the archive components the packages live in (Debian: contrib non-free
    # non-free-firmware; Ubuntu: restricted multiverse) in the standard source files.
    "nvidia_driver_manage_sources": True,
    # Blacklist nouveau (and rebuild the initramfs when that file changes).
    "nvidia_driver_blacklist_nouveau": True,
    # Run nvidia-persistenced with persistence mode on (drop-in replacing its ExecStart).
    "nvidia_driver_persistence_mode": True,
    # Who may use the GPUs: /dev/nvidia* owned by root and this group, with this mode.
    # "video" exists on every Debian and Ubuntu system (base-passwd, gid 44).
    "nvidia_driver_device_group": "video",
    "nvidia_driver_device_mode": "0660",
    # gid for the device group when the role has to create it (None: let groupadd choose,
    # and write the driver options on the next deploy once the gid is known).
    "nvidia_driver_device_gid": None,
}
