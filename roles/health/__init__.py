"""The `health` role: the node health check (gpuinfra-health) on every Slurm worker and GPU node.

Table of contents (``health()``): Python 3 (Debian's); the program (program.py beside this
file) and the library it judges with, packed into one zip (the same gpuinfra modules the
deploy runs: one copy of every rule); three entry points Slurm runs
(``gpuinfra-health-slurm``, ``-prolog``, ``-epilog``: slurm.conf takes a path, no
arguments) and ``gpuinfra-health`` for people; the node's expectation
(/etc/gpuinfra/health.json, from the spec), judged by the program itself on a staged copy
before it goes live. The slurm role writes HealthCheckProgram, Prolog and Epilog from this
role's keys (defaults.py); the monitoring role's node_exporter reads the check's metrics.
"""

from __future__ import annotations

import io
from pathlib import Path

from pyinfra.api import deploy
from pyinfra.operations import apt, files

from gpuinfra.health.expectation import PATH as EXPECTATION_PATH
from gpuinfra.health.expectation import from_node, runs_on
from gpuinfra.monitoring.units import TEXTFILE_DIRECTORY
from gpuinfra.slurm.conf import HEALTH_PROGRAMS
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.nodecode import ZIP_NAME, node_zip, shipped
from gpuinfra_deploy.ops.apt import APT_CACHE_S
from gpuinfra_deploy.ops.checked import check_script, checked_files, upload_source
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import role_file

HERE = Path(__file__).resolve().parent
LIB_DIR = "/usr/local/lib/gpuinfra-health"
PROGRAM = f"{LIB_DIR}/program.py"
ZIP = f"{LIB_DIR}/{ZIP_NAME}"
STAGE = "/etc/gpuinfra/.gpuinfra-staged"
# The commands: one for people, one per Slurm hook (gpuinfra.slurm.conf.HEALTH_PROGRAMS, the
# paths slurm.conf names).
COMMAND = "/usr/local/sbin/gpuinfra-health"


def entry_point(mode: str | None) -> str:
    """The shell script of a command: the program, in isolated mode, with its mode (one
    template for the four commands)."""
    return role_file("health", COMMAND, program=PROGRAM, mode=mode)


def expectation_text(site: Site, node: NodeSpec) -> str:
    # The check writes its metrics there only where the directory exists (node_exporter's
    # package made it): no dependency on the monitoring role.
    return from_node(node, node.settings, TEXTFILE_DIRECTORY).to_json()


@deploy("health")
def health(site: Site, node: NodeSpec) -> None:
    if not node.settings["health_enabled"]:
        files.file(name=f"{EXPECTATION_PATH} absent (health_enabled is False)",
                   path=EXPECTATION_PATH, present=False)
        return
    apt.packages(name="Install Python 3 (the health check runs on it)",
                 packages=packages(site, node), no_recommends=True, update=True,
                 cache_time=APT_CACHE_S)
    files.directory(name=f"{LIB_DIR} exists", path=LIB_DIR, user="root", group="root",
                    mode="755")
    files.put(name=f"The library the check judges with ({ZIP})", dest=ZIP,
              src=io.BytesIO(node_zip()), user="root", group="root", mode="644")
    files.put(name=f"The health check ({PROGRAM})", dest=PROGRAM,
              src=io.BytesIO(shipped(HERE / "program.py")), user="root", group="root",
              mode="644")
    files.put(name=f"{COMMAND}", dest=COMMAND, src=upload_source(entry_point(None)), user="root",
              group="root", mode="755")
    # The Slurm hooks (HealthCheckProgram, Prolog, Epilog), except on a node of Kubernetes
    # alone: each node gets its own scheduler's files (issue 46). A node in no scheduler keeps
    # them: the role run alone (another project's deploy) does not know the node's Slurm.
    k8s_only = "kubernetes" in node.schedulers and "slurm" not in node.schedulers
    for mode, path in HEALTH_PROGRAMS.items():
        if not k8s_only:
            files.put(name=f"{path}", dest=path, src=upload_source(entry_point(mode)), user="root",
                      group="root", mode="755")
        else:
            files.file(name=f"{path} absent (a Kubernetes node, not Slurm's)", path=path,
                       present=False)
    files.directory(name="/etc/gpuinfra exists", path="/etc/gpuinfra", user="root",
                    group="root", mode="755")
    staged = f"{STAGE}/{Path(EXPECTATION_PATH).name}"
    checked_files(name="The node's expectation, checked by the health check itself",
                  files={EXPECTATION_PATH: expectation_text(site, node)}, stage=STAGE,
                  check=check_script(f"{COMMAND} validate {staged}", "gpuinfra-health", STAGE))


def packages(site: Site, node: NodeSpec) -> list[str]:
    """Python 3, which the check runs on (none where health_enabled is False)."""
    return ["python3"] if node.settings["health_enabled"] else []


def applies(site: Site, node: NodeSpec) -> bool:
    """Slurm workers (their slurmd runs the check) and every GPU node
    (gpuinfra.health.expectation.runs_on)."""
    return runs_on(node)


# The one declaration of where this role applies and how it is called.
ROLE = Role("health", health, applies, reads=("nvidia_driver", "fabric_manager",
                                              "gpu_sharing"), packages=packages)
apply = ROLE.apply
