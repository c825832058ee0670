"""NVIDIA's CUDA repository for a distribution that lacks a package in its own archive: Fabric
Manager on Debian 12, and the driver itself on Debian 12 for branches after 535.

One list file, one keyring, one origin pin for every role that needs it, so the driver and
Fabric Manager always come from the same repository (the node's DriverRelease names it).
"""

from __future__ import annotations

from pyinfra.operations import apt, files
from pyinfra.operations.util import any_changed

from gpuinfra.apt.files import flat_repo_list, origin_preference
from gpuinfra.knowledge.packages import SIGNING_KEYS
from gpuinfra_deploy.ops.apt import apt_keyring
from gpuinfra_deploy.ops.checked import upload_source
from gpuinfra_deploy.templates import text

CUDA_KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
CUDA_LIST = "/etc/apt/sources.list.d/gpuinfra-cuda.list"
CUDA_ORIGIN_PIN = "/etc/apt/preferences.d/gpuinfra-cuda-origin"


def key_url_for(url: str, key_url: str | None) -> str:
    """The repository's signing key: ``key_url``, else NVIDIA's CUDA key under ``url``."""
    return key_url or f"{url.rstrip('/')}/3bf863cc.pub"


def cuda_repository(url: str, key_url: str, what: str) -> None:
    """The repository at ``url`` (signed by ``key_url``) in apt, pinned low so that only what
    is pinned by version (``what``) comes from it; apt refreshed when that changed."""
    url = url.rstrip("/")
    key = apt_keyring(name="Add the CUDA repository's signing key", url=key_url,
                      path=CUDA_KEYRING, fingerprint=SIGNING_KEYS["cuda"])
    listed = files.put(name=f"Add NVIDIA's CUDA repository ({what})", dest=CUDA_LIST,
                       src=upload_source(text(flat_repo_list(url, CUDA_KEYRING))), mode="644")
    files.put(name=f"Take only {what} from the CUDA repository", dest=CUDA_ORIGIN_PIN,
              src=upload_source(text(origin_preference(url))), mode="644")
    apt.update(name="Refresh apt after adding the CUDA repository",
               _if=any_changed(key, listed))
