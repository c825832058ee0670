"""How the verify suite reaches a host: paramiko, with the site's host-key policy enforced.

A suite that accepts any host key proves nothing: whoever answers on a node's address (a
spoofed address, a swapped machine) would be "verified" as a healthy node. So every connection
checks the host's key against the known_hosts file the site's data names, with pyinfra's own
data keys and meanings (the deploy checks the same file):

- ``ssh_known_hosts_file`` (default ``~/.ssh/known_hosts``);
- ``ssh_strict_host_key_checking``: ``"yes"`` (known keys only), ``"accept-new"`` (the
  default: a host not in the file yet is trusted on first use and added), ``"no"``/``"off"``
  (no check: the site says so explicitly).

A key that differs from the file's is refused in every mode but ``"no"``, with both
fingerprints and the fix. testinfra's paramiko backend loads no known_hosts file and accepts
every key, so the suite hands it a client connected here (:func:`testinfra_host`).
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import paramiko

from gpuinfra_verify.expect import SshTarget

TIMEOUT_S = 10


class HostKeyProblem(Exception):
    """The host's SSH key is not the one the site trusts: the message says what and the fix."""


def fingerprint(key: paramiko.PKey) -> str:
    """``SHA256:...`` as `ssh-keygen -lf` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class _Unknown(paramiko.MissingHostKeyPolicy):
    """A host missing from known_hosts: refused ("yes"), or added to the file ("accept-new")."""

    def __init__(self, target: SshTarget, accept_new: bool) -> None:
        self.target, self.accept_new = target, accept_new

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        if self.accept_new:
            client.get_host_keys().add(hostname, key.get_name(), key)
            client.save_host_keys(self.target.known_hosts_path)
            return
        raise HostKeyProblem(
            f"{self.target.name}: {hostname} is not in {self.target.known_hosts_path} and "
            f"ssh_strict_host_key_checking is 'yes': its {key.get_name()} key "
            f"{fingerprint(key)} is not trusted.\n  fix: compare that fingerprint with the "
            "node's own (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on its console) "
            "and add the key to the file, or set ssh_strict_host_key_checking = 'accept-new' "
            "in the site's data to trust new hosts on first use")


def connect(target: SshTarget, timeout: float = TIMEOUT_S) -> paramiko.SSHClient:
    """A connected client for ``target``; raises HostKeyProblem when its key is not trusted."""
    client = paramiko.SSHClient()
    if target.host_key_policy == "no":
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    else:
        known = Path(target.known_hosts_path)
        if target.host_key_policy == "accept-new" and not known.exists():
            known.parent.mkdir(parents=True, exist_ok=True)
            known.touch(mode=0o600)
        if known.is_file():
            client.load_host_keys(str(known))
        client.set_missing_host_key_policy(
            _Unknown(target, accept_new=target.host_key_policy == "accept-new"))
    options: dict[str, Any] = {"hostname": target.address, "port": target.port or 22,
                               "username": target.user, "timeout": timeout}
    if target.key:
        options.update(key_filename=target.key, look_for_keys=False, allow_agent=False)
    try:
        client.connect(**options)
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise HostKeyProblem(
            f"{target.name}: the SSH host key of {target.address} CHANGED: "
            f"{target.known_hosts_path} holds {exc.expected_key.get_name()} "
            f"{fingerprint(exc.expected_key)}, the host offered {exc.key.get_name()} "
            f"{fingerprint(exc.key)}. Something else may be answering on the node's address, "
            "so nothing it says is verified.\n  fix: check the node's key on its console "
            "(`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`); if it was reinstalled, "
            f"`ssh-keygen -R {target.address} -f {target.known_hosts_path}` and add the new "
            "key") from None
    except HostKeyProblem:
        client.close()
        raise
    return client


def testinfra_host(target: SshTarget) -> Any:
    """testinfra's host for ``target``, whose paramiko backend uses a client from
    :func:`connect` (testinfra's own would load no known_hosts and accept any key)."""
    import testinfra

    host = testinfra.get_host(f"paramiko://{target.name}")
    if "client" not in vars(host.backend):  # one connection per host and process
        host.backend.client = connect(target)
    return host
