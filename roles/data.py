"""Role data: host data over a role's defaults, so every knob has one documented default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def role_data(host: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults`` with any value the host's data (inventory, group_data, --data) sets."""
    return {key: host.data.get(key, default) for key, default in defaults.items()}
