"""kubeadm's configuration files, rendered from the spec (docs/hardware-reference.md 6.3).

``kubeadm init --config`` reads three documents: InitConfiguration (this node: its address,
name, CRI socket, taints), ClusterConfiguration (version, control-plane endpoint, pod and
service networks) and KubeletConfiguration (systemd cgroup driver, the containerd socket), all
in the current API (kubeadm.k8s.io/v1beta4, kubelet.config.k8s.io/v1beta1) [kubeadm-v1beta3]
[k8s-cgroup]. ``kubeadm join --config`` reads a JoinConfiguration in its own file: it holds the
bootstrap token, so it is rendered at execution time, in memory, and never written anywhere
but the joining node's private staging directory (roles/kubernetes).

Every file here is judged by kubeadm itself (``kubeadm config validate --config``) on the node
before it is used, and by the unit tests against the documented structure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from gpuinfra.errors import GpuinfraError
from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.text import FileText

CONFIG_DIR = "/etc/kubernetes/gpuinfra"
INIT_CONFIG = f"{CONFIG_DIR}/kubeadm-init.yaml"
ADMIN_CONF = "/etc/kubernetes/admin.conf"
KUBELET_CONF = "/etc/kubernetes/kubelet.conf"
CA_CERT = "/etc/kubernetes/pki/ca.crt"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"

TOKEN = re.compile(r"[a-z0-9]{6}\.[a-z0-9]{16}")
CA_HASH = re.compile(r"[0-9a-f]{64}")
# The AES-256 key of the certificates a control plane uploads for the others to join with.
CERTIFICATE_KEY = re.compile(r"[0-9a-f]{64}")
# Uploads the control plane's certificates (Secret kubeadm-certs, two hours) encrypted with a
# new key it prints; a control plane joins with that key [kubeadm-ha].
UPLOAD_CERTS = ("kubeadm", "init", "phase", "upload-certs", "--upload-certs", "--kubeconfig",
                ADMIN_CONF)
# Deleted once the joins are done, rather than left for their two hours.
DELETE_UPLOADED_CERTS = ("kubectl", "--kubeconfig", ADMIN_CONF, "-n", "kube-system", "delete",
                         "secret", "kubeadm-certs", "--ignore-not-found")
# The CA public key's hash, as kubeadm's documentation computes it (kubeadm join --help).
CA_HASH_COMMAND = (f"openssl x509 -pubkey -in {CA_CERT} | openssl rsa -pubin -outform der "
                   "2>/dev/null | openssl dgst -sha256 -hex | sed 's/^.* //'")
# How long the token made for one join lives: the join runs right after it is made.
JOIN_TOKEN_TTL = "15m"


def _dump(documents: Sequence[Mapping[str, Any]]) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False, explicit_start=True,
                              default_flow_style=False)


def _taints(taints: Sequence[tuple[str, str, str]]) -> list[dict[str, str]]:
    return [{"key": key, "value": value, "effect": effect} if value else
            {"key": key, "effect": effect} for key, value, effect in taints]


def _registration(name: str, address: str, taints: Sequence[tuple[str, str, str]],
                  labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """nodeRegistration: the node's name, CRI socket, its taints (an empty list: none; kubeadm
    would otherwise taint a control plane by default), the kubelet's node IP, the address its
    API listens on (the node's cluster address, not 0.0.0.0: issue 23, finding 2) and the labels
    it registers with (v1beta4 kubeletExtraArgs is a list of name/value pairs).

    The kubelet's ``--address`` is a per-node flag here, not ``address`` in the
    KubeletConfiguration: kubeadm stores that document cluster-wide (the kubelet-config
    ConfigMap) and every joining node would take the head's address."""
    args = [{"name": "node-ip", "value": address}, {"name": "address", "value": address}]
    if labels:
        args.append({"name": "node-labels",
                     "value": ",".join(f"{k}={v}" for k, v in sorted(labels.items()))})
    return {
        "name": name,
        "criSocket": k8s.CRI_SOCKET,
        "taints": _taints(taints),
        "kubeletExtraArgs": args,
    }


def init_documents(*, node_name: str, address: str, version: str, cluster_name: str,
                   pod_cidr: str, service_cidr: str, image_repository: str | None = None,
                   endpoint: str | None = None) -> list[dict[str, Any]]:
    """The three documents of ``kubeadm init --config`` for the first control plane.
    ``endpoint``: the site's VIP or load balancer (``host:port``) in front of every control
    plane; kubeadm puts it in every kubeconfig and the API server's certificate [kubeadm-ha].
    None: the head's own address."""
    k8s.release(version)  # raises for an unsupported version
    init = {
        "apiVersion": k8s.KUBEADM_API,
        "kind": "InitConfiguration",
        # kubeadm init always makes one bootstrap token; this one is short-lived and never
        # printed (--skip-token-print): workers join with their own (roles/kubernetes).
        "bootstrapTokens": [{"description": "kubeadm init's own; gpuinfra joins nodes with "
                                            "single-use tokens", "ttl": "15m0s"}],
        "localAPIEndpoint": {"advertiseAddress": address, "bindPort": k8s.API_SERVER_PORT},
        "nodeRegistration": _registration(node_name, address,
                                          [(CONTROL_PLANE_TAINT, "", "NoSchedule")]),
    }
    cluster: dict[str, Any] = {
        "apiVersion": k8s.KUBEADM_API,
        "kind": "ClusterConfiguration",
        "clusterName": cluster_name,
        "kubernetesVersion": f"v{version}",
        "controlPlaneEndpoint": endpoint or api_endpoint(address),
        # kube-apiserver listens on the control plane's cluster address only (its default
        # --bind-address is 0.0.0.0); v1beta4 extraArgs: a list of name/value pairs.
        "apiServer": {"extraArgs": [{"name": "bind-address", "value": address}]},
        "networking": {"podSubnet": pod_cidr, "serviceSubnet": service_cidr,
                       "dnsDomain": "cluster.local"},
    }
    if image_repository:
        cluster["imageRepository"] = image_repository
    kubelet = {
        "apiVersion": k8s.KUBELET_API,
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "containerRuntimeEndpoint": k8s.CRI_SOCKET,
    }
    return [init, cluster, kubelet]


def init_config(**kwargs: Any) -> str:
    """kubeadm-init.yaml (see :func:`init_documents`)."""
    return _dump(init_documents(**kwargs))


def join_documents(*, node_name: str, address: str, api_endpoint: str, token: str,
                   ca_hash: str, taints: Sequence[tuple[str, str, str]] = (),
                   labels: Mapping[str, str] | None = None,
                   certificate_key: str | None = None) -> list[dict[str, Any]]:
    """The JoinConfiguration of a worker, or of a control plane when ``certificate_key`` (the
    key of the certificates the head uploaded, ``kubeadm init phase upload-certs``) is given:
    its ``controlPlane`` section makes ``kubeadm join`` add an API server and a stacked etcd
    member that advertise ``address`` [kubeadm-ha]. ``token``, ``ca_hash`` and the key are
    checked for shape (a value with anything else in it never reaches the file)."""
    if not TOKEN.fullmatch(token or ""):
        raise GpuinfraError("the bootstrap token made on the control plane has an unexpected "
                            "shape (not [a-z0-9]{6}.[a-z0-9]{16})")
    if not CA_HASH.fullmatch(ca_hash or ""):
        raise GpuinfraError(f"the CA public-key hash {ca_hash!r} is not 64 hex digits")
    join: dict[str, Any] = {
        "apiVersion": k8s.KUBEADM_API,
        "kind": "JoinConfiguration",
        "discovery": {"bootstrapToken": {"apiServerEndpoint": api_endpoint, "token": token,
                                         "caCertHashes": [f"sha256:{ca_hash}"]}},
        "nodeRegistration": _registration(node_name, address, taints, labels),
    }
    if certificate_key is not None:
        if not CERTIFICATE_KEY.fullmatch(certificate_key):
            raise GpuinfraError("the certificate key kubeadm printed on the control plane has "
                                "an unexpected shape (not 64 hex digits)")
        join["controlPlane"] = {"localAPIEndpoint": {"advertiseAddress": address,
                                                     "bindPort": k8s.API_SERVER_PORT},
                                "certificateKey": certificate_key}
    return [join]


def certificate_key(output: str) -> str:
    """The key ``kubeadm init phase upload-certs --upload-certs`` printed (its last line of 64
    hex digits: "[upload-certs] Using certificate key:" then the key) [kubeadm-ha]."""
    found = [line.strip() for line in output.splitlines()
             if CERTIFICATE_KEY.fullmatch(line.strip())]
    if not found:
        raise GpuinfraError("kubeadm init phase upload-certs printed no certificate key (64 "
                            "hex digits on a line of its own)")
    return found[-1]


def join_config(**kwargs: Any) -> str:
    """kubeadm-join.yaml (see :func:`join_documents`): holds the token, never stored."""
    return _dump(join_documents(**kwargs))


def api_endpoint(address: str) -> str:
    """``host:6443`` of the control plane (IPv6 in brackets)."""
    return f"{_host(address)}:{k8s.API_SERVER_PORT}"


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def init_settings(text: str) -> dict[str, Any]:
    """What an existing kubeadm-init.yaml says that an initialised control plane cannot change
    by rerunning init: ``{"version", "pod_cidr", "service_cidr", "address", "endpoint"}``
    (None where absent or unreadable)."""
    out: dict[str, Any] = dict.fromkeys(("version", "pod_cidr", "service_cidr", "address",
                                         "endpoint"))
    try:
        documents = [d for d in yaml.safe_load_all(text) if isinstance(d, Mapping)]
    except yaml.YAMLError:
        return out
    for doc in documents:
        if doc.get("kind") == "ClusterConfiguration":
            version = str(doc.get("kubernetesVersion") or "")
            out["version"] = version.removeprefix("v") or None
            networking = doc.get("networking") or {}
            out["pod_cidr"] = networking.get("podSubnet")
            out["service_cidr"] = networking.get("serviceSubnet")
            out["endpoint"] = doc.get("controlPlaneEndpoint")
        elif doc.get("kind") == "InitConfiguration":
            out["address"] = (doc.get("localAPIEndpoint") or {}).get("advertiseAddress")
    return out


# ---------------------------------------------------------------------------- node preparation

KERNEL_MODULES = ("overlay", "br_netfilter")
MODULES_FILE = "/etc/modules-load.d/gpuinfra-kubernetes.conf"
SYSCTL_FILE = "/etc/sysctl.d/90-gpuinfra-kubernetes.conf"
SYSCTLS = {
    "net.bridge.bridge-nf-call-iptables": "1",
    "net.bridge.bridge-nf-call-ip6tables": "1",
    "net.ipv4.ip_forward": "1",
}


def modules_file() -> FileText:
    """The kernel modules Kubernetes networking needs, loaded at boot."""
    return FileText(f"kubernetes{MODULES_FILE}.j2", {"modules": list(KERNEL_MODULES)})


def sysctl_file() -> FileText:
    """The forwarding sysctls, set at boot."""
    return FileText(f"kubernetes{SYSCTL_FILE}.j2", {"sysctls": dict(SYSCTLS)})


def fstab_without_swap(text: str) -> str:
    """``/etc/fstab`` with every swap entry commented out (the kubelet refuses to run with swap
    on, failSwapOn); every other line as it was."""
    out = []
    for line in text.splitlines(keepends=True):
        fields = line.split()
        if fields and not fields[0].startswith("#") and len(fields) >= 3 and \
                fields[2] == "swap":
            out.append(f"# swap off for the kubelet (gpuinfra): {line}")
        else:
            out.append(line)
    return "".join(out)


def active_swaps(proc_swaps: str) -> list[str]:
    """Devices or files listed as active in ``/proc/swaps`` (its header line skipped)."""
    lines = [line.split() for line in proc_swaps.splitlines()[1:]]
    return [fields[0] for fields in lines if fields]


# ---------------------------------------------------------------------------- upgrades

def upgrade_steps(installed: str, wanted: str, control_plane: str, workers: Sequence[str],
                  other_planes: Sequence[str] = ()) -> str:
    """The ordered steps that move a kubeadm cluster from ``installed`` (a package version,
    ``1.34.2-1.1``) to Kubernetes ``wanted`` (``1.35.8``) [k8s-upgrade]: one minor at a time,
    the first control plane, then the others (``kubeadm upgrade node``), then each worker
    drained in turn. The role moves the apt
    repository line to the new minor and stops: these steps are run by hand (or by a
    maintenance job), because each one waits on the cluster."""
    package = k8s.package_version(wanted)
    have = installed.split("-")[0]
    hold = "--allow-change-held-packages"
    lines = [f"Kubernetes {have} -> {wanted}: the apt repository now points at "
             f"v{k8s.minor_of(wanted)}."]
    if k8s.minor_of(have) != k8s.minor_of(wanted):
        step_minor = int(k8s.minor_of(have).split(".")[1]) + 1
        if int(k8s.minor_of(wanted).split(".")[1]) > step_minor:
            lines.append(f"kubeadm upgrades one minor at a time: go to 1.{step_minor}.x first "
                         "(set kubernetes_version to it, deploy, follow these steps), then on.")
    lines += [
        f"1. On {control_plane}: apt-get install -y {hold} kubeadm={package}; "
        f"kubeadm upgrade plan; kubeadm upgrade apply -y v{wanted}",
        f"2. On {control_plane}: kubectl drain {control_plane} --ignore-daemonsets; "
        f"apt-get install -y {hold} kubelet={package} kubectl={package}; "
        f"systemctl daemon-reload; systemctl restart kubelet; kubectl uncordon {control_plane}",
        *([f"2b. Then each other control plane, one at a time ({', '.join(other_planes)}): "
           f"apt-get install -y {hold} kubeadm={package}; kubeadm upgrade node; then drain, "
           "upgrade kubelet and kubectl, restart and uncordon it as in step 2"]
          if other_planes else []),
        "3. Then for each worker, one at a time"
        + (f" ({', '.join(workers)})" if workers else "") + ": kubectl drain <node> "
        f"--ignore-daemonsets --delete-emptydir-data (from {control_plane}); on the node: "
        f"apt-get install -y {hold} kubeadm={package}; kubeadm upgrade node; "
        f"apt-get install -y {hold} kubelet={package} kubectl={package}; "
        "systemctl daemon-reload; systemctl restart kubelet; then kubectl uncordon <node>",
        "4. Deploy again: every node then holds the new versions and the deploy changes nothing.",
    ]
    return "\n".join(lines)
