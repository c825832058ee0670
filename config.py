"""pyinfra configuration. It runs before pyinfra connects: the spec gate lives here."""

from pyinfra import config

from gpuinfra.spec.model import CLUSTER_KEYS
from roles import engine
from roles.site import validate_before_connect

# TCP_NODELAY on SSH, each fact read once per host until it changes, a cheaper op order.
engine.install()

spec = validate_before_connect()

# A failed or unreachable worker does not stop the healthy ones; more than max_fail_percent
# of the hosts failing stops the whole run (the deploy itself is then what is broken).
config.FAIL_PERCENT = spec.max_fail_percent if spec else CLUSTER_KEYS["max_fail_percent"]
