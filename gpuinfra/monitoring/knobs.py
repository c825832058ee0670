"""Rules of the `monitoring` role's knobs (roles/monitoring/defaults.py declares the
knobs with their defaults and these rules; the spec gate judges every host's values with them
before any host is touched).

The values whose shape the gate alone cannot see whole are judged later by their consumers as
well: the extra scrape jobs by ``promtool check config``, the receivers by ``amtool
check-config``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpuinfra.monitoring.alertmanager import NO_RECEIVER, SEVERITIES
from gpuinfra.monitoring.alerts import ALERT_NAMES
from gpuinfra.spec.rules import Rule, http_url, list_of, mapping_of, text

# Prometheus' duration units (https://prometheus.io/docs/prometheus/latest/configuration/
# configuration/#duration: ms s m h d w y, y = 365 days), in seconds.
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_DURATION = re.compile(r"([1-9][0-9]{0,5})(s|m|h|d|w|y)")


def duration(low: str, high: str, why: str) -> Rule:
    """A Prometheus duration between ``low`` and ``high`` (themselves durations)."""
    def seconds(text_: str) -> int:
        match = _DURATION.fullmatch(text_)
        assert match, text_
        return int(match[1]) * _UNITS[match[2]]

    allowed = f"a duration from {low} to {high} such as '30s', '30d' or '1y' ({why})"

    def check(value: Any) -> str | None:
        if not isinstance(value, str) or not _DURATION.fullmatch(value):
            return "not a Prometheus duration (a whole number and one of s m h d w y)"
        if not seconds(low) <= seconds(value) <= seconds(high):
            return f"outside {low}..{high}"
        return None

    return Rule(allowed, check)


# Retention: Prometheus keeps at least its 2-hour head block; past 10 years is a typo.
RETENTION = duration("2h", "10y", "Prometheus writes 2-hour blocks")
# Scrape and evaluation interval: above 2m a series goes stale between two scrapes, since
# Prometheus' lookback is 5 minutes (https://prometheus.io/docs/prometheus/latest/querying/
# basics/#staleness) and a single missed scrape would then read as a gap.
SCRAPE_INTERVAL = duration("1s", "2m", "Prometheus' 5-minute lookback must hold 2 scrapes")
RECEIVER_NAME = text(r"[a-z][a-z0-9_-]{0,31}", "a receiver name: lower-case letter first, "
                     "then lower-case letters, digits, '_' or '-' (max 32)", "a receiver name")
EMAIL = text(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}", "an e-mail address",
             "an e-mail address")
_SMARTHOST = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?):([0-9]{1,5})")


def _smarthost_problem(value: Any) -> str | None:
    match = _SMARTHOST.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return "not host:port"
    if not 1 <= int(match[2]) <= 65535:
        return f"port {int(match[2])} is outside 1..65535"
    return None


SMARTHOST = Rule("host:port of the SMTP server (port 1..65535, e.g. 'mail.site:587')",
                 _smarthost_problem)
ALERT_NAME = text(r"[A-Z][A-Za-z0-9]{0,63}", "an alert name such as 'GpuMissing'",
                  "an alert name")


def _receiver_problem(value: Any) -> str | None:
    """The problem with one item of ``monitoring_alert_receivers`` (None: fine)."""
    if not isinstance(value, Mapping):
        return "must be a dict"
    allowed = {"name", "webhook_url", "email_to", "email_from", "smarthost", "severities",
               "alerts"}
    unknown = sorted(set(map(str, value)) - allowed)
    if unknown:
        return f"unknown key {unknown[0]!r} (keys: {', '.join(sorted(allowed))})"
    if "name" not in value:
        return "needs a 'name'"
    problem = RECEIVER_NAME.problem(value["name"])
    if problem or value["name"] == NO_RECEIVER:
        return f"name: {problem or 'reserved'}"
    kinds = [k for k in ("webhook_url", "email_to") if k in value]
    if len(kinds) != 1:
        return "needs exactly one of 'webhook_url' or 'email_to'"
    checks: dict[str, Rule] = {"webhook_url": http_url(), "email_to": EMAIL,
                               "email_from": EMAIL, "smarthost": SMARTHOST,
                               "severities": list_of(text("|".join(SEVERITIES), ", ".join(
                                   SEVERITIES)), non_empty=True),
                               "alerts": list_of(ALERT_NAME, non_empty=True)}
    for key, rule in checks.items():
        if key in value:
            problem = rule.problem(value[key])
            if problem:
                return f"{key}: {problem}"
    if "email_to" in value and not {"email_from", "smarthost"} <= set(value):
        return "an e-mail receiver needs 'email_from' and 'smarthost'"
    if "alerts" in value:
        unknown_alerts = sorted(set(value["alerts"]) - set(ALERT_NAMES))
        if unknown_alerts:
            return f"alerts: {unknown_alerts[0]!r} is not one of the site's alerts"
    return None


RECEIVERS = list_of(
    Rule("{'name': 'ops', 'webhook_url': 'http://...'} or {'name': 'mail', 'email_to': "
         "'ops@site', 'email_from': 'am@site', 'smarthost': 'mail:25'}, optionally with "
         f"'severities' (of {', '.join(SEVERITIES)}) and 'alerts' (alert names)",
         _receiver_problem),
    "a list of receivers: {'name', 'webhook_url' | 'email_to' + 'email_from' + 'smarthost', "
    "'severities', 'alerts'}")
SLURM_EXPORTER = mapping_of(
    text("version|sha256|url", "'version', 'sha256', 'url'"),
    text(r"[0-9A-Za-z.:/_~%+-]{1,200}", "text without spaces or quotes"),
    "None, or {'version': '1.6.0', 'sha256': '<64 hex digits of the release tarball>'} "
    "(optionally 'url': a mirror of the tarball)")


def slurm_exporter_problem(value: Any) -> str | None:
    """The problem with a ``monitoring_slurm_exporter`` value (None: fine)."""
    if value is None:
        return None
    problem = SLURM_EXPORTER.problem(value)
    if problem:
        return problem
    if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", str(value.get("version", ""))):
        return "needs 'version' as three numbers, e.g. '1.6.0'"
    if not re.fullmatch(r"[0-9a-f]{64}", str(value.get("sha256", ""))):
        return "needs 'sha256': the tarball's SHA-256 (64 lower-case hex digits)"
    if "url" in value:
        return http_url().problem(value["url"])
    return None


SLURM_EXPORTER_RULE = Rule(SLURM_EXPORTER.allowed, slurm_exporter_problem)


def slurm_exporter_url(value: Mapping[str, str]) -> str:
    """Where the Slurm exporter's release tarball is (the site's mirror, else GitHub)."""
    version = value["version"]
    return value.get("url") or (
        "https://github.com/rivosinc/prometheus-slurm-exporter/releases/download/"
        f"v{version}/prometheus-slurm-exporter_{version}_linux_amd64.tar.gz")


JOB_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_-]{0,63}")
# The job names prometheus.yml gives its own jobs (gpuinfra.monitoring.scrape).
OWN_JOBS = ("prometheus", "alertmanager", "node", "dcgm", "slurm")


def _plain(value: Any, depth: int = 0) -> bool:
    """YAML-able plain data: str, int, float, bool, None, lists and str-keyed dicts of it."""
    if depth > 8:
        return False
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _scrape_extra_problem(value: Any) -> str | None:
    """The problem with a ``monitoring_scrape_extra`` value (None: fine)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        return "must be a list"
    names = []
    for index, job in enumerate(value):
        if not isinstance(job, Mapping) or not _plain(job):
            return f"item {index}: must be a dict of plain values (text, numbers, lists, dicts)"
        name = job.get("job_name")
        if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
            return f"item {index}: needs a 'job_name' (letters, digits, '_', '-')"
        if name in OWN_JOBS or name in names:
            return f"item {index}: job_name {name!r} is taken"
        secret = _inline_secret(job)
        if secret:
            return (f"item {index} ({name}): {secret} is written in plain text into "
                    "prometheus.yml, which every user of the head can read; give it as a file "
                    "readable by Prometheus only (password_file, credentials_file, "
                    "bearer_token_file)")
        names.append(name)
    return None


# Prometheus' inline secrets and their file forms (prometheus.io/docs: <basic_auth>,
# <authorization>, <oauth2>; bearer_token in Prometheus 2).
_SECRETS = ("password", "credentials", "bearer_token", "client_secret")


def _inline_secret(value: Any, path: str = "") -> str | None:
    """The first inline secret key in a scrape job (its path), None when there is none."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if key in _SECRETS and item not in (None, ""):
                return here
            found = _inline_secret(item, here)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _inline_secret(item, f"{path}[{i}]")
            if found:
                return found
    return None


# Extra scrape jobs of the site (IPMI, switches, storage...), as Prometheus' scrape_config
# dicts: dumped as data into prometheus.yml and judged whole by `promtool check config`.
SCRAPE_EXTRA = Rule("a list of Prometheus scrape_config dicts, each with its own 'job_name'",
                    _scrape_extra_problem)
