"""gpuinfra-gpujobs: which Slurm job holds each GPU, kept by Slurm's Prolog and Epilog on a GPU
node (installed by the monitoring role beside the GPU collector).

    gpujobs.py prolog    the job's id added to its GPUs' files, its record written
    gpujobs.py epilog    the job's id removed, its record removed; one summary line logged

The folder is gpuinfra.monitoring.jobmap.JOB_MAPPING_DIR: dcgm-exporter's HPC job mapping
directory (one file per GPU index, one job id per line) and the project's GPU collector read it.
Slurm gives both hooks SLURM_JOB_ID, SLURM_JOB_USER and SLURM_JOB_GPUS (prolog_epilog.html).
Each file is written whole to a temporary file in the same folder and renamed over the old one,
under a lock (two jobs' hooks may run at once), so no reader sees half a file. The Epilog's line
goes to the journal: ``journalctl -t gpuinfra-job``. Both always exit 0: a metric's bookkeeping
must never drain a node or requeue a job (a failing Prolog does both, slurm.conf(5)).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "gpuinfra.zip"))  # the library, as the role packed it

from gpuinfra.health.collect import PATH  # noqa: E402
from gpuinfra.monitoring.jobmap import (  # noqa: E402
    JOB_MAPPING_DIR,
    LOCK,
    RECORDS,
    JobMapError,
    JobRecord,
    after_epilog,
    after_prolog,
    job_gpus,
    record_for,
    summary_line,
)
from gpuinfra_node.reader import read_folder  # noqa: E402

TAG = "gpuinfra-job"
# The GPU collector's output (the monitoring role's COLLECTOR_OUT): the Epilog's summary reads
# the last utilisation it saw.
COLLECTOR_OUT = "/var/lib/prometheus/node-exporter/gpuinfra-gpu.prom"


def log(message: str) -> None:
    """One line to the journal (tag gpuinfra-job) and to stderr."""
    print(f"{TAG}: {message}", file=sys.stderr)
    try:
        subprocess.run(["logger", "-t", TAG, "--", message], check=False, timeout=5,
                       env={"PATH": PATH})
    except (OSError, subprocess.TimeoutExpired):
        pass


def apply(folder: Path, changes: dict[str, str | None]) -> None:
    """Each file written whole (temporary file, then rename) or removed."""
    for name, text in changes.items():
        path = folder / name
        if text is None:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w") as out:
                out.write(text)
            os.chmod(temp, 0o644)  # read by dcgm-exporter and the collector's own user
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("prolog", "epilog"):
        print("usage: gpujobs.py prolog|epilog", file=sys.stderr)
        return 2
    folder = Path(JOB_MAPPING_DIR)
    job = os.environ.get("SLURM_JOB_ID", "")
    gpus = job_gpus(os.environ.get("SLURM_JOB_GPUS"))
    try:
        folder.mkdir(mode=0o755, exist_ok=True)
        (folder / RECORDS).mkdir(mode=0o755, exist_ok=True)
        with open(folder / LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            files = read_folder(str(folder))
            if argv[0] == "prolog":
                if gpus:  # a job without GPUs holds none: nothing to map
                    record = record_for(job, os.environ.get("SLURM_JOB_USER"), gpus,
                                        time.time())
                    apply(folder, after_prolog(files, record))
                return 0
            record = JobRecord.from_text(job, files.get(f"{RECORDS}/{job}", ""))
            apply(folder, after_epilog(files, job))
        if record is not None or gpus:
            try:
                prom = Path(COLLECTOR_OUT).read_text()
            except OSError:
                prom = None
            log(summary_line(record, job, gpus, time.time(), prom))
    except (OSError, JobMapError) as exc:
        log(f"{argv[0]} of job {job or '?'}: the GPU job mapping was not updated: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
