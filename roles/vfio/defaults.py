"""Data keys of the `vfio` role: default and rule of each (override them in group_data).

Also read from the cluster spec (the host's data): ``vfio_devices``, ``vms``, ``vfio_nvlink``
(checked by the spec gate: gpuinfra/spec/vfio.py), and ``reboot_policy``.
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import Rule, list_of, text
from gpuinfra.vfio import LIBVIRT_IMAGES, image_dir_problem

KNOBS = (
    # Drivers vfio-pci must load before (`softdep <driver> pre: vfio-pci`), so it claims the
    # devices of `options vfio-pci ids=` before they do: the GPU drivers and the HDMI/DP audio
    # driver of GPU cards. A site passing other devices adds their drivers here.
    Knob("vfio_host_drivers", ["nvidia", "nouveau", "snd_hda_intel"],
         list_of(text(r"[a-z0-9_-]{1,64}", "a kernel module name, e.g. 'nvidia'")),
         "drivers vfio-pci loads before"),
    # The directory every VM's `disk` must lie in (libvirt's default storage pool): a disk
    # elsewhere (/dev/sda, /etc/shadow) is refused by the spec gate, and one whose symbolic
    # links lead out of it is refused on the host before the VM is written. Never "/".
    Knob("vfio_image_dir", LIBVIRT_IMAGES,
         Rule("an absolute, normalised directory path other than '/', e.g. "
              f"'{LIBVIRT_IMAGES}'", image_dir_problem),
         "the directory VM disk images must lie in", site_wide=True),
)

DEFAULTS = defaults(KNOBS)
