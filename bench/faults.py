"""Fault drills on the lab: a dead worker, a worker killed during the driver install, a deploy
interrupted with Ctrl-C. Each must end with a rerun that converges with no manual step.

    .venv/bin/python -m bench.faults [dead-worker] [killed-install] [interrupted]
                                     [interrupted-head]

Each drill starts from a fresh lab (`gpuinfra lab down` + `up`), runs the deploy as an
operator would (`pyinfra -y --json inventory/lab.py deploy.py`), breaks it, then reruns and
prints what happened: which hosts failed, whether the healthy ones finished, whether the rerun
converged (exit 0, no failed host; then one more deploy changes nothing and the verify suite
finds every service the spec asks for running) and how long each step took. Exit 0 when every drill
behaved as it must. A benchmark/drill, not a test: it needs root and the lab, takes minutes,
and `make test` does not run it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from gpuinfra_lab.podman import Podman
from gpuinfra_lab.state import Paths, find_repo

REPO = find_repo()
BIN = REPO / ".venv" / "bin"
DEPLOY = [str(BIN / "pyinfra"), "-y", "--json", "inventory/lab.py", "deploy.py"]


def say(text: str) -> None:
    print(text, flush=True)


def lab(*args: str) -> None:
    subprocess.run([str(BIN / "gpuinfra"), "lab", *args], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL)


def deploy() -> tuple[int, dict, float]:
    """(exit code, pyinfra's results or {}, seconds) of one deploy."""
    start = time.monotonic()
    run = subprocess.run(DEPLOY, cwd=REPO, capture_output=True, text=True)
    results = _results(run.stdout)
    if run.returncode and not results:  # pyinfra stopped before its results: say why
        say("  pyinfra printed no results; its last lines:\n    " + "\n    ".join(
            line for line in run.stderr.splitlines()[-12:] if "is currently in beta" not in line))
    return run.returncode, results, time.monotonic() - start


def _results(stdout: str) -> dict:
    try:
        return json.loads(stdout)["results"]
    except (ValueError, KeyError):
        return {}


def failed(results: dict) -> list[str]:
    return sorted(results.get("failed_hosts") or [])


def converged(label: str) -> bool:
    """The rerun succeeds, and then the site is whole: one more deploy changes nothing, and
    every service the spec asks for runs (the verify suite, less the pending-reboot check: a
    fresh lab's driver install asks for one, which these drills do not take)."""
    rc, results, seconds = deploy()
    ok = rc == 0 and not failed(results)
    say(f"  {label}: exit {rc}, failed hosts {failed(results) or 'none'}, {seconds:.1f} s "
        f"-> {'converged' if ok else 'NOT converged'}")
    if not ok:
        return False
    again = subprocess.run([str(BIN / "python"), "-m", "gpuinfra_cli.idempotence",
                            "inventory/lab.py"], cwd=REPO, capture_output=True, text=True)
    say(f"  one more deploy: {'nothing changed' if again.returncode == 0 else 'CHANGED: '}"
        + ("" if again.returncode == 0 else again.stdout.strip()[-600:]))
    verify = subprocess.run([str(BIN / "pytest"), "-q", "-p", "no:cacheprovider",
                             "gpuinfra_verify", "--inventory", "inventory/lab.py", "-n", "4",
                             "-k", "not test_reboot_not_pending"],
                            cwd=REPO, capture_output=True, text=True)
    lines = verify.stdout.strip().splitlines()
    say(f"  services (verify suite): {lines[-1] if lines else 'no output'}")
    for line in lines:
        if line.startswith("FAILED"):
            say(f"    {line}")
    return again.returncode == 0 and verify.returncode == 0


def wait_for(podman: Podman, host: str, pattern: str, timeout: float = 300) -> bool:
    """Until a process matching ``pattern`` (pgrep -f) runs on ``host``. Write the pattern so
    that it does not match itself (``[d]pkg``, not ``dpkg``): pgrep leaves itself out, but not
    the ``sh -c`` around it, whose command line holds the pattern (every drill fired at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if podman.exec(host, f"pgrep -f {pattern!r} >/dev/null && echo yes",
                       check=False).strip() == "yes":
            return True
        time.sleep(0.5)
    return False


# ------------------------------------------------------------------------------ the drills

def dead_worker(podman: Podman) -> bool:
    """lab-worker2 is down for the whole deploy: the head and lab-worker1 must finish; the
    deploy names lab-worker2 as failed; once it is back a rerun converges."""
    podman.run("stop", "-t", "0", podman.container("lab-worker2"))
    rc, results, seconds = deploy()
    others_done = failed(results) == ["lab-worker2"] and bool(results.get("operations"))
    say(f"  deploy with lab-worker2 down: exit {rc}, failed {failed(results)}, "
        f"{seconds:.1f} s -> healthy hosts {'finished' if others_done else 'STOPPED'}")
    podman.start("lab-worker2")
    lab("up")  # provisioning again: key, replayed hardware
    return others_done and converged("rerun with lab-worker2 back")


def killed_install(podman: Podman) -> bool:
    """lab-worker1 loses power while apt installs the driver: dpkg is left interrupted; the
    rerun must finish it (dpkg --configure -a) and converge."""
    proc = subprocess.Popen(DEPLOY, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    if not wait_for(podman, "lab-worker1", "[d]pkg .*--status-fd"):
        proc.kill()
        say("  the driver install never started on lab-worker1")
        return False
    # dpkg itself (apt runs it with --status-fd), not apt-get still downloading: a cut during
    # the download leaves nothing interrupted
    podman.run("kill", podman.container("lab-worker1"))  # power cut, while dpkg runs
    out, _ = proc.communicate()
    say(f"  deploy during the power cut: exit {proc.returncode}, failed "
        f"{failed(_results(out))}")
    podman.start("lab-worker1")
    lab("up")
    state = podman.exec("lab-worker1", "ls -A /var/lib/dpkg/updates | wc -l; dpkg --audit | "
                        "wc -l", check=False).split()
    say(f"  after restart: dpkg updates pending {state[0]}, audit lines {state[1]}")
    if state[:2] == ["0", "0"]:
        say("  the power cut missed dpkg (nothing left interrupted): the drill proves nothing")
        return False
    return converged("rerun")


def ctrl_c_during(podman: Podman, host: str, pattern: str,
                  never: str) -> subprocess.Popen | None:
    """A deploy interrupted (Ctrl-C) once ``pattern`` runs on ``host``; None, saying
    ``never``, when it never did."""
    proc = subprocess.Popen(DEPLOY, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    if not wait_for(podman, host, pattern):
        proc.kill()
        say(f"  {never}")
        return None
    proc.send_signal(signal.SIGINT)
    proc.communicate()
    return proc


def interrupted(podman: Podman) -> bool:
    """Ctrl-C during the driver install; a rerun started at once must wait for the apt that
    is still running on the hosts (bounded) and converge."""
    proc = ctrl_c_during(podman, "lab-worker1", "[a]pt-get.*nvidia-smi",
                         "the driver install never started on lab-worker1")
    if proc is None:
        return False
    running = podman.exec("lab-worker1", "pgrep -x 'apt-get|dpkg' | wc -l", check=False).strip()
    say(f"  Ctrl-C: pyinfra exit {proc.returncode}; package processes still running on "
        f"lab-worker1: {running}")
    if running == "0":
        say("  apt had finished before the rerun: the drill proves nothing")
        return False
    return converged("rerun started at once")


def interrupted_head(podman: Podman) -> bool:
    """The deploy is cut while the head installs Prometheus and Alertmanager; the host finishes
    the install (Debian starts both daemons with their packaged settings); the rerun must leave
    every service running (it once left Alertmanager stopped: a reload's SIGHUP right after the
    restart, gpuinfra_deploy/ops/service.py)."""
    proc = ctrl_c_during(podman, "lab-head", "[a]pt-get.*prometheus-alertmanager",
                         "the head's Prometheus install never started")
    if proc is None:
        return False
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and podman.exec(
            "lab-head", "pgrep -x 'apt-get|dpkg' | wc -l", check=False).strip() != "0":
        time.sleep(1)
    state = podman.exec("lab-head", "systemctl is-active prometheus prometheus-alertmanager",
                        check=False).split()
    say(f"  Ctrl-C: pyinfra exit {proc.returncode}; the head finished its install, "
        f"Prometheus/Alertmanager as Debian started them: {'/'.join(state)}")
    return converged("rerun")


DRILLS = {"dead-worker": dead_worker, "killed-install": killed_install,
          "interrupted": interrupted, "interrupted-head": interrupted_head}


def main(argv: list[str]) -> int:
    if os.geteuid() != 0:
        say("bench.faults needs root (the lab)")
        return 2
    chosen = argv or list(DRILLS)
    podman = Podman(Paths(REPO))
    results = {}
    for name in chosen:
        say(f"drill {name}: {DRILLS[name].__doc__.splitlines()[0]}")
        lab("down")
        lab("up")
        results[name] = DRILLS[name](podman)
    lab("down")
    for name, ok in results.items():
        say(f"{name}: {'ok' if ok else 'FAILED'}")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
