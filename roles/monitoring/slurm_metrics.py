"""The head of a Slurm site in the `monitoring` role: Slurm's node states every minute
(slurm_nodes.py and the library zip, a timer: the SlurmNodesDrained alert without the Slurm
exporter), and rivosinc's Slurm exporter (``monitoring_slurm_exporter``) from its release
tarball, installed only when its SHA-256 matches the spec's."""

from __future__ import annotations

import shlex
from io import BytesIO
from pathlib import Path

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.facts.files import File
from pyinfra.operations import files, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.monitoring.knobs import slurm_exporter_url
from gpuinfra.monitoring.scrape import SLURM_EXPORTER_PORT, target
from gpuinfra.monitoring.slurmnodes import PROM_NAME as SLURM_NODES_PROM
from gpuinfra.monitoring.units import slurm_exporter_unit, slurm_nodes_service, slurm_nodes_timer
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.nodecode import ZIP_NAME, node_zip, shipped
from gpuinfra_deploy.ops.checked import check_script, checked_files, upload_source
from gpuinfra_deploy.templates import text
from gpuinfra_roles.monitoring.shared import HERE, TEXTFILE_DIR, UNIT_DIR, UNIT_STAGE

# The head of a Slurm site: Slurm's node states every minute (gpuinfra.monitoring.slurmnodes).
SLURM_NODES_LIB = "/usr/local/lib/gpuinfra-slurm-nodes"
SLURM_NODES_OUT = f"{TEXTFILE_DIR}/{SLURM_NODES_PROM}"
SLURM_NODES_UNITS = ("gpuinfra-slurm-nodes.service", "gpuinfra-slurm-nodes.timer")
SLURM_EXPORTER_DIR = "/usr/local/lib/gpuinfra-slurm-exporter"
SLURM_EXPORTER_UNIT = f"{UNIT_DIR}/prometheus-slurm-exporter.service"


def slurm_node_states() -> None:
    """The head: Slurm's node states every minute (slurm_nodes.py and the library zip, a
    timer), for the SlurmNodesDrained alert without the Slurm exporter."""
    changed = [files.put(name=f"Slurm node states: {path}", dest=path, src=BytesIO(data),
                         mode="644", create_remote_dir=True)
               for path, data in slurm_nodes_files().items()]
    service, timer = SLURM_NODES_UNITS
    units = {f"{UNIT_DIR}/{service}": slurm_nodes_service(SLURM_NODES_LIB, SLURM_NODES_OUT,
                                                          TEXTFILE_DIR),
             f"{UNIT_DIR}/{timer}": slurm_nodes_timer()}
    verify = " ".join(shlex.quote(f"{UNIT_STAGE}/{unit}") for unit in SLURM_NODES_UNITS)
    installed = checked_files(
        name="Slurm node states' units, checked by systemd-analyze", files=units,
        stage=UNIT_STAGE, check=check_script(f"systemd-analyze verify {verify}", "systemd",
                                             UNIT_STAGE))
    systemd.daemon_reload(name="systemd reads the Slurm node states' units",
                          _if=installed.did_change)
    systemd.service(name="Ask Slurm for its node states every minute", service=timer,
                    running=True, enabled=True)
    systemd.service(name="Ask Slurm for its node states now (new program)", service=service,
                    running=True, _if=any_changed(installed, *changed))


def slurm_nodes_files() -> dict[str, bytes]:
    """The head's Slurm node states program as installed, with the library zip."""
    return {f"{SLURM_NODES_LIB}/slurm_nodes.py": shipped(HERE / "slurm_nodes.py"),
            f"{SLURM_NODES_LIB}/{ZIP_NAME}": node_zip()}


@operation()
def verified_binary(url: str, sha256: str, member: str, dest: str):
    """``member`` of the tarball at ``url`` installed as ``dest`` (0755), only after the
    tarball's SHA-256 equals ``sha256``; nothing is fetched when ``dest`` exists.

    + url: the release tarball
    + sha256: its SHA-256 (64 hex digits, checked by the spec gate)
    + member: the binary's name inside the tarball
    + dest: where it goes (a versioned path: a new version is a new file)
    """
    if host.get_fact(File, path=dest):
        host.noop(f"{dest} already there")
        return
    temp = f"{dest}.gpuinfra-download"
    yield StringCommand("install", "-d", "-m", "0755", str(Path(dest).parent))
    yield StringCommand("curl", "-fsSL", "-o", shlex.quote(temp), shlex.quote(url))
    yield StringCommand("echo", shlex.quote(f"{sha256}  {temp}"), "|", "sha256sum", "-c", "-",
                        "||", "{", "rm", "-f", shlex.quote(temp), ";", "exit", "1", ";", "}")
    yield StringCommand("tar", "-xzf", shlex.quote(temp), "-O", shlex.quote(member), ">",
                        shlex.quote(f"{dest}.new"), "&&", "chmod", "0755",
                        shlex.quote(f"{dest}.new"), "&&", "mv", "-f",
                        shlex.quote(f"{dest}.new"), shlex.quote(dest), "&&", "rm", "-f",
                        shlex.quote(temp))


def slurm_exporter(node: NodeSpec, exporter: dict[str, str]) -> None:
    binary = f"{SLURM_EXPORTER_DIR}/prometheus-slurm-exporter-{exporter['version']}"
    fetched = verified_binary(name=f"Slurm exporter {exporter['version']} (SHA-256 checked)",
                              url=slurm_exporter_url(exporter), sha256=exporter["sha256"],
                              member="prometheus-slurm-exporter", dest=binary)
    unit = files.put(name="The Slurm exporter's unit", dest=SLURM_EXPORTER_UNIT,
                     src=upload_source(text(slurm_exporter_unit(binary, exporter["version"],
                                                      target(node, SLURM_EXPORTER_PORT)))),
                     mode="644")
    systemd.daemon_reload(name="systemd reads the Slurm exporter's unit", _if=unit.did_change)
    systemd.service(name="Run the Slurm exporter", service="prometheus-slurm-exporter",
                    running=True, enabled=True)
    systemd.service(name="Restart the Slurm exporter (new binary or unit)",
                    service="prometheus-slurm-exporter", restarted=True,
                    _if=any_changed(fetched, unit))
