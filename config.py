"""pyinfra configuration. It runs before pyinfra connects: the spec gate lives here."""

from pyinfra import config

from roles.site import validate_before_connect

# Stop the whole run when any host fails: a half-deployed GPU cluster is worse than none.
config.FAIL_PERCENT = 0

validate_before_connect()
