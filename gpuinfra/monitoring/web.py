"""TLS and basic authentication of Prometheus and Alertmanager (``monitoring_web_security``).

Both daemons are built on the Prometheus exporter-toolkit and read the same web configuration
file with ``--web.config.file`` (Prometheus 2.42 and Alertmanager 0.25 from Debian 12: the flag
is in both binaries' ``--help``; the format is exporter-toolkit's
docs/web-configuration.md: ``tls_server_config`` with ``cert_file``/``key_file``,
``basic_auth_users`` mapping a user to a bcrypt hash). They read it on every request, so a new
one needs no restart. ``promtool check web-config`` (Prometheus 2.42) judges it, loading the
certificate and key and parsing each hash.

Everything secret is made on the head, once, by the role (gpuinfra_roles/monitoring): the
password (random), its bcrypt hash, a self-signed certificate for the head's cluster address and
its key. The web configuration is therefore built here with :data:`HASH_TOKEN` where the hash
goes, and the head puts its hash there (gpuinfra_deploy/ops/filled.py): the machine running
pyinfra never sees the password nor its hash.

The clients use the same files: Prometheus' own scrape jobs of itself and of Alertmanager and
its alerting configuration (``basic_auth.password_file``, ``tls_config.ca_file``: Prometheus'
configuration docs, ``<http_config>``), Grafana's datasource (``$__file{}`` in provisioning
values: Grafana's pkg/services/provisioning/values, setting.ExpandVar) and the verify suite.
The certificate is its own CA (self-signed, ``CA:TRUE``, the head's address in its
subjectAltName): clients trust exactly it.

Which other daemons could use such a file (not turned on by this role yet): node_exporter 1.5
from Debian has ``--web.config.file`` (its ``--help``); the DCGM exporter has
``--web-config-file`` (dcgm-exporter's README, exporter-toolkit); rivosinc's Slurm exporter
has none.
"""

from __future__ import annotations

from typing import Any

WEB_DIR = "/etc/prometheus/gpuinfra-web"  # root:prometheus 0750
WEB_CONFIG = f"{WEB_DIR}/web.yml"  # root:prometheus 0640 (holds the hash)
WEB_PASSWORD = f"{WEB_DIR}/password"  # root:prometheus 0640 (Prometheus sends it)
WEB_PASSWORD_HASH = f"{WEB_DIR}/password.bcrypt"  # root:prometheus 0640
WEB_KEY = f"{WEB_DIR}/tls.key"  # root:prometheus 0640 (the daemons serve with it)
WEB_CERT = f"{WEB_DIR}/tls.crt"  # 0644: public, every client's CA
WEB_USER = "gpuinfra"
# Stands where the bcrypt hash goes; a plain YAML scalar, replaced on the head by the hash as a
# double-quoted (JSON) string.
HASH_TOKEN = "GPUINFRA_BCRYPT_HASH_OF_THE_HEAD"
BCRYPT_COST = 10  # exporter-toolkit's own example (htpasswd -nBC 10); the password is random
CERT_DAYS = 3650


def web_config() -> dict[str, Any]:
    """web.yml of Prometheus and Alertmanager: TLS with the head's certificate, one user whose
    bcrypt hash the head fills in (:data:`HASH_TOKEN`). Absolute paths: promtool resolves
    relative ones beside the file it checks, which is a staged copy."""
    return {"tls_server_config": {"cert_file": WEB_CERT, "key_file": WEB_KEY},
            "basic_auth_users": {WEB_USER: HASH_TOKEN}}


def client_config() -> dict[str, Any]:
    """The part of a Prometheus scrape job or alertmanager entry that reaches a daemon serving
    web.yml: HTTPS trusting the head's certificate, basic auth with the password file."""
    return {"scheme": "https",
            "basic_auth": {"username": WEB_USER, "password_file": WEB_PASSWORD},
            "tls_config": {"ca_file": WEB_CERT}}


def web_args(on: bool) -> str:
    """The daemons' argument that serves web.yml ('' when off)."""
    return f" --web.config.file={WEB_CONFIG}" if on else ""


def scheme(on: bool) -> str:
    return "https" if on else "http"
