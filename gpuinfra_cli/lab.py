"""`gpuinfra lab up|down|reboot|status`: a real multi-node cluster of Debian 12 containers.

`up` builds (or reuses) a Debian 12 image with debootstrap, starts one head and N GPU workers as
systemd containers on their own podman network, authorizes the lab's SSH key for root, gives
every worker replayed GPU hardware (device nodes and an `nvidia-smi` stand-in, from
lab/hardware/), and writes .lab/hosts.json, which inventory/lab.py reads. The deploy then
reaches the lab over SSH exactly as it reaches real hosts. `reboot` restarts every host
(`podman restart`: fresh /run and /dev), as an operator reboots after a first driver install.

Everything generated lives under .lab/ (gitignored). Every podman call uses .lab/containers.conf
through CONTAINERS_CONF (runc, no default ulimits: see docs/lab-notes.md); nothing under
/etc changes. Only containers and networks labelled ``gpuinfra.lab=1`` are ever touched.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import io
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

LABEL = "gpuinfra.lab"
NETWORK = "gpuinfra-lab"
IMAGE_REPO = "localhost/gpuinfra-lab"
HEAD_NAME = "lab-head"
WORKER_PROFILES = ("8x-h100-sxm-nvswitch", "2x-h100-pcie-bridged")  # cycled over the workers
BROKEN_PROFILE = "2x-a100-pcie-bridge-missing"
MAX_WORKERS = 16

# The image recipe. Any change here or in lab/image/customize.sh changes the image tag,
# so the next `lab up` rebuilds the image and recreates the containers.
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
VARIANT = "minbase"
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "libpam-systemd", "openssh-server", "python3", "sudo",
    "iproute2", "iputils-ping", "ca-certificates", "procps", "kmod", "netbase",
)  # fmt: skip
HOST_TOOLS = ("podman", "runc", "debootstrap")

CONTAINERS_CONF_TEXT = '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n'
BOOT_TIMEOUT_S = 120
SSH_TIMEOUT_S = 60

# Where the lab's files go inside a worker (see lab/README.md).
GUEST_HARDWARE = "usr/local/share/gpuinfra-lab/hardware"
GUEST_FILES = {  # lab/<file> -> (path in the container, mode)
    "nvidia-smi": ("usr/local/bin/nvidia-smi", 0o755),
    "gpuinfra-lab-devices": ("usr/local/sbin/gpuinfra-lab-devices", 0o755),
    "gpuinfra-lab-devices.service": ("etc/systemd/system/gpuinfra-lab-devices.service", 0o644),
}


class LabError(Exception):
    """An expected failure: printed as one line, exit code 1."""


@dataclass(frozen=True)
class HostPlan:
    """One lab host as `up` means to run it."""

    name: str
    groups: tuple[str, ...]
    profile: str | None = None

    @property
    def labels(self) -> dict[str, str]:
        return {
            LABEL: "1",
            f"{LABEL}.groups": ",".join(self.groups),
            f"{LABEL}.profile": self.profile or "",
        }


@dataclass(frozen=True)
class Paths:
    """The repository's lab assets and the generated state under .lab/."""

    repo: Path

    @property
    def lab(self) -> Path:
        return self.repo / ".lab"

    @property
    def assets(self) -> Path:
        return self.repo / "lab"

    @property
    def hardware(self) -> Path:
        return self.assets / "hardware"

    @property
    def customize(self) -> Path:
        return self.assets / "image" / "customize.sh"

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


# --- pure planning ------------------------------------------------------------------------------


def plan_hosts(workers: int = 2, broken: bool = False) -> list[HostPlan]:
    """The head, ``workers`` healthy workers (profiles cycled), and the broken one if asked."""
    hosts = [HostPlan(HEAD_NAME, ("head",))]
    for i in range(1, workers + 1):
        profile = WORKER_PROFILES[(i - 1) % len(WORKER_PROFILES)]
        hosts.append(HostPlan(f"lab-worker{i}", ("workers",), profile))
    if broken:
        hosts.append(HostPlan(f"lab-worker{workers + 1}", ("workers",), BROKEN_PROFILE))
    return hosts


def recipe_tag(customize_script: bytes) -> str:
    """Image tag keyed by a hash of the recipe: suite, mirror, variant, packages, customize.sh."""
    recipe = json.dumps([SUITE, MIRROR, VARIANT, sorted(PACKAGES)]).encode() + customize_script
    return f"{IMAGE_REPO}:{hashlib.sha256(recipe).hexdigest()[:12]}"


def hosts_document(hosts: list[dict], ssh_key: Path, image: str) -> dict:
    """The content of .lab/hosts.json (read by inventory/lab.py)."""
    return {"network": NETWORK, "image": image, "ssh_key": str(ssh_key), "hosts": hosts}


def ssh_config_text(hosts: list[dict], ssh_key: Path) -> str:
    """An ssh_config for `ssh -F .lab/ssh_config lab-worker1` and testinfra's ssh backend."""
    lines = []
    for host in hosts:
        lines += [f"Host {host['name']}", f"    HostName {host['address']}"]
    lines += [
        "Host lab-*",
        "    User root",
        f"    IdentityFile {ssh_key}",
        "    IdentitiesOnly yes",
        "    StrictHostKeyChecking no",
        "    UserKnownHostsFile /dev/null",
        "    LogLevel ERROR",
    ]
    return "\n".join(lines) + "\n"


def find_repo() -> Path:
    """The checkout holding lab/ (this package's parent, else the working directory)."""
    for candidate in (Path(__file__).resolve().parents[1], Path.cwd()):
        if (candidate / "lab" / "hardware").is_dir():
            return candidate
    raise LabError("lab/hardware not found: run gpuinfra lab from the project checkout")


# --- running commands ---------------------------------------------------------------------------


def _last_line(text: bytes) -> str:
    lines = [line.strip() for line in text.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no error message"


class Podman:
    """podman, always run with the lab's own containers.conf."""

    def __init__(self, paths: Paths) -> None:
        self.env = {**os.environ, "CONTAINERS_CONF": str(paths.containers_conf)}

    def run(self, *args: str, stdin: bytes | None = None, check: bool = True) -> str:
        """stdout of ``podman ARGS``; a LabError naming podman's last error line on failure."""
        try:
            proc = subprocess.run(
                ["podman", *args], input=stdin, capture_output=True, env=self.env, check=False
            )
        except OSError as exc:
            raise LabError(f"cannot run podman: {exc}") from None
        if check and proc.returncode != 0:
            raise LabError(f"podman {args[0]} failed: {_last_line(proc.stderr)}")
        return proc.stdout.decode(errors="replace")

    def ok(self, *args: str) -> bool:
        """True when ``podman ARGS`` exits 0."""
        return subprocess.run(["podman", *args], capture_output=True, env=self.env).returncode == 0

    def exec(self, name: str, script: str, stdin: bytes | None = None, check: bool = True) -> str:
        """Run a shell script in a container."""
        args = ["exec", *(["-i"] if stdin is not None else []), name, "sh", "-c", script]
        return self.run(*args, stdin=stdin, check=check)

    def lab_containers(self) -> dict[str, dict]:
        """Labelled containers by name: {state, labels}."""
        out = self.run("ps", "-a", "--filter", f"label={LABEL}=1", "--format", "json")
        return {
            c["Names"][0]: {"state": c["State"], "labels": c.get("Labels") or {}}
            for c in json.loads(out or "[]")
        }

    def address(self, name: str) -> str:
        """The container's IP address on the lab network."""
        info = json.loads(self.run("inspect", name, "--format", "json"))[0]
        return info["NetworkSettings"]["Networks"][NETWORK]["IPAddress"]


def _sbin_path() -> str:
    return os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin"


def ensure_host_tools(log: Path) -> None:
    """Install podman, runc and debootstrap with apt-get when any is missing."""
    missing = [t for t in HOST_TOOLS if shutil.which(t, path=_sbin_path()) is None]
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise LabError(f"{', '.join(missing)} missing and no apt-get to install it")
    say(f"installing {' '.join(HOST_TOOLS)} (missing: {', '.join(missing)})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with log.open("wb") as out:
        proc = subprocess.run(
            ["apt-get", "install", "-y", *HOST_TOOLS], stdout=out, stderr=out, env=env
        )
    if proc.returncode != 0:
        raise LabError(f"apt-get install {' '.join(HOST_TOOLS)} failed (see {log})")


def say(message: str) -> None:
    print(message, flush=True)


# --- state under .lab/ --------------------------------------------------------------------------


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
    key, pub = paths.ssh_key, paths.ssh_key.with_suffix(".pub")
    if not key.is_file() or not pub.is_file():
        from cryptography.hazmat.primitives import serialization as ser
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        private = Ed25519PrivateKey.generate()
        key.parent.mkdir(mode=0o700, exist_ok=True)
        pem = private.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption())
        key.touch(mode=0o600)
        key.write_bytes(pem)
        line = private.public_key().public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH)
        pub.write_text(line.decode() + " gpuinfra-lab\n")
    return pub.read_text()


def write_state(paths: Paths, hosts: list[dict], image: str) -> None:
    """hosts.json for inventory/lab.py and ssh_config for ssh/testinfra."""
    doc = hosts_document(hosts, paths.ssh_key, image)
    paths.hosts_json.write_text(json.dumps(doc, indent=2) + "\n")
    paths.ssh_config.write_text(ssh_config_text(hosts, paths.ssh_key))


# --- the image ----------------------------------------------------------------------------------


def ensure_image(podman: Podman, paths: Paths) -> str:
    """The lab image for the current recipe: reused when present, else built and imported."""
    tag = recipe_tag(paths.customize.read_bytes())
    if podman.ok("image", "exists", tag):
        say(f"image {tag}: reused")
        return tag
    start = time.monotonic()
    say(f"image {tag}: building with debootstrap (about a minute)")
    rootfs = paths.lab / "build" / tag.rsplit(":", 1)[1]
    try:
        debootstrap(rootfs, paths.lab / "build.log")
        customize(rootfs, paths.customize)
        import_rootfs(podman, rootfs, tag)
    finally:
        shutil.rmtree(rootfs.parent, ignore_errors=True)
    say(f"image {tag}: built in {time.monotonic() - start:.0f} s")
    return tag


def debootstrap(rootfs: Path, log: Path) -> None:
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs.mkdir(parents=True)
    cmd = [
        "debootstrap",
        f"--variant={VARIANT}",
        f"--include={','.join(PACKAGES)}",
        SUITE,
        str(rootfs),
        MIRROR,
    ]
    with log.open("wb") as out:
        rc = subprocess.run(
            cmd, stdout=out, stderr=out, env={**os.environ, "PATH": _sbin_path()}
        ).returncode
    if rc != 0:
        raise LabError(f"image build failed: debootstrap exited {rc} (see {log})")


def customize(rootfs: Path, script: Path) -> None:
    """Run lab/image/customize.sh inside the new root."""
    target = rootfs / "tmp" / "gpuinfra-customize.sh"
    shutil.copyfile(script, target)
    proc = subprocess.run(
        ["chroot", str(rootfs), "/bin/sh", "/tmp/gpuinfra-customize.sh"],
        capture_output=True,
        env={**os.environ, "PATH": _sbin_path()},
    )
    target.unlink()
    if proc.returncode != 0:
        raise LabError(f"image build failed: customize.sh: {_last_line(proc.stderr)}")


def import_rootfs(podman: Podman, rootfs: Path, tag: str) -> None:
    """tar the root into `podman import`, with /sbin/init as the command."""
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    proc = subprocess.run(
        [
            "podman",
            "import",
            "--change",
            "CMD=/sbin/init",
            "--change",
            f"LABEL={LABEL}=1",
            "-",
            tag,
        ],
        stdin=tar.stdout,
        capture_output=True,
        env=podman.env,
    )
    tar.stdout.close()
    if tar.wait() != 0 or proc.returncode != 0:
        raise LabError(f"image build failed: podman import: {_last_line(proc.stderr)}")


def drop_old_images(podman: Podman, keep: str) -> None:
    """Remove lab images of older recipes (after their containers were recreated)."""
    out = podman.run(
        "images",
        "--filter",
        f"reference={IMAGE_REPO}",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        check=False,
    )
    for tag in set(out.split()) - {keep}:
        podman.run("rmi", tag, check=False)


# --- network and containers ---------------------------------------------------------------------


def ensure_network(podman: Podman) -> str:
    """The lab network (created when missing, refused when not ours); its IPv4 subnet."""
    if not podman.ok("network", "exists", NETWORK):
        podman.run("network", "create", "--label", f"{LABEL}=1", NETWORK)
        say(f"network {NETWORK}: created")
    info = json.loads(podman.run("network", "inspect", NETWORK))[0]
    if (info.get("labels") or {}).get(LABEL) != "1":
        raise LabError(f"a podman network {NETWORK} exists without label {LABEL}=1: not ours")
    subnets = [s["subnet"] for s in info.get("subnets") or [] if "." in s["subnet"]]
    if not subnets:
        raise LabError(f"podman network {NETWORK} has no IPv4 subnet")
    return subnets[0]


def host_address(subnet: str, name: str) -> str:
    """A fixed address per host (head .10, lab-workerN .10+N): restarts keep ssh_config valid."""
    offset = 10 if name == HEAD_NAME else 10 + int(name.removeprefix("lab-worker"))
    return str(ipaddress.ip_network(subnet)[offset])


def wanted_labels(plan: HostPlan, image: str, address: str) -> dict[str, str]:
    """Every label of a container run as planned; any difference means: recreate it."""
    return {**plan.labels, f"{LABEL}.image": image, f"{LABEL}.address": address}


def run_container(podman: Podman, plan: HostPlan, image: str, address: str) -> None:
    labels = [f"--label={k}={v}" for k, v in wanted_labels(plan, image, address).items()]
    podman.run(
        "run", "-d", "--name", plan.name, "--hostname", plan.name,
        "--network", NETWORK, "--ip", address,
        "--systemd=always", "--privileged", "--no-hosts",
        *labels, image, "/sbin/init",
    )  # fmt: skip


def ensure_container(
    podman: Podman, plan: HostPlan, image: str, address: str, found: dict | None
) -> str:
    """Make one host run as planned; returns what was done."""
    if found is None:
        run_container(podman, plan, image, address)
        return "created"
    wanted = wanted_labels(plan, image, address)
    if any(found["labels"].get(k) != v for k, v in wanted.items()):
        podman.run("rm", "-f", "-t", "0", plan.name)
        run_container(podman, plan, image, address)
        return "recreated (image, profile or address changed)"
    if found["state"] != "running":
        podman.run("start", plan.name)
        return "started"
    return "reused"


def wait_booted(podman: Podman, name: str) -> str:
    """Wait until systemd in the container finished booting; its final state."""
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while True:
        state = podman.exec(name, "systemctl is-system-running", check=False).strip()
        if state in ("running", "degraded"):
            return state
        if time.monotonic() > deadline:
            raise LabError(f"{name}: systemd did not finish booting ({state or 'no answer'})")
        time.sleep(0.5)


def guest_tar(paths: Paths, plan: HostPlan, pubkey: str) -> bytes:
    """The files `up` installs in a container: root's authorized key, and a worker's hardware."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _tar_add(tar, "root/.ssh", None, 0o700)
        _tar_add(tar, "root/.ssh/authorized_keys", pubkey.encode(), 0o600)
        if plan.profile:
            for source, (target, mode) in GUEST_FILES.items():
                _tar_add(tar, target, (paths.assets / source).read_bytes(), mode)
            for file in sorted((paths.hardware / plan.profile).iterdir()):
                _tar_add(tar, f"{GUEST_HARDWARE}/{file.name}", file.read_bytes(), 0o644)
    return buf.getvalue()


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes | None, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.mode, info.mtime = mode, int(time.time())
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


INSTALL_SCRIPT = f"rm -rf /{GUEST_HARDWARE} && tar -x -p --no-overwrite-dir -C / -f -"
DEVICES_SCRIPT = (
    "systemctl daemon-reload && systemctl enable --quiet gpuinfra-lab-devices.service"
    " && systemctl restart gpuinfra-lab-devices.service"
)


def provision(podman: Podman, paths: Paths, plan: HostPlan, pubkey: str) -> str:
    """Install the SSH key and, on workers, the replayed hardware; the systemd state."""
    state = wait_booted(podman, plan.name)
    podman.exec(plan.name, INSTALL_SCRIPT, stdin=guest_tar(paths, plan, pubkey))
    if plan.profile:
        podman.exec(plan.name, DEVICES_SCRIPT)
    return state


def ssh_banner(address: str, timeout: float = 1.0) -> bool:
    """True when an SSH server answers on address:22."""
    try:
        with socket.create_connection((address, 22), timeout=timeout) as conn:
            return conn.recv(8).startswith(b"SSH-")
    except OSError:
        return False


def wait_ssh(name: str, address: str) -> None:
    deadline = time.monotonic() + SSH_TIMEOUT_S
    while not ssh_banner(address):
        if time.monotonic() > deadline:
            raise LabError(f"{name}: sshd does not answer on {address}:22")
        time.sleep(0.5)


# --- commands -----------------------------------------------------------------------------------


def lab_up(paths: Paths, plan: list[HostPlan]) -> list[dict]:
    """Bring the lab to ``plan``; the hosts as written to hosts.json."""
    ensure_host_tools(paths.lab / "apt-install.log")
    podman = Podman(paths)
    pubkey = ensure_ssh_key(paths)
    image = ensure_image(podman, paths)
    subnet = ensure_network(podman)
    found = podman.lab_containers()
    for extra in sorted(set(found) - {p.name for p in plan}):
        podman.run("rm", "-f", "-t", "0", extra)
        say(f"{extra}: removed (not in this lab)")
    addresses = {h.name: host_address(subnet, h.name) for h in plan}
    for h in plan:
        done = ensure_container(podman, h, image, addresses[h.name], found.get(h.name))
        say(f"{h.name}: {done}")
    drop_old_images(podman, image)
    hosts = []
    for h in plan:
        state = provision(podman, paths, h, pubkey)
        wait_ssh(h.name, addresses[h.name])
        hosts.append({"name": h.name, "address": addresses[h.name], "groups": list(h.groups),
                      "profile": h.profile, "systemd": state})  # fmt: skip
    write_state(paths, hosts, image)
    return hosts


def cmd_up(args: argparse.Namespace) -> int:
    if not 0 <= args.workers <= MAX_WORKERS:
        return fail(f"--workers must be between 0 and {MAX_WORKERS}")
    start = time.monotonic()
    try:
        paths = _root_paths()
        with locked(paths):
            hosts = lab_up(paths, plan_hosts(args.workers, args.broken))
    except LabError as exc:
        return fail(str(exc))
    say(f"lab up: {len(hosts)} hosts ready in {time.monotonic() - start:.1f} s")
    print_table(hosts)
    say(
        f"inventory: inventory/lab.py (reads {paths.hosts_json.relative_to(paths.repo)}); "
        f"ssh -F {paths.ssh_config.relative_to(paths.repo)} lab-worker1"
    )
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    try:
        paths = _root_paths()
        with locked(paths):
            removed = lab_down(paths)
    except LabError as exc:
        return fail(str(exc))
    say(f"lab down: removed {', '.join(removed) if removed else 'nothing (no lab)'}")
    return 0


def lab_down(paths: Paths) -> list[str]:
    """Remove every labelled container and network; forget their addresses."""
    for stale in (paths.hosts_json, paths.ssh_config):
        stale.unlink(missing_ok=True)
    if shutil.which("podman") is None:
        return []
    podman = Podman(paths)
    names = sorted(podman.lab_containers())
    if names:
        podman.run("rm", "-f", "-t", "0", *names)
    nets = podman.run(
        "network", "ls", "--filter", f"label={LABEL}=1", "--format", "{{.Name}}"
    ).split()
    for net in nets:
        podman.run("network", "rm", net)
    return names + [f"network {n}" for n in nets]


def lab_reboot(paths: Paths) -> list[dict]:
    """Reboot every running lab host the way a container reboots: `podman restart`.

    A restart boots systemd afresh with a new /run (so the reboot marker
    /run/gpuinfra/reboot-required is gone, as after a real reboot) and a new /dev, whose
    NVIDIA nodes gpuinfra-lab-devices.service recreates from the driver options. Addresses are
    fixed, so hosts.json and ssh_config stay valid. Returns the hosts (name, address, systemd).
    """
    podman = Podman(paths)
    found = podman.lab_containers()
    names = sorted((n for n, info in found.items() if info["state"] == "running"), key=_order)
    if not names:
        raise LabError("no running lab to reboot (run `gpuinfra lab up`)")
    podman.run("restart", "-t", "5", *names)
    hosts = []
    for name in names:
        state = wait_booted(podman, name)
        address = podman.address(name)
        wait_ssh(name, address)
        hosts.append({"name": name, "address": address, "systemd": state})
    return hosts


def cmd_reboot(args: argparse.Namespace) -> int:
    start = time.monotonic()
    try:
        paths = _root_paths()
        with locked(paths):
            hosts = lab_reboot(paths)
    except LabError as exc:
        return fail(str(exc))
    for h in hosts:
        say(f"{h['name']}: rebooted, systemd {h['systemd']}, ssh ok on {h['address']}")
    say(f"lab reboot: {len(hosts)} hosts in {time.monotonic() - start:.1f} s")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    try:
        paths = _root_paths()
        hosts = lab_status(paths)
    except LabError as exc:
        return fail(str(exc))
    if not hosts:
        say("no lab (run `gpuinfra lab up`)")
        return 1
    print_table(hosts)
    healthy = all(h["state"] == "running" and h["ssh"] == "ok" for h in hosts)
    return 0 if healthy else 1


def lab_status(paths: Paths) -> list[dict]:
    """Each labelled container: name, address, state, profile, groups, ssh."""
    if shutil.which("podman") is None:
        return []
    podman = Podman(paths)
    hosts = []
    for name, info in sorted(podman.lab_containers().items(), key=lambda kv: _order(kv[0])):
        running = info["state"] == "running"
        address = podman.address(name) if running else "-"
        labels = info["labels"]
        hosts.append({
            "name": name, "address": address, "state": info["state"],
            "groups": labels.get(f"{LABEL}.groups", "").split(","),
            "profile": labels.get(f"{LABEL}.profile") or None,
            "ssh": "ok" if running and ssh_banner(address) else "down",
        })  # fmt: skip
    return hosts


def _order(name: str) -> tuple[int, str]:
    return (0 if name == HEAD_NAME else 1, name.zfill(20))


def print_table(hosts: list[dict]) -> None:
    rows = [("HOST", "ADDRESS", "STATE", "GROUPS", "HARDWARE PROFILE")]
    for h in hosts:
        state = h.get("state", "running") + (f", ssh {h['ssh']}" if "ssh" in h else "")
        if "systemd" in h:
            state += f", systemd {h['systemd']}"
        rows.append((h["name"], h["address"], state, ",".join(h["groups"]), h["profile"] or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        say("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _root_paths() -> Paths:
    """The lab's paths, after checking we may drive rootful podman."""
    if os.geteuid() != 0:
        raise LabError("the lab needs root (rootful podman, so this machine reaches the hosts)")
    paths = Paths(find_repo())
    ensure_lab_dir(paths)
    return paths


def fail(message: str) -> int:
    print(f"gpuinfra lab: {message}", file=sys.stderr)
    return 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add `lab up|down|reboot|status` to the gpuinfra command line."""
    lab = sub.add_parser(
        "lab",
        help="the local podman lab cluster: up, down, reboot, status",
        description=__doc__.split("\n\n")[0],
    )
    verbs = lab.add_subparsers(dest="lab_command", required=True, parser_class=type(lab))
    up = verbs.add_parser("up", help="start (or repair) the lab; idempotent")
    up.add_argument("--workers", type=int, default=2, help="healthy GPU workers (default 2)")
    up.add_argument(
        "--broken",
        action="store_true",
        help="add a worker whose spec says bridged pairs but whose hardware is not",
    )
    up.set_defaults(func=cmd_up)
    down = verbs.add_parser("down", help="remove every lab container and network")
    down.set_defaults(func=cmd_down)
    reboot = verbs.add_parser(
        "reboot", help="reboot every lab host (podman restart: fresh /run and /dev)"
    )
    reboot.set_defaults(func=cmd_reboot)
    status = verbs.add_parser("status", help="each host, its address, state and hardware")
    status.set_defaults(func=cmd_status)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `lab ...` alone (python -m gpuinfra_cli.lab up), without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="gpuinfra")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["lab", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
