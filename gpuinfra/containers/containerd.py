"""containerd's config.toml: the installed containerd's own default, with what Kubernetes needs.

The text starts from ``containerd config default`` of the containerd on the node (so every
key is the one that containerd knows), then (docs/hardware-reference.md 6.2 [containerd-cri]):
- ``SystemdCgroup = true`` under the runc runtime's options (the kubelet's cgroup driver is
  systemd; config version 2: ``plugins."io.containerd.grpc.v1.cri"``, version 3, containerd
  2.x: ``plugins.'io.containerd.cri.v1.runtime'``);
- the sandbox image matched to the Kubernetes release (v2 ``sandbox_image``, v3
  ``pinned_images.sandbox``): containerd's own default (pause 3.6 in 1.6, 3.8 in 1.7) is older
  than the one kubeadm expects.

What the container toolkit adds afterwards (``nvidia-ctk runtime configure``: the
``runtimes.nvidia`` table, ``default_runtime_name = "nvidia"`` with ``--set-as-default``, an
``imports`` line for drop-ins, gpuinfra.containers.runtimes) belongs to the toolkit: a rewrite
carries it
over, so rerunning this role never takes the GPU runtime away (the failure kubespray has,
docs/field.md); the carried-over tables are written by tomli-w. nvidia-ctk re-serialises the
whole file, so the live file is compared by meaning (parsed TOML), not by bytes.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

import tomli_w

from gpuinfra.errors import GpuinfraError

CONFIG = "/etc/containerd/config.toml"

# The CRI plugin tables that hold the runtimes, per config version.
CRI_RUNTIME_PLUGIN = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
_TOOLKIT_RUNTIME = "nvidia"

_IMAGE = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?(/[a-z0-9._-]+)+:[A-Za-z0-9._-]+")


def config_version(text: str) -> int:
    """The ``version`` of a containerd config text (2 for 1.x, 3 for 2.x)."""
    data = _parse(text, "containerd config")
    version = data.get("version", 1)
    if version not in CRI_RUNTIME_PLUGIN:
        raise GpuinfraError(f"containerd config version {version!r} is not handled (2 or 3)")
    return version


def containerd_config(default: str, sandbox_image: str, live: str | None = None) -> str:
    """config.toml: ``default`` (``containerd config default``) with SystemdCgroup on and
    ``sandbox_image``, plus the toolkit's nvidia runtime carried over from ``live``.

    Raises GpuinfraError when the default does not have exactly one of each line to change (a
    containerd whose default changed shape: say so rather than write a half-made file).
    """
    if not isinstance(sandbox_image, str) or not _IMAGE.fullmatch(sandbox_image):
        raise GpuinfraError(f"{sandbox_image!r} is not an image reference "
                            "(registry/path:tag, e.g. 'registry.k8s.io/pause:3.10.1')")
    version = config_version(default)
    text = _replace_one(default, r"^(\s*)SystemdCgroup = false$", r"\1SystemdCgroup = true",
                        "SystemdCgroup = false")
    sandbox = r"^(\s*)sandbox_image = \S+$" if version == 2 else r"^(\s*)sandbox = \S+$"
    key = "sandbox_image" if version == 2 else "sandbox"
    text = _replace_one(text, sandbox, rf'\1{key} = "{sandbox_image}"', key)
    carried = toolkit_additions(live, version) if live else {}
    if carried.get("default_runtime_name") == _TOOLKIT_RUNTIME:
        text = _replace_one(text, r"^(\s*)default_runtime_name = \S+$",
                            rf'\1default_runtime_name = "{_TOOLKIT_RUNTIME}"',
                            "default_runtime_name")
    if carried.get("imports"):
        line = tomli_w.dumps({"imports": carried["imports"]}).rstrip("\n")
        text = _replace_one(text, r"^imports = \[\]$", lambda _: line, "imports = []")
    if carried.get("runtimes"):
        runtimes = {"plugins": {CRI_RUNTIME_PLUGIN[version]: {
            "containerd": {"runtimes": carried["runtimes"]}}}}
        # Only the runtime tables get headers ([plugins."<cri>".containerd.runtimes.nvidia]):
        # tomli-w writes none for a table that holds nothing but tables.
        text = text.rstrip("\n") + "\n\n" + tomli_w.dumps(runtimes)
    check(text, sandbox_image)
    return text


def toolkit_additions(live: str, version: int) -> dict[str, Any]:
    """What the container toolkit added to ``live``: ``{"runtimes": {"nvidia": {...}},
    "default_runtime_name": "nvidia", "imports": [...]}`` (keys present only when found;
    every runtime named nvidia*: the GPU Operator's toolkit also writes nvidia-cdi and
    nvidia-legacy).
    A live file of another config version, or one that does not parse, gives ``{}``."""
    try:
        data = tomllib.loads(live)
    except tomllib.TOMLDecodeError:
        return {}
    if data.get("version", 1) != version:
        return {}
    out: dict[str, Any] = {}
    containerd = _dig(data, "plugins", CRI_RUNTIME_PLUGIN[version], "containerd")
    runtimes = {name: table for name, table in _dig(containerd, "runtimes").items()
                if name.startswith(_TOOLKIT_RUNTIME) and isinstance(table, Mapping)}
    if runtimes:
        out["runtimes"] = runtimes
    if containerd.get("default_runtime_name") == _TOOLKIT_RUNTIME:
        out["default_runtime_name"] = _TOOLKIT_RUNTIME
    if data.get("imports"):
        out["imports"] = list(data["imports"])
    return out


def same_config(desired: str, live: str | None) -> bool:
    """Whether ``live`` says what ``desired`` says (parsed TOML compared, not bytes)."""
    if live is None:
        return False
    try:
        return tomllib.loads(desired) == tomllib.loads(live)
    except tomllib.TOMLDecodeError:
        return False


def check(text: str, sandbox_image: str) -> None:
    """Raise GpuinfraError unless ``text`` parses and says SystemdCgroup and the sandbox."""
    data = _parse(text, "the new containerd config")
    version = data.get("version", 1)
    runc = _dig(data, "plugins", CRI_RUNTIME_PLUGIN.get(version, ""), "containerd", "runtimes",
                "runc", "options")
    if runc.get("SystemdCgroup") is not True:
        raise GpuinfraError("the new containerd config does not set SystemdCgroup = true on runc")
    if version == 2:
        sandbox = _dig(data, "plugins", CRI_RUNTIME_PLUGIN[2]).get("sandbox_image")
    else:
        sandbox = _dig(data, "plugins", "io.containerd.cri.v1.images",
                       "pinned_images").get("sandbox")
    if sandbox != sandbox_image:
        raise GpuinfraError(f"the new containerd config has sandbox image {sandbox!r}, "
                            f"not {sandbox_image!r}")


def live_settings(text: str) -> dict[str, Any]:
    """``{"systemd_cgroup": bool|None, "sandbox_image": str|None}`` of a config text
    (``containerd config dump`` output on a node, for the verify suite)."""
    data = _parse(text, "containerd config dump")
    version = data.get("version", 1)
    runc = _dig(data, "plugins", CRI_RUNTIME_PLUGIN.get(version, ""), "containerd", "runtimes",
                "runc", "options")
    if version == 3:
        sandbox = _dig(data, "plugins", "io.containerd.cri.v1.images",
                       "pinned_images").get("sandbox")
    else:
        sandbox = _dig(data, "plugins", CRI_RUNTIME_PLUGIN[2]).get("sandbox_image")
    return {"systemd_cgroup": runc.get("SystemdCgroup"), "sandbox_image": sandbox}


# ---------------------------------------------------------------------------- helpers

def _parse(text: str, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GpuinfraError(f"{what} is not valid TOML: {exc}") from None


def _dig(data: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    for key in keys:
        data = data.get(key) if isinstance(data, Mapping) else None
        if not isinstance(data, Mapping):
            return {}
    return dict(data)


def _replace_one(text: str, pattern: str, replacement: str | Callable[[re.Match[str]], str],
                 what: str) -> str:
    new, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    if count != 1:
        raise GpuinfraError(f"containerd's default config has {count} '{what}' line(s), "
                            "expected exactly 1: this containerd's default is not one the "
                            "containerd role knows")
    return new
