"""Slurm's login nodes (the 'login' group), judged on each: MUNGE running and no slurmd or
slurmctld (they run no job and control nothing); Slurm's client commands there reach the
controller (`sinfo` lists the site's Slurm workers) and a job submitted there runs on a worker
(`srun -N1 hostname`), with the head's slurm.conf byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable

from testinfra.host import Host

from gpuinfra.spec import NodeSpec
from gpuinfra_verify.expect import problem
from gpuinfra_verify.failure import fail

VERIFY_NODES = "login"
VERIFY_SCHEDULER = "slurm"
Note = Callable[[str, object], None]
SLURM_CONF = "/etc/slurm/slurm.conf"
JOB_TIMEOUT = 60


def test_login_runs_munge_and_no_slurm_daemon(host: Host, node: NodeSpec, note: Note) -> None:
    running = [u for u in ("slurmd", "slurmctld") if host.service(u).is_running]
    note("slurm daemons", ", ".join(running) or "none")
    if running:
        fail(note, problem(node.name, f"{', '.join(running)} running on a login node",
                           "left from an earlier role of the host, or installed by hand",
                           f"`systemctl disable --now {' '.join(running)}` on {node.name}"))
    if not host.service("munge").is_running:
        fail(note, problem(node.name, "munged is not running on a login node",
                           "it failed at start (its key), or the munge role did not run",
                           "`systemctl status munge`; deploy (munge role)"))


def test_login_has_the_heads_slurm_conf(host: Host, node: NodeSpec, controller: Host,
                                        note: Note) -> None:
    here = host.run(f"sha256sum {SLURM_CONF}").stdout.split()[:1]
    head = controller.run(f"sha256sum {SLURM_CONF}").stdout.split()[:1]
    note("slurm.conf sha256", f"{here} (head {head})")
    if not here or here != head:
        fail(note, problem(node.name, f"its {SLURM_CONF} is not the head's "
                           f"({here[0][:12] if here else 'missing'} vs "
                           f"{head[0][:12] if head else 'missing'})",
                           "the head's files changed in a run that did not reach this login "
                           "node (--limit), or it was edited here",
                           f"deploy with --limit {node.name} (the slurm role writes it)"))


def test_login_reaches_the_controller_and_runs_a_job(host: Host, node: NodeSpec, site,
                                                    note: Note) -> None:
    workers = {w.short_name for w in site.spec.workers_of("slurm")}
    listed = host.run("sinfo -h -N -o %N")
    seen = set(listed.stdout.split())
    note("sinfo", " ".join(sorted(seen)) or listed.stderr.strip())
    if listed.rc != 0 or not seen & workers:
        fail(note, problem(node.name, f"sinfo on the login node fails or lists none of the "
                           f"Slurm workers ({listed.stderr.strip()[:200] or 'nothing listed'})",
                           "MUNGE's key differs from the head's, the controller is not "
                           "reachable on port 6817, or slurm.conf is missing",
                           f"`munge -n | ssh HEAD unmunge` from {node.name}; `scontrol ping`"))
    job = host.run(f"timeout {JOB_TIMEOUT} srun -N1 --mem=64 hostname")
    ran = job.stdout.strip()
    note("srun -N1 hostname", ran or job.stderr.strip())
    if job.rc != 0 or ran.split(".")[0] not in workers:
        fail(note, problem(node.name, f"a job from the login node did not run on a worker "
                           f"(rc {job.rc}: {job.stderr.strip()[:200] or ran})",
                           "no worker is idle, the partition is down, or the workers cannot "
                           "reach back to the login node (srun listens for its tasks)",
                           "`sinfo` and `squeue` on the head; open the login node's ports to "
                           "the workers (SrunPortRange)"))
