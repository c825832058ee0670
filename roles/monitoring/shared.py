"""What the `monitoring` role's parts share: where its files go on the hosts, the group of the
Prometheus daemons, their argument files and the text of a YAML file built from the spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pyinfra.operations import files

from gpuinfra.header import HEADER
from gpuinfra.monitoring.units import TEXTFILE_DIRECTORY
from gpuinfra_deploy.ops.checked import upload_source
from gpuinfra_deploy.templates import role_file

HERE = Path(__file__).resolve().parent
TEXTFILE_DIR = TEXTFILE_DIRECTORY  # Debian's and Ubuntu's default (gpuinfra.monitoring.units)
UNIT_DIR = "/etc/systemd/system"
UNIT_STAGE = "/etc/systemd/system/.gpuinfra-staged"
DAEMON_GROUP = "prometheus"  # Debian's and Ubuntu's units run every Prometheus daemon as it


def yaml_with_header(data: Any) -> str:
    """``data`` as the text of a YAML file (pyyaml, keys in their order, block style), under
    the managed-by header and a line saying it is built from the site's spec."""
    return HEADER + "# Built from the site's spec (monitoring role).\n" + yaml.safe_dump(
        data, sort_keys=False, default_flow_style=False)


def daemon_args(path: str, args: str, what: str) -> Any:
    return files.put(name=f"{what}'s arguments in {path}", dest=path,
                     src=upload_source(role_file("monitoring", "/etc/default/prometheus-daemon",
                                         args=args)), mode="644")
