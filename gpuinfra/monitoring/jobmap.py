"""Which Slurm job holds each GPU: the mapping folder Slurm's Prolog and Epilog keep on a GPU
node, read by NVIDIA's dcgm-exporter and by the project's own GPU collector.

The folder is dcgm-exporter's "HPC job mapping" directory (``--hpc-job-mapping-dir DIR``,
environment ``DCGM_HPC_JOB_MAPPING_DIR``; NVIDIA/dcgm-exporter README "Enabling HPC Job Mapping",
internal/pkg/transformation/hpc.go): one file per GPU, named after the GPU's index (hpc.go's
``getGPUFiles`` keeps only names ``strconv.Atoi`` accepts and skips folders), each line of it
one job id holding that GPU (``readFile``: one job per line, every line taken as it is); every
metric of that GPU is then repeated once per job with the label ``hpc_job``. A GPU without a
file (or with an empty one) keeps its metrics unlabelled.

Beside the GPU files, in the folder ``jobs/`` (a folder: dcgm-exporter skips it), one small JSON
record per job running on the node: its id, user, GPUs and start time. The collector reads it
for the user label of ``gpuinfra_gpu_job_info``, and the Epilog for its summary line.

Everything here is pure: the node's programs (roles/monitoring/gpujobs.py, the Prolog
and Epilog; roles/monitoring/collector.py) read the folder's files and hand their text
in, and write back what :func:`after_prolog`/:func:`after_epilog` return.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# dcgm-exporter's mapping folder on every Slurm GPU node. Under /run: a reboot ends every job,
# and the folder goes with them.
JOB_MAPPING_DIR = "/run/gpuinfra-gpu-jobs"
RECORDS = "jobs"  # the folder of job records, inside JOB_MAPPING_DIR
LOCK = ".lock"  # not a number: dcgm-exporter skips it
# Slurm's job ids are numbers (SLURM_JOB_ID; an array task has its own number too).
_JOB_ID = re.compile(r"[1-9][0-9]{0,18}")
# A Unix user name as Slurm passes it (SLURM_JOB_USER); anything else is not written.
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\$?")
# What the collector wrote last for each GPU: its utilisation (gpuinfra.monitoring.gpumetrics).
_UTILIZATION = re.compile(r'^gpuinfra_gpu_utilization_ratio\{gpu="(\d+)"[^}]*\} (\S+)$', re.M)
_COLLECTED_AT = re.compile(r"^gpuinfra_gpu_collector_last_run_timestamp_seconds (\S+)$", re.M)


class JobMapError(ValueError):
    """What the Prolog was given cannot be written (a job id or user of an unexpected shape)."""


@dataclass(frozen=True)
class JobRecord:
    """A job running on the node: Slurm's id, the user, the GPU indices it holds, and when its
    Prolog ran (Unix time)."""

    job: str
    user: str
    gpus: tuple[int, ...]
    start: float

    def text(self) -> str:
        return json.dumps({"job": self.job, "user": self.user, "gpus": list(self.gpus),
                           "start": round(self.start, 3)}, sort_keys=True) + "\n"

    @classmethod
    def from_text(cls, job: str, text: str) -> JobRecord | None:
        """The record of ``job`` (its file's name) from its text; None when unreadable."""
        try:
            data = json.loads(text)
            gpus = tuple(int(g) for g in data["gpus"])
            return cls(job, str(data["user"]), gpus, float(data["start"]))
        except (ValueError, KeyError, TypeError):
            return None


def job_gpus(value: str | None) -> tuple[int, ...]:
    """GPU indices of ``SLURM_JOB_GPUS`` (``"0,2"``), the variable Slurm gives the Prolog and
    Epilog (prolog_epilog.html; the health check's Prolog reads it too, measured on 22.05);
    no GPU for an unset or empty one. Ranges are not Slurm's form there; other items are
    skipped."""
    if not value:
        return ()
    return tuple(sorted({int(part) for part in value.split(",") if part.strip().isdigit()}))


def record_for(job: str | None, user: str | None, gpus: Iterable[int], now: float) -> JobRecord:
    """The record the Prolog writes, its values checked (they become file names and labels)."""
    if not job or not _JOB_ID.fullmatch(job):
        raise JobMapError(f"SLURM_JOB_ID {job!r} is not a job number")
    if not user or not _USER.fullmatch(user):
        raise JobMapError(f"SLURM_JOB_USER {user!r} is not a user name")
    return JobRecord(job, user, tuple(sorted(set(gpus))), now)


def _jobs_of(text: str | None) -> list[str]:
    """Job ids of one GPU file, in order, each once (dcgm-exporter's one id per line)."""
    seen: dict[str, None] = {}
    for line in (text or "").splitlines():
        if line.strip():
            seen.setdefault(line.strip(), None)
    return list(seen)


def _gpu_text(jobs: Sequence[str]) -> str | None:
    return "".join(f"{job}\n" for job in jobs) or None


def gpu_files(files: Mapping[str, str]) -> dict[int, str]:
    """The GPU files among the folder's files (name -> text), as dcgm-exporter picks them: a
    name that is a number."""
    return {int(name): text for name, text in files.items() if name.isdigit()}


def after_prolog(files: Mapping[str, str], record: JobRecord) -> dict[str, str | None]:
    """The files to write (name relative to the folder -> text; None: remove) once ``record``'s
    job holds its GPUs: its id added to each of its GPUs' files (a shared GPU lists every job),
    and its record. ``files``: the folder's files as they are."""
    gpus = gpu_files(files)
    out: dict[str, str | None] = {}
    for gpu in record.gpus:
        jobs = _jobs_of(gpus.get(gpu))
        if record.job not in jobs:
            out[str(gpu)] = _gpu_text([*jobs, record.job])
    out[f"{RECORDS}/{record.job}"] = record.text()
    return out


def after_epilog(files: Mapping[str, str], job: str) -> dict[str, str | None]:
    """The files to write once ``job`` ended: its id gone from every GPU file (a file left
    without a job is removed: the GPU is idle), and its record removed."""
    out: dict[str, str | None] = {}
    for gpu, text in gpu_files(files).items():
        jobs = _jobs_of(text)
        if job in jobs:
            out[str(gpu)] = _gpu_text([j for j in jobs if j != job])
    if f"{RECORDS}/{job}" in files:
        out[f"{RECORDS}/{job}"] = None
    return out


def records(files: Mapping[str, str]) -> dict[str, JobRecord]:
    """Every readable job record among the folder's files, by job id."""
    out: dict[str, JobRecord] = {}
    for name, text in files.items():
        folder, _, job = name.partition("/")
        if folder == RECORDS and _JOB_ID.fullmatch(job):
            record = JobRecord.from_text(job, text)
            if record is not None:
                out[job] = record
    return out


@dataclass(frozen=True)
class Holding:
    """One job holding one GPU: what ``gpuinfra_gpu_job_info`` labels."""

    gpu: int
    job: str
    user: str


def holdings(files: Mapping[str, str]) -> list[Holding]:
    """Who holds each GPU, from the folder's files: the GPU files say which jobs (as
    dcgm-exporter reads them), the records whose user; "" for a job without a record."""
    known = records(files)
    out = []
    for gpu, text in sorted(gpu_files(files).items()):
        for job in _jobs_of(text):
            record = known.get(job)
            out.append(Holding(gpu, job, record.user if record else ""))
    return out


def last_utilization(prom_text: str, gpus: Iterable[int]) -> tuple[dict[int, float],
                                                                     float | None]:
    """The utilisation (0..1) of ``gpus`` in the collector's last file, and when it ran (Unix
    time; None when the file does not say)."""
    wanted = set(gpus)
    seen = {}
    for gpu, value in _UTILIZATION.findall(prom_text):
        if int(gpu) in wanted:
            try:
                seen[int(gpu)] = float(value)
            except ValueError:
                continue
    stamp = _COLLECTED_AT.search(prom_text)
    try:
        at = float(stamp[1]) if stamp else None
    except ValueError:
        at = None
    return seen, at


def summary_line(record: JobRecord | None, job: str, gpus: Sequence[int], now: float,
                 prom_text: str | None) -> str:
    """The Epilog's one line for the journal (``journalctl -t gpuinfra-job``): the job, its
    user, its GPUs, how long it held them, and each GPU's utilisation as the collector last saw
    it (every minute), with how long before the job's end."""
    user = record.user if record else "?"
    held = record.gpus if record else tuple(gpus)
    parts = [f"job={job}", f"user={user}", f"gpus={','.join(map(str, held)) or 'none'}"]
    parts.append(f"seconds={round(now - record.start)}" if record else "seconds=?")
    seen, at = last_utilization(prom_text or "", held)
    if seen:
        shown = ",".join(f"{gpu}:{round(seen[gpu] * 100)}%" for gpu in held if gpu in seen)
        mean = sum(seen.values()) / len(seen)
        ago = f" {round(now - at)}s before the end" if at is not None else ""
        parts.append(f"last_utilization={shown} mean={round(mean * 100)}%{ago}")
    else:
        parts.append("last_utilization=unknown (no collector sample of these GPUs)")
    return " ".join(parts)
