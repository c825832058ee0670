"""Issue 44: what the spec gate let through, each refused before any host is touched, with the
file's host, the key, the value and the fix (gpuinfra/paths.py for every path a role removes,
replaces or opens up; gpuinfra/spec for the rest)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuinfra.paths import opened_parent_problem, path_problem
from gpuinfra.spec import HostInput
from gpuinfra.spec.model import PYINFRA_SSH_KEYS
from gpuinfra_deploy.pyinfra_patches.gate import unknown_data_keys
from gpuinfra_deploy.run.knobs import spec_problems
from tests.unit.test_spec_cross import PCIE, about, problems, site


def test_the_plain_site_is_valid() -> None:
    assert problems(site()) == []


@pytest.mark.parametrize("bundle", ["/etc", "/usr", "/", "/srv/../etc", "/tmp/bundle",
                                    "/var/tmp/b", "/var/lib", "/home/alice/b", "/srv"])
def test_an_oci_bundle_root_would_remove_is_refused(bundle: str) -> None:
    """The job_containers role rebuilds the bundle with `rm -rf BUNDLE && mv ...` as root."""
    data = {"job_containers_runtime": "oci", "job_containers_oci_bundle": bundle}
    found = about(site(everywhere=data), "job_containers_oci_bundle")
    assert found and found[0].value == bundle and found[0].fix
    assert not about(site(everywhere={**data, "job_containers_oci_bundle":
                                      "/srv/containers/busybox"}), "job_containers_oci_bundle")


@pytest.mark.parametrize(("key", "value"), [
    ("job_containers_enroot_data_path", "/etc"),
    ("job_containers_enroot_data_path", "/usr/bin"),
    ("job_containers_enroot_cache_path", "/home"),
    ("job_containers_enroot_runtime_path", "/run/../etc/user-$(id -u)"),
    ("job_containers_enroot_data_path", "/var/lib/user-$(id -u)"),  # /var/lib made 1777
    ("job_containers_enroot_cache_path", "/tmp/enroot/user-$(id -u)"),
])
def test_enroot_folders_whose_parent_the_role_opens_are_refused(key: str, value: str) -> None:
    found = about(site(everywhere={key: value}), key)
    assert found and found[0].value == value


def test_the_path_rule_is_one_rule() -> None:
    assert path_problem("/srv/containers/busybox") is None
    assert opened_parent_problem("/var/lib/enroot/data/user-$(id -u)", per_user=True) is None
    assert "every user may write" in (path_problem("/dev/shm/x") or "")
    assert "only in the last part" in (opened_parent_problem("/srv/$(id -u)/x", True) or "")


@pytest.mark.parametrize(("key", "value", "words"), [
    ("PluginDir", "/tmp/plugins", "root loads code from it"),
    ("PlugStackConfig", "/tmp/plugstack.conf", "root loads code from it"),
    ("UnkillableStepProgram", "/tmp/x.sh", "runs as root"),
    ("SlurmctldPrimaryOnProg", "/home/a/x", "runs as root"),
    ("AuthInfo", "socket=/tmp/munge.sock", "munged's own socket"),
    ("SlurmdUser", "slurm", "slurmd runs as root"),
    ("X11Parameters", "home_xauthority", "X11 forwarding stays off"),
])
def test_slurm_conf_extra_cannot_load_code_or_trust_a_socket_from_anywhere(
        key: str, value: str, words: str) -> None:
    found = about(site(everywhere={"slurm_conf_extra": {key: value}}), "slurm_conf_extra")
    assert found and words in found[0].problem
    fine = {"PluginDir": "/usr/lib/x86_64-linux-gnu/slurm-wlm",
            "PlugStackConfig": "/etc/slurm/plugstack.conf",
            "AuthInfo": "socket=/run/munge/munge.socket.2"}
    if key in fine:
        assert not about(site(everywhere={"slurm_conf_extra": {key: fine[key]}}),
                         "slurm_conf_extra")


def test_logs_port_enters_the_clash_check() -> None:
    found = about(site(everywhere={"logs_port": 9090}), "monitoring_prometheus_port, logs_port")
    assert found and "Prometheus and systemd-journal-remote" in found[0].problem
    assert found[0].host == "head01"


def test_a_partition_named_default_is_refused() -> None:
    parts = [{"name": "DEFAULT", "nodes": ["gpu01"], "gpu": True}]
    found = about(site(everywhere={"slurm_partitions": parts}), "slurm_partitions[0]['name']")
    assert found and "only sets defaults" in found[0].problem


@pytest.mark.parametrize("flag", ["gpu", "default"])
def test_partition_flags_are_booleans(flag: str) -> None:
    parts = [{"name": "gpu", "nodes": ["gpu01"], flag: "false"}]
    found = about(site(everywhere={"slurm_partitions": parts}), f"slurm_partitions[0][{flag!r}]")
    assert found and "'false' would count as true" in found[0].problem


def test_the_head_is_not_a_hypervisor() -> None:
    hosts = [HostInput("head01", ("head", "hypervisors"),
                       {"node_address": "10.0.0.1", "vfio_devices": ["0000:3b:00.0"]}),
             HostInput("gpu01", ("workers",), {"node_address": "10.0.0.2", **PCIE})]
    found = [e for e in spec_problems(hosts) if e.field == "groups"]
    assert found and "the cluster's head is also a hypervisor" in found[0].problem


@pytest.mark.parametrize("key", ["monitoring_tls_cert", "logs_tls", "slurm_conf_extras",
                                 "ssh_hostnme", "ssh_passwd"])
def test_unknown_keys_with_a_prefix_gpuinfra_owns_are_refused(key: str) -> None:
    found = about(site(everywhere={key: "x"}), key)
    assert found and "unknown key" in found[0].problem and key in found[0].fix
    assert not about(site(everywhere={"rack": "r12"}), "rack")  # the operator's own key


def test_unknown_data_keys_are_named_with_the_nearest() -> None:
    said = unknown_data_keys(["no_such_key=1", "reboot_policy=never", "_sudo=True",
                              "slurm_partitons=[]"])
    assert len(said) == 2 and said[0].startswith("no_such_key: no such key")
    assert "the nearest: 'slurm_partitions'" in said[1]


def test_the_ssh_keys_are_pyinfras() -> None:
    from pyinfra.connectors.ssh import connector_data_meta

    assert set(PYINFRA_SSH_KEYS) == set(connector_data_meta)


def _gpus_left(passed: int, total: int, count: int) -> Any:
    from gpuinfra.knowledge.gpus import gpu_model
    from gpuinfra.parsers.pcisysfs import PciFunction, PciSysfs
    from gpuinfra.vfio import binding, kept_gpus_problem

    model = gpu_model("H100-PCIE-80GB")
    pid = model.pci_ids[0]
    functions = [PciFunction(f"0000:{i + 1:02x}:00.0", "10de", pid, "030200", None, i, None)
                 for i in range(total)]
    pci = PciSysfs(functions)
    bound = binding([f.address for f in functions[:passed]], [], pci)
    return kept_gpus_problem(model.key, model.pci_ids, count, bound, pci)


def test_a_gpu_node_passing_its_counted_gpus_to_vms_is_refused() -> None:
    assert "leaving 2; gpu_count = 4" in (_gpus_left(2, 4, 4) or "")
    assert _gpus_left(2, 4, 2) is None and _gpus_left(0, 4, 4) is None


# ---------------------------------------------------------------------------- bounded inputs

@pytest.mark.parametrize("argv", [
    ["check", "--topo", "/dev/zero", "--profile", "pcie-only", "--gpus", "2"],
    ["smoke", "check", "/dev/zero"],
    ["parse", "topo", "/dev/zero"],
])
def test_a_device_is_refused_at_once(argv: list[str], capsys) -> None:
    from gpuinfra_cli.main import main

    assert main(argv) == 2
    assert "/dev/zero: a device" in capsys.readouterr().err


def test_captures_are_read_with_a_bound(tmp_path, capsys, monkeypatch) -> None:
    """An endless pipe or a huge file stops at the bound; a huge line is refused before any
    pattern runs over it."""
    import time

    from gpuinfra_cli import inputs
    from gpuinfra_cli.main import main

    monkeypatch.setattr(inputs, "MAX_CAPTURE_BYTES", 1 << 20)
    big = tmp_path / "big.txt"
    big.write_text("GPU0\tX\n" * 200_000)
    assert main(["parse", "topo", str(big)]) == 2
    assert "more than 1 MiB" in capsys.readouterr().err
    line = tmp_path / "line.txt"
    line.write_text("x" * 900_000)
    start = time.monotonic()
    assert main(["check", "--topo", str(line), "--profile", "pcie-only", "--gpus", "2"]) == 2
    assert "a line of 900000 characters" in capsys.readouterr().err
    assert time.monotonic() - start < 5


def test_a_binary_facts_file_is_named(tmp_path, capsys) -> None:
    from gpuinfra_cli.main import main
    from tests.conftest import REPO

    (tmp_path / "head01.json").write_bytes(b"\x00\xff\xfe")
    assert main(["render", str(REPO / "inventory/example.py"), "--facts", str(tmp_path),
                 "--out", str(tmp_path / "o")]) == 2
    assert f"{tmp_path}/head01.json: not text" in capsys.readouterr().err


# ------------------------------------------------- the older corpus's last accepted findings

K8S = {"schedulers": ["kubernetes"]}


@pytest.mark.parametrize(("key", "value", "words"), [
    ("kubernetes_pod_cidr", "127.0.0.0/16", "a loopback network"),
    ("kubernetes_service_cidr", "169.254.0.0/16", "a link-local network"),
    ("kubernetes_pod_cidr", "224.0.0.0/8", "a multicast network"),
    ("kubernetes_image_repository", "reg.local:99999/k8s", "not an image repository"),
])
def test_kubernetes_values_no_cluster_can_use(key: str, value: str, words: str) -> None:
    found = about(site(everywhere={**K8S, key: value}), key)
    assert found and words in found[0].problem
    assert not about(site(everywhere={**K8S, "kubernetes_image_repository":
                                      "reg.local:5000/k8s"}), "kubernetes_image_repository")


def test_an_address_given_as_an_integer_is_refused() -> None:
    found = about(site(gpu01={"node_address": 167772162}), "node_address")
    assert found and "not an IP address" in found[0].problem


def test_an_empty_mig_layout_is_refused() -> None:
    gpu = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}
    for empty in ({}, [{}] * 8):
        found = about(site(gpu01={**gpu, "gpu_sharing": {"mode": "mig", "mig_layout": empty}}),
                      "gpu_sharing['mig_layout']")
        assert found and "no instance on any GPU" in found[0].problem
    mixed = [{"3g.40gb": 2}] + [{}] * 7
    assert not about(site(everywhere={"mig_strategy": "mixed"},
                          gpu01={**gpu, "gpu_sharing": {"mode": "mig", "mig_layout": mixed}}),
                     "gpu_sharing['mig_layout']")


def test_a_scrape_password_in_plain_text_is_refused() -> None:
    job = {"job_name": "ipmi", "static_configs": [{"targets": ["bmc1:9290"]}],
           "basic_auth": {"username": "u", "password": "secret"}}
    found = about(site(everywhere={"monitoring_scrape_extra": [job]}), "monitoring_scrape_extra")
    assert found and "basic_auth.password is written in plain text" in found[0].problem
    assert "secret" not in found[0].problem
    job["basic_auth"] = {"username": "u", "password_file": "/etc/prometheus/ipmi.pw"}
    assert not about(site(everywhere={"monitoring_scrape_extra": [job]}),
                     "monitoring_scrape_extra")


def test_unchecked_host_keys_are_said() -> None:
    from gpuinfra_deploy.run.knobs import build_spec

    spec = build_spec(site(everywhere={"ssh_strict_host_key_checking": "no"}))
    said = [w for w in spec.warnings if w.field == "ssh_strict_host_key_checking"]
    assert len(said) == 2 and "receives the MUNGE key" in said[0].message
    assert not build_spec(site()).warnings or all(
        w.field != "ssh_strict_host_key_checking" for w in build_spec(site()).warnings)


# ------------------------------------------------------------------ contradictions

def _parts(**extra: Any) -> list[dict[str, Any]]:
    return [{"name": "gpu", "nodes": ["gpu01"], "default": True, **extra}]


def test_a_partition_qos_needs_accounting() -> None:
    found = about(site(everywhere={"slurm_partitions": _parts(qos="high")}), "slurm_partitions")
    assert found and "QOS live in the accounting database" in found[0].problem
    assert not about(site(everywhere={"slurm_partitions": _parts(qos="high"),
                                      "slurm_accounting": True}), "slurm_partitions")


def test_allow_accounts_names_accounts_the_site_makes() -> None:
    parts = _parts(allow_accounts=["physics"])
    found = about(site(everywhere={"slurm_partitions": parts, "slurm_accounting": True}),
                  "slurm_partitions")
    assert found and "physics, which the site never makes" in found[0].problem
    found = about(site(everywhere={"slurm_partitions": parts}), "slurm_partitions")
    assert found and "without slurm_accounting" in found[0].problem
    assert not about(site(everywhere={"slurm_partitions": parts, "slurm_accounting": True,
                                      "slurm_accounts": ["physics"]}), "slurm_partitions")
