"""Central logs: every node's journal on the head, with systemd's own tools (the logs role).

Pure functions: the files the role writes, as data (:class:`gpuinfra.text.FileText`: the
units and drop-ins from ``systemd/unit.j2``, stunnel's file and the age script from the role's
templates in roles/logs/templates), the size arithmetic of the head's disk check, and the
one-line query an operator runs on the head.

What runs where (Debian 12's package ``systemd-journal-remote`` 252.39, read with ``dpkg -x``;
Ubuntu 22.04 and 24.04 ship the same package): the head runs ``systemd-journal-remote``, whose
vendor unit is socket-activated (``systemd-journal-remote.socket``, ``ListenStream=19532``),
runs as the static user ``systemd-journal-remote`` (``usr/lib/sysusers.d/systemd-remote.conf``)
and writes under ``/var/log/journal/remote/`` (``--output=``, ``LogsDirectory=journal/remote``).
Every other node runs ``systemd-journal-upload`` (``DynamicUser=yes``, ``--save-state``: its
cursor in ``/var/lib/systemd/journal-upload/state``, ``StateDirectory=``), which sends the
node's journal over HTTPS and resumes from that cursor after any interruption.

TLS both ways, the client's checked by stunnel. Debian 12's journal-remote cannot check a
client certificate: its systemd is built without GnuTLS (``systemd-journal-remote --version``:
``-GNUTLS``; it logs "Certificate checking disabled." at start and accepted an upload from a
throwaway self-signed certificate, and from none, in the lab; systemd issue #4092). So the head
terminates TLS with stunnel (Debian's ``stunnel4``, its ``stunnel@.service`` template): on the
head's cluster address it requires a client certificate signed by the cluster's logs CA
(``verifyChain = yes``, which implies ``requireCert = yes``: stunnel4(8)) and forwards to
journal-remote, which listens over plain HTTP on the head's loopback only (the vendor socket
moved to ``127.0.0.1``, ``--listen-http=-3``). Every certificate is signed by that CA, made on
the head (its key never leaves it); the uploader checks the head's certificate against it and
the head's address in it. Since every upload reaches journal-remote from 127.0.0.1, its host
split writes them all to ``remote-127.0.0.1.journal``; each entry keeps its node's
``_HOSTNAME``, which the query selects on.

Retention and disk cap. journal-remote.conf(5) of systemd 252 (Debian 12) knows only
``Seal=``, ``SplitMode=``, ``ServerKeyFile=``, ``ServerCertificateFile=``,
``TrustedCertificateFile=`` (man page of the package, read with ``man -l``): no size limit.
``MaxUse=``, ``KeepFree=``, ``MaxFileSize=``, ``MaxFiles=`` came with systemd 253 (systemd PR
#25076, "vacuum journal remote"): Ubuntu 24.04's 255 has them, Ubuntu 22.04's 249 does not. So
the cap is enforced the same way everywhere by a timer on the head running
``journalctl --directory=... --vacuum-size= --vacuum-time=`` (journalctl(1): vacuuming another
directory is allowed since systemd 244, PR #13924), and also by journal-remote itself
(``MaxUse=``, ``MaxFileSize=``) where it knows the keys. Vacuuming removes archived files only:
each node's active file stays, which journal-remote rotates at ``MaxFileSize`` (its default,
journald's rule, 128 MiB at most: systemd issue #5242), so the disk check counts one such file
per node beside the cap.

No checker exists for journal-remote.conf, journal-upload.conf or stunnel's file (none of the
three daemons has a ``--check`` mode; a bad key is only reported at start): the role writes
them from data here, and judges the unit drop-ins with ``systemd-analyze verify`` and the
certificates with ``openssl verify -CAfile``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from gpuinfra.errors import GpuinfraError
from gpuinfra.spec.model import NodeSpec
from gpuinfra.text import FileText
from gpuinfra.units import unit_file

REMOTE_DIR = "/var/log/journal/remote"  # the vendor unit's --output= (LogsDirectory=)
UPLOAD_STATE = "/var/lib/systemd/journal-upload/state"  # --save-state's default file
PACKAGE = "systemd-journal-remote"  # both daemons
REMOTE_SERVICE = "systemd-journal-remote.service"
TUNNEL_SERVICE = "stunnel@gpuinfra-logs.service"  # Debian's template: /etc/stunnel/<i>.conf
TUNNEL_CONF = "/etc/stunnel/gpuinfra-logs.conf"
TUNNEL_USER = "stunnel4"  # the package's sysusers.d: stunnel drops root for it after start
LOOPBACK = "127.0.0.1"
REMOTE_SOCKET = "systemd-journal-remote.socket"
UPLOAD_SERVICE = "systemd-journal-upload.service"

# On every host: the role's TLS files.
TLS_DIR = "/etc/gpuinfra/logs"  # root 0755 (public certificates; keys 0600/0640 inside)
CA_CERT = f"{TLS_DIR}/ca.crt"  # 0644: both sides trust it
# On the head only:
CA_KEY = f"{TLS_DIR}/ca.key"  # root 0600: signs the head's and the nodes' certificates
SERVER_KEY = f"{TLS_DIR}/server.key"  # root 0600: stunnel reads it as root, at start
SERVER_CERT = f"{TLS_DIR}/server.crt"  # 0644
SERVER_ADDRESS = f"{TLS_DIR}/server.address"  # 0644: the address SERVER_CERT names
NODES_DIR = f"{TLS_DIR}/nodes"  # root 0700: each node's key and certificate, made here
# On each uploading node (copied from the head through memory):
CLIENT_KEY = f"{TLS_DIR}/client.key"  # root:gpuinfra-logs-upload 0640
CLIENT_CERT = f"{TLS_DIR}/client.crt"  # 0644
# The uploader runs as a dynamic user (the vendor unit's DynamicUser=yes): it reads its key
# through this static group, which only its unit gets (SupplementaryGroups=). Not through
# LoadCredential=: in the lab's containers systemd hands the dynamic user an empty, root-only
# credentials directory (tried: "Permission denied" on $CREDENTIALS_DIRECTORY).
UPLOAD_GROUP = "gpuinfra-logs-upload"
CERT_DAYS = 3650

REMOTE_CONF = "/etc/systemd/journal-remote.conf.d/gpuinfra.conf"
UPLOAD_CONF = "/etc/systemd/journal-upload.conf.d/gpuinfra.conf"
DROPIN_NAME = "gpuinfra-logs.conf"
SOCKET_DROPIN = f"/etc/systemd/system/{REMOTE_SOCKET}.d/{DROPIN_NAME}"
RECEIVER_DROPIN = f"/etc/systemd/system/{REMOTE_SERVICE}.d/{DROPIN_NAME}"
UPLOAD_DROPIN = f"/etc/systemd/system/{UPLOAD_SERVICE}.d/{DROPIN_NAME}"
VACUUM_UNITS = ("gpuinfra-logs-vacuum.service", "gpuinfra-logs-vacuum.timer")

# journal-remote's active file per node: journald's largest default file (systemd issue #5242:
# "rotated every 128MB"), what one node may hold beside the cap.
ACTIVE_FILE_BYTES = 128 * 1024 ** 2
# What the head keeps free beside the logs: journald's own default, SystemKeepFree= 15% of the
# file system (journald.conf(5)).
KEEP_FREE_PERCENT = 15
UPLOAD_RESTART_SEC = 10
DEFAULT_PORT = 19532  # the vendor socket's own (systemd-journal-remote.socket)

# journald.conf(5) sizes: "the usual K, M, G, T, P, E suffixes (to the base of 1024)".
SIZE = r"[1-9][0-9]{0,5}[KMGT]"
_UNITS = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}
# journalctl --vacuum-time= (systemd.time(5) spans): hours, days or weeks, no ambiguity.
RETENTION = r"[1-9][0-9]{0,4}(h|d|w)"
_SPANS = {"h": "h", "d": "days", "w": "weeks"}


def size_bytes(size: str) -> int:
    """``"4G"`` -> 4294967296 (journald's sizes, base 1024)."""
    if not isinstance(size, str) or not re.fullmatch(SIZE, size):
        raise GpuinfraError(f"not a size like 4G or 512M: {size!r}")
    return int(size[:-1]) * _UNITS[size[-1]]


def vacuum_time(retention: str) -> str:
    """``"30d"`` -> ``"30days"`` (journalctl --vacuum-time= reads ``d`` as days too, spelt out
    here so a reader of the unit does not wonder)."""
    if not isinstance(retention, str) or not re.fullmatch(RETENTION, retention):
        raise GpuinfraError(f"not a time like 30d, 12h or 8w: {retention!r}")
    return retention[:-1] + _SPANS[retention[-1]]


def disk_problem(filesystem_bytes: int, max_use: str, nodes: int) -> str | None:
    """Why the logs' cap does not fit the head's file system holding :data:`REMOTE_DIR`
    (None: it fits): the cap plus one active file per uploading node must leave
    :data:`KEEP_FREE_PERCENT` of it free."""
    need = size_bytes(max_use) + nodes * ACTIVE_FILE_BYTES
    room = filesystem_bytes * (100 - KEEP_FREE_PERCENT) // 100
    if need <= room:
        return None
    gib = 1024 ** 3
    return (f"logs_max_use = {max_use!r} does not fit the head's disk: the file system holding "
            f"{REMOTE_DIR} is {filesystem_bytes / gib:.1f} GiB, and the cap plus one active "
            f"journal file per uploading node ({nodes} x 128 MiB) needs {need / gib:.1f} GiB "
            f"while {KEEP_FREE_PERCENT}% must stay free ({room / gib:.1f} GiB usable). Set "
            "logs_max_use smaller, or give the head's /var/log more room")


def remote_conf(limits: bool, max_use: str) -> str:
    """/etc/systemd/journal-remote.conf.d/gpuinfra.conf: the size keys where journal-remote
    knows them (``limits``: systemd 253 and later); the host split, its default, said."""
    lines: list[tuple[str, str | None]] = [("SplitMode", "host")]
    if limits:
        lines += [("MaxUse", max_use), ("MaxFileSize", "128M")]
    return unit_file({"Remote": lines}, about=(
        "journal-remote.conf(5). No checker exists for this file: systemd-journal-remote has no\n"
        "--check mode. Size keys only on systemd 253 and later (see gpuinfra/logs/journal.py)."))


def socket_dropin(port: int) -> str:
    """The receiver's socket on the head's loopback only (stunnel in front of it checks the
    clients); the vendor socket listens on every address."""
    return unit_file({"Socket": [
        ("#", "Replaces the vendor's ListenStream=19532 (every address)."),
        ("ListenStream", ""), ("ListenStream", f"{LOOPBACK}:{int(port)}")]},
        about="The logs receiver listens on the loopback only: stunnel terminates TLS.")


def receiver_dropin(binary: str) -> str:
    """journal-remote over plain HTTP on the socket (the vendor's ``--listen-https=-3`` needs
    the TLS it cannot check: see the module's docstring)."""
    return unit_file({"Service": [
        ("ExecStart", ""),
        ("ExecStart", f"{binary} --listen-http=-3 --output={REMOTE_DIR}/")]},
        about="Central logs (gpuinfra_roles/logs): HTTP on the loopback, behind stunnel.")


def tunnel_conf(address: str, port: int) -> FileText:
    """/etc/stunnel/gpuinfra-logs.conf (stunnel4(8), template
    ``logs/etc/stunnel/gpuinfra-logs.conf.j2``): TLS on the head's cluster address, a client
    certificate signed by the logs CA required, forwarded to journal-remote on the loopback.
    stunnel has no checker either (it reports a bad file when it starts)."""
    accept = f"accept = {address}:{int(port)}"
    if "\n" in accept or "\r" in accept:
        raise GpuinfraError(f"newline in stunnel's configuration: {accept!r}")
    return FileText("logs/etc/stunnel/gpuinfra-logs.conf.j2", {
        "address": address, "port": int(port), "loopback": LOOPBACK, "user": TUNNEL_USER,
        "cert": SERVER_CERT, "key": SERVER_KEY, "ca": CA_CERT})


def upload_url(address: str, port: int) -> str:
    return f"https://{address}:{int(port)}"


def upload_conf(address: str, port: int) -> str:
    """/etc/systemd/journal-upload.conf.d/gpuinfra.conf: the head's receiver, this node's key
    and certificate, the logs CA (the head's certificate must be signed by it and name the
    address)."""
    return unit_file({"Upload": [
        ("URL", upload_url(address, port)), ("ServerKeyFile", CLIENT_KEY),
        ("ServerCertificateFile", CLIENT_CERT),
        ("TrustedCertificateFile", CA_CERT)]}, about=(
        "journal-upload.conf(5). No checker exists for this file: systemd-journal-upload has no\n"
        "--check mode."))


def upload_dropin() -> str:
    """The uploader's drop-in: the group that reads its key, and restarted forever, every
    10 s, so that it resumes from its saved cursor whenever the head comes back (the vendor's
    Restart=on-failure gives up after 5 starts in 10 s)."""
    return unit_file({
        "Unit": [("#", "Never give up: the head may be down for hours."),
                 ("StartLimitIntervalSec", "0")],
        "Service": [("SupplementaryGroups", UPLOAD_GROUP),
                    ("Restart", "always"), ("RestartSec", UPLOAD_RESTART_SEC)],
    }, about="Central logs (gpuinfra_roles/logs): reads its key, restarted forever.")


def vacuum_service(max_use: str, retention: str) -> str:
    """The head's cap: archived journal files of the remote directory removed beyond
    ``max_use`` and older than ``retention``."""
    command = shlex.join(["journalctl", f"--directory={REMOTE_DIR}",
                          f"--vacuum-size={max_use}",
                          f"--vacuum-time={vacuum_time(retention)}"])
    return unit_file({
        "Unit": [("Description", "Cap the central logs (gpuinfra: logs_max_use, "
                                 "logs_retention)")],
        "Service": [("Type", "oneshot"), ("ExecStart", command)],
    })


def vacuum_timer() -> str:
    return unit_file({
        "Unit": [("Description", "Cap the central logs every hour")],
        "Timer": [("OnBootSec", "5min"), ("OnUnitActiveSec", "1h")],
        "Install": [("WantedBy", "timers.target")],
    })


def query(host: str, since: str, until: str | None = None) -> str:
    """The one line an operator runs on the head for what ``host`` logged between ``since``
    and ``until`` (journalctl's time formats: ``"2026-11-27 03:00:00"``, ``"-10min"``)."""
    return shlex.join(["journalctl", "--directory", REMOTE_DIR, f"_HOSTNAME={host}",
                       "--since", since, *(["--until", until] if until else [])])


def verify_command(cert: str) -> str:
    """Shell: ``openssl verify`` of ``cert`` against the logs CA (output kept off the log on
    success: it prints only the path)."""
    return f"openssl verify -CAfile {shlex.quote(CA_CERT)} {shlex.quote(cert)} >/dev/null"


def cert_command(key: str, cert: str, subject: str, extensions: Sequence[str],
                 ca: bool = False, key_group: str | None = None) -> str:
    """Shell (root): an EC P-256 key and its certificate (``CERT_DAYS``), self-signed when
    ``ca``, else signed by the logs CA and judged by ``openssl verify -CAfile`` before it goes
    in; written under umask 077 beside their targets and renamed into place; the key 0600, or
    root:``key_group`` 0640. No secret in the command line, nothing printed (openssl's own
    progress goes to the deploy's log only on failure)."""
    q = shlex.quote
    key_new, cert_new = f"{key}.gpuinfra-new", f"{cert}.gpuinfra-new"
    signer = "" if ca else f"-CA {q(CA_CERT)} -CAkey {q(CA_KEY)} "
    adds = " ".join(f"-addext {q(e)}" for e in extensions)
    check = "" if ca else \
        f"openssl verify -CAfile {q(CA_CERT)} {q(cert_new)} >/dev/null && "
    share = f"chgrp {q(key_group)} {q(key_new)} && chmod 0640 {q(key_new)} && " \
        if key_group else ""
    return (f"umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
            f"-nodes -keyout {q(key_new)} -out {q(cert_new)} -days {CERT_DAYS} "
            f"-subj {q(subject)} {signer}{adds} 2>&1 >/dev/null && {check}{share}"
            f"chmod 0644 {q(cert_new)} && mv -f {q(key_new)} {q(key)} && "
            f"mv -f {q(cert_new)} {q(cert)}")


def ca_command(cluster: str) -> str:
    return cert_command(CA_KEY, CA_CERT, f"/CN=gpuinfra logs CA of {cluster}",
                        ["basicConstraints=critical,CA:TRUE,pathlen:0",
                         "keyUsage=critical,keyCertSign,cRLSign"], ca=True)


def server_command(short_name: str, address: str) -> str:
    return cert_command(SERVER_KEY, SERVER_CERT, f"/CN={short_name}",
                        [f"subjectAltName=IP:{address}",
                         "basicConstraints=critical,CA:FALSE",
                         "extendedKeyUsage=serverAuth"])


def node_dir(short_name: str) -> str:
    return f"{NODES_DIR}/{short_name}"


def client_command(short_name: str) -> str:
    """A node's client key and certificate, made on the head in its own folder; the CN is the
    node's short name (stunnel logs it when it refuses or admits the node)."""
    folder = node_dir(short_name)
    return cert_command(f"{folder}/client.key", f"{folder}/client.crt", f"/CN={short_name}",
                        ["basicConstraints=critical,CA:FALSE",
                         "extendedKeyUsage=clientAuth"])


# ---------------------------------------------------------------------------- stale logs
# A node that stops sending its journal: each node logs a heartbeat every HEARTBEAT_S (so a
# quiet node still has recent entries), the head writes each node's newest entry time into
# node_exporter's textfile directory every minute, and the NodeLogsStale alert
# (gpuinfra.monitoring.alerts) fires when one is older than STALE_S.
HEARTBEAT_UNITS = ("gpuinfra-logs-heartbeat.service", "gpuinfra-logs-heartbeat.timer")
HEARTBEAT_S = 120
AGE_UNITS = ("gpuinfra-logs-age.service", "gpuinfra-logs-age.timer")
AGE_SCRIPT = "/usr/local/lib/gpuinfra-logs/last-entry.sh"
AGE_METRIC = "gpuinfra_logs_last_entry_timestamp_seconds"
AGE_FILE = "gpuinfra-logs.prom"
STALE_S = 600


def uploaders(nodes: Sequence[NodeSpec]) -> list[NodeSpec]:
    """The nodes that send their journal: every node but the head (it keeps its own), where
    ``logs_enabled``."""
    return [n for n in nodes if not n.is_head and n.settings.get("logs_enabled")]


def heartbeat_service() -> str:
    return unit_file({
        "Unit": [("Description", "A line in the journal, so the head sees this node's logs "
                                 "flowing (gpuinfra: NodeLogsStale)")],
        "Service": [("Type", "oneshot"),
                    ("ExecStart", "/usr/bin/logger -t gpuinfra-logs-heartbeat alive")],
    })


def heartbeat_timer() -> str:
    return unit_file({
        "Unit": [("Description", "A journal heartbeat every 2 minutes")],
        "Timer": [("OnBootSec", "1min"), ("OnUnitActiveSec", f"{HEARTBEAT_S}s")],
        "Install": [("WantedBy", "timers.target")],
    })


def age_script(nodes: Sequence[str], textfile_dir: str) -> FileText:
    """The head's writer of :data:`AGE_METRIC` (one series per node, its newest entry's
    time in seconds, 0 when it has none), written beside the live file and renamed over it:
    template ``logs/usr/local/lib/gpuinfra-logs/last-entry.sh.j2``. ``nodes``: short names,
    checked host names (gpuinfra.spec), written unquoted."""
    for name in nodes:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}", name):
            raise GpuinfraError(f"not a host name: {name!r}")
    return FileText("logs/usr/local/lib/gpuinfra-logs/last-entry.sh.j2", {
        "nodes": list(nodes), "textfile_dir": textfile_dir, "file": AGE_FILE,
        "metric": AGE_METRIC, "remote_dir": REMOTE_DIR})


def age_service(textfile_dir: str) -> str:
    return unit_file({
        "Unit": [("Description", "Each node's newest journal entry, for Prometheus "
                                 "(gpuinfra: NodeLogsStale)")],
        "Service": [("Type", "oneshot"), ("ExecStart", f"/bin/sh {AGE_SCRIPT}"),
                    ("ProtectSystem", "strict"), ("ReadWritePaths", textfile_dir),
                    ("PrivateNetwork", "yes"), ("NoNewPrivileges", "yes")],
    })


def age_timer() -> str:
    return unit_file({
        "Unit": [("Description", "Each node's newest journal entry, every minute")],
        "Timer": [("OnBootSec", "1min"), ("OnUnitActiveSec", "1min")],
        "Install": [("WantedBy", "timers.target")],
    })
