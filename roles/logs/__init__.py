"""The `logs` role: every node's journal on the head, with the distribution's own tools.

Table of contents (``logs()``). The head, first: its disk checked against the cap when the
deploy is planned; the packages; the cluster's logs CA, the head's server certificate for its
cluster address and each node's client key and certificate (made there with openssl, signed
certificates judged by ``openssl verify -CAfile`` before they go in, kept; made again when the
CA or the head's address is new); the receiver, ``systemd-journal-remote`` over HTTP on the
loopback behind stunnel, which terminates TLS on the cluster address and admits only clients
whose certificate the logs CA signed (Debian 12's journal-remote cannot check clients:
gpuinfra/logs/journal.py); the hourly cap (``logs_max_use``, ``logs_retention``). Every other node:
the package, its key and certificates from the head through this machine's memory
(gpuinfra_deploy/ops/from_head.py), the uploader (``systemd-journal-upload --save-state``: it
resumes from its cursor after any interruption), restarted forever. Unit drop-ins are judged
by ``systemd-analyze verify`` before they go live; journal-remote.conf, journal-upload.conf and
stunnel's file have no checker. Daemons restart only where their files changed. Option
``logs_forward`` (every node, with or without the above): rsyslog forwards the node's own logs
to the site's syslog or Elasticsearch, its file judged by ``rsyslogd -N1`` (``_forward``). Data
keys: defaults.py; per-distribution values: :data:`DISTRO`.
"""

from __future__ import annotations

import shlex
from typing import Any

import yaml
from pyinfra import host
from pyinfra.api import FactBase, deploy
from pyinfra.operations import apt, files, server, systemd
from pyinfra.operations.util import any_changed

from gpuinfra.errors import GpuinfraError
from gpuinfra.header import HEADER
from gpuinfra.knowledge.packages import SIGNING_KEYS, PinnedPackages
from gpuinfra.knowledge.repositories import GRAFANA_KEYRING, GRAFANA_LIST, grafana_apt_line
from gpuinfra.logs.forward import (
    FORWARD_CONF,
    FORWARD_STAGE,
    SERVICE,
    check_command,
    forward_conf,
)
from gpuinfra.logs.forward import packages as forward_packages
from gpuinfra.logs.journal import (
    AGE_SCRIPT,
    AGE_UNITS,
    CA_CERT,
    CLIENT_CERT,
    CLIENT_KEY,
    DROPIN_NAME,
    HEARTBEAT_UNITS,
    NODES_DIR,
    PACKAGE,
    RECEIVER_DROPIN,
    REMOTE_CONF,
    REMOTE_DIR,
    REMOTE_SERVICE,
    REMOTE_SOCKET,
    SERVER_ADDRESS,
    SERVER_CERT,
    SERVER_KEY,
    SOCKET_DROPIN,
    TLS_DIR,
    TUNNEL_CONF,
    TUNNEL_SERVICE,
    UPLOAD_CONF,
    UPLOAD_DROPIN,
    UPLOAD_GROUP,
    UPLOAD_SERVICE,
    VACUUM_UNITS,
    age_script,
    age_service,
    age_timer,
    ca_command,
    client_command,
    disk_problem,
    heartbeat_service,
    heartbeat_timer,
    node_dir,
    receiver_dropin,
    remote_conf,
    server_command,
    socket_dropin,
    tunnel_conf,
    upload_conf,
    upload_dropin,
    uploaders,
    vacuum_service,
    vacuum_timer,
)
from gpuinfra.logs.loki import (
    ALLOY_CONFIG,
    ALLOY_SERVICE,
    ALLOY_STAGE,
    LOKI_CONFIG,
    LOKI_DATA,
    LOKI_GATE,
    LOKI_JUDGED,
    LOKI_SERVICE,
    LOKI_STAGE,
    LOKI_USER,
    PIN_FILE,
    alloy_check,
    alloy_config,
    loki_check,
    loki_config,
    loki_gate,
    loki_judged_marker,
)
from gpuinfra.monitoring.units import TEXTFILE_DIRECTORY
from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.facts.system import host_distro
from gpuinfra_deploy.ops.apt import APT_CACHE_S, apt_keyring, install_pinned, require_available
from gpuinfra_deploy.ops.boot import BootNeeds, boot_order
from gpuinfra_deploy.ops.checked import check_script, checked_files, upload_source
from gpuinfra_deploy.ops.from_head import Copy, files_from_head
from gpuinfra_deploy.ops.made_on_host import secret_files
from gpuinfra_deploy.pyinfra_patches.schedule import meeting
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import role_file, text

UNIT_DIR = "/etc/systemd/system"
VACUUM_STAGE = f"{UNIT_DIR}/.gpuinfra-staged-logs"


def unit_warning(stage: str) -> str:
    """An ERE for systemd-analyze's diagnostics about a file under ``stage``: verify exits 0
    on a setting it cannot parse ("<stage>/x.conf:3: Failed to parse service restart specifier,
    ignoring: sometimes", tried in the lab), so such a line fails the check too (diagnostics
    about other units of the host do not)."""
    return stage.replace(".", "\\.") + "/[^ ]*:[0-9]+: "

# Per-distribution values. The packages are the same on all three (systemd's source package
# has both daemons; stunnel4: Debian main, Ubuntu universe); ``units``: where the vendor units
# are (a drop-in is verified beside a copy of its unit); ``receiver``: the daemon's path in the
# vendor unit; ``limits``: journal-remote.conf knows MaxUse=/MaxFileSize= (systemd 253 and
# later: gpuinfra/logs/journal.py). Debian 12's values read from its packages (dpkg -x); Ubuntu's
# taken
# from the same Debian packaging, not read from Ubuntu's archive (unreachable here).
HEAD_PACKAGES = [PACKAGE, "openssl", "stunnel4"]
DISTRO: dict[str, dict[str, Any]] = {
    "debian-12": {"packages": [PACKAGE], "head": HEAD_PACKAGES, "limits": False,
                  "units": "/lib/systemd/system",
                  "receiver": "/lib/systemd/systemd-journal-remote"},  # systemd 252
    # systemd 257.13-1~deb13u1 (trixie main Packages, 2026-12-07); paths read from its
    # systemd-journal-remote .deb (dpkg -x): merged /usr, as Ubuntu 24.04.
    "debian-13": {"packages": [PACKAGE], "head": HEAD_PACKAGES, "limits": True,
                  "units": "/usr/lib/systemd/system",
                  "receiver": "/usr/lib/systemd/systemd-journal-remote"},
    "ubuntu-22.04": {"packages": [PACKAGE], "head": HEAD_PACKAGES, "limits": False,
                     "units": "/lib/systemd/system",
                     "receiver": "/lib/systemd/systemd-journal-remote"},  # systemd 249
    "ubuntu-24.04": {"packages": [PACKAGE], "head": HEAD_PACKAGES, "limits": True,
                     "units": "/usr/lib/systemd/system",
                     "receiver": "/usr/lib/systemd/systemd-journal-remote"},  # systemd 255
}


class LogDiskBytes(FactBase):
    """The size in bytes of the file system that holds (or will hold) the received logs
    (``df`` of the nearest existing folder of /var/log/journal/remote), as an int."""

    def command(self) -> str:
        return (f"p={shlex.quote(REMOTE_DIR)}; while [ ! -e \"$p\" ]; do p=$(dirname \"$p\"); "
                "done; df -B1 --output=size \"$p\" | tail -n 1")

    def process(self, output: list[str]) -> int:
        return int(output[-1].strip())


@deploy("logs")
def logs(site: Site, node: NodeSpec) -> None:
    data = node.settings
    if not data["logs_enabled"]:
        host.noop("central logs disabled (logs_enabled = False)")
        _forward(data["logs_forward"])
        if data["logs_loki"]:
            _loki(site, node, data)
        return
    head = site.spec.head[0]
    missing = _unaddressed(site)
    if missing:
        raise GpuinfraError(f"logs: no cluster-network address for {', '.join(missing)}: the "
                            "head's receiver listens there and its certificate names it. Set "
                            "node_address (or an IP ssh_hostname), or logs_enabled = False")
    distro = DISTRO[host_distro()]
    renewed = False
    if node.is_head:
        # First on the head: every node copies its key and certificates from there.
        _fits_the_disk(site, data)
        apt.packages(name="Install systemd-journal-remote, openssl and stunnel",
                     packages=_central(node), no_recommends=True, update=True,
                     cache_time=APT_CACHE_S)
        renewed = _credentials(site, head)
    else:
        apt.packages(name="Install systemd-journal-remote (its uploader)",
                     packages=_central(node), no_recommends=True, update=True,
                     cache_time=APT_CACHE_S)
    # One operation of every host, a meeting (gpuinfra_deploy/pyinfra_patches/schedule.py):
    # it runs on a node once the head has made the credentials above, so each node's copy
    # below finds them.
    with meeting():
        files.directory(name=f"{TLS_DIR}: root, public certificates (0755)", path=TLS_DIR,
                        user="root", group="root", mode="755")
    if node.is_head:
        _receiver(head, data, distro, renewed)
    else:
        uploader = _uploader(site, node, head, distro)
    # Shared again: the nodes start their uploaders only once the head's receiver runs (an
    # uploader started before it fails and waits 10 s: a second deploy would start it again).
    with meeting():
        files.file(name=f"{CA_CERT}: the logs CA's certificate, public (0644)", path=CA_CERT,
                   user="root", group="root", mode="644")
    if not node.is_head:
        systemd.service(name="Send this node's journal to the head", service=UPLOAD_SERVICE,
                        running=True, enabled=True)
        systemd.service(name="Restart the uploader on its new configuration or key",
                        service=UPLOAD_SERVICE, restarted=True, _if=uploader)
    if data.get("monitoring_enabled"):
        _staleness(site, node)
    _forward(data["logs_forward"])
    if data["logs_loki"]:
        _loki(site, node, data)


def _forward(targets: list[dict[str, Any]]) -> None:
    """Option ``logs_forward``: this node's logs to the site's syslog or Elasticsearch with
    rsyslog (gpuinfra/logs/forward.py), the file judged by ``rsyslogd -N1`` before it goes
    live, rsyslog restarted only when it changed. No targets: the file of an earlier deploy
    removed (and rsyslog restarted without it); nothing else touched."""
    if not targets:
        removed = files.file(name=f"{FORWARD_CONF}: no forwarding (logs_forward is empty)",
                             path=FORWARD_CONF, present=False)
        server.shell(name="Restart rsyslog without the forwarding file",
                     commands=[f"systemctl try-restart {SERVICE}"], _if=removed.did_change)
        return
    apt.packages(name="Install rsyslog (forwarding to the site's log store)",
                 packages=forward_packages(targets), no_recommends=True, update=True,
                 cache_time=APT_CACHE_S)
    conf = checked_files(
        name=f"{FORWARD_CONF}: the site's log targets, checked by rsyslogd -N1",
        files={FORWARD_CONF: forward_conf(targets)}, stage=FORWARD_STAGE,
        check=check_script(check_command(FORWARD_STAGE), "rsyslogd -N1", FORWARD_STAGE))
    systemd.service(name="Run rsyslog (it forwards this node's logs)", service=SERVICE,
                    running=True, enabled=True)
    systemd.service(name="Restart rsyslog on its new forwarding file", service=SERVICE,
                    restarted=True, _if=conf.did_change)


def loki_packages(data: Any, head: bool) -> PinnedPackages:
    """Alloy on every node, Loki too on the head, at the knobs' exact versions."""
    versions = {"alloy": data["logs_alloy_version"]}
    if head:
        versions["loki"] = data["logs_loki_version"]
    return PinnedPackages(packages=versions, pins=dict(versions))


def _loki(site: Site, node: NodeSpec, data: Any) -> None:
    """Option ``logs_loki`` (gpuinfra/logs/loki.py): Grafana's repository, then on the head
    Loki (its file judged by ``loki -verify-config``), on every node Alloy reading the journal
    into it (its file judged by ``alloy validate``); each daemon restarted only when its file
    changed. Grafana's data source and dashboard are the monitoring role's."""
    head = site.spec.head[0]
    if head.address is None:  # refused at the gate; a plan without it stops here
        raise GpuinfraError("logs_loki: the head has no cluster-network address for Loki to "
                            "listen on. Set its node_address, or logs_loki = False")
    repo = data["monitoring_grafana_repo_url"]
    keyring = apt_keyring(name="Add Grafana's signing key (Loki, Alloy)",
                          url=f"{repo.rstrip('/')}/gpg.key", path=GRAFANA_KEYRING,
                          fingerprint=SIGNING_KEYS["grafana"])
    listed = files.put(name="List Grafana's repository in apt sources (Loki, Alloy)",
                       dest=GRAFANA_LIST, src=upload_source(text(grafana_apt_line(repo))),
                       mode="644")
    apt.update(name="Refresh apt after adding Grafana's repository (Loki, Alloy)",
               _if=any_changed(keyring, listed))
    pinned = loki_packages(data, node.is_head)
    require_available("Loki and Alloy", pinned, "logs_loki_version / logs_alloy_version")
    if node.is_head:  # before the install: the package starts Loki on its own default file
        gate = files.put(name=f"{LOKI_GATE}: Loki starts only on its judged file",
                         dest=LOKI_GATE, src=upload_source(text(loki_gate())), mode="644")
        systemd.daemon_reload(name="systemd reads Loki's start gate", _if=gate.did_change)
    # One name on every host: pyinfra merges the same call's operations across hosts.
    installed = install_pinned("Alloy, and Loki on the head", pinned, PIN_FILE)
    port = data["logs_loki_port"]
    if node.is_head:
        files.directory(name=f"{LOKI_DATA}: Loki's chunks and index ({LOKI_USER}, 0750)",
                        path=LOKI_DATA, user=LOKI_USER, mode="750")
        conf = checked_files(
            name=f"{LOKI_CONFIG}: Loki on the head's cluster address, checked by loki "
                 "-verify-config",
            files={LOKI_CONFIG: HEADER + "# Built from the site's spec (logs role, "
                                "logs_loki).\n" + yaml.safe_dump(
                loki_config(str(head.address), port, data["logs_retention"]),
                sort_keys=False, default_flow_style=False)},
            stage=LOKI_STAGE,
            check=check_script(loki_check(LOKI_STAGE), "loki -verify-config", LOKI_STAGE))
        files.put(name=f"{LOKI_JUDGED}: Loki's judged file is live (its start gate opens)",
                  dest=LOKI_JUDGED, src=upload_source(text(loki_judged_marker())), mode="644")
        boot_order([BootNeeds(LOKI_SERVICE, "the head's cluster address, to listen on",
                              ("network-online.target",), ("network-online.target",))])
        systemd.service(name="Run Loki (every node's journal, for Grafana)",
                        service=LOKI_SERVICE, running=True, enabled=True)
        systemd.service(name="Restart Loki on its new configuration or package",
                        service=LOKI_SERVICE, restarted=True,
                        _if=any_changed(conf, installed))
    alloy = checked_files(
        name=f"{ALLOY_CONFIG}: this node's journal to the head's Loki, checked by alloy "
             "validate",
        files={ALLOY_CONFIG: alloy_config(node.short_name, str(head.address), port)},
        stage=ALLOY_STAGE,
        check=check_script(alloy_check(ALLOY_STAGE), "alloy validate", ALLOY_STAGE))
    systemd.service(name="Run Alloy (this node's journal to Loki)", service=ALLOY_SERVICE,
                    running=True, enabled=True)
    systemd.service(name="Restart Alloy on its new configuration or package",
                    service=ALLOY_SERVICE, restarted=True, _if=any_changed(alloy, installed))


def _fits_the_disk(site: Site, data: Any) -> None:
    size = host.get_fact(LogDiskBytes)
    if size is None:
        raise GpuinfraError(f"logs: cannot read the size of the file system of {REMOTE_DIR} "
                            "on the head (df)")
    problem = disk_problem(size, data["logs_max_use"], len(uploaders(site.spec.nodes)))
    if problem:
        raise GpuinfraError(f"logs: {problem}")


def _credentials(site: Site, head: NodeSpec) -> bool:
    """On the head: the logs CA, the head's server pair, each node's client pair (made once,
    kept). True when this run makes the CA or the server pair again."""
    files.directory(name=f"{NODES_DIR}: root only (0700)", path=NODES_DIR, user="root",
                    group="root", mode="700")
    ca = secret_files(name="The logs CA's key and certificate, made on the head",
                      paths=[f"{TLS_DIR}/ca.key", CA_CERT], what="the logs CA",
                      command=ca_command(site.spec.name))
    # The address the server certificate names: a new one makes a new certificate.
    address = files.put(name="The address of the receiver's certificate",
                        dest=SERVER_ADDRESS,
                        src=upload_source(role_file("logs", SERVER_ADDRESS,
                                               address=str(head.address))),
                        mode="644")
    pair = secret_files(name="The receiver's key and certificate, signed by the logs CA",
                        paths=[SERVER_KEY, SERVER_CERT], what="the receiver's key",
                        command=server_command(head.short_name, str(head.address)),
                        refresh=ca.will_change or address.will_change)
    for key in (f"{TLS_DIR}/ca.key", SERVER_KEY):
        files.file(name=f"{key}: root only (0600)", path=key, user="root", group="root",
                   mode="600")
    # host.loop: each node's two operations told apart by the loop's position. Without it,
    # pyinfra told the Nth node's apart from the first's by a suffix per earlier node
    # ("<hash>-0-1-...-N", each looked up in the head's list of operations): cubic in the
    # nodes, hours for 10,000 (bench/plan_scale.py).
    for other in host.loop(uploaders(site.spec.nodes)):
        folder = node_dir(other.short_name)
        files.directory(name=f"{folder}: root only (0700)", path=folder, user="root",
                        group="root", mode="700")
        secret_files(name=f"{other.short_name}: its log client key and certificate, signed on "
                          "the head",
                     paths=[f"{folder}/client.key", f"{folder}/client.crt"],
                     what=f"{other.short_name}'s log client key",
                     command=client_command(other.short_name), refresh=ca.will_change)
    return bool(ca.will_change or pair.will_change)


def dropin_check(stage: str, unit: str, units_dir: str) -> str:
    """systemd-analyze verify of ``unit`` (the vendor's file) with the staged drop-in, both
    copied into a folder of the private stage (the drop-in's live folder is not read)."""
    q = shlex.quote
    probe = f"{stage}/verify"
    return check_script(
        f"rm -rf {q(probe)} && mkdir -p {q(f'{probe}/{unit}.d')} && "
        f"cp {q(f'{units_dir}/{unit}')} {q(probe)}/ && "
        f"cp {q(f'{stage}/{DROPIN_NAME}')} {q(f'{probe}/{unit}.d')}/ && "
        f"systemd-analyze verify --man=no {q(f'{probe}/{unit}')}", "systemd-analyze", stage,
        fail_pattern=unit_warning(stage))


def _dropin(path: str, text: str, unit: str, distro: dict[str, Any]) -> Any:
    stage = f"{path.rsplit('/', 1)[0]}/.gpuinfra-staged"
    return checked_files(name=f"{unit}: gpuinfra's drop-in, checked by systemd-analyze",
                         files={path: text}, stage=stage,
                         check=dropin_check(stage, unit, distro["units"]))


def _receiver(head: NodeSpec, data: Any, distro: dict[str, Any], renewed: bool) -> None:
    port = data["logs_port"]
    conf = files.put(name=f"{REMOTE_CONF}: host split (and the cap where journal-remote has it)",
                     dest=REMOTE_CONF, src=upload_source(text(remote_conf(distro["limits"],
                                                                data["logs_max_use"]))),
                     mode="644", create_remote_dir=True)
    socket = _dropin(SOCKET_DROPIN, socket_dropin(port), REMOTE_SOCKET, distro)
    http = _dropin(RECEIVER_DROPIN, receiver_dropin(distro["receiver"]), REMOTE_SERVICE, distro)
    tunnel = files.put(name=f"{TUNNEL_CONF}: TLS on the cluster address, clients of the logs "
                            "CA only", dest=TUNNEL_CONF,
                       src=upload_source(text(tunnel_conf(str(head.address), port))),
                       mode="644")
    service, timer = VACUUM_UNITS
    vacuum = checked_files(
        name="The central logs' cap (hourly vacuum), checked by systemd-analyze",
        files={f"{UNIT_DIR}/{service}": vacuum_service(data["logs_max_use"],
                                                       data["logs_retention"]),
               f"{UNIT_DIR}/{timer}": vacuum_timer()},
        stage=VACUUM_STAGE,
        check=check_script("systemd-analyze verify " + " ".join(
            shlex.quote(f"{VACUUM_STAGE}/{unit}") for unit in VACUUM_UNITS),
            "systemd-analyze", VACUUM_STAGE, fail_pattern=unit_warning(VACUUM_STAGE)))
    boot_order([BootNeeds(TUNNEL_SERVICE, "the head's cluster address, to listen on",
                          ("network-online.target",), ("network-online.target",))])
    systemd.daemon_reload(name="systemd reads the receiver's units",
                          _if=any_changed(socket, http, vacuum))
    systemd.service(name="Receive the nodes' logs on the loopback (socket-activated)",
                    service=REMOTE_SOCKET, running=True, enabled=True)
    # The socket holds the listening address; the running receiver holds its arguments.
    server.shell(name="Restart the receiver on its new address or configuration",
                 commands=[f"systemctl stop {REMOTE_SERVICE} {REMOTE_SOCKET} && "
                           f"systemctl start {REMOTE_SOCKET}"],
                 _if=any_changed(conf, socket, http))
    systemd.service(name="stunnel: TLS for the nodes' logs", service=TUNNEL_SERVICE,
                    running=True, enabled=True)
    systemd.service(name="Cap the central logs every hour", service=timer, running=True,
                    enabled=True)
    server.shell(name="Restart stunnel on its new configuration or key",
                 commands=[f"systemctl restart {TUNNEL_SERVICE}"],
                 _if=lambda: bool(renewed) or tunnel.did_change())


def _uploader(site: Site, node: NodeSpec, head: NodeSpec, distro: dict[str, Any]) -> Any:
    """The uploader's files; the condition "any of them changed" (it is started later, once
    the head's receiver runs)."""
    server.group(name=f"Group {UPLOAD_GROUP} (the uploader reads its key)",
                 group=UPLOAD_GROUP, system=True)
    folder = node_dir(node.short_name)
    copied = files_from_head(
        name="This node's log client key and certificates from the head",
        head=site.host(head.name),
        copies=[Copy(CA_CERT, CA_CERT, "root", "0644"),
                Copy(f"{folder}/client.crt", CLIENT_CERT, "root", "0644"),
                Copy(f"{folder}/client.key", CLIENT_KEY, UPLOAD_GROUP, "0640")])
    conf = files.put(name=f"{UPLOAD_CONF}: the head's receiver, this node's certificate",
                     dest=UPLOAD_CONF, src=upload_source(text(upload_conf(str(head.address),
                                                                node.settings["logs_port"]))),
                     mode="644", create_remote_dir=True)
    dropin = _dropin(UPLOAD_DROPIN, upload_dropin(), UPLOAD_SERVICE, distro)
    systemd.daemon_reload(name="systemd reads the uploader's drop-in", _if=dropin.did_change)
    return any_changed(copied, conf, dropin)


def _timer(name: str, units: dict[str, str]) -> None:
    """Oneshot service and its timer in /etc/systemd/system, judged by systemd-analyze."""
    stage = f"{UNIT_DIR}/.gpuinfra-staged-logs-{name}"
    installed = checked_files(
        name=f"{', '.join(units)}, checked by systemd-analyze",
        files={f"{UNIT_DIR}/{unit}": text for unit, text in units.items()}, stage=stage,
        check=check_script("systemd-analyze verify " + " ".join(
            shlex.quote(f"{stage}/{unit}") for unit in units), "systemd-analyze", stage,
            fail_pattern=unit_warning(stage)))
    systemd.daemon_reload(name=f"systemd reads {', '.join(units)}", _if=installed.did_change)
    systemd.service(name=f"Run {list(units)[1]}", service=list(units)[1], running=True,
                    enabled=True)


def _staleness(site: Site, node: NodeSpec) -> None:
    """What the NodeLogsStale alert reads (gpuinfra.monitoring.alerts): a heartbeat in each
    node's journal, and on the head each node's newest entry there, for node_exporter."""
    if not node.is_head:
        service, timer = HEARTBEAT_UNITS
        _timer("heartbeat", {service: heartbeat_service(), timer: heartbeat_timer()})
        return
    names = [n.short_name for n in uploaders(site.spec.nodes)]
    files.put(name=f"{AGE_SCRIPT}: each node's newest journal entry, for Prometheus",
              dest=AGE_SCRIPT, src=upload_source(text(age_script(names, TEXTFILE_DIRECTORY))),
              mode="755", create_remote_dir=True)
    files.directory(name=f"{TEXTFILE_DIRECTORY}: node_exporter's textfile directory",
                    path=TEXTFILE_DIRECTORY, present=True)
    service, timer = AGE_UNITS
    _timer("age", {service: age_service(TEXTFILE_DIRECTORY), timer: age_timer()})


def _unaddressed(site: Site) -> list[str]:
    """The head and uploaders without a cluster-network address (refused at the gate), found
    once per run: every host asks, and each look is at every node."""
    return site.once("logs: unaddressed", lambda: [
        n.name for n in (site.spec.head[0], *uploaders(site.spec.nodes)) if n.address is None])


def _central(node: NodeSpec) -> list[str]:
    """The central logs' packages: the receiver's, its TLS tools and tunnel on the head,
    the uploader on the others."""
    return list(DISTRO[host_distro()]["head" if node.is_head else "packages"])


def packages(site: Site, node: NodeSpec) -> list[str]:
    """The distribution's packages of the central logs and of the forwarding (rsyslog and
    its modules), as the role installs them; Loki and Alloy are pinned from Grafana's
    repository, installed by the role."""
    data = node.settings
    central = _central(node) if data["logs_enabled"] and not _unaddressed(site) else []
    targets = data["logs_forward"]
    return [*central, *(forward_packages(targets) if targets else [])]


def applies(site: Site, node: NodeSpec) -> bool:
    """Every host of a site with a head (the role itself says where logs_enabled is False)."""
    return bool(site.spec.head)


# The one declaration of where this role applies and how it is called: deploy.py, the entry
# file beside this one and another project's deploy all run ``ROLE.apply``.
# Other roles' knobs it reads: monitoring's (monitoring_enabled: the NodeLogsStale metric).
ROLE = Role("logs", logs, applies, reads=("monitoring",), packages=packages)
apply = ROLE.apply
