"""Slurm's own daemons judging staged files, for the slurm role (roles/slurm/operations.py) and
the versions judge of the lab (gpuinfra_lab/slurm_versions.py): one text of each check."""

from __future__ import annotations

import shlex

from gpuinfra_deploy.ops.checked import check_script

# What `slurmd -G` says when it checks, on a host without that node's GPUs (the head, with an
# empty gres.conf), a site with shared GRES (mps, shard): the node's GPU lines come from
# slurm.conf alone, without File= (each node checks its own gres.conf lines). Slurm 22.05,
# measured in a lab container: one `error:` line, exit 0, when the impersonated node itself
# shares none.
ELSEWHERE = 'SHARING configuration lacks "File" specification'


# slurmctld's own judgement of staged files it alone reads (topology.conf: slurmd -G does not).
# slurmctld 22.05 has no test mode, so a second slurmctld runs in the foreground on a copy of
# the staged slurm.conf that keeps every node, partition and plugin but listens on a free port,
# keeps its state in a temporary folder, reaches no slurmd (another SlurmdPort) and no slurmdbd
# (accounting left out), and is stopped once it has read the files ("Running as primary
# controller") or ended. The keys the copy replaces (compared without case, as Slurm reads them).
_TRIAL_REPLACED = ("SlurmctldHost", "SlurmctldPort", "SlurmdPort", "StateSaveLocation",
                   "SlurmctldPidFile", "SlurmctldLogFile", "SlurmUser", "AccountingStorageType",
                   "AccountingStorageHost", "AccountingStorageTRES", "JobCompType")
TRIAL_SECONDS = 60


_TRIAL = r"""d=$(mktemp -d) || exit 1
port=$((20000 + $$ % 20000))
{ grep -viE '^[[:space:]]*(REPLACED)[[:space:]]*=' STAGE/slurm.conf
  printf '%s\n' "SlurmctldHost=$(hostname -s)" "SlurmctldPort=$port" \
    "SlurmdPort=$((port + 1))" "StateSaveLocation=$d/state" \
    "SlurmctldPidFile=$d/slurmctld.pid" SlurmUser=root; } > "$d/slurm.conf" &&
  cp STAGE/cgroup.conf "$d"/ && : > "$d/gres.conf" && mkdir "$d/state" || exit 1
[ ! -f STAGE/topology.conf ] || cp STAGE/topology.conf "$d"/ || exit 1
slurmctld -D -i -f "$d/slurm.conf" > "$d/log" 2>&1 & pid=$!
i=0
while [ $i -lt SECONDS_ ] && kill -0 $pid 2>/dev/null &&
    ! grep -q 'Running as primary controller' "$d/log"; do sleep 1; i=$((i + 1)); done
grep -qE 'Running as primary controller|fatal:' "$d/log" ||
  echo 'gpuinfra: slurmctld did not read the staged files within SECONDS_ s'
kill $pid 2>/dev/null; wait $pid 2>/dev/null
cat "$d/log"
rm -rf "$d"
"""


def controller_trial_command(stage: str, fail_pattern: str, tool: str) -> str:
    """Shell: a second slurmctld reads the staged slurm.conf, cgroup.conf and topology.conf
    (when there is one; see above); exit 1 with its lines matching ``fail_pattern`` (an ERE)
    when any does. Also what gpuinfra_lab/slurm_versions.py runs with each release's Slurm."""
    inner = (_TRIAL.replace("REPLACED", "|".join(_TRIAL_REPLACED))
             .replace("STAGE", shlex.quote(stage)).replace("SECONDS_", str(TRIAL_SECONDS)))
    return check_script(f"sh -c {shlex.quote(inner)}", tool, stage, fail_pattern=fail_pattern)


