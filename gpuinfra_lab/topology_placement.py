"""Lab proof: Slurm places jobs by the site's fabric (issue 45, item 1).

    .venv/bin/python -m gpuinfra_lab.topology_placement [inventory/lab.py]

On a deployed lab (group_data/lab.py: its workers alternate between leaf1 and leaf2 under one
spine), each step prints one line; exit 0 when every step held, 1 listing what did not:

1. slurmctld runs with ``TopologyPlugin=topology/tree`` and ``scontrol show topology`` lists
   each switch of the spec's fabric with the same nodes (leaves) or switches (the spine);
2. with both workers idle, a 2-node job asking for one leaf (``--switches=1@<wait>``) is held
   pending: its nodes would be under two leaves; the same job allowed two leaves
   (``--switches=2``) runs at once on both workers. Without the topology, Slurm ignores
   ``--switches`` and both would run;
3. a deploy whose topology.conf names a node slurm.conf lacks (a site template: the spec
   refuses such a fabric itself) is refused by slurmctld's own reading of the staged file,
   and slurmctld keeps its PID and its live topology.conf (gpuinfra_lab/refusal.py); a deploy
   with the site's templates back then succeeds (the workers had accepted the refused file:
   slurmd -G does not read topology.conf), leaving the lab converged.
"""

from __future__ import annotations

import sys
import time

from gpuinfra_lab.bad_slurm_conf import controller_probe
from gpuinfra_lab.health_drain import lab_hosts
from gpuinfra_lab.profiles import lab_fabric
from gpuinfra_lab.refusal import Refusal, prove
from gpuinfra_lab.steps import Steps

TAG = "topology"
HELD_S = 20  # how long the one-leaf job must stay pending while both nodes are idle
WAIT = "0:05:00"  # its --switches wait: far longer than HELD_S
RUN_S = 60


def parse_topology(text: str) -> dict[str, tuple[str, str]]:
    """``scontrol show topology`` -> switch: (Nodes, Switches) as Slurm prints them (a switch
    above the leaves lists the nodes under them too: Switches= says what hangs on it)."""
    out = {}
    for line in text.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "SwitchName" in fields:
            out[fields["SwitchName"]] = (fields.get("Nodes", ""), fields.get("Switches", ""))
    return out


def expand(names: str) -> list[str]:
    """A short hostlist as scontrol prints it (``lab-worker[1-2]``, ``leaf1,leaf2``)."""
    out: list[str] = []
    for part in _split(names):
        if "[" not in part:
            out.append(part)
            continue
        stem, _, inner = part.partition("[")
        for item in inner.rstrip("]").split(","):
            low, _, high = item.partition("-")
            width = len(low)
            out += [f"{stem}{n:0{width}d}" for n in range(int(low), int(high or low) + 1)]
    return out


def _split(names: str) -> list[str]:
    parts, depth, word = [], 0, ""
    for char in names:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(word)
            word = ""
        else:
            word += char
    return [p for p in [*parts, word] if p]


class TopologyProof(Steps):
    def __init__(self, inventory: str) -> None:
        super().__init__(TAG, inventory)
        self.workers = [h["name"] for h in lab_hosts() if "workers" in h["groups"]]
        self.jobs: list[str] = []

    def run(self) -> int:
        if len(self.workers) < 2:
            print(f"{TAG}: the lab needs two workers (it has {len(self.workers)})")
            return 1
        try:
            self.topology()
            self.placement()
        finally:
            if self.jobs:
                self.sh(f"scancel {' '.join(self.jobs)}")
        return self.end()

    def topology(self) -> None:
        plugin = self.sh("scontrol show config | awk '$1 == \"TopologyPlugin\" {print $3}'")
        self.say(plugin == "topology/tree", f"slurmctld runs with TopologyPlugin={plugin}",
                 f"slurmctld runs with TopologyPlugin={plugin!r}, not topology/tree")
        shown = parse_topology(self.sh("scontrol show topology"))
        want = lab_fabric(self.workers)
        got = {name: expand(switches or nodes) for name, (nodes, switches) in shown.items()}
        self.say(got == want, "scontrol show topology: " + "; ".join(
                 f"{k}: {','.join(v)}" for k, v in got.items()),
                 f"scontrol show topology {got} is not the spec's fabric {want}")

    def placement(self) -> None:
        pair = self.workers[:2]
        leaves = {n: leaf for leaf, kids in lab_fabric(self.workers).items()
                  for n in kids if n in pair}
        nodes = ",".join(pair)
        one = self.sh(f"sbatch --parsable -N2 -w {nodes} --switches=1@{WAIT} --mem=64 "
                      "--wrap 'sleep 1'")
        self.jobs.append(one)
        time.sleep(HELD_S)
        state = self.sh(f"squeue -h -j {one} -o '%T %r'")
        idle = self.sh(f"sinfo -h -n {nodes} -o '%n %t'")
        held = state.startswith("PENDING") and all(
            f"{n} idle" in idle or f"{n} mix" in idle for n in pair)
        self.say(held, f"a 2-node job asking for one leaf (job {one}, --switches=1) is held "
                 f"{HELD_S} s ({state}) while {', '.join(pair)} ({leaves[pair[0]]}, "
                 f"{leaves[pair[1]]}) are free ({idle.replace(chr(10), '; ')})",
                 f"job {one} with --switches=1: {state!r} after {HELD_S} s; nodes: {idle!r}")
        self.sh(f"scancel {one}")
        two = self.sh(f"sbatch --parsable -N2 -w {nodes} --switches=2 --mem=64 "
                      "--wrap 'sleep 5'")
        self.jobs.append(two)
        deadline = time.monotonic() + RUN_S
        shown = ""
        while time.monotonic() < deadline:
            shown = self.sh(f"sacct -n -X -j {two} -o State,NodeList%40 -P")
            if shown.startswith(("RUNNING", "COMPLETED")):
                break
            time.sleep(1)
        self.say(shown.startswith(("RUNNING", "COMPLETED")),
                 f"the same job allowed two leaves (job {two}, --switches=2) runs: {shown}",
                 f"job {two} with --switches=2: {shown!r} after {RUN_S} s")


# A topology.conf naming a node slurm.conf lacks: the site's own template (the spec refuses
# such a fabric before slurmctld could see it).
BAD_TOPOLOGY = ("{{ header }}\n{% for line in lines %}\n{{ line }}\n{% endfor %}\n"
                "SwitchName=leaf9 Nodes=lab-worker99\n")


REFUSAL = Refusal(
    tag=TAG, daemon="slurmctld", conf="topology.conf", deploy=("deploy.py",),
    must_say=('lookup failure for node "lab-worker99"',
              "gpuinfra: slurmctld (topology.conf) refused the new configuration"),
    probe=controller_probe("topology.conf", "scontrol show topology"),
    answered="scontrol show topology answers",
    not_answered="scontrol show topology does not answer after the refused deploy",
    overrides={"slurm/etc/slurm/topology.conf.j2": BAD_TOPOLOGY}, converge_after=True)


def main(argv: list[str]) -> int:
    inventory = argv[0] if argv else "inventory/lab.py"
    placed = TopologyProof(inventory).run()
    refused = prove(REFUSAL, [inventory])
    return placed or refused


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
