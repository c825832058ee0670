"""podman for the lab: the client with the lab's containers.conf, the lab network, and one
systemd container per host at a fixed address.

Callers name hosts (``lab-head``); :class:`Podman` maps them to this checkout's containers
(``lab-head-<lab id>``, labelled with the id), so another checkout's lab is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from gpuinfra_lab.boot import STATE_COMMAND, Boot, wait_whole
from gpuinfra_lab.profiles import SHARED_STATE, HostPlan, expected_failures
from gpuinfra_lab.state import LABEL, LabError, Paths, say

HOST_TOOLS = ("podman", "runc", "debootstrap")


def last_line(text: bytes) -> str:
    lines = [line.strip() for line in text.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no error message"


class Podman:
    """podman, always run with the lab's own containers.conf, for this checkout's lab."""

    def __init__(self, paths: Paths) -> None:
        self.env = {**os.environ, "CONTAINERS_CONF": str(paths.containers_conf)}
        self.lab_id = paths.lab_id
        self.network = paths.network
        self.subnet = paths.subnet
        # The folder of this machine the lab's Slurm controllers share (`lab up --backup`).
        self.shared_state = paths.lab / "slurm-state"

    def container(self, host: str) -> str:
        """The container of lab host ``host`` in this checkout's lab."""
        return f"{host}-{self.lab_id}"

    def run(self, *args: str, stdin: bytes | None = None, check: bool = True) -> str:
        """stdout of ``podman ARGS``; a LabError naming podman's last error line on failure."""
        try:
            proc = subprocess.run(
                ["podman", *args], input=stdin, capture_output=True, env=self.env, check=False
            )
        except OSError as exc:
            raise LabError(f"cannot run podman: {exc}") from None
        if check and proc.returncode != 0:
            raise LabError(f"podman {args[0]} failed: {last_line(proc.stderr)}")
        return proc.stdout.decode(errors="replace")

    def ok(self, *args: str) -> bool:
        """True when ``podman ARGS`` exits 0."""
        return subprocess.run(["podman", *args], capture_output=True, env=self.env).returncode == 0

    def exec(self, host: str, script: str, stdin: bytes | None = None, check: bool = True) -> str:
        """Run a shell script in a host's container."""
        args = ["exec", *(["-i"] if stdin is not None else []), self.container(host), "sh",
                "-c", script]
        return self.run(*args, stdin=stdin, check=check)

    def lab_containers(self, every_lab: bool = False) -> dict[str, dict]:
        """This lab's containers by host name: {state, labels, container}. ``every_lab``:
        every gpuinfra lab on the machine, keyed by container name."""
        label = f"label={LABEL}=1" if every_lab else f"label={LABEL}.id={self.lab_id}"
        out = self.run("ps", "-a", "--filter", label, "--format", "json")
        found = {}
        for c in json.loads(out or "[]"):
            labels = c.get("Labels") or {}
            key = c["Names"][0] if every_lab else labels.get(f"{LABEL}.host", c["Names"][0])
            found[key] = {"state": c["State"], "labels": labels, "container": c["Names"][0]}
        return found

    def remove(self, *hosts: str) -> None:
        if hosts:
            self.run("rm", "-f", "-t", "0", *(self.container(h) for h in hosts))

    def start(self, host: str) -> None:
        self.run("start", self.container(host))

    def restart(self, *hosts: str) -> None:
        self.run("restart", "-t", "5", *(self.container(h) for h in hosts))

    def address(self, host: str) -> str:
        """The host's IP address on the lab network."""
        info = json.loads(self.run("inspect", self.container(host), "--format", "json"))[0]
        return info["NetworkSettings"]["Networks"][self.network]["IPAddress"]


def sbin_path() -> str:
    return os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin"


def apt_install(packages: list[str], missing: list[str], log: Path,
                recommends: bool = True) -> None:
    """Install ``packages`` with apt-get (``missing``: the tools that were not found, for the
    messages); apt's output goes to ``log``. The lab's one way of installing host tools."""
    if shutil.which("apt-get") is None:
        raise LabError(f"{', '.join(missing)} missing and no apt-get to install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    options = [] if recommends else ["--no-install-recommends"]
    # Never remove anything of the machine's without asking (podman conflicts with Docker
    # CE's packages, for one): apt's own dry run names what would go, and --no-remove makes
    # apt-get abort rather than remove (apt-get(8)).
    removed = would_remove(subprocess.run(
        ["apt-get", "install", "-s", *options, *packages], capture_output=True, text=True,
        env=env).stdout)
    if removed:
        raise LabError(f"installing {' '.join(packages)} (missing: {', '.join(missing)}) would "
                       f"remove {', '.join(removed)} from this machine: not done. Install them "
                       "yourself if that is fine (apt-get install "
                       f"{' '.join(packages)}), or run the lab on another machine")
    say(f"installing {' '.join(packages)} (missing: {', '.join(missing)})")
    with log.open("wb") as out:
        proc = subprocess.run(["apt-get", "install", "-y", "--no-remove", *options, *packages],
                              stdout=out, stderr=out, env=env)
    if proc.returncode != 0:
        raise LabError(f"apt-get install {' '.join(packages)} failed (see {log})")


def would_remove(simulation: str) -> list[str]:
    """The packages an ``apt-get install -s`` run would remove (its ``Remv NAME ...`` lines)."""
    return [line.split()[1] for line in simulation.splitlines()
            if line.startswith("Remv ") and len(line.split()) > 1]


def ensure_host_tools(log: Path) -> None:
    """Install podman, runc and debootstrap with apt-get when any is missing."""
    missing = [t for t in HOST_TOOLS if shutil.which(t, path=sbin_path()) is None]
    if missing:
        apt_install(list(HOST_TOOLS), missing, log)


def ensure_network(podman: Podman) -> str:
    """The lab network (created when missing, refused when not ours); its IPv4 subnet."""
    network = podman.network
    if podman.ok("network", "exists", network):
        info = json.loads(podman.run("network", "inspect", network))[0]
        if (info.get("labels") or {}).get(LABEL) != "1":
            raise LabError(f"a podman network {network} exists without label {LABEL}=1: "
                           "not ours")
        subnets = [s["subnet"] for s in info.get("subnets") or [] if "." in s["subnet"]]
        if subnets == [podman.subnet]:
            return podman.subnet
        # Made by an older lab with podman's own subnet: its containers go with it (lab up
        # makes them again at their fixed addresses).
        for name, found in podman.lab_containers().items():
            podman.run("rm", "-f", "-t", "0", found["container"])
            say(f"{name}: removed (its network moves to {podman.subnet})")
        podman.run("network", "rm", network)
    podman.run("network", "create", "--subnet", podman.subnet, "--label", f"{LABEL}=1",
               "--label", f"{LABEL}.id={podman.lab_id}", network)
    say(f"network {network}: created ({podman.subnet})")
    return podman.subnet


# A reboot from inside (`systemctl reboot`, pyinfra's server.reboot, a rolling change) ends the
# container's systemd with a non-zero status; podman then starts it again, with a fresh /run
# and /dev, as a machine reboots (measured with podman 4.3: exit 129, restarted once, the
# marker in /run gone). `gpuinfra lab reboot` is `podman restart` from outside.
RESTART = "on-failure"


def wanted_labels(plan: HostPlan, image: str, address: str, lab_id: str) -> dict[str, str]:
    """Every label of a container run as planned; any difference means: recreate it."""
    return {
        LABEL: "1",
        f"{LABEL}.id": lab_id,
        f"{LABEL}.host": plan.name,
        f"{LABEL}.groups": ",".join(plan.groups),
        f"{LABEL}.profile": plan.profile or "",
        f"{LABEL}.image": image,
        f"{LABEL}.address": address,
        f"{LABEL}.restart": RESTART,
        f"{LABEL}.shared-state": "1" if plan.shared_state else "",
    }


def run_container(podman: Podman, plan: HostPlan, image: str, address: str) -> None:
    wanted = wanted_labels(plan, image, address, podman.lab_id)
    labels = [f"--label={k}={v}" for k, v in wanted.items()]
    mounts = []
    if plan.shared_state:
        # One folder of this machine in both controllers: what NFS is to a real site.
        podman.shared_state.mkdir(mode=0o700, parents=True, exist_ok=True)
        mounts = ["--volume", f"{podman.shared_state}:{SHARED_STATE}"]
    podman.run(
        "run", "-d", "--name", podman.container(plan.name), "--hostname", plan.name,
        "--network", podman.network, "--ip", address,
        "--systemd=always", "--privileged", "--no-hosts", f"--restart={RESTART}",
        *labels, *mounts, image, "/sbin/init",
    )  # fmt: skip


def ensure_container(
    podman: Podman, plan: HostPlan, image: str, address: str, found: dict | None
) -> str:
    """Make one host run as planned; returns what was done."""
    if found is None:
        run_container(podman, plan, image, address)
        return "created"
    wanted = wanted_labels(plan, image, address, podman.lab_id)
    if any(found["labels"].get(k) != v for k, v in wanted.items()):
        podman.remove(plan.name)
        run_container(podman, plan, image, address)
        return "recreated (image, profile or address changed)"
    if found["state"] != "running":
        podman.start(plan.name)
        return "started"
    return "reused"


def wait_booted(podman: Podman, name: str, profile: str | None) -> Boot:
    """Wait until systemd in the container finished booting and came back whole (gpuinfra_lab.boot),
    or the boot timeout: the last look either way."""
    return wait_whole(lambda: podman.exec(name, STATE_COMMAND, check=False),
                      expected_failures(profile))
