"""Data keys of the `munge` role, with their defaults (override them in group_data).

Also read from the cluster spec (group_data/<site>.py): ``munge_key_rotation``.
"""

DEFAULTS = {
    # Key size when the role creates the cluster key on the head (mungekey --bits; 256..8192).
    "munge_key_bits": 1024,
}
