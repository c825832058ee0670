"""Role data: host data over a role's defaults, so every knob has one documented default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def with_defaults(data: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` with any value ``data`` (anything with ``.get``) sets for their keys."""
    return {key: data.get(key, default) for key, default in defaults.items()}


def role_data(host: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` with any value the host's data (inventory, group_data, --data) sets."""
    return with_defaults(host.data, defaults)
