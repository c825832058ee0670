"""Forwarding every node's logs to a site's own syslog or Elasticsearch/OpenSearch (the logs
role's option ``logs_forward``), with rsyslog.

Pure functions: the rule of the knob, the data of ``/etc/rsyslog.d/60-gpuinfra-forward.conf``
(its wording: template ``logs/etc/rsyslog.d/60-gpuinfra-forward.conf.j2``) and the shell that
judges it with ``rsyslogd -N1`` before it goes live.

Where: every node forwards its own logs (the head too): rsyslog reads the local journal as
Debian and Ubuntu ship it (``imuxsock`` on ``/run/systemd/journal/syslog``: their systemd
forwards the journal to syslog, a Debian patch that turns ``ForwardToSyslog=`` on). The head's
copy of the other nodes' journals (``/var/log/journal/remote``) is not read by rsyslog, so no
line is sent twice.

RainerScript, parameter names from rsyslog's documentation:
- ``omfwd`` (built in, never loaded): ``target``, ``port``, ``protocol`` (``udp``/``tcp``)
  (https://www.rsyslog.com/doc/configuration/modules/omfwd/parameters/basic.html), with
  ``queue.type="linkedList"`` so that an unreachable target does not block local logging
  (https://www.rsyslog.com/doc/getting_started/forwarding_logs.html).
- ``omelasticsearch`` (Debian/Ubuntu package ``rsyslog-elasticsearch``,
  ``module(load="omelasticsearch")``): ``server`` (a host, the scheme chosen by ``usehttps``),
  ``serverport`` (default 9200), ``searchIndex`` (default ``system``), ``usehttps``,
  ``bulkmode`` (https://www.rsyslog.com/doc/omelasticsearch.html and its parameter pages
  reference/parameters/omelasticsearch-*.html). OpenSearch takes the same API.
- ``action.resumeRetryCount="-1"``: retry forever while the target is down (rsyslog's action
  parameters), the queue holding the lines meanwhile.

Checked: ``rsyslogd -N1 -f <main>`` (config validation run; exit 1 on an unknown parameter, a
bad protocol or a module it cannot load: tried with rsyslog 8.2302, Debian 12), where
``<main>`` is a copy of ``/etc/rsyslog.conf`` reading a copy of ``/etc/rsyslog.d`` that holds
the staged file instead of the live one (:func:`check_command`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from gpuinfra.errors import GpuinfraError, clip
from gpuinfra.spec.rules import Rule, host_name, url_problem
from gpuinfra.text import FileText

FORWARD_CONF = "/etc/rsyslog.d/60-gpuinfra-forward.conf"
FORWARD_STAGE = "/etc/rsyslog.d/.gpuinfra-staged"  # not read by rsyslog (*.conf only)
MAIN_CONF = "/etc/rsyslog.conf"
DROPIN_DIR = "/etc/rsyslog.d"
SERVICE = "rsyslog.service"
PACKAGE = "rsyslog"
ES_PACKAGE = "rsyslog-elasticsearch"  # omelasticsearch.so
ES_KINDS = ("elasticsearch", "opensearch")
KINDS = ("syslog", *ES_KINDS)
ES_PORT = 9200  # omelasticsearch's serverport default
SYSLOG_PORT = 514
# Elasticsearch's index names: lower case, no \ / * ? " < > | space , #, not starting with -
# _ +, at most 255 bytes (Elasticsearch's create-index API).
INDEX = r"[a-z0-9][a-z0-9._-]{0,254}"
_FIELDS = {"syslog": {"kind", "host", "port", "protocol"},
           "elasticsearch": {"kind", "url", "index"}, "opensearch": {"kind", "url", "index"}}

ALLOWED = ("a list of targets, each {'kind': 'syslog', 'host': '10.0.0.5', 'port': 514, "
           "'protocol': 'tcp' or 'udp'} or {'kind': 'elasticsearch' or 'opensearch', "
           "'url': 'https://es.example:9200', 'index': 'gpuinfra'} ('port', 'protocol' and "
           "'index' optional: 514, 'tcp', 'gpuinfra')")


def target_problem(target: Any) -> str | None:
    """What is wrong with one target of ``logs_forward`` (None: nothing)."""
    if not isinstance(target, Mapping):
        return "must be a dict"
    kind = target.get("kind")
    if kind not in KINDS:
        return f"kind {clip(kind)} is not one of {', '.join(KINDS)}"
    unknown = sorted(str(k) for k in target if k not in _FIELDS[kind])
    if unknown:
        return f"unknown field {clip(unknown[0])} for kind {kind!r} " \
               f"(known: {', '.join(sorted(_FIELDS[kind]))})"
    if kind == "syslog":
        if "host" not in target:
            return "a syslog target needs 'host'"
        problem = host_name().problem(target["host"])
        if problem:
            return f"host: {problem}"
        port = target.get("port", SYSLOG_PORT)
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            return f"port {clip(port)}: must be an integer from 1 to 65535"
        if target.get("protocol", "tcp") not in ("tcp", "udp"):
            return f"protocol {clip(target.get('protocol'))}: must be 'tcp' or 'udp'"
        return None
    if "url" not in target:
        return f"an {kind} target needs 'url'"
    problem = url_problem(target["url"])
    if problem:
        return f"url: {problem}"
    if urlsplit(target["url"]).path not in ("", "/"):
        return "url: no path (omelasticsearch takes a server and a port; the index is 'index')"
    index = target.get("index", "gpuinfra")
    if not isinstance(index, str) or not re.fullmatch(INDEX, index):
        return (f"index {clip(index)}: an index name: lower-case letters, digits, '.', '_', "
                "'-', not starting with '.', '_' or '-'")
    return None


def forward_rule() -> Rule:
    """The rule of ``logs_forward``: a list of targets (:func:`target_problem`)."""

    def check(value: Any) -> str | None:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            return "must be a list"
        for index, target in enumerate(value):
            problem = target_problem(target)
            if problem:
                return f"item {index}: {problem}"
        return None

    return Rule(ALLOWED, check)


def _in_quotes(value: Any) -> str:
    """A value the template writes in a RainerScript string (``"..."``): the rule admits no
    quote, backslash or newline; refused here too, so no value can end the string it is
    written in."""
    text = str(value)
    if re.search(r'["\\\n\r]', text):
        raise GpuinfraError(f"logs_forward: a value rsyslog cannot hold in quotes: {clip(text)}")
    return text


def forward_conf(targets: Sequence[Mapping[str, Any]]) -> FileText:
    """/etc/rsyslog.d/60-gpuinfra-forward.conf (template
    ``logs/etc/rsyslog.d/60-gpuinfra-forward.conf.j2``): one action per target, every line
    rsyslog receives (the journal through imuxsock) sent to each, each with its own in-memory
    queue (an unreachable target never blocks local logging), retried forever."""
    for index, target in enumerate(targets):
        problem = target_problem(target)
        if problem:
            raise GpuinfraError(f"logs_forward: item {index}: {problem}")
    out: list[dict[str, Any]] = []
    for target in targets:
        if target["kind"] == "syslog":
            out.append({"kind": "syslog", "host": _in_quotes(target["host"]),
                        "port": _in_quotes(target.get("port", SYSLOG_PORT)),
                        "protocol": _in_quotes(target.get("protocol", "tcp"))})
        else:
            url = urlsplit(target["url"])
            out.append({"kind": target["kind"], "url": target["url"],
                        "server": _in_quotes(url.hostname),
                        "port": _in_quotes(url.port or ES_PORT),
                        "https": url.scheme == "https",
                        "index": _in_quotes(target.get("index", "gpuinfra"))})
    return FileText("logs/etc/rsyslog.d/60-gpuinfra-forward.conf.j2", {
        "elasticsearch": any(t["kind"] in ES_KINDS for t in targets), "targets": out})


def packages(targets: Sequence[Mapping[str, Any]]) -> list[str]:
    """rsyslog, and its Elasticsearch output where a target needs it."""
    return [PACKAGE] + ([ES_PACKAGE] if any(t["kind"] in ES_KINDS for t in targets) else [])


def check_command(stage: str, main: str = MAIN_CONF, dropins: str = DROPIN_DIR,
                  live: str = FORWARD_CONF) -> str:
    """Shell: ``rsyslogd -N1`` of the main configuration as it would be with the staged file
    (``stage``/<its name>) in place of ``live``: the main file and the other drop-ins copied
    into ``stage``/probe, the main file's include of ``dropins`` pointed at the copy."""
    q = shlex.quote
    name = live.rsplit("/", 1)[1]
    probe = f"{stage}/probe"
    return (f"rm -rf {q(probe)} && mkdir -p {q(probe + '/d')} && "
            f"for f in {q(dropins)}/*.conf; do if [ -f \"$f\" ] && [ \"$f\" != {q(live)} ]; "
            f"then cp \"$f\" {q(probe + '/d')}/ || exit 1; fi; done; "
            f"cp {q(f'{stage}/{name}')} {q(probe + '/d')}/ && "
            f"sed 's#{dropins}/#{probe}/d/#g' {q(main)} > {q(probe + '/rsyslog.conf')} && "
            f"rsyslogd -N1 -f {q(probe + '/rsyslog.conf')}")
