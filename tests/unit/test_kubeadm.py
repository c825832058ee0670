"""kubeadm's files and the join: the token made on the control plane only ever lives in memory
and in the joining node's private staging file; it is never on a command line, printed,
logged or kept; a failing join says why without it."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import yaml

from gpuinfra.errors import GpuinfraError
from gpuinfra.kubernetes import kubeadm
from gpuinfra_roles.kubernetes.operations import JOIN_STAGED, _join

TOKEN = "q7w2z1.k3v9x4m1n8b5c2d6"
CA_HASH = "0" * 63 + "f"
SETTINGS = {"node_name": "gpu01", "address": "10.0.0.11", "api_endpoint": "10.0.0.10:6443",
            "taints": [], "labels": {"nvidia.com/gpu.present": "true"}}


class Output(SimpleNamespace):
    pass


class FakeHost:
    """What _join may use of a pyinfra Host: run_shell_command only, recorded (a file is the
    standard input of ``umask 0077 && cat > PATH``). pyinfra's file transfer stages files in
    /tmp under sudo: using it fails the test."""

    def __init__(self, name: str, answers: dict[str, tuple[bool, str, str]] | None = None):
        self.name = name
        self.data = {}
        self.state = SimpleNamespace(config=SimpleNamespace(SUDO=False))
        self.answers = answers or {}
        self.commands: list[str] = []
        self.kwargs: list[dict] = []
        self.uploads: dict[str, str] = {}

    def run_shell_command(self, command, **kwargs):
        text = command.get_raw_value()
        self.commands.append(text)
        self.kwargs.append(kwargs)
        if text.startswith("umask 0077 && cat > "):
            self.uploads[text.removeprefix("umask 0077 && cat > ")] = kwargs["_stdin"]
        for words, (ok, out, err) in self.answers.items():
            if words in text:
                return ok, Output(stdout=out, stderr=err)
        return True, Output(stdout="", stderr="")

    def put_file(self, *args, **kwargs):
        raise AssertionError("the join config went through pyinfra's file transfer (/tmp)")

    get_file = put_file


def _head(token_ok: bool = True) -> FakeHost:
    return FakeHost("k8s-head", {
        "kubeadm token create": (token_ok, f"{TOKEN}\n" if token_ok else "",
                                 "" if token_ok else "failed to create token"),
        "openssl x509": (True, f"{CA_HASH}\n", ""),
    })


def test_the_join_config_goes_up_from_memory_and_the_token_never_on_a_command_line(caplog):
    head, node = _head(), FakeHost("gpu01")
    with caplog.at_level(logging.DEBUG):
        _join(None, node, head, SETTINGS)
    config = yaml.safe_load(node.uploads[JOIN_STAGED])
    assert config["discovery"]["bootstrapToken"]["token"] == TOKEN
    assert config["discovery"]["bootstrapToken"]["caCertHashes"] == [f"sha256:{CA_HASH}"]
    assert config["nodeRegistration"]["kubeletExtraArgs"][2] == {
        "name": "node-labels", "value": "nvidia.com/gpu.present=true"}
    secret = TOKEN.split(".")[1]
    for command in head.commands + node.commands:
        assert secret not in command, command
    assert f"kubeadm join --config {JOIN_STAGED}" in node.commands
    assert node.commands[-1] == f"rm -f {JOIN_STAGED}"  # removed after use
    assert head.commands[-1] == f"kubeadm token delete --kubeconfig {kubeadm.ADMIN_CONF} q7w2z1"
    assert all(kw.get("print_output") is False and kw.get("print_input") is False
               for kw in head.kwargs + node.kwargs)
    assert secret not in caplog.text


def test_the_staging_directory_is_private_and_made_first():
    node = FakeHost("gpu01")
    _join(None, node, _head(), SETTINGS)
    stage = JOIN_STAGED.rsplit("/", 1)[0]
    assert node.commands[0] == f"install -d -m 0700 {stage}"


def test_a_failing_join_names_the_problem_without_the_token():
    node = FakeHost("gpu01", {"kubeadm join": (False, "", f"token {TOKEN} is invalid")})
    head = _head()
    with pytest.raises(GpuinfraError) as raised:
        _join(None, node, head, SETTINGS)
    assert "kubeadm join failed on gpu01" in str(raised.value)
    assert TOKEN not in str(raised.value) and TOKEN.split(".")[1] not in str(raised.value)
    assert node.commands[-1] == f"rm -f {JOIN_STAGED}"  # removed even when the join failed
    assert "kubeadm token delete" in head.commands[-1]


def test_no_token_no_join():
    node = FakeHost("gpu01")
    with pytest.raises(GpuinfraError, match="kubeadm token create failed on k8s-head"):
        _join(None, node, _head(token_ok=False), SETTINGS)
    assert node.uploads == {} and node.commands == []


@pytest.mark.parametrize("token, ca_hash, words", [
    ("abc.def", CA_HASH, "unexpected shape"),
    (TOKEN + "\nkind: Evil", CA_HASH, "unexpected shape"),
    (TOKEN, "sha256:" + CA_HASH, "not 64 hex digits"),
])
def test_a_token_or_hash_of_another_shape_never_reaches_the_file(token, ca_hash, words):
    with pytest.raises(GpuinfraError, match=words):
        kubeadm.join_config(token=token, ca_hash=ca_hash, **SETTINGS)


def test_fstab_swap_lines_are_commented_out_and_nothing_else():
    fstab = ("# /etc/fstab\nUUID=1 / ext4 errors=remount-ro 0 1\n"
             "/swap.img\tnone\tswap\tsw\t0\t0\nUUID=2 none swap sw 0 0\n"
             "# UUID=3 none swap sw 0 0\n")
    out = kubeadm.fstab_without_swap(fstab)
    assert out.splitlines()[1] == "UUID=1 / ext4 errors=remount-ro 0 1"
    assert out.count("# swap off for the kubelet (gpuinfra): ") == 2
    assert kubeadm.fstab_without_swap(out) == out


def test_active_swaps_reads_proc_swaps():
    header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority"
    assert kubeadm.active_swaps(header + "\n") == []
    assert kubeadm.active_swaps(header + "\n/swap.img  file  2097148  0  -2\n") == ["/swap.img"]


def test_api_server_and_kubelets_listen_on_their_node_address_only():
    """kube-apiserver's bind-address (ClusterConfiguration) and each kubelet's --address (its
    own nodeRegistration: the cluster-wide KubeletConfiguration would give every node the
    head's) are the node's cluster address, never 0.0.0.0 (issue 23, finding 2)."""
    init = kubeadm.init_documents(node_name="head", address="10.0.0.10", version="1.35.8",
                                  cluster_name="lab", pod_cidr="10.244.0.0/16",
                                  service_cidr="10.96.0.0/12")
    assert init[1]["apiServer"]["extraArgs"] == [{"name": "bind-address", "value": "10.0.0.10"}]
    assert {"name": "address", "value": "10.0.0.10"} in \
        init[0]["nodeRegistration"]["kubeletExtraArgs"]
    assert "address" not in init[2]  # KubeletConfiguration: shared by every node
    join = kubeadm.join_documents(node_name="gpu01", address="10.0.0.11",
                                  api_endpoint="10.0.0.10:6443", token=TOKEN, ca_hash=CA_HASH)
    assert {"name": "address", "value": "10.0.0.11"} in \
        join[0]["nodeRegistration"]["kubeletExtraArgs"]


def test_init_settings_reads_back_what_cannot_change():
    text = kubeadm.init_config(node_name="head", address="10.0.0.10", version="1.35.8",
                               cluster_name="lab", pod_cidr="10.244.0.0/16",
                               service_cidr="10.96.0.0/12")
    assert kubeadm.init_settings(text) == {"version": "1.35.8", "pod_cidr": "10.244.0.0/16",
                                           "service_cidr": "10.96.0.0/12",
                                           "address": "10.0.0.10",
                                           "endpoint": "10.0.0.10:6443"}
    assert kubeadm.init_settings("::: not yaml") == dict.fromkeys(
        ("version", "pod_cidr", "service_cidr", "address", "endpoint"))


def test_upgrade_steps_go_one_minor_at_a_time_control_plane_first():
    steps = kubeadm.upgrade_steps("1.33.4-1.1", "1.35.8", "head", ["w1", "w2"])
    assert "go to 1.34.x first" in steps
    assert steps.index("kubeadm upgrade apply -y v1.35.8") < steps.index("kubeadm upgrade node")
    assert "(w1, w2)" in steps and "kubectl drain" in steps
    same_minor = kubeadm.upgrade_steps("1.35.2-1.1", "1.35.8", "head", [])
    assert "first" not in same_minor


def test_a_failure_reading_the_ca_hash_leaves_no_token_alive():
    """The token is made only once everything else is read from the head: a CA hash that
    cannot be read leaves no token (it would stay valid for its TTL)."""
    head = FakeHost("k8s-head", {"openssl x509": (False, "", "no such file"),
                                 "kubeadm token create": (True, f"{TOKEN}\n", "")})
    with pytest.raises(GpuinfraError, match="the CA key hash failed on k8s-head"):
        _join(None, FakeHost("gpu01"), head, SETTINGS)
    assert not [c for c in head.commands if "token create" in c]


# ---------------------------------------------------------------------------- HA control plane

KEY = "ab" * 32
UPLOAD_OUTPUT = ('[upload-certs] Storing the certificates in Secret "kubeadm-certs" in the '
                 f'"kube-system" Namespace\n[upload-certs] Using certificate key:\n{KEY}\n')


def _ha_head(upload_ok: bool = True) -> FakeHost:
    head = _head()
    head.answers["upload-certs"] = (upload_ok, UPLOAD_OUTPUT if upload_ok else "",
                                    "" if upload_ok else "error uploading certs")
    return head


def test_an_endpoint_goes_into_every_kubeconfig_and_certificate():
    init = kubeadm.init_documents(node_name="head", address="10.0.0.10", version="1.35.8",
                                  cluster_name="lab", pod_cidr="10.244.0.0/16",
                                  service_cidr="10.96.0.0/12", endpoint="k8s-api.example:6443")
    assert init[1]["controlPlaneEndpoint"] == "k8s-api.example:6443"
    assert init[0]["localAPIEndpoint"]["advertiseAddress"] == "10.0.0.10"


def test_a_control_plane_joins_with_the_head_certificate_key_that_stays_in_memory(caplog):
    head, node = _ha_head(), FakeHost("cp01")
    settings = {**SETTINGS, "node_name": "cp01", "address": "10.0.0.21",
                "api_endpoint": "k8s-api.example:6443"}
    with caplog.at_level(logging.DEBUG):
        _join(None, node, head, settings, control_plane=True)
    config = yaml.safe_load(node.uploads[JOIN_STAGED])
    assert config["controlPlane"] == {"localAPIEndpoint": {"advertiseAddress": "10.0.0.21",
                                                           "bindPort": 6443},
                                      "certificateKey": KEY}
    for command in head.commands + node.commands:
        assert KEY not in command, command
    assert KEY not in caplog.text
    # The uploaded certificates are deleted after the join, not left for two hours.
    assert head.commands[-1] == " ".join(kubeadm.DELETE_UPLOADED_CERTS)
    worker = FakeHost("gpu01")
    _join(None, worker, _head(), SETTINGS)
    assert "controlPlane" not in yaml.safe_load(worker.uploads[JOIN_STAGED])


def test_a_failed_upload_joins_nothing_and_leaves_no_token_nor_secret():
    head, node = _ha_head(upload_ok=False), FakeHost("cp01")
    with pytest.raises(GpuinfraError, match="upload-certs failed on k8s-head"):
        _join(None, node, head, SETTINGS, control_plane=True)
    assert node.uploads == {}
    assert "kubeadm token delete" in head.commands[-2]
    assert head.commands[-1] == " ".join(kubeadm.DELETE_UPLOADED_CERTS)


@pytest.mark.parametrize("output", ["[upload-certs] Using certificate key:\n", "abc\n",
                                    f"{KEY}\nkind: Evil\n{KEY[:-1]}"])
def test_a_certificate_key_of_another_shape_never_reaches_the_file(output):
    if KEY in output.splitlines():
        assert kubeadm.certificate_key(output) == KEY
        return
    with pytest.raises(GpuinfraError, match="no certificate key"):
        kubeadm.certificate_key(output)
    with pytest.raises(GpuinfraError, match="unexpected shape"):
        kubeadm.join_config(token=TOKEN, ca_hash=CA_HASH, certificate_key="x" + KEY,
                            **SETTINGS)


def test_upgrade_steps_name_the_other_control_planes_before_the_workers():
    steps = kubeadm.upgrade_steps("1.35.2-1.1", "1.35.8", "head", ["w1"], ["cp01", "cp02"])
    assert steps.index("(cp01, cp02)") < steps.index("(w1)")
