"""Lab proofs that a deploy with a broken configuration is refused while its daemon keeps running.

One procedure for every such proof (gpuinfra_lab/bad_slurm_conf.py,
gpuinfra_lab/bad_prometheus_conf.py): on a
converged lab, probe the daemon on the head (state, PID, the live file's SHA-256, whether it
answers), deploy with data the spec gate accepts but the daemon's own checker refuses, probe
again, and require: the deploy failed, its output carries the checker's error and gpuinfra's
refusal, and nothing about the daemon changed. Exit 0 when all hold, 1 listing what did not.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETTLE_S = 90  # a daemon a deploy has just started may still be "activating" (slurmctld)


@dataclass(frozen=True)
class Refusal:
    tag: str  # the proof's name, at the start of every line it prints
    daemon: str  # as the messages name it
    conf: str  # the live file's name, as the messages name it
    deploy: Sequence[str]  # what follows the inventory on pyinfra's command line
    must_say: tuple[str, ...]  # the checker's error (first), gpuinfra's refusal(s)
    probe: Callable[[dict], dict[str, str]]  # head -> active, pid, conf, answers ("answers")
    answered: str  # the success line's words for "the daemon answers"
    not_answered: str  # the problem when it no longer answers
    # The site's own templates for this deploy: name -> text, written into the checkout's
    # templates/ (the lab site's folder) for the deploy only, and removed afterwards.
    overrides: dict[str, str] = field(default_factory=dict)
    # Deploy again with the site's templates back once the refusal is proved, as an operator
    # does after fixing the file: where the workers accepted the refused configuration (their
    # judgement, slurmd -G, does not read it: topology.conf), they remember its digest, and
    # the next deploy would judge the site's configuration again (2 operations changed after
    # `make demo` and a reboot).
    converge_after: bool = False


def head() -> dict:
    """The lab's head: ``name``, ``address``, ``groups`` from .lab/hosts.json."""
    lab = json.loads((REPO / ".lab" / "hosts.json").read_text())
    return next(h for h in lab["hosts"] if "head" in h["groups"])


def lab_ssh(name: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``command`` on the lab host ``name`` over the lab's SSH configuration."""
    return subprocess.run(["ssh", "-F", str(REPO / ".lab" / "ssh_config"), name, command],
                          capture_output=True, text=True, check=False, timeout=timeout)


def on_head(name: str, command: str) -> str:
    return lab_ssh(name, command).stdout.strip()


SITE_TEMPLATES = REPO / "templates"


@contextmanager
def site_templates(overrides: dict[str, str]):
    """``overrides`` in the lab site's templates/ folder while the block runs; nothing of them
    left afterwards (a file already there is refused: it is someone's own)."""
    written: list[Path] = []
    try:
        for name, text in overrides.items():
            path = SITE_TEMPLATES / name
            if path.exists():
                raise SystemExit(f"{path} exists: this proof writes its own override there")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
        yield
    finally:
        for path in written:
            path.unlink(missing_ok=True)
            for parent in path.parents:
                if parent == SITE_TEMPLATES or any(parent.iterdir()):
                    break
                parent.rmdir()


def prove(proof: Refusal, argv: list[str]) -> int:
    inventory = argv[0] if argv else "inventory/lab.py"
    lab_head = head()
    before = proof.probe(lab_head)
    deadline = time.monotonic() + SETTLE_S
    while before["active"] in ("activating", "reloading") and time.monotonic() < deadline:
        time.sleep(2)
        before = proof.probe(lab_head)
    with site_templates(proof.overrides):
        deploy = _deploy(inventory, proof)
    output = deploy.stdout + deploy.stderr
    after = proof.probe(lab_head)
    problems = []
    if deploy.returncode == 0:
        problems.append(f"the deploy with a broken {proof.conf} succeeded")
    problems += [f"the deploy output does not say {words!r}" for words in proof.must_say
                 if words not in output]
    if before["active"] != "active" or before["answers"] != "answers":
        problems.append(f"{proof.daemon} was {before['active']!r} before the test: converge "
                        "first")
    for key, what in (("active", f"{proof.daemon} state"), ("pid", f"{proof.daemon} PID"),
                      ("conf", f"live {proof.conf}")):
        if after[key] != before[key]:
            problems.append(f"{what} changed: {before[key]!r} -> {after[key]!r}")
    if after["answers"] != "answers":
        problems.append(proof.not_answered)
    for line in problems:
        print(f"{proof.tag}: {line}")
    if problems:
        print("\n".join(output.splitlines()[-30:]))
        return 1
    refused = next(line.strip() for line in output.splitlines() if proof.must_say[0] in line)
    print(f"{proof.tag}: refused ({refused[:120]}); {proof.daemon} {after['active']}, PID "
          f"{after['pid']} unchanged, {proof.conf} {after['conf']} unchanged, {proof.answered}")
    if proof.converge_after:
        again = _deploy(inventory, proof)
        if again.returncode != 0:
            print(f"{proof.tag}: the deploy with the site's templates back failed (exit "
                  f"{again.returncode}):")
            print("\n".join((again.stdout + again.stderr).splitlines()[-30:]))
            return 1
        print(f"{proof.tag}: the deploy with the site's templates back succeeded")
    return 0


def _deploy(inventory: str, proof: Refusal) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "pyinfra"), "-y", inventory,
                           *proof.deploy], cwd=REPO, capture_output=True, text=True,
                          check=False, timeout=600)
