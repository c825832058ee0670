"""Data keys of the `vfio` role: default and rule of each (override them in group_data).

Also read from the cluster spec (the host's data): ``vfio_devices``, ``vms``, ``vfio_nvlink``
(checked by the spec gate: gpuinfra/spec/vfio.py), and ``reboot_policy``.
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import list_of, text

KNOBS = (
    # Drivers vfio-pci must load before (`softdep <driver> pre: vfio-pci`), so it claims the
    # devices of `options vfio-pci ids=` before they do: the GPU drivers and the HDMI/DP audio
    # driver of GPU cards. A site passing other devices adds their drivers here.
    Knob("vfio_host_drivers", ["nvidia", "nouveau", "snd_hda_intel"],
         list_of(text(r"[a-z0-9_-]{1,64}", "a kernel module name, e.g. 'nvidia'")),
         "drivers vfio-pci loads before"),
)

DEFAULTS = defaults(KNOBS)
