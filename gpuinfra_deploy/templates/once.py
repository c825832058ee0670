"""A run renders a template with the same values once: each later host gets the same text.

Most files a deploy writes are the same on every worker (a unit, a drop-in, an apt pin), and
each host rendered them again: about 35 renders per worker, each looking the template up on
disk (the site's folders, the role's, the shared ones: seven stat calls) before Jinja ran,
a sixth of planning a 1,000-worker deploy (cProfile, ``python -m bench.plan_scale``). Within
one pyinfra run (its ``State``) a render of the same template with the same values returns the
text the first render made, as long as that text's template file is the same on disk (its
size, inode and modification time) and no site folder has since got a template of that name
(:func:`remembered`'s ``stamp``): two system calls instead of seven, and no Jinja. (A State
can outlive its run: pyinfra's ``ctx_state.use`` does not put the previous one back when the
block raises, so a later render may find a finished run's State current.)

The values are compared strictly (:func:`key`): the same types (``True`` is not ``1``, a
:class:`~gpuinfra.text.Block` is not a plain str), equal, in the same order; values of other
types (objects the template reads attributes of) or very large ones are not remembered, and
render as before.
"""

from __future__ import annotations

import ipaddress
import os
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from pathlib import PurePath
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from gpuinfra.text import Block

T = TypeVar("T")

# Values a template may be given that cannot change once made.
_PLAIN = (str, int, float, bool, bytes, type(None), ipaddress.IPv4Address,
          ipaddress.IPv6Address, ipaddress.IPv4Network, ipaddress.IPv6Network)
# Beyond this many values, a context is rendered as it is: a file with a line per node is
# made once per run anyway (Site.once), and comparing it would cost as much as rendering.
MAX_VALUES = 2000

# Renders remembered per run, the least recently asked forgotten first: a text every worker
# gets is asked again by each, one that a single host gets (its address in it) soon forgotten.
KEPT = 512

_RUNS: WeakKeyDictionary[Any, OrderedDict[Hashable, Any]] = WeakKeyDictionary()


class _Unkeyable(Exception):
    pass


def key(name: str, context: Mapping[str, Any], site: Any) -> Hashable | None:
    """What makes two renders the same: the template's name, the site's template folders
    as set (``use_site``; None: the working directory's, which :func:`remembered` adds) and
    the values, strictly (see the module docstring); None when a value is of another type or
    there are more than :data:`MAX_VALUES`."""
    budget = [MAX_VALUES]
    try:
        return (name, site, _frozen(dict(context), budget))
    except _Unkeyable:
        return None


def _frozen(value: Any, budget: list[int]) -> Hashable:
    budget[0] -= 1
    if budget[0] < 0:
        raise _Unkeyable
    kind = type(value)
    if kind in _PLAIN or kind is Block:
        return (kind, value)
    if isinstance(value, PurePath):
        return (kind, str(value))
    if kind is list or kind is tuple:
        return (kind, tuple(_frozen(item, budget) for item in value))
    if kind is dict:
        return (kind, tuple((_frozen(k, budget), _frozen(v, budget))
                            for k, v in value.items()))
    raise _Unkeyable


def remembered(render_key: Hashable | None, render: Callable[[], T],
               stamp: Callable[[T], Hashable]) -> T:
    """``render()``, or within the running deploy (pyinfra's current State) what it returned
    for the same ``render_key`` before, while ``stamp`` of it (what it was made from, as on
    disk now) is what it was then."""
    from pyinfra.context import ctx_state

    state = ctx_state.get() if ctx_state.isset() else None
    if render_key is None or state is None:
        return render()
    try:
        done = _RUNS.setdefault(state, OrderedDict())
    except TypeError:  # a state that cannot be weakly held: as before
        return render()
    render_key = (os.getcwd(), render_key)  # the site's folders default to the cwd's
    found = done.get(render_key)
    if found is not None:
        made, made_from = found
        try:
            same = stamp(made) == made_from
        except OSError:
            same = False
        if same:
            done.move_to_end(render_key)
            return made
    made = render()
    try:
        done[render_key] = (made, stamp(made))
    except OSError:
        return made
    done.move_to_end(render_key)
    if len(done) > KEPT:
        done.popitem(last=False)
    return made
