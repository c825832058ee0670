"""pyinfra configuration. It runs before pyinfra connects: the spec gate lives here."""

from pyinfra import config

from roles import engine
from roles.site import validate_before_connect

# Stop the whole run when any host fails: a half-deployed GPU cluster is worse than none.
config.FAIL_PERCENT = 0

# TCP_NODELAY on SSH, each fact read once per host until it changes, a cheaper op order.
engine.install()

validate_before_connect()
