"""The nvidia_driver role's own operations: the driver changed only where no GPU process runs,
and the GPU device nodes of the running system.

Each reads facts when it runs, computes the difference and yields commands only for what is
missing, saying why otherwise: a converged host gets no command.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from pyinfra import host, logger
from pyinfra.api import QuoteString, StringCommand, operation
from pyinfra.facts.deb import DebPackages

from gpuinfra.driver import check_mode, check_name
from gpuinfra.driverchange import (
    OVERRIDE,
    driver_change_refusal,
    gpu_processes,
    package_changes,
    unreadable_refusal,
)
from gpuinfra.errors import ParseError
from gpuinfra.sharing import migplan
from gpuinfra_deploy.facts.nvidia import NvidiaDeviceNodes, NvidiaMigState


@operation()
def driver_change_allowed(packages: Mapping[str, str], node_name: str,
                          schedulers: Sequence[str] = (), under_processes: bool = False):
    """Stop this host, naming the processes, when installing ``packages`` would change its
    driver while GPU compute processes run (gpuinfra.driverchange); else runs no command.

    + packages: the driver's pinned packages, name -> exact version
    + node_name: the node's name in its schedulers (for the drain command of the message)
    + schedulers: the node's schedulers (``slurm``, ``kubernetes``)
    + under_processes: change it under them anyway (``nvidia_driver_change_under_processes``)

    The processes are read only when the packages would change: a first install (no driver
    answers) and an unchanged driver go on whatever runs. The refusal is a command that fails
    on this host (its message on stderr), so this host stops before any package change and
    the others go on (``max_fail_percent``): an OperationError raised while pyinfra 3.10
    executes stops the run on every host.

    .. code:: python

        driver_change_allowed(packages={"nvidia-smi": "535.261.03-1"}, node_name="gpu01",
                              schedulers=["slurm"])
    """
    changes = package_changes(packages, host.get_fact(DebPackages))
    if not changes:
        host.noop("the driver packages are installed at their pinned versions")
        return
    state = host.get_fact(NvidiaMigState) or dict.fromkeys(migplan.SECTIONS, "")
    try:
        processes = gpu_processes(migplan.compute_processes(state))
    except ParseError as exc:
        if not under_processes:
            yield _stop(unreadable_refusal(host.name, exc))
            return
        logger.warning(f"{host.print_prefix}{exc}: the GPU processes are not known "
                       f"({OVERRIDE} = True: the driver changes anyway)")
        processes = ()
    refusal = driver_change_refusal(host.name, changes, processes, override=under_processes,
                                    node_name=node_name, schedulers=schedulers)
    if refusal:
        yield _stop(refusal)
        return
    if processes:
        logger.warning(f"{host.print_prefix}changing the NVIDIA driver under {len(processes)} "
                       f"GPU process(es) ({OVERRIDE} = True): "
                       f"{'; '.join(map(str, processes))}")
    host.noop("no GPU compute process runs: the driver may change"
              if not processes else f"{OVERRIDE} = True: the driver changes under them")


def _stop(message: str) -> StringCommand:
    """A command that fails this host with ``message`` on stderr."""
    return StringCommand(f"printf '%s\\n' {shlex.quote(message)} >&2; exit 1")


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
