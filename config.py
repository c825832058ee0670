"""pyinfra configuration. It runs before pyinfra connects: the spec gate lives here."""

from gpuinfra_deploy.pyinfra_patches import engine, uploads
from gpuinfra_deploy.pyinfra_patches.gate import validate_before_connect

# TCP_NODELAY on SSH, each fact read once per host until it changes, a cheaper op order.
engine.install()

# Every SSH upload through a private path: stdin into a umask 077 shell and a root-made
# mktemp -d, never pyinfra's /tmp/pyinfra-<sha1(dest)> under sudo.
uploads.install()

# The gate judges the inventory pyinfra loads next (before it connects), and sets pyinfra's
# FAIL_PERCENT from the site's max_fail_percent: a dead worker does not stop healthy ones.
validate_before_connect()
