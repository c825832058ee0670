"""One role as every caller runs it: where it applies, and how it is called.

Each role declares, in its ``__init__.py``, ``ROLE = Role(name, its @deploy, applies=...)``:
the one place that decides which nodes it is for, from the typed spec. ``deploy.py``, the
role's own entry file (``roles/<role>/deploy.py``) and another project's deploy all
call ``ROLE.apply(...)``, so the three plan the same operations on the same host.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyinfra.api.exceptions import PyinfraError

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.ops.gpu import node_driver
from gpuinfra_deploy.pyinfra_patches import uploads
from gpuinfra_deploy.pyinfra_patches.schedule import meeting
from gpuinfra_deploy.run.site import Site, this_node


@dataclass(frozen=True)
class Role:
    """A role: its name (the folder under roles/, the prefix of its knobs), its
    ``@deploy`` function, and ``applies(site, node)``: whether this node gets it at all.

    ``needs_head``: a scheduler role (MUNGE, Slurm, Kubernetes) whose every node needs the
    head: a head that failed in this run stops it on every host (``_if=site.head_up``), while
    the rest of the deploy goes on; each of its operations is a meeting of every host
    (gpuinfra_deploy/pyinfra_patches/schedule.py), as pyinfra runs every operation.
    ``takes_driver``: a GPU role, handed the node's driver
    release (one per node for the run, so the GPU roles agree on one version).
    ``reads``: other roles whose knobs this one reads (the driver release is resolved from
    nvidia_driver's): run alone, their keys are judged with its own.
    ``packages``: ``(site, node) -> names``, the packages of the distribution's own archive
    this role installs on the node with nothing pinned and nothing of its own before them
    (the same list its install takes). deploy.py installs every role's in one apt transaction
    early (:func:`gpuinfra_deploy.run.ahead.packages_ahead`); the role's own install then
    finds them there. Run alone, the role installs them itself.
    """

    name: str
    deploy: Callable[..., Any]
    applies: Callable[[Site, NodeSpec], bool]
    needs_head: bool = False
    takes_driver: bool = False
    reads: tuple[str, ...] = ()
    packages: Callable[[Site, NodeSpec], list[str]] | None = None

    @property
    def knob_roles(self) -> tuple[str, ...]:
        """The roles whose knobs a deploy running this role alone must judge."""
        driver = ("nvidia_driver",) if self.takes_driver else ()
        return tuple(dict.fromkeys((self.name, *driver, *self.reads)))

    def apply(self, site: Site | None = None, node: NodeSpec | None = None, *,
              groups: Mapping[str, str] | None = None) -> None:
        """Run the role on the host being planned, where it applies.

        Without ``site`` (another project's deploy): the spec is built for this role alone,
        its knobs and the spec keys judged, the rest of the host data left alone; ``groups``
        names the operator's groups for gpuinfra's (head, workers, hypervisors).
        """
        uploads.install()  # another project's deploy has no config.py to install it
        if site is None or node is None:
            site, node = this_node(roles=self.knob_roles, groups=groups)
        if not self.applies(site, node):
            return
        try:
            args: tuple[Any, ...] = ()
            if self.takes_driver:
                args = (site.once(("driver", node.name), lambda: node_driver(site, node)),)
            if self.needs_head:  # every operation a meeting of all hosts (schedule.py)
                with meeting():
                    self.deploy(site, node, *args, _if=site.head_up)
            else:
                self.deploy(site, node, *args)
        except GpuinfraError as exc:  # a role refusing what it was given: its words, no trace
            if isinstance(exc, (AssertionError, PyinfraError)):  # a test's, or already one
                raise
            said = str(exc)
            if node.name not in said:
                exc.args = (f"{node.name}: {said}",)
            try:
                exc.__class__ = refused(type(exc))
            except TypeError:  # an exception class with its own layout: as it is
                pass
            raise


@functools.cache
def refused(cls: type[GpuinfraError]) -> type:
    """``cls`` that is also a pyinfra error: a role's refusal while planning a host (a value
    that cannot work there, a host it cannot change safely) keeps its type for the callers
    that catch it, and pyinfra prints its message and stops, before any host is changed,
    instead of a Python traceback of the deploy file."""
    return type(cls.__name__, (cls, PyinfraError), {"__module__": cls.__module__,
                                                     "__qualname__": cls.__qualname__})


def entry(role: Role) -> None:
    """The body of a role's own entry file: the role on this host of the whole site, as
    deploy.py runs it (``pyinfra inventory/<site>.py roles/<role>/deploy.py``)."""
    role.apply(*this_node())
