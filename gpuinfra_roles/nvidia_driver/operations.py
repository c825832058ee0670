"""The nvidia_driver role's own operation: the GPU device nodes of the running system.

Reads facts, computes the difference and yields commands only for what is missing, saying why
otherwise: a converged host gets no command.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import QuoteString, StringCommand, operation

from gpuinfra.render import check_mode, check_name
from gpuinfra_deploy.facts.nvidia import NvidiaDeviceNodes


@operation()
def nvidia_device_access(group: str, mode: str):
    """Existing /dev/nvidia* character devices owned by ``group`` with ``mode``.

    + group: the group that may use the GPUs
    + mode: octal mode, e.g. ``"0660"``

    The driver applies its options only when it creates the nodes (next module load); this
    brings the nodes of the running system in line now. No nodes: nothing to do.
    """
    group = check_name(group, "device group")
    mode = check_mode(mode)
    nodes = host.get_fact(NvidiaDeviceNodes)
    if not nodes:
        host.noop("no /dev/nvidia* device nodes yet")
        return
    for path, node in sorted(nodes.items()):
        if node["group"] != group:
            yield StringCommand("chgrp", QuoteString(group), QuoteString(path))
        if node["mode"] != mode:
            yield StringCommand("chmod", mode, QuoteString(path))
