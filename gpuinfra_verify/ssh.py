"""How the verify suite reaches a host: as the deploy does (pyinfra's SSH connector), with the
site's host-key policy enforced on the node and on every jump host.

**The route.** :func:`resolve` reads a host's pyinfra data (:func:`gpuinfra_verify.expect.
ssh_target`) and then the ssh_config file, exactly as pyinfra 3's connector does
(pyinfra/connectors/ssh.py ``make_paramiko_kwargs``, pyinfra/connectors/sshuserclient/client.py
``parse_config`` and ``derive_shorthand``; tests/unit/test_verify_ssh_route.py runs pyinfra's own
code on the same data and config and requires the same route):

- the file: ``ssh_config_file``, else ``~/.ssh/config``; none there, no config (pyinfra's
  parser, with ``Include``);
- the lookup name is ``ssh_hostname``, else the inventory name; its ``HostName`` is where the
  connection goes;
- ``ssh_user``, ``ssh_port``, ``ssh_key`` beat the config's ``User``, ``Port``,
  ``IdentityFile`` (with ``CertificateFile``); ``ssh_known_hosts_file`` beats
  ``UserKnownHostsFile``; ``ssh_strict_host_key_checking`` (default ``accept-new``) always
  decides for the node (the config's ``StrictHostKeyChecking`` counts for jump hosts only);
  ``ssh_password``, ``ssh_key_password``, ``ssh_allow_agent``, ``ssh_look_for_keys`` and
  ``ssh_paramiko_connect_kwargs`` as pyinfra passes them; ``ServerAliveInterval``,
  ``IdentityAgent`` honoured; the timeout is pyinfra's ``CONNECT_TIMEOUT`` (10 s), which a
  jump host's ``ConnectTimeout`` overrides for that hop;
- ``ProxyCommand`` (beats ``ProxyJump``): the command's stdin/stdout carry the connection;
- ``ProxyJump a,user@b:2222``: each hop, from its ``user@host:port`` and its own config entry
  (HostName, User, Port, IdentityFile, UserKnownHostsFile, StrictHostKeyChecking,
  ConnectTimeout), is connected through the previous one's ``direct-tcpip`` channel; the last
  opens the channel to the node. A jump host's own ProxyJump/ProxyCommand is not followed
  (pyinfra discards it too): a chain is written on the node's line.

**Host keys.** A suite that accepts any host key proves nothing: whoever answers on a node's
address would be "verified" as a healthy node. Every connection, each jump host's as well as
the node's, checks the key against its known_hosts files:

- the node: ``ssh_strict_host_key_checking``: ``"yes"`` (known keys only), ``"accept-new"``
  (the default: a host not in the file yet is trusted on first use and added), ``"no"``/
  ``"off"`` (no check: the site says so explicitly);
- a jump host: its config entry's StrictHostKeyChecking, else the node's policy (pyinfra would
  ask on the terminal; a test run cannot), against its UserKnownHostsFile, else
  ``~/.ssh/known_hosts`` (pyinfra's files).

A key that differs from the file's is refused in every mode but ``"no"``, with both
fingerprints and the fix. testinfra's paramiko backend loads no known_hosts file, reads no
ssh_config and accepts every key, so the suite hands it a client connected here
(:func:`testinfra_host`).

**Failures.** Every way a connection fails (a jump host that does not resolve, refuses, does
not answer, refuses the key, will not forward; the node the same) raises :class:`ReachProblem`
naming the inventory host, the hop and the fix: one message, no traceback.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import paramiko
from paramiko.hostkeys import HostKeyEntry

from gpuinfra_verify.expect import DEFAULT_KNOWN_HOSTS, SshTarget, host_key_policy

TIMEOUT_S = 10  # pyinfra's CONNECT_TIMEOUT (pyinfra/api/config.py)
DEFAULT_CONFIG = "~/.ssh/config"


class ReachProblem(Exception):
    """The host cannot be reached: the message names the host, the hop and the fix."""


class HostKeyProblem(ReachProblem):
    """The host's (or a jump host's) SSH key is not the one the site trusts: the message says
    what and the fix."""


def fingerprint(key: paramiko.PKey) -> str:
    """``SHA256:...`` as `ssh-keygen -lf` prints it."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


# ---------------------------------------------------------------- the route


@dataclass(frozen=True)
class Endpoint:
    """One SSH connection of a route: a jump host or the node itself.

    hostname: where it goes (after HostName) and the name its key is looked up under
    (``[hostname]:port`` off port 22); spec: how the route names it (the node's lookup name,
    the ProxyJump entry of a hop)."""

    spec: str
    hostname: str
    port: int
    user: str | None
    policy: str
    known_hosts: tuple[str, ...]
    timeout: float | None = TIMEOUT_S
    key: str | None = None  # the data's ssh_key (the node only)
    key_password: str | None = None
    identity_files: tuple[str, ...] = ()  # the config's IdentityFile (when no ssh_key)
    certificate: str | None = None  # the config's CertificateFile
    password: str | None = None
    allow_agent: bool = True
    look_for_keys: bool = True
    keepalive: int = 0
    identity_agent: str | None = None
    extra: tuple[tuple[str, Any], ...] = ()  # ssh_paramiko_connect_kwargs (the node only)


@dataclass(frozen=True)
class Jump:
    """A jump host, and where the ``direct-tcpip`` channel opened through it goes."""

    endpoint: Endpoint
    to: tuple[str, int]


@dataclass(frozen=True)
class Route:
    """How to reach one inventory host: through ``proxy_command`` or ``jumps`` (first to last),
    if any, to ``node``; config_file: the ssh_config read (None: there was none)."""

    target: SshTarget
    node: Endpoint
    jumps: tuple[Jump, ...] = ()
    proxy_command: str | None = None
    config_file: str | None = None


def load_config(path: str | None) -> paramiko.SSHConfig | None:
    """The ssh_config at ``path`` (None: ``~/.ssh/config``) parsed as pyinfra parses it
    (``Include`` expanded); None when there is no such file, as pyinfra reads it."""
    file = Path(os.path.expanduser(path or DEFAULT_CONFIG))
    if not file.is_file():
        return None
    stat = file.stat()
    return _parse_config(str(file), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=32)
def _parse_config(path: str, mtime_ns: int, size: int) -> paramiko.SSHConfig:
    try:  # pyinfra's own parser: paramiko's, with Include
        from pyinfra.connectors.sshuserclient.config import SSHConfig
    except ImportError:  # pragma: no cover - pyinfra always comes with the project
        SSHConfig = paramiko.SSHConfig  # noqa: N806
    config = SSHConfig()
    with open(path, encoding="utf-8") as handle:
        config.parse(handle)
    return config


def _files(value: str) -> tuple[str, ...]:
    return tuple(os.path.expanduser(f) for f in value.split())


def _shorthand(config: paramiko.SSHConfig, entry: str) -> tuple[str, int, str | None,
                                                                float | None]:
    """A ProxyJump entry ``[user@]host[:port]`` as pyinfra's ``derive_shorthand`` reads it:
    (host, port, user, ConnectTimeout); the entry's user and port beat the config's."""
    user_host = entry.rsplit("@", 1)
    hostport = user_host.pop()
    user = user_host[0] if user_host and user_host[0] else None
    port: int | None = None
    if hostport.count(":") > 1:  # IPv6: no port
        host = hostport
    else:
        host, _, port_text = hostport.partition(":")
        port = int(port_text) if port_text else None
    base = config.lookup(host)
    timeout = float(base["connecttimeout"]) if "connecttimeout" in base else None
    return host, port or int(base.get("port", 22)), user or base.get("user"), timeout


def _jump_endpoint(config: paramiko.SSHConfig, entry: str, node_policy: str,
                   node_timeout: float | None) -> Endpoint:
    """A ProxyJump hop as pyinfra connects it (derive_shorthand, then parse_config)."""
    host, port, user, timeout = _shorthand(config, entry)
    found = config.lookup(host)
    policy = (host_key_policy(found["stricthostkeychecking"])
              if "stricthostkeychecking" in found else node_policy)
    return Endpoint(
        spec=entry, hostname=found.get("hostname", host), port=port, user=user, policy=policy,
        known_hosts=_files(found["userknownhostsfile"]) if "userknownhostsfile" in found
        else (os.path.expanduser(DEFAULT_KNOWN_HOSTS),),
        timeout=timeout if timeout is not None else node_timeout,
        identity_files=tuple(found.get("identityfile") or ()),
        certificate=(found.get("certificatefile") or [None])[0],
        keepalive=int(found.get("serveraliveinterval", 0)),
        identity_agent=_agent(found))


def _agent(found: dict) -> str | None:
    agent = found.get("identityagent")
    return os.path.expanduser(agent) if agent and agent.lower() != "none" else None


def resolve(target: SshTarget) -> Route:
    """The route to ``target``: its data, then its ssh_config entry, as pyinfra resolves them
    (precedence in this module's docstring)."""
    config = load_config(target.config_file)
    config_file = (os.path.expanduser(target.config_file or DEFAULT_CONFIG)
                   if config is not None else None)
    found: dict = config.lookup(target.address) if config is not None else {}
    # pyinfra's cfg["port"] before its data override: where a jump host's channel goes
    channel_port = int(found["port"]) if "port" in found else (target.port or 22)
    if target.known_hosts:
        known = (os.path.expanduser(target.known_hosts),)
    elif "userknownhostsfile" in found:
        known = _files(found["userknownhostsfile"])
    else:
        known = (os.path.expanduser(DEFAULT_KNOWN_HOSTS),)
    node = Endpoint(
        spec=target.address, hostname=found.get("hostname", target.address),
        port=target.port or channel_port, user=target.user or found.get("user"),
        policy=target.host_key_policy, known_hosts=known, key=target.key,
        key_password=target.key_password,
        identity_files=() if target.key else tuple(found.get("identityfile") or ()),
        certificate=(found.get("certificatefile") or [None])[0], password=target.password,
        allow_agent=False if target.key else target.allow_agent,
        look_for_keys=False if target.key else target.look_for_keys,
        keepalive=int(found.get("serveraliveinterval", 0)), identity_agent=_agent(found),
        extra=target.paramiko_kwargs)
    if "proxycommand" in found:
        return Route(target, node, proxy_command=found["proxycommand"], config_file=config_file)
    jumps: list[Jump] = []
    # ``ProxyJump none`` (OpenSSH: no jump, e.g. on the bastion's own entry under a
    # ``Host *`` that jumps) is no jump; pyinfra 3.10 would look for a host named "none"
    if config is not None and found.get("proxyjump", "none").lower() != "none":
        entries = [e.strip() for e in found["proxyjump"].split(",") if e.strip()]
        hops = [_jump_endpoint(config, e, target.host_key_policy, node.timeout)
                for e in entries]
        for i, hop in enumerate(hops):
            if i + 1 < len(entries):  # pyinfra's channel goes to the next entry's own host name
                host, port, _, _ = _shorthand(config, entries[i + 1])
                jumps.append(Jump(hop, (host, port)))
            else:
                jumps.append(Jump(hop, (node.hostname, channel_port)))
    return Route(target, node, tuple(jumps), config_file=config_file)


def describe(route: Route) -> str:
    """One line: how the suite reaches the host (its summary prints it for proxied hosts)."""
    node = route.node
    path = [f"{j.endpoint.user or ''}{'@' if j.endpoint.user else ''}"
            f"{j.endpoint.hostname}:{j.endpoint.port}" for j in route.jumps]
    via = (f" via ProxyCommand `{route.proxy_command}`" if route.proxy_command
           else f" via {' -> '.join(path)}" if path else "")
    return (f"{route.target.name}: {node.user or ''}{'@' if node.user else ''}"
            f"{node.hostname}:{node.port}{via}")


# ---------------------------------------------------------------- connecting


class _Unknown(paramiko.MissingHostKeyPolicy):
    """A host missing from known_hosts: refused ("yes"), or added to the first file
    ("accept-new", appended as pyinfra appends)."""

    def __init__(self, route: Route, hop: str, endpoint: Endpoint, accept_new: bool) -> None:
        self.route, self.hop, self.endpoint, self.accept_new = route, hop, endpoint, accept_new

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        file = self.endpoint.known_hosts[0]
        if self.accept_new:
            client.get_host_keys().add(hostname, key.get_name(), key)
            with open(file, "a", encoding="utf-8") as handle:
                handle.write(HostKeyEntry([hostname], key).to_line())
            return
        where = self.route.config_file and self.hop != "the node"
        raise HostKeyProblem(
            f"{self.route.target.name}: {self.hop} {hostname} is not in "
            f"{', '.join(self.endpoint.known_hosts)} and its host key checking is 'yes': its "
            f"{key.get_name()} key {fingerprint(key)} is not trusted.\n  fix: compare that "
            "fingerprint with the host's own (`ssh-keygen -lf "
            "/etc/ssh/ssh_host_ed25519_key.pub` on its console) and add the key to the file, "
            + (f"or set StrictHostKeyChecking accept-new for it in {self.route.config_file}"
               if where else "or set ssh_strict_host_key_checking = 'accept-new' in the "
               "site's data to trust new hosts on first use"))


class RoutedClient(paramiko.SSHClient):
    """A client whose connection may run through jump hosts: closing it closes them too."""

    def __init__(self) -> None:
        super().__init__()
        self.jumps: list[paramiko.SSHClient] = []
        self.route: Route | None = None

    def close(self) -> None:
        super().close()
        for jump in reversed(self.jumps):
            jump.close()
        self.jumps = []


def connect(target: SshTarget, timeout: float | None = None) -> paramiko.SSHClient:
    """A client connected to ``target`` along its route (:func:`resolve`); raises
    HostKeyProblem when a key on the way is not trusted, ReachProblem when a hop fails."""
    route = resolve(target)
    if timeout is not None:
        route = Route(route.target, _with_timeout(route.node, timeout),
                      tuple(Jump(_with_timeout(j.endpoint, timeout), j.to) for j in route.jumps),
                      route.proxy_command, route.config_file)
    return open_route(route)


def _with_timeout(endpoint: Endpoint, timeout: float) -> Endpoint:
    return replace(endpoint, timeout=timeout)


def open_route(route: Route) -> RoutedClient:
    """Connect along ``route``: each jump host, each channel through it, then the node."""
    opened: list[paramiko.SSHClient] = []
    sock: Any = None
    count = len(route.jumps)
    try:
        if route.proxy_command:
            sock = _proxy_command(route)
        for i, jump in enumerate(route.jumps, 1):
            hop = f"jump host {jump.endpoint.spec} (hop {i} of {count})"
            client = _open(route, hop, jump.endpoint, sock, paramiko.SSHClient())
            opened.append(client)
            sock = _channel(route, hop, client, jump)
        node_client = RoutedClient()
        _open(route, "the node", route.node, sock, node_client)
    except BaseException:
        for client in reversed(opened):
            client.close()
        raise
    node_client.jumps, node_client.route = opened, route
    return node_client


def _proxy_command(route: Route) -> Any:
    try:
        return paramiko.ProxyCommand(route.proxy_command or "")
    except (OSError, paramiko.SSHException) as exc:
        raise ReachProblem(
            f"{route.target.name}: its ProxyCommand `{route.proxy_command}` (for "
            f"{route.node.spec} in {route.config_file}) did not start: {exc}.\n  fix: correct "
            f"the ProxyCommand line in {route.config_file}") from None


def _channel(route: Route, hop: str, client: paramiko.SSHClient, jump: Jump) -> Any:
    """The ``direct-tcpip`` channel through ``client`` to ``jump.to``."""
    transport = client.get_transport()
    assert transport is not None
    ep = jump.endpoint
    try:
        return transport.open_channel("direct-tcpip", jump.to, (ep.hostname, ep.port),
                                      timeout=route.node.timeout)
    except (paramiko.SSHException, OSError, EOFError) as exc:
        client.close()
        host, port = jump.to
        raise ReachProblem(
            f"{route.target.name}: {hop} at {ep.hostname}:{ep.port} did not open a connection "
            f"to {host}:{port} ({_reason(exc)}).\n  fix: check that {host}:{port} answers SSH "
            f"from the jump host (`ssh{_with_config(route)} {ep.spec} nc -zv {host} {port}`) "
            "and that its sshd allows forwarding "
            "(AllowTcpForwarding yes)") from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, paramiko.ChannelException):
        return f"the jump host said: {exc.text or 'administratively prohibited'}"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "no answer in time"
    return str(exc) or type(exc).__name__


def _with_config(route: Route) -> str:
    return f" -F {route.config_file}" if route.config_file else ""


@contextlib.contextmanager
def _agent_socket(path: str | None) -> Iterator[None]:
    """SSH_AUTH_SOCK set to IdentityAgent while connecting (as pyinfra does)."""
    if not path:
        yield
        return
    old = os.environ.get("SSH_AUTH_SOCK")
    os.environ["SSH_AUTH_SOCK"] = path
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SSH_AUTH_SOCK", None)
        else:
            os.environ["SSH_AUTH_SOCK"] = old


def _trust(client: paramiko.SSHClient, route: Route, hop: str, endpoint: Endpoint) -> None:
    """Load ``endpoint``'s known_hosts files and its policy for hosts missing from them."""
    if endpoint.policy == "no":
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        return
    first = Path(endpoint.known_hosts[0])
    if endpoint.policy == "accept-new" and not first.exists():
        first.parent.mkdir(parents=True, exist_ok=True)
        first.touch(mode=0o600)
    for file in endpoint.known_hosts:
        if Path(file).is_file():
            client.get_host_keys().load(file)
    client.set_missing_host_key_policy(
        _Unknown(route, hop, endpoint, accept_new=endpoint.policy == "accept-new"))


def _credentials(route: Route, hop: str, endpoint: Endpoint) -> dict[str, Any]:
    """paramiko's key arguments: the data's ssh_key, else the config's IdentityFile, each
    loaded as pyinfra loads it (with an OpenSSH certificate when there is one)."""
    from pyinfra.api.exceptions import PyinfraError
    from pyinfra.connectors.ssh_util import load_key_with_certificate

    if endpoint.key:
        try:
            return {"pkey": load_key_with_certificate(
                key_filename=endpoint.key, key_password=endpoint.key_password,
                cwd=os.getcwd(), allow_prompt=False)}
        except (PyinfraError, paramiko.SSHException, OSError) as exc:
            raise ReachProblem(
                f"{route.target.name}: ssh_key {endpoint.key} cannot be used: {exc}.\n  fix: "
                "point ssh_key at the private key the node accepts (and set "
                "ssh_key_password when it is encrypted)") from None
    for file in endpoint.identity_files:
        if not Path(file).expanduser().is_file():
            continue
        try:
            return {"pkey": load_key_with_certificate(
                key_filename=file, certificate_filename=endpoint.certificate,
                allow_prompt=False)}
        except (PyinfraError, paramiko.SSHException, OSError):
            continue
    return {"key_filename": list(endpoint.identity_files)} if endpoint.identity_files else {}


def _open(route: Route, hop: str, endpoint: Endpoint, sock: Any,
          client: paramiko.SSHClient) -> paramiko.SSHClient:
    """``client`` connected to ``endpoint`` (over ``sock`` when given), its key checked."""
    _trust(client, route, hop, endpoint)
    options: dict[str, Any] = {
        "hostname": endpoint.hostname, "port": endpoint.port, "username": endpoint.user,
        "timeout": endpoint.timeout, "allow_agent": endpoint.allow_agent,
        "look_for_keys": endpoint.look_for_keys,
        **_credentials(route, hop, endpoint)}
    if endpoint.password:
        options["password"] = endpoint.password
    if sock is not None:
        options["sock"] = sock
    options.update(dict(endpoint.extra))
    try:
        with _agent_socket(endpoint.identity_agent):
            client.connect(**options)
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise _changed(route, hop, endpoint, exc) from None
    except HostKeyProblem:
        client.close()
        raise
    except (paramiko.SSHException, OSError, EOFError) as exc:
        client.close()
        raise _failed(route, hop, endpoint, exc) from None
    if endpoint.keepalive:
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(endpoint.keepalive)
    return client


def _changed(route: Route, hop: str, endpoint: Endpoint,
             exc: paramiko.BadHostKeyException) -> HostKeyProblem:
    name = endpoint.hostname if endpoint.port == 22 else f"[{endpoint.hostname}]:{endpoint.port}"
    known = endpoint.known_hosts[0]
    whose = "" if hop == "the node" else f"{hop} "
    return HostKeyProblem(
        f"{route.target.name}: the SSH host key of {whose}{endpoint.hostname} CHANGED: "
        f"{known} holds {exc.expected_key.get_name()} {fingerprint(exc.expected_key)}, the "
        f"host offered {exc.key.get_name()} {fingerprint(exc.key)}. Something else may be "
        f"answering on {'the node' if not whose else 'the jump host'}'s address, so nothing "
        "it says is verified.\n  fix: check the host's key on its console "
        "(`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`); if it was reinstalled, "
        f"`ssh-keygen -R {name} -f {known}` and add the new key")


def _failed(route: Route, hop: str, endpoint: Endpoint, exc: BaseException) -> ReachProblem:
    """What failed on the way to the host, said with the hop and the fix."""
    name = route.target.name
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError) and exc.errors:
        exc = next(iter(exc.errors.values()))  # one per address tried: the first says it
    where = f"{endpoint.hostname}:{endpoint.port}"
    is_jump = hop != "the node"
    origin = (f" (ProxyJump of {route.node.spec} in {route.config_file})" if is_jump
              else f" through {len(route.jumps)} jump host(s)" if route.jumps
              else f" through ProxyCommand `{route.proxy_command}`" if route.proxy_command
              else "")
    subject = f"{hop} {endpoint.spec}" if not is_jump else hop
    check = (f"`ssh{' -F ' + route.config_file if route.config_file else ''} "
             f"{endpoint.spec if is_jump else route.node.spec} true` must work")
    if isinstance(exc, socket.gaierror):
        what = f"{endpoint.hostname} does not resolve ({exc.strerror or exc})"
        fix = (f"correct the ProxyJump line (or the jump host's HostName) in "
               f"{route.config_file}, or make {endpoint.hostname} resolvable here; {check}"
               if is_jump else f"correct ssh_hostname (or its HostName); {check}")
    elif isinstance(exc, paramiko.AuthenticationException):
        user = endpoint.user or "(your login name)"
        what = f"{where} refused user {user}'s credentials ({exc})"
        fix = (f"authorise the key on the jump host, or set User/IdentityFile for "
               f"{endpoint.spec} in {route.config_file}; {check}" if is_jump
               else f"authorise the key on the node, or set ssh_user/ssh_key; {check}")
    elif isinstance(exc, ConnectionRefusedError):
        what = f"{where} refused the connection (no sshd listening)"
        fix = (f"start sshd on {'the jump host' if is_jump else 'the node'}, or fix its "
               f"address; {check}")
    elif isinstance(exc, TimeoutError | socket.timeout):
        what = f"{where} did not answer within {endpoint.timeout} s"
        fix = f"check the address and that this machine reaches it; {check}"
    elif isinstance(exc, paramiko.ProxyCommandFailure):
        what = f"the ProxyCommand failed ({exc})"
        fix = f"run the ProxyCommand by hand; {check}"
    else:
        what = f"{where}: {exc or type(exc).__name__}"
        fix = check
    return ReachProblem(f"{name}: cannot reach {subject}{origin}: {what}.\n  fix: {fix}")


def testinfra_host(target: SshTarget, sudo: bool = False) -> Any:
    """testinfra's host for ``target``, whose paramiko backend uses a client from
    :func:`connect` (testinfra's own would load no known_hosts, read no ssh_config and accept
    any key). ``sudo``: every command through sudo (testinfra's ``--sudo``: the SSH user is not
    root)."""
    import testinfra

    host = testinfra.get_host(f"paramiko://{target.name}", sudo=sudo)
    if "client" not in vars(host.backend):  # one connection per host and process
        host.backend.client = connect(target)
    return host
