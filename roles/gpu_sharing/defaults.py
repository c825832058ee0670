"""Data keys of the `gpu_sharing` role: default and rule of each (override them in group_data).

Also read from the cluster spec (the host's data): ``gpu_sharing`` (mode, ``mig_layout``, MPS
``clients``/``thread_percentage``/``pinned_mem_limit``), ``gpu_model``, ``gpu_count`` and
``reboot_policy``; checked by the spec gate (gpuinfra/spec/sharing.py).
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean

KNOBS = (
    # Off: the role leaves MIG and MPS as they are (the schedulers still count the spec's
    # MIG/MPS resources: lay the GPUs out by hand, or with NVIDIA's MIG manager).
    Knob("gpu_sharing_enabled", True, boolean(), "the node-side MIG layout and MPS daemon"),
    # Off: the MPS daemon's unit does not set compute mode EXCLUSIVE_PROCESS when it starts.
    # Only where no GPU answers (the lab): the MPS documentation recommends the mode.
    Knob("gpu_sharing_mps_compute_mode", True, boolean(),
         "set EXCLUSIVE_PROCESS on the GPUs when the MPS daemon starts"),
)

DEFAULTS = defaults(KNOBS)
