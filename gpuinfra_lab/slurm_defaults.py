"""Lab proof: Slurm's production keys hold on the live lab (issue 28, item 1).

    .venv/bin/python -m gpuinfra_lab.slurm_defaults [inventory/lab.py]

On a deployed lab, each step prints one line; exit 0 when every step held, 1 listing what did
not:

1. slurmctld runs with ``MpiDefault=pmix`` and ``PrologFlags=Contain`` (``scontrol show
   config``), ``srun --mpi=list`` lists pmix, and a one-task step launched with
   ``--mpi=pmix`` on the first worker runs (the worker loads mpi/pmix and its libpmix);
2. the default partition's ``DefMemPerGPU`` is the smallest ``RealMemory / GPUs`` of its nodes
   (read back from the head's slurm.conf, computed here from its ``NodeName=`` lines), and
   slurmctld has it (``scontrol show partition``: ``JobDefaults=DefMemPerGPU=...``);
3. a one-GPU job submitted without ``--mem`` gets that much memory (``scontrol show job``:
   ``mem=<DefMemPerGPU>M`` in its TRES), not the node's RealMemory;
4. with a partition ``short`` (``max_time`` 10 minutes, ``default_time`` 5) deployed from the
   spec (``--data slurm_partitions=...``): a job asking for 30 minutes there is refused at
   submission or left pending with reason ``PartitionTimeLimit``; a job without ``--time`` gets
   the 5-minute default (``TimeLimit=00:05:00``); with accounting (the lab's), the spec's
   account and user (``slurm_accounts``, ``slurm_users``) are in slurmdbd.

Then the jobs are cancelled and a full run without the data puts the lab back (the partition
gone), whatever happened.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

from gpuinfra.slurm.nodes import node_gpu_count
from gpuinfra_lab.health_drain import lab_hosts
from gpuinfra_lab.refusal import REPO
from gpuinfra_lab.steps import Steps

TAG = "slurm-defaults"
SHORT = {"name": "short", "max_time": "10", "default_time": "5"}
# Accounting associations from the spec (slurm_accounts, slurm_users): an account and an OS
# user every lab node has; left in slurmdbd afterwards (the role never removes one).
ACCOUNT, USER = "proof", "nobody"
WAIT_S = 60


def deploy(inventory: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "pyinfra"), "-y", inventory,
                           "deploy.py", *args], cwd=REPO, capture_output=True, text=True,
                          check=False, timeout=900)


def expected_mem_per_gpu(slurm_conf: str, nodes: list[str]) -> int | None:
    """The smallest RealMemory / GPUs over ``nodes``' ``NodeName=`` lines of a slurm.conf."""
    shares = []
    for line in slurm_conf.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if fields.get("NodeName") in nodes and "RealMemory" in fields:
            gpus = node_gpu_count(line)
            if gpus:
                shares.append(int(fields["RealMemory"]) // gpus)
    return min(shares) if shares else None


def partition_line(slurm_conf: str, name: str) -> dict[str, str]:
    for line in slurm_conf.splitlines():
        if line.startswith(f"PartitionName={name} "):
            return dict(f.split("=", 1) for f in line.split() if "=" in f)
    return {}


def field(text: str, key: str) -> str:
    """``key=value`` of ``scontrol show`` output (one word)."""
    match = re.search(rf"(?:^|\s){re.escape(key)}=(\S*)", text)
    return match.group(1) if match else ""


def config_value(text: str, key: str) -> str:
    """A key of ``scontrol show config`` output (``MpiDefault              = pmix``)."""
    match = re.search(rf"^{re.escape(key)}\s*=\s*(\S*)", text, re.MULTILINE)
    return match.group(1) if match else ""


def tres_mem_mb(tres: str) -> int | None:
    """``mem=`` of a TRES string (``cpu=1,mem=2952M,node=1``) in MiB."""
    match = re.search(r"(?:^|,)mem=(\d+(?:\.\d+)?)([KMGT]?)", tres)
    if not match:
        return None
    scale = {"K": 1 / 1024, "M": 1, "": 1, "G": 1024, "T": 1024 * 1024}[match.group(2)]
    return round(float(match.group(1)) * scale)


class SlurmDefaultsProof(Steps):
    def __init__(self, inventory: str) -> None:
        super().__init__(TAG, inventory)
        self.workers = [h["name"] for h in lab_hosts() if "workers" in h["groups"]]
        self.jobs: list[str] = []

    def run(self) -> int:
        if not self.workers:
            print(f"{TAG}: the lab has no worker")
            return 1
        try:
            self.launch()
            self.memory()
            self.time_limits()
        finally:
            if self.jobs:
                self.sh(f"scancel {' '.join(self.jobs)}")
            back = deploy(self.inventory)
            gone = "short" not in self.sh("sinfo -h -o %R")
            self.say(back.returncode == 0 and gone,
                     "the lab is back on its own partitions (full run without the data)",
                     f"putting the lab back failed: exit {back.returncode}, partition short "
                     f"gone: {gone}; {(back.stderr or back.stdout)[-300:]}")
        return self.end()

    def launch(self) -> None:
        config = self.sh("scontrol show config")
        mpi, flags = config_value(config, "MpiDefault"), config_value(config, "PrologFlags")
        self.say(mpi == "pmix" and "Contain" in flags,
                 f"slurmctld runs with MpiDefault={mpi} PrologFlags={flags}",
                 f"slurmctld runs with MpiDefault={mpi!r} PrologFlags={flags!r}")
        listed = self.sh("srun --mpi=list 2>&1")
        self.say("pmix" in listed, "srun --mpi=list lists pmix",
                 f"srun --mpi=list does not list pmix: {listed!r}")
        step = self.sh(f"timeout 120 srun -w {self.workers[0]} -n1 --mem=64 --mpi=pmix "
                       "printenv PMIX_RANK 2>&1")
        self.say(step.strip() == "0",
                 f"a step with --mpi=pmix runs on {self.workers[0]} (PMIX_RANK={step.strip()})",
                 f"a step with --mpi=pmix on {self.workers[0]} failed: {step[-300:]!r}")

    def memory(self) -> None:
        conf = self.sh("cat /etc/slurm/slurm.conf")
        default = next((line.split()[0].split("=", 1)[1] for line in conf.splitlines()
                        if line.startswith("PartitionName=") and " Default=YES" in line), "")
        part = partition_line(conf, default)
        nodes = part.get("Nodes", "").split(",")
        want = expected_mem_per_gpu(conf, nodes)
        written = part.get("DefMemPerGPU")
        self.say(want is not None and written == str(want),
                 f"partition {default}: DefMemPerGPU={written} MiB, the smallest RealMemory/GPUs "
                 f"of {', '.join(nodes)}",
                 f"partition {default}: DefMemPerGPU={written!r}, expected {want!r} from the "
                 "nodes' lines")
        live = self.sh(f"scontrol show partition {default}")
        self.say(f"DefMemPerGPU={want}" in field(live, "JobDefaults"),
                 f"slurmctld has it (JobDefaults={field(live, 'JobDefaults')})",
                 f"scontrol show partition {default}: JobDefaults={field(live, 'JobDefaults')!r}")
        node = self.workers[0]
        real = field(self.sh(f"scontrol show node {node}"), "RealMemory")
        job = self.sh(f"sbatch --parsable -p {default} -w {node} --gres=gpu:1 "
                      "--wrap 'sleep 120'")
        self.jobs.append(job)
        deadline = time.monotonic() + WAIT_S
        shown = ""
        while time.monotonic() < deadline:
            shown = self.sh(f"scontrol show job {job}")
            if field(shown, "JobState") == "RUNNING":
                break
            time.sleep(1)
        mem = tres_mem_mb(field(shown, "TRES") or field(shown, "ReqTRES"))
        self.say(field(shown, "JobState") == "RUNNING" and mem == want,
                 f"job {job} (1 GPU, no --mem) runs on {node} with mem={mem}M (TRES="
                 f"{field(shown, 'TRES')}; MinMemory {field(shown, 'MinMemoryNode') or '-'}), "
                 f"not the node's RealMemory={real}",
                 f"job {job}: state {field(shown, 'JobState')!r}, mem {mem!r} (want {want}); "
                 f"TRES={field(shown, 'TRES')!r} Reason={field(shown, 'Reason')!r}")

    def time_limits(self) -> None:
        parts = [{"name": "gpu", "nodes": self.workers, "default": True},
                 {**SHORT, "nodes": self.workers}]
        out = deploy(self.inventory, "--data", f"slurm_partitions={json.dumps(parts)}",
                     "--data", f"slurm_accounts={json.dumps([ACCOUNT])}",
                     "--data", f"slurm_users={json.dumps({USER: ACCOUNT})}")
        line = self.sh("grep '^PartitionName=short ' /etc/slurm/slurm.conf")
        self.say(out.returncode == 0 and "MaxTime=10 DefaultTime=5" in line,
                 f"partition short deployed from the spec (slurmd -G accepted it): {line}",
                 f"deploying partition short: exit {out.returncode}, line {line!r}; "
                 f"{(out.stderr or out.stdout)[-400:]}")
        assoc = self.sh(f"sacctmgr -n -P list associations account={ACCOUNT} "
                        "format=cluster,account,user")
        self.say(f"|{ACCOUNT}|{USER}" in assoc,
                 f"accounting: account {ACCOUNT} and user {USER} added from the spec "
                 f"({', '.join(assoc.split())})",
                 f"accounting: sacctmgr shows {assoc!r} for account {ACCOUNT}")
        long = subprocess.run(
            ["ssh", "-F", str(REPO / ".lab" / "ssh_config"), self.head,
             "sbatch --parsable -p short --time=30 --mem=64 --wrap 'sleep 1'"],
            capture_output=True, text=True, check=False, timeout=60)
        if long.returncode != 0:
            self.say("time limit" in long.stderr.lower(),
                     f"a 30-minute job in short (MaxTime=10) is refused: {long.stderr.strip()}",
                     f"a 30-minute job in short failed otherwise: {long.stderr.strip()!r}")
        else:
            job = long.stdout.strip()
            self.jobs.append(job)
            time.sleep(3)
            shown = self.sh(f"scontrol show job {job}")
            self.say(field(shown, "JobState") == "PENDING"
                     and field(shown, "Reason") == "PartitionTimeLimit",
                     f"a 30-minute job in short (MaxTime=10) is held: job {job} PENDING, "
                     "Reason=PartitionTimeLimit",
                     f"a 30-minute job in short: job {job} {field(shown, 'JobState')!r} "
                     f"Reason={field(shown, 'Reason')!r}")
        job = self.sh("sbatch --parsable -p short --mem=64 --wrap 'sleep 1'")
        self.jobs.append(job)
        limit = field(self.sh(f"scontrol show job {job}"), "TimeLimit")
        self.say(limit == "00:05:00", f"a job in short without --time gets TimeLimit={limit} "
                 "(default_time 5)", f"a job in short without --time: TimeLimit={limit!r}")


def main(argv: list[str]) -> int:
    return SlurmDefaultsProof(argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
