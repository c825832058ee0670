"""Web security of the `monitoring` role, made on the head: the TLS key and certificate and the
basic-auth password of Prometheus and Alertmanager (``monitoring_web_security``), and
node_exporter's CA, password and each node's key, certificate and web.yml
(``monitoring_node_exporter_web_security``), every web.yml judged by ``promtool check
web-config``; a node copies its own from the head (:func:`node_web_copies`)."""

from __future__ import annotations

import shlex
from pathlib import Path

from pyinfra import host
from pyinfra.operations import files

from gpuinfra.monitoring.web import (
    BCRYPT_COST,
    CERT_DAYS,
    EXPORTER_CA_CERT,
    EXPORTER_CA_KEY,
    EXPORTER_DIR,
    EXPORTER_HASH_TOKEN,
    EXPORTER_NODES,
    EXPORTER_PASSWORD,
    EXPORTER_PASSWORD_HASH,
    HASH_TOKEN,
    NODE_WEB_DIR,
    NODE_WEB_FILES,
    WEB_CERT,
    WEB_CONFIG,
    WEB_DIR,
    WEB_KEY,
    WEB_PASSWORD,
    WEB_PASSWORD_HASH,
    exporter_web_config,
    node_material_dir,
    web_config,
)
from gpuinfra.spec import ClusterSpec, NodeSpec
from gpuinfra_deploy.ops.checked import check_script, upload_source
from gpuinfra_deploy.ops.from_head import Copy
from gpuinfra_deploy.ops.made_on_host import filled_file, secret_files
from gpuinfra_deploy.templates import render
from gpuinfra_roles.monitoring.shared import DAEMON_GROUP, yaml_with_header

WEB_STAGE = "/etc/prometheus/.gpuinfra-staged-web"
# The address a node's certificate names, in the head's folder of that node (every node's folder
# under EXPORTER_NODES: one template for all).
ADDRESS_TEMPLATE = "monitoring/etc/prometheus/gpuinfra-web/exporters/nodes/address.j2"

# What the head makes its web secrets with: openssl (the certificate and key) and python3-bcrypt
# (the password's hash): bookworm has python3-bcrypt 3.2.2-1 and openssl 3.0 (apt-cache policy);
# Ubuntu ships both in main (python3-bcrypt is python3-paramiko's dependency).
WEB_TOOLS = ["openssl", "python3-bcrypt"]


def password_command(path: str, hash_path: str, group: str) -> str:
    """Shell (root): a random password in ``path`` and its bcrypt hash in ``hash_path``, both
    root:``group`` 0640, written under umask 077 beside their targets and renamed into place.
    The password goes from one command's file to the next one's standard input only."""
    new, hash_new = f"{path}.gpuinfra-new", f"{hash_path}.gpuinfra-new"
    make = "import secrets, sys; sys.stdout.write(secrets.token_urlsafe(32))"
    digest = ("import bcrypt, sys; sys.stdout.write(bcrypt.hashpw(sys.stdin.buffer.read()"
              f".strip(), bcrypt.gensalt({BCRYPT_COST})).decode())")
    q = shlex.quote
    return (f"umask 077 && python3 -I -c {q(make)} > {q(new)} && "
            f"python3 -I -c {q(digest)} < {q(new)} > {q(hash_new)} && "
            f"chgrp {q(group)} {q(new)} {q(hash_new)} && chmod 0640 {q(new)} {q(hash_new)} && "
            f"mv -f {q(hash_new)} {q(hash_path)} && mv -f {q(new)} {q(path)}")


def tls_command(node: NodeSpec, key: str, cert: str, group: str) -> str:
    """Shell (root): a self-signed certificate (its own CA) for the node's cluster address, an
    EC P-256 key root:``group`` 0640 (written 0600 under umask 077 first), the certificate
    0644; ``openssl req -addext`` (OpenSSL 1.1.1 and later: 3.0 on every distribution here)."""
    return _self_signed(key, cert, "/CN=" + node.short_name,
                        ["subjectAltName=IP:" + str(node.address)], key_group=group)


def web_check(stage: str) -> str:
    """promtool judges the staged web.yml: the certificate and key load, each hash parses."""
    config = shlex.quote(f"{stage}/{Path(WEB_CONFIG).name}")
    return check_script(f"promtool check web-config {config}", "promtool", stage)


def web_security(head: NodeSpec) -> bool:
    """The head's web secrets (made once, kept) and web.yml built from them (no daemon needs
    telling: both read it on every request). True when this run makes any of them again."""
    files.directory(name=f"{WEB_DIR}: root and the prometheus group only (0750)", path=WEB_DIR,
                    user="root", group=DAEMON_GROUP, mode="750")
    password = secret_files(name="The web password and its bcrypt hash, made on the head",
                            paths=[WEB_PASSWORD, WEB_PASSWORD_HASH], what="the web password",
                            command=password_command(WEB_PASSWORD, WEB_PASSWORD_HASH,
                                                     DAEMON_GROUP))
    tls = secret_files(name="The web TLS key and certificate, made on the head",
                       paths=[WEB_KEY, WEB_CERT], what="the web TLS key and certificate",
                       command=tls_command(head, WEB_KEY, WEB_CERT, DAEMON_GROUP))
    filled_file(name="web.yml of Prometheus and Alertmanager (the head's hash), judged "
                     "by promtool check web-config",
                template=yaml_with_header(web_config()),
                fills={HASH_TOKEN: WEB_PASSWORD_HASH}, dest=WEB_CONFIG, stage=WEB_STAGE,
                check=web_check(WEB_STAGE), group=DAEMON_GROUP,
                refresh=password.will_change)
    return password.will_change or tls.will_change


def exporter_ca_command(spec: ClusterSpec, key: str, cert: str) -> str:
    """Shell (root): the exporters' CA, an EC P-256 key root 0600 and its self-signed
    certificate (10 years, ``CA:TRUE`` with ``pathlen:0``: it signs node certificates only),
    written under umask 077 beside their targets and renamed into place."""
    return _self_signed(key, cert, "/CN=gpuinfra node_exporter CA of " + spec.name,
                        ["basicConstraints=critical,CA:TRUE,pathlen:0",
                         "keyUsage=critical,keyCertSign,cRLSign"])


def _self_signed(key: str, cert: str, subject: str, extensions: list[str],
                 key_group: str | None = None) -> str:
    """Shell (root): an EC P-256 key and its self-signed certificate (``CERT_DAYS``), written
    under umask 077 beside their targets (``.gpuinfra-new``) and renamed into place; the key
    0600, or root:``key_group`` 0640; the certificate 0644."""
    q = shlex.quote
    key_new, cert_new = f"{key}.gpuinfra-new", f"{cert}.gpuinfra-new"
    adds = " ".join(f"-addext {q(e)}" for e in extensions)
    share = f"chgrp {q(key_group)} {q(key_new)} && chmod 0640 {q(key_new)} && " \
        if key_group else ""
    return (f"umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
            f"-nodes -keyout {q(key_new)} -out {q(cert_new)} -days {CERT_DAYS} "
            f"-subj {q(subject)} {adds} 2>&1 && {share}"
            f"chmod 0644 {q(cert_new)} && mv -f {q(key_new)} {q(key)} && "
            f"mv -f {q(cert_new)} {q(cert)}")


def node_cert_command(node: NodeSpec, folder: str, ca_key: str = EXPORTER_CA_KEY,
                      ca_cert: str = EXPORTER_CA_CERT) -> str:
    """Shell (root): ``node``'s node_exporter key (EC P-256) and its certificate signed by the
    exporters' CA (``openssl req -x509 -CA``, OpenSSL 3.0 and later: every distribution here),
    for the node's cluster address, ``CA:FALSE`` (a node cannot sign for another), server
    authentication only; both root 0600 on the head (the node's copies get their group there),
    written under umask 077 and renamed into place."""
    q = shlex.quote
    key, cert = f"{folder}/tls.key", f"{folder}/tls.crt"
    key_new, cert_new = f"{key}.gpuinfra-new", f"{cert}.gpuinfra-new"
    return (f"umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
            f"-nodes -keyout {q(key_new)} -out {q(cert_new)} -days {CERT_DAYS} "
            f"-subj {q('/CN=' + node.short_name)} -CA {q(ca_cert)} -CAkey {q(ca_key)} "
            f"-addext {q('subjectAltName=IP:' + str(node.address))} "
            f"-addext {q('basicConstraints=critical,CA:FALSE')} "
            f"-addext {q('extendedKeyUsage=serverAuth')} 2>&1 && "
            f"mv -f {q(key_new)} {q(key)} && mv -f {q(cert_new)} {q(cert)}")


def node_web_check(folder: str, stage: str) -> str:
    """promtool judges a node's staged web.yml with that node's key and certificate beside it
    (web.yml names them relative to itself): the pair loads, the hash parses."""
    q = shlex.quote
    return check_script(f"cp {q(folder + '/tls.crt')} {q(folder + '/tls.key')} {q(stage)}/ && "
                        f"promtool check web-config {q(stage + '/web.yml')}", "promtool", stage)


def exporter_credentials(spec: ClusterSpec) -> None:
    """On the head: the exporters' password and hash, their CA, and for every node its key, its
    certificate and its web.yml, judged by promtool (made once, kept; a node's certificate made
    again when the CA or the node's address is new)."""
    files.directory(name=f"{EXPORTER_DIR}: root and the prometheus group only (0750)",
                    path=EXPORTER_DIR, user="root", group=DAEMON_GROUP, mode="750")
    files.directory(name=f"{EXPORTER_NODES}: root only (0700)", path=EXPORTER_NODES,
                    user="root", group="root", mode="700")
    password = secret_files(
        name="The exporters' password and its bcrypt hash, made on the head",
        paths=[EXPORTER_PASSWORD, EXPORTER_PASSWORD_HASH], what="the exporters' password",
        command=password_command(EXPORTER_PASSWORD, EXPORTER_PASSWORD_HASH, DAEMON_GROUP))
    ca = secret_files(name="The exporters' CA key and certificate, made on the head",
                      paths=[EXPORTER_CA_KEY, EXPORTER_CA_CERT], what="the exporters' CA",
                      command=exporter_ca_command(spec, EXPORTER_CA_KEY, EXPORTER_CA_CERT))
    template = yaml_with_header(exporter_web_config())
    # host.loop: each node's operations told apart by the loop's position, not by a suffix
    # per earlier node (cubic in the nodes: roles/logs has the same loop)
    for node in host.loop(spec.nodes):
        folder = node_material_dir(node.short_name)
        files.directory(name=f"{folder}: root only (0700)", path=folder, user="root",
                        group="root", mode="700")
        # The address the certificate names: a new one makes a new certificate.
        address = files.put(name=f"{node.short_name}: the address of its certificate",
                            dest=f"{folder}/address",
                            src=upload_source(render(ADDRESS_TEMPLATE, address=str(node.address))),
                            mode="600")
        pair = secret_files(
            name=f"{node.short_name}: node_exporter's key and certificate, signed on the head",
            paths=[f"{folder}/tls.key", f"{folder}/tls.crt"],
            what=f"{node.short_name}'s node_exporter key and certificate",
            command=node_cert_command(node, folder),
            refresh=ca.will_change or address.will_change)
        stage = f"{folder}/.staged"
        filled_file(name=f"{node.short_name}: node_exporter's web.yml (the exporters' hash), "
                         "judged by promtool check web-config with its key and certificate",
                    template=template, fills={EXPORTER_HASH_TOKEN: EXPORTER_PASSWORD_HASH},
                    dest=f"{folder}/web.yml", stage=stage, check=node_web_check(folder, stage),
                    group="root", mode="0600",
                    refresh=password.will_change or pair.will_change)


def node_web_copies(node: NodeSpec) -> list[Copy]:
    """node_exporter's key, certificate and web.yml: from the head's directory of this node to
    the node's NODE_WEB_DIR, root:prometheus (the certificate 0644, the others 0640)."""
    folder = node_material_dir(node.short_name)
    return [Copy(f"{folder}/{name}", f"{NODE_WEB_DIR}/{name}", DAEMON_GROUP,
                 "0644" if name == "tls.crt" else "0640") for name in NODE_WEB_FILES]
