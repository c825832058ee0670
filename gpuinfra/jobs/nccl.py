"""The NCCL all-reduce job for Slurm: which nodes one run uses, and the sbatch script.

- :func:`plan_job` picks a partition's GPU nodes for one run (MIG nodes left out, the rest
  identical: GPU model, count, topology, RDMA NICs, GRES type).
- :func:`sbatch_script` renders the job: ``srun`` of ``all_reduce_perf`` over those nodes, the
  output teed to a log, then a POSIX awk pass/fail so the job's exit code is the verdict. The
  full diagnosis of that log is :mod:`gpuinfra.jobs.nccl_verdict`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge.nccl import SWEEP_MAX_BYTES, BusbwThreshold
from gpuinfra.parsers.nccl import size_text
from gpuinfra.slurm.gres import node_gres_type
from gpuinfra.spec import ClusterSpec, NodeSpec, Partition


class NcclPlanError(GpuinfraError):
    """The partition cannot be tested in one NCCL run; the message says what to change."""


# ---------------------------------------------------------------------------- the nodes

@dataclass(frozen=True)
class JobPlan:
    """The nodes one run uses, and what they have in common."""

    partition: str
    nodes: tuple[NodeSpec, ...]
    excluded: tuple[str, ...]  # short names of partition nodes left out (MIG)
    gpu_type: str
    notes: tuple[str, ...]

    @property
    def first(self) -> NodeSpec:
        return self.nodes[0]


def plan_job(spec: ClusterSpec, partition: str | None = None,
             nodes: int | None = None) -> JobPlan:
    """The GPU nodes of ``partition`` (default: the spec's default one) for one run: the first
    ``nodes`` of them (default: all); raises NcclPlanError when there is none to run.

    MIG nodes are left out (NCCL cannot all-reduce across MIG instances) and excluded in the
    script; the others must share GPU model, count, topology, RDMA NICs and GRES type (the
    slurm role's: each node's ``slurm_gpu_type`` setting, else its model's type).
    """
    part = _partition(spec, partition)
    members = [spec.node(name) for name in part.nodes]
    gpu_nodes = [n for n in members if n.gpus is not None]
    mig = [n for n in gpu_nodes if n.sharing.mode == "mig"]
    eligible = [n for n in gpu_nodes if n.sharing.mode != "mig"]
    notes = [f"{n.name} left out: its GPUs are split into MIG instances, and NCCL cannot "
             "all-reduce across MIG instances" for n in mig]
    if not eligible:
        raise NcclPlanError(f"partition {part.name!r} has no GPU node without MIG to test "
                            f"(members: {', '.join(part.nodes)})")
    types = {n.name: node_gres_type(n, n.settings.get("slurm_gpu_type")) for n in eligible}
    _require_uniform(part.name, eligible, types)
    chosen = _chosen_nodes(part.name, eligible, nodes)
    return JobPlan(part.name, tuple(chosen), tuple(n.short_name for n in mig),
                   types[chosen[0].name], tuple(notes))


def _partition(spec: ClusterSpec, name: str | None) -> Partition:
    if not spec.partitions:
        raise NcclPlanError("the spec has no Slurm partitions (is 'slurm' in schedulers?)")
    known = ", ".join(p.name for p in spec.partitions)
    if name is None:
        defaults = [p for p in spec.partitions if p.default]
        if defaults or len(spec.partitions) == 1:
            return (defaults or list(spec.partitions))[0]
        raise NcclPlanError(f"no default partition: pass --partition (one of: {known})")
    for part in spec.partitions:
        if part.name == name:
            return part
    raise NcclPlanError(f"--partition {name!r}: not in the spec (partitions: {known})")


def _setup(node: NodeSpec, gres_type: str) -> str:
    assert node.gpus is not None
    nics = ",".join(nic.name for nic in node.rdma_nics) or "no RDMA NICs"
    return (f"{node.gpus.count}x {node.gpus.model.key} {node.gpus.topology.name}, {nics}, "
            f"gres gpu:{gres_type}")


def _require_uniform(partition: str, nodes: Sequence[NodeSpec], types: Mapping[str, str]) -> None:
    """One run needs identical nodes: the floor and --ntasks-per-node assume it."""
    setups = {n.name: _setup(n, types[n.name]) for n in nodes}
    if len(set(setups.values())) > 1:
        listing = "; ".join(f"{name}: {setup}" for name, setup in setups.items())
        raise NcclPlanError(
            f"partition {partition!r} mixes GPU setups ({listing}); one NCCL run needs "
            "identical nodes: give each setup its own partition (slurm_partitions in "
            "group_data) and generate one script per partition")


def _chosen_nodes(partition: str, nodes: Sequence[NodeSpec],
                  wanted: int | None) -> list[NodeSpec]:
    """The nodes one run uses: the first ``wanted`` of ``nodes`` (all of them when None);
    NcclPlanError when the partition has fewer eligible nodes than ``wanted`` (or it is < 1)."""
    if wanted is None:
        return list(nodes)
    if not 1 <= wanted <= len(nodes):
        raise NcclPlanError(f"--nodes {wanted}: partition {partition!r} has {len(nodes)} "
                            "eligible GPU node(s) "
                            f"({', '.join(n.name for n in nodes)})")
    return list(nodes[:wanted])


# ---------------------------------------------------------------------------- sbatch script

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # Slurm partition/job/node names we accept
_GRES_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")  # as gpuinfra.slurm.conf accepts
_MPI = re.compile(r"^[a-z0-9_]{1,32}$")  # srun --mpi plugin names: pmix, pmix_v4, pmi2, none
_HCA = re.compile(r"^[A-Za-z0-9_.-]{1,64}(:\d+)?$")  # mlx5_0, or mlx5_0:1 with a port
_TIME = re.compile(r"^(\d+-)?\d{1,2}(:\d{2}){0,2}$|^\d+$")  # sbatch --time formats


class ScriptError(GpuinfraError):
    """A value that cannot go into the sbatch script safely."""


@dataclass(frozen=True)
class JobSettings:
    """How the job runs; every field has the safe common default.

    mpi: srun's --mpi plugin (`srun --mpi=list` shows what the cluster has). binary: the
    all_reduce_perf built with MPI=1 (on PATH by default). exclude: nodes of the partition to
    leave out (short names). time_limit: sbatch --time.
    """

    job_name: str = "nccl-all-reduce"
    mpi: str = "pmix"
    binary: str = "all_reduce_perf"
    time_limit: str = "00:30:00"
    exclude: tuple[str, ...] = ()


def sbatch_script(
    partition: str,
    threshold: BusbwThreshold,
    gpu_type: str,
    ib_hcas: Sequence[str] = (),
    settings: JobSettings | None = None,
    ib_gid_index: int | None = None,
) -> str:
    """The sbatch script that runs all_reduce_perf on ``threshold.nodes`` nodes of
    ``partition`` and exits non-zero unless the run passes ``threshold``.

    ib_hcas: the nodes' RDMA device names (exported as NCCL_IB_HCA when the job spans nodes).
    ib_gid_index: their RoCE GID index (NCCL_IB_GID_INDEX; None: NCCL's own choice).
    Raises ScriptError for names that Slurm or the shell could misread.
    """
    job = settings or JobSettings()
    _check_values(partition, gpu_type, ib_hcas, job)
    lines = _header(partition, threshold, gpu_type, job)
    lines += _body(threshold, ib_hcas, job, ib_gid_index)
    return "\n".join(lines) + "\n"


def _check_values(partition: str, gpu_type: str, ib_hcas: Sequence[str],
                  job: JobSettings) -> None:
    checks = [("partition", partition, _NAME), ("job name", job.job_name, _NAME),
              ("GRES type", gpu_type, _GRES_TYPE),
              ("--mpi", job.mpi, _MPI), ("--time", job.time_limit, _TIME)]
    checks += [("excluded node", name, _NAME) for name in job.exclude]
    checks += [("RDMA device", name, _HCA) for name in ib_hcas]
    for what, value, pattern in checks:
        if not pattern.match(value):
            raise ScriptError(f"{what} {value!r}: refused in an sbatch script (use letters, "
                              "digits, '-' and '_'; --time as [D-]HH:MM:SS or minutes; --mpi "
                              "as `srun --mpi=list` prints it)")
    if not job.binary or "\n" in job.binary:
        raise ScriptError(f"--binary {job.binary!r}: give the path of all_reduce_perf")


def _header(partition: str, threshold: BusbwThreshold, gpu_type: str,
            job: JobSettings) -> list[str]:
    gpus = threshold.gpus_per_node
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job.job_name}",
        f"#SBATCH --partition={partition}",
        f"#SBATCH --nodes={threshold.nodes}",
        f"#SBATCH --ntasks-per-node={gpus}",
        f"#SBATCH --gres=gpu:{gpu_type}:{gpus}",
        "#SBATCH --exclusive",
        f"#SBATCH --time={job.time_limit}",
        f"#SBATCH --output={job.job_name}-%j.out",
    ]
    if job.exclude:
        lines.append(f"#SBATCH --exclude={','.join(job.exclude)}")
    return lines + [
        "#",
        "# NCCL all-reduce check, generated by `gpuinfra nccl script`",
        "# (gpuinfra_roles/slurm/NCCL.md).",
        f"# {threshold.nodes} node(s) x {gpus} {threshold.model} ({threshold.profile}).",
        f"# Pass: busbw at {size_text(SWEEP_MAX_BYTES)} >= {threshold.min_busbw:g} GB/s, no wrong "
        f"values, all {threshold.ranks} ranks present.",
        f"# Floor ({threshold.bound}): {_one_line(threshold.source)}",
        *_condition_lines(threshold),
        "# The job's exit code is the verdict: 0 pass, 1 fail.",
    ]


def _body(threshold: BusbwThreshold, ib_hcas: Sequence[str], job: JobSettings,
          gid_index: int | None = None) -> list[str]:
    run = ["srun", f"--mpi={job.mpi}", job.binary, "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
    lines = [
        "set -u -o pipefail",
        "",
        f"MIN_BUSBW={threshold.min_busbw:g}",
        f"MAX_BYTES={SWEEP_MAX_BYTES}",
        f"RANKS={threshold.ranks}",
        'LOG="${NCCL_CHECK_LOG:-' + job.job_name + '-${SLURM_JOB_ID:-local}.log}"',
        "",
        "export NCCL_DEBUG=INFO  # the log then names the transport used (NET/IB, NET/Socket)",
    ]
    if threshold.nodes > 1 and ib_hcas:
        # '=': exact device names, so mlx5_1 does not also select mlx5_10..mlx5_19
        lines.append(f"export NCCL_IB_HCA='={','.join(ib_hcas)}'")
        if gid_index is not None:  # RoCE: the GID of the spec's type (RoCE v2, IPv4)
            lines.append(f"export NCCL_IB_GID_INDEX={int(gid_index)}")
    lines += [
        "",
        " ".join(shlex.quote(part) for part in run) + ' 2>&1 | tee "$LOG"',
        "launch=$?",
        "",
        "awk -v min=\"$MIN_BUSBW\" -v max_bytes=\"$MAX_BYTES\" -v ranks=\"$RANKS\" "
        f"{shlex.quote(_AWK)} \"$LOG\"",
        "verdict=$?",
        'if [ "$verdict" -eq 0 ] && [ "$launch" -ne 0 ]; then',
        '    echo "NCCL all_reduce FAIL: srun exited $launch after a passing table"',
        "    verdict=1",
        "fi",
        f'echo "diagnosis: {_check_hint(threshold)}"',
        'exit "$verdict"',
    ]
    return lines


def _check_hint(threshold: BusbwThreshold) -> str:
    """The `gpuinfra nccl check` command for this job's log (shell-quoted, $LOG expanded)."""
    parts = ["--profile", threshold.profile, "--model", threshold.model, "--nodes",
             str(threshold.nodes), "--gpus", str(threshold.gpus_per_node), "--max-size", "8G"]
    if threshold.bound == "explicit":
        parts += ["--min-busbw", f"{threshold.min_busbw:g}"]
    elif threshold.nodes > 1:
        parts += ["--nics", str(threshold.nics), "--nic-gbps", f"{threshold.nic_gbps:g}"]
    return "gpuinfra nccl check $LOG " + " ".join(shlex.quote(part) for part in parts)


def _condition_lines(threshold: BusbwThreshold) -> list[str]:
    if not threshold.condition:
        return []
    lines = [f"# The floor assumes {threshold.condition}."]
    if threshold.ring_floor is not None:
        lines.append(f"# With NVLS off the floor is {threshold.ring_floor:g} GB/s "
                     f"({_one_line(threshold.ring_source)}): `gpuinfra nccl check` applies it "
                     "when the log shows NVLS off.")
    return lines


def _one_line(text: str) -> str:
    return " ".join(text.split())


# POSIX awk: strips mpirun tags, counts ranks, reads the table (with or without the root column)
# and the out-of-bounds summary, and judges the largest size. Exit 0 pass, 1 fail.
_AWK = r"""
{ sub(/^\[[0-9]+,[0-9]+\]<std(out|err)>: ?/, "") }
$1 == "#" && $2 == "Rank" && $3 ~ /^[0-9]+$/ { seen[$3] = 1; next }
/^[ \t]*#[ \t]*Out of bounds values/ {
    split($0, part, ":"); split(part[2], word, " "); oob = word[1] + 0; summary = 1; next
}
$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && (NF == 13 || NF == 12) {
    if (NF == 13) { bw = ($8 + $12) / 2; w = 0
        if ($9 ~ /^[0-9]+$/) w += $9
        if ($13 ~ /^[0-9]+$/) w += $13
        wrong += w
    } else { bw = ($7 + $11) / 2 }
    rows++
    if ($1 + 0 >= size) { size = $1 + 0; busbw = bw }
}
END {
    n = 0; for (r in seen) n++
    why = ""
    if (rows == 0) why = why "no result rows (the run crashed or never started); "
    else if (!summary) why = why "no out-of-bounds summary (the run did not finish); "
    if (oob > 0 || wrong > 0) why = why "wrong values: out of bounds " oob ", #wrong " wrong "; "
    if (n != ranks) why = why n " ranks instead of " ranks "; "
    if (rows > 0 && size < max_bytes) why = why sprintf("sweep stopped at %.0f B; ", size)
    if (rows > 0 && busbw < min) why = why "busbw below the floor; "
    sub(/; $/, "", why)
    line = sprintf("busbw %.2f GB/s at %.0f B, floor %s GB/s", busbw, size, min)
    if (why == "") { print "NCCL all_reduce PASS: " line; exit 0 }
    print "NCCL all_reduce FAIL: " line ": " why
    exit 1
}
"""
