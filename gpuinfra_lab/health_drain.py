"""Lab proof: the node health check drains a broken GPU node with its cause, and resumes it.

    .venv/bin/python -m gpuinfra_lab.health_drain [inventory/lab.py]

On a deployed lab (health_check_interval = 10 in group_data/lab.py), each step waits at most
a few intervals and prints one line; exit 0 when every step held, 1 listing what did not:

1. the broken worker (`lab up --broken`: spec NVLink-bridged pairs, replay PCIe only) is
   drained by Slurm with ``gpuinfra: ...nvlink-topology...`` as its reason, and a GPU job
   asked of it does not run there; no healthy worker is drained by gpuinfra (skipped, said so,
   on a lab without the broken worker);
2. a node an operator drained (lab-worker1, by hand) stays drained with the operator's reason
   over several intervals, then is resumed by hand;
3. lab-worker2's replay swapped for the broken worker's real PCIe-only captures (``topo -m``
   and the P2P matrices: no NV#, P2P NS) drains it; the healthy captures put back bring it back
   to idle on the following intervals, with nobody typing scontrol;
4. a real Xid 79 line (tests/fixtures/kernel-log/nvsentinel-155-xid79-line.txt, its PCI
   address SUBSTITUTED for lab-worker1's GPU 0) written to lab-worker1's replayed kernel log
   while a one-GPU job runs there drains lab-worker1 after the job with a reason naming the
   job and the XID; the log removed, the check resumes it;
5. the same line already logged when a one-GPU job asks for lab-worker1: the Prolog (it gets
   SLURM_JOB_GPUS, measured on 22.05) drains it naming the job, Slurm requeues and holds the
   job, which never runs there (or, when the periodic check saw the line first, that check
   drained it; the proof says which); the log removed, the check resumes it.

Every replay it changes is put back, and every node it drained resumed, whatever happened.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable

from gpuinfra.health.slurm import drained_by_gpuinfra as drained_by_us
from gpuinfra.health.slurm import ours
from gpuinfra.parsers.slurm import SINFO, SlurmNode, parse_sinfo_nodes
from gpuinfra_lab.refusal import REPO, head, lab_ssh

TAG = "health-drain"
HARDWARE = "/usr/local/share/gpuinfra-lab/hardware"
INTERVAL_S = 10  # group_data/lab.py health_check_interval
WAIT_S = 8 * INTERVAL_S
BROKEN_CAPTURES = ("topo-m.txt", "topo-p2p-r.txt", "topo-p2p-w.txt")
XID_LINE = (REPO / "tests/fixtures/kernel-log/nvsentinel-155-xid79-line.txt").read_text()
HAND_REASON = "maintenance by hand (lab proof)"


def lab_hosts() -> list[dict]:
    return json.loads((REPO / ".lab" / "hosts.json").read_text())["hosts"]


def nodes(head_name: str) -> dict[str, SlurmNode]:
    out = lab_ssh(head_name, SINFO).stdout
    return parse_sinfo_nodes(out)


def wait(head_name: str, name: str, test: Callable[[SlurmNode], bool],
         timeout: float = WAIT_S) -> SlurmNode | None:
    """The node's state once ``test`` holds (None: it did not within ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        node = nodes(head_name).get(name)
        if node is not None and test(node):
            return node
        if time.monotonic() > deadline:
            return None
        time.sleep(2)


def usable(node: SlurmNode) -> bool:
    return node.base_state in ("idle", "mixed", "allocated") and node.reason in ("", "none")


def write(host: str, path: str, text: str) -> None:
    subprocess.run(["ssh", "-F", str(REPO / ".lab" / "ssh_config"), host,
                    f"cat > {shlex.quote(path)}"], input=text, text=True, check=True,
                   capture_output=True, timeout=60)


class HealthDrainProof:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.head = head()["name"]
        self.workers = [h for h in lab_hosts() if "workers" in h["groups"]]
        self.restore: list[Callable[[], None]] = []

    def say(self, line: str) -> None:
        print(f"{TAG}: {line}", flush=True)

    def fail(self, line: str) -> None:
        self.problems.append(line)
        self.say(f"FAILED: {line}")

    def broken_worker(self) -> None:
        broken = [h["name"] for h in self.workers if h.get("profile", "").endswith("missing")]
        if not broken:
            self.say("1. no broken worker in this lab (`gpuinfra lab up --broken` adds it): "
                     "skipped")
            return
        name = broken[0]
        node = wait(self.head, name, drained_by_us)
        if node is None:
            self.fail(f"{name} (replay without the NVLink bridge) was not drained by gpuinfra "
                      f"within {WAIT_S} s: {nodes(self.head).get(name)}")
            return
        if "nvlink-topology" not in node.reason:
            self.fail(f"{name} drained, but the reason does not name the topology: "
                      f"{node.reason}")
        job = lab_ssh(self.head, f"srun --immediate=15 -N1 -w {name} --gres=gpu:1 true",
                      timeout=60)
        if job.returncode == 0:
            self.fail(f"a GPU job ran on the drained {name}")
        self.say(f"1. {name} drained: {node.state}, Reason=\"{node.reason}\"; a GPU job asked "
                 f"of it did not run ({(job.stderr.strip().splitlines() or ['?'])[-1][:90]})")
        for other, state in nodes(self.head).items():
            if other != name and ours(state):
                self.fail(f"healthy {other} drained by gpuinfra: {state.reason}")

    def hand_drain(self, name: str) -> None:
        lab_ssh(self.head, f"scontrol update NodeName={name} State=DRAIN "
                           f"Reason={shlex.quote(HAND_REASON)}")
        self.restore.append(lambda: lab_ssh(self.head, f"scontrol update NodeName={name} "
                                                       "State=RESUME"))
        time.sleep(3 * INTERVAL_S)
        node = nodes(self.head).get(name)
        if node is None or node.reason != HAND_REASON or node.base_state not in (
                "drained", "draining"):
            self.fail(f"{name}, drained by hand, was changed by the check: {node}")
        else:
            self.say(f"2. {name} drained by hand stayed drained over 3 intervals "
                     f"(Reason=\"{node.reason}\")")
        lab_ssh(self.head, f"scontrol update NodeName={name} State=RESUME")
        wait(self.head, name, usable, 30)

    def swap_and_heal(self, name: str, broken_profile: str) -> None:
        source = REPO / "gpuinfra_lab" / "hardware" / broken_profile
        saved = " && ".join(f"cp -p {HARDWARE}/{f} {HARDWARE}/{f}.saved" for f in
                            BROKEN_CAPTURES)
        put_back = " && ".join(f"mv -f {HARDWARE}/{f}.saved {HARDWARE}/{f}" for f in
                               BROKEN_CAPTURES)
        lab_ssh(name, saved)
        self.restore.append(lambda: lab_ssh(name, f"[ -e {HARDWARE}/topo-m.txt.saved ] && "
                                                  f"{put_back}; true"))
        for capture in BROKEN_CAPTURES:
            write(name, f"{HARDWARE}/{capture}", (source / capture).read_text())
        node = wait(self.head, name, drained_by_us)
        if node is None:
            self.fail(f"{name} with PCIe-only captures was not drained within {WAIT_S} s")
            lab_ssh(name, put_back)
            return
        lab_ssh(name, put_back)
        back = wait(self.head, name, usable)
        if back is None:
            self.fail(f"{name} not resumed within {WAIT_S} s of its healthy captures coming "
                      f"back: {nodes(self.head).get(name)}")
            return
        self.say(f"3. {name} with the broken replay: drained (Reason=\"{node.reason}\"); "
                 f"healthy replay back: {back.state}, no scontrol typed")

    def xid_during_job(self, name: str, bus_id: str) -> None:
        address = ":".join(bus_id.split(":")[:2])[-7:]  # 00000000:19:00.0 -> 0000:19
        line = XID_LINE.replace("PCI:0000:44:00", f"PCI:{address}:00")
        job = lab_ssh(self.head, f"sbatch --parsable -N1 -w {name} --gres=gpu:1 -J xid-proof "
                                 "--wrap 'sleep 12'").stdout.strip()
        if not job.isdigit():
            self.fail(f"sbatch on {name} gave no job id: {job!r}")
            return
        log = f"{HARDWARE}/kernel.log"
        self.restore.append(lambda: lab_ssh(name, f"rm -f {log}"))
        deadline = time.monotonic() + 60
        while "RUNNING" not in lab_ssh(self.head, f"squeue -h -j {job} -o %T").stdout:
            if time.monotonic() > deadline:
                self.fail(f"job {job} never ran on {name}")
                return
            time.sleep(1)
        write(name, log, line)
        node = wait(self.head, name, lambda n: drained_by_us(n) and f"job {job}" in n.reason)
        if node is None:
            self.fail(f"{name} not drained naming job {job} after an Xid 79 during it: "
                      f"{nodes(self.head).get(name)}")
        elif "Xid 79" not in node.reason:
            self.fail(f"{name} drained for job {job} without naming Xid 79: {node.reason}")
        else:
            self.say(f"4. Xid 79 during job {job}: {name} drained after it "
                     f"(Reason=\"{node.reason}\")")
        lab_ssh(name, f"rm -f {log}")
        if wait(self.head, name, usable) is None:
            self.fail(f"{name} not resumed after its kernel log was clean again")

    def xid_before_job(self, name: str, bus_id: str) -> None:
        """A fatal XID already logged when a job asks for the GPU: the Prolog (it gets
        SLURM_JOB_GPUS) drains the node naming the job, and Slurm requeues and holds the job;
        the job never runs there. The periodic check may see the XID first (every 10 s): then
        it drains the node itself and the job cannot start there either; said which."""
        address = ":".join(bus_id.split(":")[:2])[-7:]
        log = f"{HARDWARE}/kernel.log"
        self.restore.append(lambda: lab_ssh(name, f"rm -f {log}"))
        write(name, log, XID_LINE.replace("PCI:0000:44:00", f"PCI:{address}:00"))
        job = lab_ssh(self.head, f"sbatch --parsable -N1 -w {name} --gres=gpu:1 -J xid-before "
                                 "--wrap 'sleep 5'").stdout.strip()
        self.restore.append(lambda: lab_ssh(self.head, f"scancel {job}"))
        node = wait(self.head, name, drained_by_us)
        time.sleep(3)
        state = lab_ssh(self.head, f"squeue -h -j {job} -o '%T %r'").stdout.strip()
        ran = lab_ssh(self.head, f"sacct -n -X -j {job} -o Start").stdout.split()
        if node is None or "Xid 79" not in node.reason:
            self.fail(f"{name} not drained naming Xid 79 when job {job} asked for its GPU: "
                      f"{nodes(self.head).get(name)}")
        elif state.startswith("RUNNING") or state == "" and ran[:1] not in ([], ["Unknown"]):
            self.fail(f"job {job} ran on {name} although its GPU had logged Xid 79: {state!r}")
        else:
            path = ("the Prolog drained it and Slurm requeued the job" if f"job {job}" in
                    node.reason else "the periodic check drained it before the job started")
            self.say(f"5. Xid 79 before job {job}: {path} (Reason=\"{node.reason}\"; job: "
                     f"{state or 'gone'})")
        lab_ssh(self.head, f"scancel {job}")
        lab_ssh(name, f"rm -f {log}")
        if wait(self.head, name, usable) is None:
            self.fail(f"{name} not resumed after its kernel log was clean again")

    def run(self) -> int:
        by_profile = {h.get("profile"): h["name"] for h in self.workers}
        try:
            self.broken_worker()
            nvswitch = by_profile.get("8x-h100-sxm-nvswitch")
            pcie = by_profile.get("2x-h100-pcie-bridged")
            if nvswitch:
                self.hand_drain(nvswitch)
            if pcie:
                self.swap_and_heal(pcie, "2x-a100-pcie-bridge-missing")
            if nvswitch:
                gpus = json.loads(lab_ssh(nvswitch, f"cat {HARDWARE}/gpus.json").stdout)
                self.xid_during_job(nvswitch, gpus[0]["pci.bus_id"])
                self.xid_before_job(nvswitch, gpus[0]["pci.bus_id"])
        finally:
            for undo in reversed(self.restore):
                undo()
        if self.problems:
            self.say(f"{len(self.problems)} problem(s)")
            return 1
        self.say("the health check drained what was broken, with its cause, and resumed "
                 "only what it drained")
        return 0


if __name__ == "__main__":
    sys.exit(HealthDrainProof().run())
