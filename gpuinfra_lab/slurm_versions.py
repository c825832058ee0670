"""Slurm's own daemons of each Debian release judge the configuration the roles render (issue 45,
item 6): a version trap is caught here, not at a site.

    .venv/bin/python -m gpuinfra_lab.slurm_versions

Debian's archive carries Slurm 20.11 (Debian 11, bullseye), 22.05 (12, bookworm) and 24.11
(13, trixie). For each, an image (debootstrap of that release with slurmd, slurmctld and its
MUNGE; built once, then reused: its tag is a hash of the recipe) runs the real daemons on what
``gpuinfra render --os <target>`` writes for the head of realistic sites (inventory/example.py:
an InfiniBand fabric on two leaves, MIG, MPS, node hardware, a backup controller;
inventory/lab.py: accounting, health checks, the lab's fabric; inventory/gb200.py: NVL72
racks as topology/block): ``slurmd -G`` reads slurm.conf, cgroup.conf and an empty
gres.conf as a worker would, and a second slurmctld reads all of it, topology.conf included
(``controller_trial_command`` in gpuinfra_deploy/ops/slurm_trial.py, as on the head).

Each target is judged by the Slurm nearest to its own (the roles' targets: DISTRO in
roles/slurm): Debian 12 by its own 22.05; Ubuntu 24.04's 23.11 by 24.11; Ubuntu 22.04's
21.08 by 22.05 (what 22.05 reads and 21.08 does not is the cited table's to refuse:
gpuinfra/slurm/versions.py); Debian 12's files by Debian 13's 24.11 too (what an upgrade
meets, issue 49). And one judgement must refuse: Debian 12's files read by 20.11, which
predates cgroup.conf's CgroupPlugin (Slurm 21.08): the judge can fail. Exit 0 when every
judgement came out as expected, 1 listing what did not.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpuinfra_deploy.ops.slurm_trial import ELSEWHERE, controller_trial_command
from gpuinfra_lab.podman import Podman
from gpuinfra_lab.state import Paths, ensure_lab_dir

REPO = Path(__file__).resolve().parents[1]
TAG = "slurm-versions"
MIRROR = "http://deb.debian.org/debian"
# No libpmix-dev: debootstrap cannot configure its libltdl-dev (measured on bookworm), so the
# MPI plugin's errors are left out below; MpiDefault=pmix is proven live in the lab
# (gpuinfra_lab/slurm_defaults.py).
PACKAGES = ("slurmd", "slurmctld", "slurm-client", "munge")
SUITES = {"bullseye": "20.11", "bookworm": "22.05", "trixie": "24.11"}
IMAGE_REPO = "localhost/gpuinfra-slurm-judge"
SITES = ("inventory/example.py", "inventory/lab.py")
# Lines the daemons print in a container that has none of the site's hosts, mail or GPUs:
# not about the files.
BENIGN = ("Configured MailProg is invalid", "getaddrinfo", ELSEWHERE,
          "Unable to resolve", "Couldn't find address of node", "pmix", "mpi/", "MPI:",
          # slurmd -G in a container with 2 CPUs, not the node's (a preview without
          # node_hardware says CPUs=1)
          "differs from hardware",
          # the trial slurmctld's own changes: no accounting, a new state folder
          "accounting information", "state file", "Trying backup state save file")


@dataclass(frozen=True)
class Judgement:
    target: str  # gpuinfra render --os
    suite: str  # the Debian release whose Slurm judges
    why: str
    refuses: str | None = None  # a judgement that must fail: words its refusal names
    sites: tuple[str, ...] = SITES


JUDGEMENTS = (
    Judgement("debian-12", "bookworm", "Debian 12's own Slurm 22.05"),
    # The example site's HGX nodes need Fabric Manager, which trixie has no repository for
    # here (refused by the roles): Debian 13 is judged on the lab's site as it runs there.
    Judgement("debian-13", "trixie", "Debian 13's own Slurm 24.11", sites=("inventory/lab.py",)),
    Judgement("ubuntu-24.04", "trixie", "Ubuntu 24.04's 23.11, nearest in Debian: 24.11"),
    Judgement("ubuntu-22.04", "bookworm", "Ubuntu 22.04's 21.08, nearest in Debian: 22.05 (the "
              "version table refuses what 21.08 lacks)", sites=("inventory/lab.py",)),
    # The example site's MIG node on Ubuntu 22.04: refused by gpuinfra's own table before any
    # daemon (21.08 has no NVML plugin package there), never rendered.
    Judgement("ubuntu-22.04", "bookworm", "the version table refuses MIG without NVML",
              refuses="no NVML plugin package", sites=("inventory/example.py",)),
    Judgement("debian-12", "trixie", "Debian 13's 24.11 on Debian 12's files (an upgrade)"),
    Judgement("debian-12", "bullseye", "Slurm 20.11 predates CgroupPlugin (21.08): must refuse",
              refuses="CgroupPlugin"),
    # GB200 NVL72 racks as NVLink blocks (fabric_blocks: topology/block, Slurm 23.11 and
    # later): read by 24.11; refused by gpuinfra's table for Debian 12 before any daemon; and
    # 22.05 itself must refuse the files made for Ubuntu 24.04 (no topology_block.so), which
    # is what the table's refusal spares a Debian 12 site.
    Judgement("ubuntu-24.04", "trixie", "NVLink blocks (topology/block) read by 24.11",
              sites=("inventory/gb200.py",)),
    Judgement("debian-12", "bookworm", "the version table refuses topology/block before 23.11",
              refuses="added in Slurm 23.11", sites=("inventory/gb200.py",)),
    Judgement("ubuntu-24.04", "bookworm", "Slurm 22.05 has no topology/block: must refuse",
              refuses="topology/block", sites=("inventory/gb200.py",)),
)


def image(podman: Podman, suite: str) -> str:
    """The judge image of ``suite`` (built once per recipe)."""
    recipe = json.dumps([suite, MIRROR, sorted(PACKAGES)]).encode()
    tag = f"{IMAGE_REPO}:{suite}-{hashlib.sha256(recipe).hexdigest()[:12]}"
    if podman.ok("image", "exists", tag):
        return tag
    root = Path(tempfile.mkdtemp(prefix=f"gpuinfra-judge-{suite}-"))
    try:
        built = subprocess.run(["debootstrap", "--variant=minbase",
                                f"--include={','.join(PACKAGES)}", suite, str(root / "fs"),
                                MIRROR], capture_output=True, text=True, check=False)
        if built.returncode != 0:
            raise SystemExit(f"{TAG}: debootstrap {suite} failed: "
                             f"{(built.stderr + built.stdout)[-600:]}")
        tar = subprocess.Popen(["tar", "-C", str(root / "fs"), "-c", "."],
                               stdout=subprocess.PIPE)
        imported = subprocess.run(["podman", "import", "--change", "CMD=/bin/sleep", "-", tag],
                                  stdin=tar.stdout, capture_output=True, env=podman.env,
                                  check=False)
        assert tar.stdout is not None
        tar.stdout.close()
        if tar.wait() != 0 or imported.returncode != 0:
            raise SystemExit(f"{TAG}: podman import {tag} failed: {imported.stderr[-400:]!r}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return tag


def render(site: str, target: str, out: Path) -> tuple[Path, str] | str:
    """(the head's /etc/slurm, the first Slurm worker) of ``site`` rendered for ``target``, or
    why the render refused (gpuinfra's own version table, before any daemon)."""
    # The lab's site as `lab up --os target` starts it (inventory/lab.py, GPUINFRA_LAB_OS).
    done = subprocess.run([str(REPO / ".venv" / "bin" / "gpuinfra"), "render", site, "--out",
                           str(out), "--os", target], cwd=REPO, capture_output=True, text=True,
                          check=False, timeout=600,
                          env={**os.environ, "GPUINFRA_LAB_OS": target})
    if done.returncode != 0:
        return f"render refused: {(done.stderr or done.stdout).strip()[-300:]}"
    # The head is the one host with a slurm.conf (the workers fetch theirs: configless).
    conf_path = next(out.glob("*/etc/slurm/slurm.conf"))
    worker = next(line.split()[0].split("=", 1)[1]
                  for line in conf_path.read_text().splitlines()
                  if line.startswith("NodeName="))
    return conf_path.parent, worker


JUDGE = """set -u
d=/tmp/judge
mkdir -p /run/munge && chown munge:munge /run/munge && su -s /bin/sh munge -c /usr/sbin/munged
: > "$d/gres.conf"
echo "== slurmd -G"
slurmd -G -f "$d/slurm.conf" -N "$1" 2>&1
echo "== slurmctld"
"""


def judge(podman: Podman, suite: str, files: Path, worker: str) -> list[str]:
    """The daemons' error and fatal lines on ``files`` (none: accepted)."""
    name = f"gpuinfra-judge-{suite}"
    podman.run("rm", "-f", name, check=False)
    podman.run("run", "-d", "--name", name, "--privileged", image(podman, suite),
               "sleep", "infinity")
    try:
        podman.run("cp", f"{files}/.", f"{name}:/tmp/judge")
        trial = controller_trial_command("/tmp/judge", fail_pattern="(error|fatal):",
                                         tool=f"Slurm {SUITES[suite]}")
        out = subprocess.run(["podman", "exec", name, "sh", "-c", JUDGE + trial, "judge",
                              worker], capture_output=True, text=True, env=podman.env,
                             check=False, timeout=300)
    finally:
        podman.run("rm", "-f", name, check=False)
    said = (out.stdout + out.stderr).splitlines()
    # A trial slurmctld that never got to reading the files judged nothing: a failure too.
    return [line for line in said if ("error:" in line or "fatal:" in line
                                      or "did not read the staged files" in line)
            and not any(b in line for b in BENIGN)]


def main() -> int:
    paths = Paths(REPO)
    ensure_lab_dir(paths)  # the lab's containers.conf, which every podman call here uses
    podman = Podman(paths)
    problems = []
    with tempfile.TemporaryDirectory(prefix="gpuinfra-versions-") as tmp:
        for j in JUDGEMENTS:
            for site in j.sites:
                rendered = render(site, j.target, Path(tmp) / f"{j.target}-{j.suite}" /
                                  Path(site).stem)
                label = (f"{Path(site).stem} rendered for {j.target}, judged by Slurm "
                         f"{SUITES[j.suite]} ({j.suite}: {j.why})")
                if isinstance(rendered, str):
                    ok = j.refuses is not None and j.refuses in rendered
                    said = rendered.splitlines()[-1]
                    print(f"{TAG}: {'ok' if ok else 'FAIL'}: {label}: {said}", flush=True)
                    if not ok:
                        problems.append(f"{label}: {said}")
                    continue
                errors = judge(podman, j.suite, *rendered)
                if j.refuses is None:
                    ok = not errors
                    said = "accepted" if ok else "refused: " + " | ".join(errors[:4])
                else:
                    ok = any(j.refuses in e for e in errors)
                    said = (f"refused, as it must: {next(e for e in errors if j.refuses in e)}"
                            if ok else f"not refused on {j.refuses}: {errors[:4]}")
                print(f"{TAG}: {'ok' if ok else 'FAIL'}: {label}: {said}", flush=True)
                if not ok:
                    problems.append(f"{label}: {said}")
    for line in problems:
        print(f"{TAG}: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
