"""The lab's state under .lab/ (gitignored): paths, its SSH key, hosts.json and ssh_config.

inventory/lab.py reads hosts.json; `ssh -F .lab/ssh_config lab-worker1` and the verify suite
reach the hosts through ssh_config. Each checkout has its own lab (:attr:`Paths.lab_id`, from
the checkout's path): its containers are named ``<host>-<id>`` and labelled
``gpuinfra.lab.id=<id>``, its network is ``gpuinfra-lab-<id>``, so two checkouts on one machine
never touch each other's lab. Only containers and networks labelled ``gpuinfra.lab=1`` are
ever touched (:data:`LABEL`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LABEL = "gpuinfra.lab"
NETWORK_PREFIX = "gpuinfra-lab"
# Every podman call of the lab uses this containers.conf (CONTAINERS_CONF): runc and no
# default ulimits, which this machine's kernel needs (docs/lab-notes.md); nothing under /etc.
CONTAINERS_CONF_TEXT = '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n'


class LabError(Exception):
    """An expected failure: printed as one line, exit code 1."""


def say(message: str) -> None:
    print(message, flush=True)


@dataclass(frozen=True)
class Paths:
    """The repository's lab assets and the generated state under .lab/."""

    repo: Path

    @property
    def lab(self) -> Path:
        return self.repo / ".lab"

    @property
    def lab_id(self) -> str:
        """This checkout's lab: 8 hex digits of its path's SHA-256."""
        return hashlib.sha256(str(self.repo.resolve()).encode()).hexdigest()[:8]

    @property
    def network(self) -> str:
        return f"{NETWORK_PREFIX}-{self.lab_id}"

    @property
    def subnet(self) -> str:
        """This checkout's lab network, fixed (so inventory/lab.py knows every container's
        address before the lab is up): a /24 in 10.100.0.0-10.199.255.0 from the lab id, clear
        of podman's own pool (10.89.0.0/16) and of the guests' segment (10.77.0.0/24)."""
        return f"10.{100 + int(self.lab_id[:2], 16) % 100}.{int(self.lab_id[2:4], 16)}.0/24"

    @property
    def assets(self) -> Path:
        return self.repo / "gpuinfra_lab"

    @property
    def hardware(self) -> Path:
        return self.assets / "hardware"

    @property
    def customize(self) -> Path:
        return self.assets / "image" / "customize.sh"

    @property
    def vm_customize(self) -> Path:
        return self.assets / "image" / "vm-customize.sh"

    @property
    def vms(self) -> Path:
        """Each QEMU guest's state: .lab/vm/<host>/ (gpuinfra_lab/qemu.py)."""
        return self.lab / "vm"

    @property
    def containers_conf(self) -> Path:
        return self.lab / "containers.conf"

    @property
    def hosts_json(self) -> Path:
        return self.lab / "hosts.json"

    @property
    def ssh_config(self) -> Path:
        return self.lab / "ssh_config"

    @property
    def ssh_key(self) -> Path:
        return self.lab / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        """The lab hosts' SSH host keys, read through podman (never over the network)."""
        return self.lab / "known_hosts"


def find_repo() -> Path:
    """The checkout holding gpuinfra_lab/ (this package's parent, else the working directory)."""
    for candidate in (Path(__file__).resolve().parents[1], Path.cwd()):
        if (candidate / "gpuinfra_lab" / "hardware").is_dir():
            return candidate
    raise LabError("gpuinfra_lab/hardware not found: run gpuinfra lab from the project checkout")


def hosts_document(hosts: list[dict], ssh_key: Path, image: str, network: str,
                   known_hosts: Path | None = None) -> dict:
    """The content of .lab/hosts.json (read by inventory/lab.py)."""
    return {"network": network, "image": image, "ssh_key": str(ssh_key),
            "known_hosts": str(known_hosts) if known_hosts else None, "hosts": hosts}


def ssh_config_text(hosts: list[dict], ssh_key: Path, known_hosts: Path) -> str:
    """An ssh_config for `ssh -F .lab/ssh_config lab-worker1`: the lab's key for root, and
    host keys checked against the lab's known_hosts (a changed key is refused)."""
    lines = []
    for host in hosts:
        lines += [f"Host {host['name']}", f"    HostName {host['address']}"]
        if host.get("port"):
            lines.append(f"    Port {host['port']}")
    lines += [
        "Host lab-*",
        "    User root",
        f"    IdentityFile {ssh_key}",
        "    IdentitiesOnly yes",
        "    StrictHostKeyChecking yes",
        f"    UserKnownHostsFile {known_hosts}",
        "    LogLevel ERROR",
    ]
    return "\n".join(lines) + "\n"


def known_hosts_text(keys: dict[str, tuple[str, list[str]]]) -> str:
    """known_hosts lines: each host's public keys under its name and address.

    ``keys``: name -> (address, ["ssh-ed25519 AAAA...", ...])."""
    lines = []
    for name, (address, public_keys) in keys.items():
        for key in public_keys:
            fields = key.split()
            if len(fields) >= 2:
                lines.append(f"{name},{address} {fields[0]} {fields[1]}")
    return "\n".join(lines) + "\n"


def ensure_lab_dir(paths: Paths) -> None:
    """.lab/ with the containers.conf that every podman call of the lab uses."""
    paths.lab.mkdir(exist_ok=True)
    conf = paths.containers_conf
    if not conf.is_file() or conf.read_text() != CONTAINERS_CONF_TEXT:
        conf.write_text(CONTAINERS_CONF_TEXT)


@contextlib.contextmanager
def locked(paths: Paths) -> Iterator[None]:
    """One lab command at a time (make demo and molecule may overlap)."""
    with (paths.lab / "lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def ensure_ssh_key(paths: Paths) -> str:
    """The lab's ed25519 key pair (created once); returns the public key line."""
    paths.ssh_key.parent.mkdir(mode=0o700, exist_ok=True)
    return ensure_ed25519(paths.ssh_key, "gpuinfra-lab")


def ensure_ed25519(key: Path, comment: str) -> str:
    """An ed25519 key pair at ``key`` (0600) and ``key``.pub, made once here, in this process
    (no key ever travels over the network); returns the public key line."""
    pub = key.with_suffix(".pub")
    if not key.is_file() or not pub.is_file():
        from cryptography.hazmat.primitives import serialization as ser
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        private = Ed25519PrivateKey.generate()
        pem = private.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption())
        key.unlink(missing_ok=True)
        key.touch(mode=0o600)
        key.write_bytes(pem)
        line = private.public_key().public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH)
        pub.write_text(f"{line.decode()} {comment}\n")
    return pub.read_text()


def write_state(paths: Paths, hosts: list[dict], image: str,
                host_keys: dict[str, tuple[str, list[str]]]) -> None:
    """hosts.json for inventory/lab.py, ssh_config for ssh, known_hosts for both and for the
    verify suite (``host_keys``: name -> (address, public keys), read through podman)."""
    doc = hosts_document(hosts, paths.ssh_key, image, paths.network, paths.known_hosts)
    paths.hosts_json.write_text(json.dumps(doc, indent=2) + "\n")
    paths.known_hosts.write_text(known_hosts_text(host_keys))
    paths.ssh_config.write_text(ssh_config_text(hosts, paths.ssh_key, paths.known_hosts))
