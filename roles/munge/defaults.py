"""Data keys of the `munge` role: default and rule of each (override them in group_data).

Also read from the cluster spec (group_data/<site>.py): ``munge_key_rotation``. Checked by the
spec gate before any host is touched.
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import integer

# The scheduler this role belongs to: a deploy running it alone defaults to it.
SCHEDULER = "slurm"

KNOBS = (
    # Key size when the role creates the cluster key on the head (mungekey --bits; 256..8192).
    Knob("munge_key_bits", 1024, integer(256, 8192), "mungekey --bits for a new key"),
)

DEFAULTS = defaults(KNOBS)
