"""Pure helpers of the verify suite: what a host must show, and how a failure reads.

Nothing here connects to a host or imports testinfra, so tests/unit/test_verify_expect.py can
check it without a lab.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuinfra.spec import ClusterSpec, HostInput
from gpuinfra.verdicts import Finding
from gpuinfra_deploy.run.knobs import build_spec

# One test per check family; the checks (Finding.check) each family covers.
FAMILIES: dict[str, tuple[str, ...]] = {
    "gpu-count": ("gpu-count", "gpu-model", "profile"),
    "nvlink-topology": ("nvlink-topology",),
    "p2p": ("p2p-r", "p2p-w"),
    "nvlink-links": ("nvlink-links",),
}

# What each nvidia-smi probe runs; p2p letters become the matrix mode.
PROBES: dict[str, str] = {
    "topo": "nvidia-smi topo -m",
    "p2p-r": "nvidia-smi topo -p2p r",
    "p2p-w": "nvidia-smi topo -p2p w",
    "nvlink": "nvidia-smi nvlink --status",
}

# nvidia-smi exit codes (its man page, RETURN VALUE), said the way an operator acts on them.
SMI_EXIT_CODES: dict[int, str] = {
    2: "an argument or flag is invalid for this nvidia-smi",
    3: "the operation is not supported on this GPU",
    4: "insufficient permissions",
    6: "the query was unsuccessful",
    8: "external power cables are not attached",
    9: "the NVIDIA driver is not loaded (nvidia-smi cannot talk to it)",
    10: "the kernel detected an interrupt issue with a GPU",
    12: "the NVML shared library could not be found or loaded (driver not installed?)",
    13: "the local NVML version does not implement this function",
    14: "infoROM is corrupted",
    15: "a GPU has fallen off the bus or become inaccessible",
}
_HOST_ID = re.compile(r"\[([^\]\[]+)\](?:@[^\[\]]*)?$")
NO_SMI = "nvidia-smi not found on the host: the NVIDIA driver is not installed"


# pyinfra's values of ssh_strict_host_key_checking, as the verify suite applies them.
HOST_KEY_POLICIES = {"yes": "yes", "accept-new": "accept-new", "no": "no", "off": "no"}
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


def host_key_policy(value: Any) -> str:
    """pyinfra's ``ssh_strict_host_key_checking`` (or ssh_config's StrictHostKeyChecking) as
    the suite applies it; anything else ("ask": no one to ask) is read as the strictest, "yes"."""
    return HOST_KEY_POLICIES.get(str(value).lower(), "yes")


@dataclass(frozen=True)
class SshTarget:
    """How to reach one inventory host: its pyinfra data, as pyinfra's SSH connector reads it
    (gpuinfra_verify/ssh.py resolves it through the ssh_config file, as pyinfra does).

    address: ``ssh_hostname``, else the name (the ssh_config lookup name: an alias there may
    give another HostName, a ProxyJump); host_key_policy: "yes" (known keys only),
    "accept-new" (trust on first use) or "no" (no check); known_hosts: the data's
    ``ssh_known_hosts_file`` (None: the ssh_config's UserKnownHostsFile, else
    ``~/.ssh/known_hosts``); config_file: ``ssh_config_file`` (None: ``~/.ssh/config``)."""

    name: str
    address: str
    user: str | None
    port: int | None
    key: str | None
    host_key_policy: str = "accept-new"
    known_hosts: str | None = None
    config_file: str | None = None
    password: str | None = None
    key_password: str | None = None
    allow_agent: bool = True
    look_for_keys: bool = True
    # ssh_paramiko_connect_kwargs: paramiko's connect() arguments over everything else
    paramiko_kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def known_hosts_path(self) -> str:
        """The data's known_hosts file, else pyinfra's default (ssh.py also reads the
        ssh_config's UserKnownHostsFile when the data names none)."""
        return str(Path(self.known_hosts or DEFAULT_KNOWN_HOSTS).expanduser())


@dataclass(frozen=True)
class SiteUnderTest:
    """The inventory under test: the cluster spec and each host's merged pyinfra data."""

    inventory: str
    spec: ClusterSpec
    data: Mapping[str, Mapping[str, Any]]

    def target(self, name: str) -> SshTarget:
        return ssh_target(name, self.data[name])


def site_from_json(inventory: str, text: str) -> SiteUnderTest:
    """The :class:`SiteUnderTest` from `python -m gpuinfra_verify.inventory_json` output.

    Raises gpuinfra.spec.SpecInvalid when the spec is invalid.
    """
    raw = json.loads(text)
    hosts = [HostInput(h["name"], tuple(h["groups"]), h["data"]) for h in raw["hosts"]]
    spec = build_spec(hosts, raw["duplicates"])
    return SiteUnderTest(inventory, spec, {h.name: h.data for h in hosts})


def ssh_target(name: str, data: Mapping[str, Any]) -> SshTarget:
    """pyinfra's ssh_* data keys (pyinfra/connectors/ssh.py ``connector_data_meta``, with its
    defaults) as an :class:`SshTarget`; the address defaults to the name. An unknown host-key
    policy is read as the strictest, "yes"."""
    port = data.get("ssh_port")
    extra = data.get("ssh_paramiko_connect_kwargs") or {}
    return SshTarget(
        name=name,
        address=str(data.get("ssh_hostname") or name),
        user=data.get("ssh_user") or None,
        port=int(port) if port else None,
        key=data.get("ssh_key") or None,
        host_key_policy=host_key_policy(data.get("ssh_strict_host_key_checking", "accept-new")),
        known_hosts=str(data["ssh_known_hosts_file"]) if data.get("ssh_known_hosts_file")
        else None,
        config_file=str(data["ssh_config_file"]) if data.get("ssh_config_file") else None,
        password=data.get("ssh_password") or None,
        key_password=data.get("ssh_key_password") or None,
        allow_agent=bool(data.get("ssh_allow_agent", True)),
        look_for_keys=bool(data.get("ssh_look_for_keys", True)),
        paramiko_kwargs=tuple(sorted(dict(extra).items())),
    )


def etc_hosts(text: str) -> dict[str, set[str]]:
    """/etc/hosts as name -> addresses (comments and blank lines ignored)."""
    names: dict[str, set[str]] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        for name in fields[1:]:
            names.setdefault(name, set()).add(fields[0])
    return names


def missing_hosts_entries(expected: Mapping[str, str], text: str) -> list[str]:
    """``name -> address`` entries of ``expected`` that /etc/hosts ``text`` lacks."""
    seen = etc_hosts(text)
    return [f"{address} {name}" for name, address in sorted(expected.items())
            if address not in seen.get(name, set())]


def sysctl_mismatches(expected: Mapping[str, Any], observed: Mapping[str, str]) -> list[str]:
    """``key: expected X, observed Y`` for each sysctl whose `sysctl -n` value differs.

    Values compare word by word, so ``4096 87380 6291456`` matches tabs or spaces.
    """
    return [
        f"{key}: expected {value}, observed {observed.get(key) or 'nothing'}"
        for key, value in expected.items()
        if str(observed.get(key, "")).split() != str(value).split()
    ]


def smi_failure(command: str, rc: int, output: str) -> str:
    """Why a nvidia-smi probe failed, for a test failure message."""
    if rc == 127:
        return NO_SMI
    meaning = SMI_EXIT_CODES.get(rc, "unknown exit code")
    first = next((line.strip() for line in output.splitlines() if line.strip()), "no output")
    return f"`{command}` exited {rc}: {meaning}\n  nvidia-smi said: {first}"


def family(findings: Sequence[Finding], name: str) -> list[Finding]:
    """The findings of one check family (see :data:`FAMILIES`)."""
    return [f for f in findings if f.check in FAMILIES[name]]


def format_finding(finding: Finding) -> str:
    """``check subject: expected X, observed Y`` then its cause and fix, indented."""
    text = f"{finding.check} {finding.subject}: expected {finding.expected}, " \
           f"observed {finding.observed}"
    if finding.cause:
        text += f"\n  cause: {finding.cause}"
    if finding.fix:
        text += f"\n  fix: {finding.fix}"
    return text


def format_failures(node: str, findings: Sequence[Finding]) -> str:
    """Every failed finding of ``findings`` for an assert message ('' when none failed)."""
    failed = [f for f in findings if f.failed]
    if not failed:
        return ""
    return f"{node}: {len(failed)} failed check(s)\n" + "\n".join(map(format_finding, failed))


# The id of a module's one skipped case when no host of the site is of the module's kind.
NO_HOST = "no-host-of-this-kind"


def host_of(test_id: str) -> str | None:
    """The host a test ran on, from its id: ``test_p2p[lab-worker3]`` -> ``lab-worker3``."""
    match = _HOST_ID.search(test_id)
    return match.group(1) if match else None


# --- the driver suite (test_driver.py) -----------------------------------------------------


def problem(node: str, what: str, cause: str, fix: str) -> str:
    """A failure message in the suite's form: what was seen, then its cause and fix."""
    return f"{node}: {what}\n  cause: {cause}\n  fix: {fix}"


def reboot_pending_message(node: str, reasons: Sequence[str]) -> str:
    """Why a host with the reboot marker is not judged on its driver yet."""
    return problem(
        node, f"reboot pending: {'; '.join(reasons)}",
        "the deploy changed something that takes effect only at boot (the driver is not "
        "loaded, or runs with the old settings, until then)",
        "reboot the host (or deploy with reboot_policy = 'if-needed'), then verify again",
    )


def driver_version_problems(versions: Sequence[str], branch: str) -> list[str]:
    """``GPUn: driver X, not on branch B`` for each GPU whose driver is not of ``branch``."""
    return [f"GPU{i}: driver {v or 'unknown'}, expected branch {branch} ({branch}.*)"
            for i, v in enumerate(versions) if not v.startswith(f"{branch}.")]


# The driver's own source packages (dpkg's ${source:Package}): Debian's and Ubuntu's driver,
# the open kernel modules, Fabric Manager.
DRIVER_SOURCES = ("nvidia-graphics-drivers", "nvidia-open-gpu-kernel-modules", "fabric-manager",
                  "nvidia-fabricmanager")


def driver_package_problems(dpkg_lines: str, branch: str) -> list[str]:
    """``PACKAGE VERSION: not of branch B`` for each installed NVIDIA driver package of another
    branch. ``dpkg_lines``: ``dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}
    ${source:Package}\\n'`` (the source column may be absent: every package is then judged).

    A driver package is one named ``nvidia-*``/``libnvidia-*`` whose upstream version starts
    with a driver branch (three digits, 300+), built from a driver source (Debian's
    ``nvidia-graphics-drivers[-tesla-<BR>]``, Ubuntu's ``nvidia-graphics-drivers-<BR>-server``,
    the open modules, Fabric Manager): the container toolkit (1.x) is not, nor are the tools
    Debian builds from sources of their own and versions apart from the driver, which serve
    every branch: on Debian 13 a 535 worker has nvidia-modprobe 570.133.07-1 and
    nvidia-persistenced 550.163.01-1 (measured in the trixie lab; trixie has no 535 build of
    either). What the deploy installed, so it can fail where nvidia-smi is replayed."""
    wrong = []
    for line in dpkg_lines.splitlines():
        fields = line.split()
        if len(fields) < 3 or not fields[2].startswith("ii"):
            continue
        name, version = fields[0], fields[1].split(":", 1)[-1]
        if len(fields) > 3 and not fields[3].startswith(DRIVER_SOURCES):
            continue
        major = version.split(".", 1)[0]
        if not name.startswith(("nvidia-", "libnvidia-")) or not (
                major.isascii() and major.isdigit() and len(major) == 3 and int(major) >= 300):
            continue
        if major != branch:
            wrong.append(f"{name} {fields[1]}: not of branch {branch}")
    return wrong


def csv_column(text: str) -> list[str]:
    """The values of a one-field ``--format=csv,noheader`` output, one per GPU."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def device_problems(stat_lines: str, group: str, mode: str) -> list[str]:
    """``/dev/nvidia0: root:video 0666, expected group video mode 0660`` per wrong node.

    ``stat_lines``: ``stat -c '%n %U %G %a'`` output, one node a line."""
    wanted = int(mode, 8)
    out = []
    for line in stat_lines.splitlines():
        fields = line.split()
        if len(fields) != 4:
            continue
        path, user, grp, octal = fields
        if grp != group or int(octal, 8) != wanted:
            out.append(f"{path}: {user}:{grp} {int(octal, 8):04o}, expected group {group} "
                       f"mode {wanted:04o}")
    return out


def loaded_modules(proc_modules: str) -> set[str]:
    """Module names from /proc/modules, read by the parser `gpuinfra check --lsmod` uses."""
    from gpuinfra.parsers.system import parse_lsmod

    return set(parse_lsmod(proc_modules)[0].modules)


# --- units (test_common.py, test_driver.py) -------------------------------------------------


def unit_failures(units: Mapping[str, tuple[str, str]],
                  expected: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(failed units that are failures, failed units the site's lab data expects, with why).

    ``units``: gpuinfra.parsers.system.parse_unit_states of the host; ``expected``: the host's
    ``lab_expected_failures`` (only lab hosts have any: on a real node every failure counts)."""
    failed = sorted(u for u, (active, _) in units.items() if active == "failed")
    return ([u for u in failed if u not in expected],
            [f"{u}: {expected[u]}" for u in failed if u in expected])
