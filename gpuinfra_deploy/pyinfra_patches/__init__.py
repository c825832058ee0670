"""The only place the project patches pyinfra's internals (attributes of pyinfra's and
pyinfra_cli's modules and classes), against the pinned pyinfra 3.10.0:

- ``engine``: TCP_NODELAY on SSH, facts read once per host until it changes, a cheaper
  operation order (installed by config.py);
- ``uploads``: every SSH upload through a private path, stdin into ``umask 077`` and a
  ``mktemp -d`` (installed by config.py and by every role's ``apply``);
- ``gate``: the spec gate around the CLI's inventory load (called by config.py);
- ``loader``: pyinfra's inventory loader with every file checked (the gate and
  ``gpuinfra validate``);
- ``internals``: every internal the plan and `gpuinfra render` read or swap for a while,
  named and checked. It is imported here, so importing anything from this package checks
  that the installed pyinfra is the pinned one.

README.md here lists every patched symbol, why, and the tests that fail when pyinfra changes
under it; tests/unit/test_pyinfra_patches.py keeps that list and the code in step.
"""

from gpuinfra_deploy.pyinfra_patches import internals  # noqa: F401 - the check
