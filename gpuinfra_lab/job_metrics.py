"""Lab proof: GPU metrics name the Slurm job holding each GPU, and the head's metrics say which
nodes Slurm has drained.

    .venv/bin/python -m gpuinfra_lab.job_metrics [inventory/lab.py]

On a deployed lab (monitoring_job_mapping and the health check on: the defaults), each step
prints one line; exit 0 when every step held, 1 listing what did not:

1. a one-GPU job on lab-worker1 (sbatch as ``nobody``, sleeping) runs; Slurm's own record of it
   (``scontrol show job -d``: ``IDX:``) says which GPU it holds;
2. while it runs, the mapping folder's file of that GPU lists the job (dcgm-exporter's format:
   /run/gpuinfra-gpu-jobs/<index>, one job id per line), and the GPU collector, run once
   (``systemctl start gpuinfra-gpu-metrics.service``), writes
   ``gpuinfra_gpu_job_info{gpu=<that index>,job_id=<the job>,user=<its user>} 1`` and no
   other GPU with the job;
3. after ``scancel`` (the job gone from squeue: its Epilog ran), the folder no longer lists it,
   the collector run again writes no series with its id, and the Epilog's summary line is in
   the worker's journal (``journalctl -t gpuinfra-job``);
4. ``scontrol update nodename=lab-worker1 state=drain``: the head's Slurm node states
   (``systemctl start gpuinfra-slurm-nodes.service``) say ``state="drained"`` with the
   reason; resumed, they say it is usable again.

The node drained by step 4 is resumed and the job cancelled whatever happened.
"""

from __future__ import annotations

import re
import sys
import time

from gpuinfra.monitoring.jobmap import JOB_MAPPING_DIR
from gpuinfra_lab.refusal import lab_ssh, on_head
from gpuinfra_lab.steps import Steps

TAG = "job-metrics"
WORKER = "lab-worker1"
GPU_PROM = "/var/lib/prometheus/node-exporter/gpuinfra-gpu.prom"
NODES_PROM = "/var/lib/prometheus/node-exporter/gpuinfra-slurm-nodes.prom"
REASON = "job-metrics proof"
USER = "nobody"  # the same UID on every lab node
_IDX = re.compile(r"gpu[^ ]*\(IDX:([0-9,-]+)\)")


def indices(text: str) -> set[int]:
    """The GPU indices of ``scontrol show job -d``'s ``GRES=gpu:h100:1(IDX:0)`` (or 0-1,3)."""
    out: set[int] = set()
    for spec in _IDX.findall(text):
        for part in spec.split(","):
            low, _, high = part.partition("-")
            out.update(range(int(low), int(high or low) + 1))
    return out


def job_series(prom: str, job: str) -> list[str]:
    return [line for line in prom.splitlines()
            if line.startswith("gpuinfra_gpu_job_info{") and f'job_id="{job}"' in line]


class JobMetricsProof(Steps):
    def submit(self) -> str:
        """A one-GPU job sleeping on the worker as ``nobody`` (not root: the user label is
        the job's), once it runs (or 30 s passed)."""
        job = on_head(self.head, f"cd /tmp && runuser -u {USER} -- sbatch --parsable "
                                 f"-w {WORKER} --gres=gpu:1 --mem=64 -t 3 -o /dev/null "
                                 "--wrap 'sleep 120'")
        deadline = time.monotonic() + 30
        while not self.job_state(job).startswith("RUNNING") and time.monotonic() < deadline:
            time.sleep(0.5)
        return job

    def collect(self) -> str:
        """The GPU collector run once on the worker, and what it wrote."""
        return lab_ssh(WORKER, f"systemctl start gpuinfra-gpu-metrics.service && "
                               f"cat {GPU_PROM}").stdout

    def node_states(self) -> str:
        return lab_ssh(self.head, f"systemctl start gpuinfra-slurm-nodes.service && "
                                  f"cat {NODES_PROM}").stdout

    def run(self) -> int:
        started = time.monotonic()
        job = ""
        try:
            job = self.submit()
            running = self.job_state(job).startswith("RUNNING")
            shown = on_head(self.head, f"scontrol show job -d {job}")
            gpus = indices(shown)
            user = on_head(self.head, f"squeue -h -j {job} -o %u")
            self.say(running and len(gpus) == 1,
                     f"job {job} (user {user}) runs on {WORKER} holding GPU {sorted(gpus)}",
                     f"job {job!r}: state {self.job_state(job)!r}, GPUs {sorted(gpus)} "
                     f"(scontrol: {shown[-300:]!r})")
            if running and gpus:
                self.during(job, user, gpus)
            on_head(self.head, f"scancel {job}")
            deadline = time.monotonic() + 30
            while self.job_state(job) and time.monotonic() < deadline:
                time.sleep(0.5)
            self.after(job)
            self.drained()
        finally:
            if job:
                on_head(self.head, f"scancel {job}")
            on_head(self.head, f"scontrol update nodename={WORKER} state=resume")
        print(f"{TAG}: {time.monotonic() - started:.1f} s")
        return self.end()

    def during(self, job: str, user: str, gpus: set[int]) -> None:
        listed = {int(name) for name in lab_ssh(
            WORKER, f"cd {JOB_MAPPING_DIR} && grep -lx {job} [0-9]*").stdout.split()}
        self.say(listed == gpus,
                 f"{JOB_MAPPING_DIR}/{min(gpus)} lists job {job} (dcgm-exporter's mapping)",
                 f"the mapping folder lists job {job} for GPUs {sorted(listed)}, "
                 f"Slurm says {sorted(gpus)}")
        series = job_series(self.collect(), job)
        want = f'gpuinfra_gpu_job_info{{gpu="{min(gpus)}",'
        ok = (len(series) == len(gpus) and series[0].startswith(want)
              and f'user="{user}"' in series[0] and series[0].endswith(" 1"))
        self.say(ok, f"the collector writes {series[0] if series else ''}",
                 f"the collector's series for job {job}: {series} (want one per GPU "
                 f"{sorted(gpus)}, user {user})")

    def after(self, job: str) -> None:
        gone = not self.job_state(job)
        listed = lab_ssh(WORKER, f"cd {JOB_MAPPING_DIR} && grep -lx {job} [0-9]* "
                                 f"jobs/{job} 2>/dev/null").stdout.split()
        series = job_series(self.collect(), job)
        self.say(gone and not listed and not series,
                 f"after scancel: job {job} gone from the mapping folder and the collector's "
                 "output",
                 f"after scancel (job left squeue: {gone}): the folder still lists it in "
                 f"{listed}, the collector still writes {series}")
        line = lab_ssh(WORKER, "journalctl -t gpuinfra-job -o cat --no-pager -q "
                               f"| grep 'job={job} ' | tail -1").stdout.strip()
        self.say(bool(line), f"the Epilog's line: {line}",
                 f"no 'job={job}' line in the worker's journal (journalctl -t gpuinfra-job)")

    def drained(self) -> None:
        on_head(self.head, f"scontrol update nodename={WORKER} state=drain "
                           f"reason='{REASON}'")
        want = f'gpuinfra_slurm_node_state{{node="{WORKER}",state="drained",' \
               f'reason="{REASON}"}} 1'
        states = self.node_states()
        self.say(want in states, f"drained by hand, the head's metric says: {want}",
                 f"drained by hand, the head's metric has no {want!r}: "
                 f"{[x for x in states.splitlines() if WORKER in x]}")
        on_head(self.head, f"scontrol update nodename={WORKER} state=resume")
        states = self.node_states()
        mine = [x for x in states.splitlines() if f'node="{WORKER}"' in x]
        self.say(len(mine) == 1 and 'state="idle"' in mine[0],
                 f"resumed: {mine[0] if mine else ''}",
                 f"resumed, the head's metric says {mine}")


def main(argv: list[str]) -> int:
    return JobMetricsProof(TAG, argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
