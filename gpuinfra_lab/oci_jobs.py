"""Lab proof: Slurm jobs run inside an OCI container on every worker (job_containers "oci").

    .venv/bin/python -m gpuinfra_lab.oci_jobs [inventory/lab.py]

On a lab deployed with ``job_containers_runtime = "oci"`` and a bundle
(group_data/lab.py), each step prints one line; exit 0 when every step held, 1 listing what
did not:

1. each worker has oci.conf where slurmstepd reads it (beside slurmd's fetched slurm.conf)
   and the bundle the role built;
2. on each worker, as the unprivileged user ``nobody`` (rootless, as every job):
   ``srun -w <worker> --container=<bundle> cat /etc/os-release`` prints the bundle's
   ``ID=gpuinfra-bundle``, while the same srun without ``--container`` prints the host's
   ``ID=debian`` (the container is real, not Slurm's "advisory" mode without oci.conf);
3. oci.conf survives a restart of slurmd, which fetches its configuration from slurmctld
   into the same folder again (it rewrites only the files it fetches);
4. a second run of the role changes nothing (its files and bundle are converged).
"""

from __future__ import annotations

import json
import runpy
import shlex
import subprocess
import sys

from gpuinfra.jobs.containers import BUNDLE_ID, OCI_CONF
from gpuinfra_lab.deploys import changed_operations
from gpuinfra_lab.health_drain import lab_hosts, usable, wait
from gpuinfra_lab.refusal import REPO, lab_ssh
from gpuinfra_lab.steps import Steps

TAG = "oci-jobs"
USER = "nobody"  # the same UID on every lab node


def lab_setting(key: str) -> object:
    return runpy.run_path(str(REPO / "group_data" / "lab.py")).get(key)


def srun(head: str, worker: str, container: str | None) -> subprocess.CompletedProcess[str]:
    option = f"--container={shlex.quote(container)} " if container else ""
    command = (f"cd /tmp && runuser -u {USER} -- srun -w {worker} -N1 -n1 --mem=64 -t 2 "
               f"{option}cat /etc/os-release")
    return lab_ssh(head, command, timeout=180)


class OciJobsProof(Steps):
    def run(self) -> int:
        runtime, bundle = (lab_setting("job_containers_runtime"),
                           lab_setting("job_containers_oci_bundle"))
        if runtime != "oci" or not isinstance(bundle, str):
            print(f"{TAG}: group_data/lab.py must set job_containers_runtime = 'oci' and "
                  f"job_containers_oci_bundle (it has {runtime!r}, {bundle!r})")
            return 1
        workers = [h["name"] for h in lab_hosts() if "workers" in h["groups"]]
        for worker in workers:
            there = lab_ssh(worker, f"test -s {OCI_CONF} && test -s {bundle}/config.json && "
                                    f"test -x {bundle}/rootfs/bin/busybox")
            self.say(there.returncode == 0, f"{worker}: {OCI_CONF} and the bundle {bundle}",
                     f"{worker}: oci.conf or the bundle missing ({OCI_CONF}, {bundle})")
            inside, outside = srun(self.head, worker, bundle), srun(self.head, worker, None)
            ok = (inside.returncode == 0 and f"ID={BUNDLE_ID}" in inside.stdout
                  and "ID=debian" in outside.stdout and f"ID={BUNDLE_ID}" not in outside.stdout)
            line = next((x for x in inside.stdout.splitlines() if x.startswith("ID=")), "")
            self.say(ok, f"{worker}: as {USER}, srun --container={bundle} ran inside the "
                         f"bundle ({line}; without --container: ID=debian)",
                     f"{worker}: srun --container exit {inside.returncode}: "
                     f"{(inside.stdout + inside.stderr)[-400:]!r}; without: "
                     f"{outside.stdout[-200:]!r}")
        for worker in workers:
            lab_ssh(worker, "systemctl restart slurmd")
            back = wait(self.head, worker, usable, timeout=90)
            kept = lab_ssh(worker, f"test -s {OCI_CONF}").returncode == 0
            self.say(back is not None and kept,
                     f"{worker}: slurmd restarted (configuration fetched again), oci.conf kept",
                     f"{worker}: after a slurmd restart: back in Slurm: {back is not None}, "
                     f"oci.conf still there: {kept}")
        again = subprocess.run([str(REPO / ".venv" / "bin" / "pyinfra"), "-y", self.inventory,
                                "roles/job_containers/deploy.py", "--json"], cwd=REPO,
                               capture_output=True, text=True, check=False, timeout=900)
        try:
            changed = changed_operations(json.loads(again.stdout)["results"])
        except (ValueError, KeyError):
            changed = [("no JSON results", [f"exit {again.returncode}", again.stderr[-300:]])]
        self.say(again.returncode == 0 and not changed,
                 "a second run of the role changes nothing",
                 f"the second run changed: {changed}")
        return self.end()


def main(argv: list[str]) -> int:
    return OciJobsProof(TAG, argv[0] if argv else "inventory/lab.py").run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
