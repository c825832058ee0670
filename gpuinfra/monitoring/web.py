"""TLS and basic authentication of Prometheus and Alertmanager (``monitoring_web_security``).

Both daemons are built on the Prometheus exporter-toolkit and read the same web configuration
file with ``--web.config.file`` (Prometheus 2.42 and Alertmanager 0.25 from Debian 12: the flag
is in both binaries' ``--help``; the format is exporter-toolkit's
docs/web-configuration.md: ``tls_server_config`` with ``cert_file``/``key_file``,
``basic_auth_users`` mapping a user to a bcrypt hash). They read it on every request, so a new
one needs no restart. ``promtool check web-config`` (Prometheus 2.42) judges it, loading the
certificate and key and parsing each hash.

Everything secret is made on the head, once, by the role (roles/monitoring): the
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

node_exporter on every node (``monitoring_node_exporter_web_security``, off by default) serves
the same format with its own credentials, so that a node, which holds them, never holds those of
Prometheus' and Alertmanager's APIs: a password of its own (made on the head like the first,
:data:`EXPORTER_PASSWORD`), and per node a key and a certificate signed by a small CA of the
head's (:data:`EXPORTER_CA_CERT`; its key never leaves the head). Prometheus scrapes every
node_exporter over HTTPS, verifying the certificate against that CA and the node's address in
it (``tls_config.ca_file``, no ``insecure_skip_verify``), with the password
(``basic_auth.password_file``). A node's certificate is no CA (``CA:FALSE``): a node's root
cannot sign a certificate for another node's address. The head builds each node's key,
certificate and web.yml in its own directory and judges them there with promtool (a worker has
no promtool); each node gets its three files from the head at execution time through the
deploy machine's memory (gpuinfra_deploy/ops/from_head.py), never the password.

The other exporters: NVIDIA's DCGM exporter reads the same format with ``--web-config-file``
(dcgm-exporter pkg/cmd/app.go, ``CLIWebConfigFile``, exporter-toolkit); the role does not
serve it yet (the lab cannot run DCGM, and which user NVIDIA's unit runs it as is unchecked).
rivosinc's Slurm exporter has no such option (its main.go serves ``http.ListenAndServe``).
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


# node_exporter's credentials (monitoring_node_exporter_web_security). On the head:
EXPORTER_DIR = f"{WEB_DIR}/exporters"  # root:prometheus 0750
EXPORTER_PASSWORD = f"{EXPORTER_DIR}/password"  # root:prometheus 0640 (Prometheus sends it)
EXPORTER_PASSWORD_HASH = f"{EXPORTER_DIR}/password.bcrypt"  # root:prometheus 0640
EXPORTER_CA_KEY = f"{EXPORTER_DIR}/ca.key"  # root 0600: signs the nodes' certificates
EXPORTER_CA_CERT = f"{EXPORTER_DIR}/ca.crt"  # 0644: Prometheus trusts it for node_exporter
EXPORTER_NODES = f"{EXPORTER_DIR}/nodes"  # root 0700: each node's files, made and judged here
EXPORTER_USER = "gpuinfra-scrape"
EXPORTER_HASH_TOKEN = "GPUINFRA_BCRYPT_HASH_OF_THE_EXPORTERS"
# On every node: node_exporter's web.yml and the files it names (relative: beside it).
NODE_WEB_DIR = "/etc/prometheus/gpuinfra-node-exporter"  # root:prometheus 0750
NODE_WEB_FILES = ("tls.key", "tls.crt", "web.yml")  # in the order a node gets them


def node_material_dir(short_name: str) -> str:
    """Where the head keeps a node's key, certificate and web.yml (``short_name``: the
    node's short name, checked by the spec as a host name)."""
    return f"{EXPORTER_NODES}/{short_name}"


def exporter_web_config() -> dict[str, Any]:
    """node_exporter's web.yml: TLS with the node's own key and certificate (paths relative to
    web.yml: the same text judged on the head and served on the node), one user whose bcrypt
    hash the head fills in (:data:`EXPORTER_HASH_TOKEN`)."""
    return {"tls_server_config": {"cert_file": "tls.crt", "key_file": "tls.key"},
            "basic_auth_users": {EXPORTER_USER: EXPORTER_HASH_TOKEN}}


def exporter_client_config() -> dict[str, Any]:
    """The part of Prometheus' node job that reaches node_exporter serving that web.yml: HTTPS,
    the certificate verified against the head's exporter CA (and the target's address in it),
    basic auth with the exporters' password file."""
    return {"scheme": "https",
            "basic_auth": {"username": EXPORTER_USER, "password_file": EXPORTER_PASSWORD},
            "tls_config": {"ca_file": EXPORTER_CA_CERT}}
