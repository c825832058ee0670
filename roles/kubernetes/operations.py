"""The kubernetes role's facts and operations: cluster state read from kubectl, the join with a
token that only ever lives in memory, node labels and taints, manifests kept applied."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from io import StringIO
from typing import Any

from pyinfra import host
from pyinfra.api import FactBase, FunctionCommand, QuoteString, StringCommand, operation
from pyinfra.facts.files import File, FileContents
from pyinfra.operations import files

from gpuinfra.errors import GpuinfraError
from gpuinfra.kubernetes import kubeadm
from gpuinfra.parsers.kubectl import parse_nodes
from gpuinfra_deploy.facts.kernel import LoadedModules
from gpuinfra_deploy.ops.checked import check_script, checked_files
from gpuinfra_deploy.ops.remote import put_text, run, sudo_args

KUBECTL = ("kubectl", "--kubeconfig", kubeadm.ADMIN_CONF)
JOIN_STAGE = f"{kubeadm.CONFIG_DIR}/.join-stage"
JOIN_STAGED = f"{JOIN_STAGE}/kubeadm-join.yaml"


# ---------------------------------------------------------------------------- facts

class KubeNodes(FactBase):
    """The cluster's nodes as the control plane sees them (``kubectl get nodes -o json``):
    ``{name: {"labels", "taints", "ready", "allocatable", ...}}``; ``{}`` before the control
    plane exists."""

    default = dict

    def requires_command(self) -> str:
        return "kubectl"

    def command(self) -> str:
        words = " ".join(KUBECTL)
        return (f"[ -f {kubeadm.ADMIN_CONF} ] && {words} get nodes -o json 2>/dev/null "
                "|| echo '{\"items\": []}'")

    def process(self, output: list[str]) -> dict[str, Any]:
        return {name: node.to_json() for name, node in parse_nodes("\n".join(output)).items()}


class ManifestsInSync(FactBase):
    """Whether the cluster holds what the manifest file says (``kubectl diff``): True, False,
    or None when it cannot tell (no control plane yet, or no such file)."""

    def requires_command(self, path: str) -> str:
        return "kubectl"

    def command(self, path: str) -> str:
        words = " ".join(KUBECTL)
        return (f"if [ -f {kubeadm.ADMIN_CONF} ] && [ -f {shlex.quote(path)} ]; then "
                f"{words} diff --server-side --field-manager=gpuinfra --force-conflicts "
                f"-f {shlex.quote(path)} >/dev/null 2>&1; echo $?; else echo none; fi")

    def process(self, output: list[str]) -> bool | None:
        answer = output[-1].strip() if output else "none"
        return {"0": True, "1": False}.get(answer)


# ---------------------------------------------------------------------------- node preparation
# One operation each, whatever the node's state: every Kubernetes node plans the same number of
# operations before the control plane's init and the workers' joins, which pyinfra then runs
# in the order of the code (init first: see the plan test of that order).

@operation()
def swap_off():
    """No swap now (``swapoff -a``) and none at boot (swap lines of /etc/fstab commented)."""
    lines = host.get_fact(FileContents, path="/etc/fstab")
    if lines is not None:
        text = "\n".join(lines) + "\n"
        wanted = kubeadm.fstab_without_swap(text)
        if wanted != text:
            yield from files.put._inner(src=StringIO(wanted), dest="/etc/fstab", mode="644")
    swaps = host.get_fact(FileContents, path="/proc/swaps") or []
    if kubeadm.active_swaps("\n".join(swaps)):
        yield StringCommand("swapoff", "-a")
    elif lines is None or kubeadm.fstab_without_swap("\n".join(lines) + "\n") == \
            "\n".join(lines) + "\n":
        host.noop("no swap, now or at boot")


@operation()
def modules_loaded(modules: Sequence[str]):
    """``modules`` loaded now (modprobe), when /proc/modules lacks them."""
    loaded = host.get_fact(LoadedModules).get("modules", {})
    missing = [m for m in modules if m not in loaded]
    if not missing:
        host.noop(f"already loaded: {', '.join(modules)}")
        return
    yield StringCommand("modprobe", "-a", *missing)


# ---------------------------------------------------------------------------- the control plane

@operation()
def control_plane(config: str, stage: str, refusal: str | None = None):
    """The control plane, initialised once: kubeadm-init.yaml checked by kubeadm and moved in,
    then ``kubeadm init``; nothing when /etc/kubernetes/admin.conf exists (never again), or
    the refusal when the spec changed what a running control plane cannot change.

    + config: kubeadm-init.yaml's text
    + stage: the private staging directory
    + refusal: the message to stop with (computed from the live file by the caller)
    """
    if host.get_fact(File, path=kubeadm.ADMIN_CONF):
        if refusal:
            yield StringCommand(f"printf '%s\\n' {shlex.quote(refusal)} >&2; exit 1")
        else:
            host.noop("control plane already initialised (kept: never initialised again)")
        return
    yield from checked_files._inner(
        files={kubeadm.INIT_CONFIG: config}, stage=stage, mode="0600",
        check=check_script(f"kubeadm config validate --config {stage}/kubeadm-init.yaml",
                           "kubeadm", stage))
    yield StringCommand("kubeadm", "init", "--config", kubeadm.INIT_CONFIG, "--skip-token-print")


# ---------------------------------------------------------------------------- the join

def _scrub(message: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            message = message.replace(secret, "<token>")
    return message


def _join(state: Any, host: Any, head: Any, settings: Mapping[str, Any],  # noqa: ARG001
          control_plane: bool = False) -> None:
    """Execution time: a single-use bootstrap token made on the control plane, the CA key's
    hash read there, the JoinConfiguration rendered in this machine's memory, written into the
    node's private staging directory as a command's input (gpuinfra_deploy.ops.remote), checked by
    kubeadm, used by ``kubeadm join --config`` and removed; the token is deleted on the control
    plane afterwards. The token is never printed, logged, written here or put on a command line
    (pyinfra passes (state, host)).

    A control plane (``control_plane``) also needs the head's certificates: the head uploads
    them encrypted (``kubeadm init phase upload-certs``) and prints the key, which goes, as the
    token does, only into the staged JoinConfiguration; the uploaded Secret is deleted after
    the join instead of living its two hours."""
    node = host
    # Everything the join needs from the head is read before the token exists: a failure
    # there leaves no live token behind (it would stay valid for its whole TTL).
    ca_hash = run(head, StringCommand(kubeadm.CA_HASH_COMMAND), "the CA key hash").strip()
    token = run(head, StringCommand(
        "kubeadm", "token", "create", "--kubeconfig", kubeadm.ADMIN_CONF,
        "--ttl", kubeadm.JOIN_TOKEN_TTL,
        "--description", QuoteString(f"gpuinfra: join of {settings['node_name']}")),
        "kubeadm token create").strip()
    secrets = [token, token.split(".")[-1]]
    try:
        key = None
        if control_plane:
            key = kubeadm.certificate_key(run(head, StringCommand(*kubeadm.UPLOAD_CERTS),
                                              "kubeadm init phase upload-certs"))
            secrets.append(key)
        text = kubeadm.join_config(token=token, ca_hash=ca_hash, certificate_key=key,
                                   **settings)
        run(node, StringCommand("install", "-d", "-m", "0700", JOIN_STAGE),
            "the join staging directory")
        try:
            put_text(node, text, JOIN_STAGED, "kubeadm join config")
            run(node, StringCommand(check_script(
                f"kubeadm config validate --config {JOIN_STAGED}", "kubeadm", JOIN_STAGE)),
                "kubeadm config validate")
            run(node, StringCommand("kubeadm", "join", "--config", JOIN_STAGED), "kubeadm join")
        finally:
            run(node, StringCommand("rm", "-f", JOIN_STAGED), "removing the join config")
    except GpuinfraError as exc:
        raise GpuinfraError(_scrub(str(exc), secrets)) from None
    finally:
        # Best effort: the token expires by itself after JOIN_TOKEN_TTL, the uploaded
        # certificates after two hours.
        head.run_shell_command(StringCommand("kubeadm", "token", "delete", "--kubeconfig",
                                             kubeadm.ADMIN_CONF, token.split(".")[0]),
                               print_output=False, print_input=False, **sudo_args(head))
        if control_plane:
            head.run_shell_command(StringCommand(*kubeadm.DELETE_UPLOADED_CERTS),
                                   print_output=False, print_input=False, **sudo_args(head))

@operation()
def joined(head: Any, settings: Mapping[str, Any], control_plane: bool = False):
    """This node in the cluster (``kubeadm join``), unless it already is (its kubelet.conf).

    + head: the pyinfra host of the control plane (the token is made there)
    + settings: node_name, address, api_endpoint, taints, labels for the JoinConfiguration
    + control_plane: join as a control plane (API server and stacked etcd member)
    """
    if host.get_fact(File, path=kubeadm.KUBELET_CONF):
        host.noop(f"already joined ({kubeadm.KUBELET_CONF}): never joined twice")
        return
    yield FunctionCommand(_join, (head, dict(settings)), {"control_plane": control_plane})


# ---------------------------------------------------------------------------- labels, taints

@operation()
def node_labels(node: str, labels: Mapping[str, str], taint: tuple[str, str, str] | None,
                untaints: Sequence[tuple[str, str, str]] = ()):
    """Node ``node``'s labels (``kubectl label --overwrite``) and taints, as the spec says.

    + node: the Kubernetes node name
    + labels: label -> value it must have
    + taint: (key, value, effect) it must have, or None
    + untaints: (key, value, effect) it must not have (the GPU taint when it is off; the
      health taint when no controller keeps it)
    """
    seen = host.get_fact(KubeNodes).get(node)
    have = seen["labels"] if seen else {}
    missing = {k: v for k, v in labels.items() if have.get(k) != v}
    taints = {tuple(t) for t in seen["taints"]} if seen else set()
    removed = [t for t in untaints if t in taints]
    if missing:
        yield StringCommand(*KUBECTL, "label", "node", QuoteString(node), "--overwrite",
                            *(QuoteString(f"{k}={v}") for k, v in sorted(missing.items())))
    if taint and taint not in taints:
        key, value, effect = taint
        yield StringCommand(*KUBECTL, "taint", "node", QuoteString(node), "--overwrite",
                            QuoteString(f"{key}={value}:{effect}"))
    for key, _value, effect in removed:
        yield StringCommand(*KUBECTL, "taint", "node", QuoteString(node),
                            QuoteString(f"{key}:{effect}-"))
    if not missing and (not taint or taint in taints) and not removed:
        host.noop(f"node {node} already has its GPU labels and taints")


@operation()
def manifests_applied(path: str, file_changes: bool,
                      pruning: Sequence[tuple[str, str | None, str]] = ()):
    """The objects of manifest ``path`` in the cluster (server-side apply), when the file
    changed or the cluster drifted from it (``kubectl diff``).

    + path: a manifest file on the control plane
    + file_changes: the file is (re)written by this run
    + pruning: objects the file no longer holds, deleted after apply: (kinds, namespace or
      None for cluster-wide kinds, label selector)
    """
    in_sync = host.get_fact(ManifestsInSync, path=path)
    if in_sync and not file_changes:
        host.noop(f"the cluster already holds {path}")
        return
    yield StringCommand(*KUBECTL, "apply", "--server-side", "--field-manager=gpuinfra",
                        "--force-conflicts", "-f", path)
    for kinds, namespace, selector in pruning:
        where = ("-n", namespace) if namespace else ()
        yield StringCommand(*KUBECTL, "delete", kinds, *where, "--ignore-not-found", "-l",
                            QuoteString(selector))


@operation()
def refuse(message: str):
    """Stop this host's deploy here with ``message`` (an upgrade to do by hand, a control plane
    whose settings cannot change): every earlier operation has run."""
    yield StringCommand(f"printf '%s\\n' {shlex.quote(message)} >&2; exit 1")
