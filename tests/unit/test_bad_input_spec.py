"""Hostile and careless spec input: every class is refused at the gate, named, never a crash.

Each case starts from one valid site (the roles' knobs included, as the gate judges it) and
breaks one thing. The gate must raise SpecInvalid naming the field; anything else (a pass, a
TypeError) is a failure of the gate.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gpuinfra.apt.mirror import point_at_mirror
from gpuinfra.spec import HostInput, SpecInvalid, format_errors
from gpuinfra_deploy.run.knobs import build_spec, spec_problems
from gpuinfra_deploy.templates import text as file_text

Site = dict[str, tuple[tuple[str, ...], dict[str, Any]]]
NIC = {"name": "mlx5_0", "pci": "0000:17:00.0", "ats": True, "link_layer": "infiniband"}


def valid_site() -> Site:
    return {
        "head01": (("head",), {"node_address": "10.0.0.1"}),
        "gpu01": (("workers",), {"node_address": "10.0.0.2", "gpu_model": "H100-PCIE-80GB",
                                 "gpu_count": 2,
                                 "gpu_topology": "bridged-pairs", "rdma_nics": [dict(NIC)]}),
        "gpu02": (("workers",), {"node_address": "10.0.0.3", "gpu_model": "H100-PCIE-80GB",
                                 "gpu_count": 2,
                                 "gpu_topology": "bridged-pairs"}),
    }


def hosts(site: Site) -> list[HostInput]:
    return [HostInput(name, groups, data) for name, (groups, data) in site.items()]


def everywhere(**values: Any) -> Callable[[Site], None]:
    def mutate(site: Site) -> None:
        for _, data in site.values():
            data.update(values)
    return mutate


def on(host: str, **values: Any) -> Callable[[Site], None]:
    return lambda site: site[host][1].update(values)


def rename(old: str, new: str) -> Callable[[Site], None]:
    def mutate(site: Site) -> None:
        site[new] = site.pop(old)
    return mutate


def partitions(*parts: Any) -> Callable[[Site], None]:
    return everywhere(slurm_partitions=list(parts))


def nic(**changes: Any) -> Callable[[Site], None]:
    def mutate(site: Site) -> None:
        entry = {**NIC, **changes}
        site["gpu01"][1]["rdma_nics"] = [{k: v for k, v in entry.items() if v is not ...}]
    return mutate


def no_workers(site: Site) -> None:
    for name in ("gpu01", "gpu02"):
        del site[name]


def test_the_valid_site_passes():
    spec = build_spec(hosts(valid_site()))
    assert [n.name for n in spec.workers] == ["gpu01", "gpu02"]


# (id, mutation, field named in the error, words in the problem)
CASES = [
    # names are matched whole: a trailing newline never passes
    ("host-name-newline", rename("gpu02", "gpu02\n"), "host name", "not a valid host name"),
    ("cluster-name-newline", everywhere(cluster_name="lab\n"), "cluster_name", "not a valid"),
    ("partition-newline", partitions({"name": "gpu\n", "nodes": ["gpu01"]}),
     "slurm_partitions[0]['name']", "malformed partition name"),
    ("nic-name-newline", nic(name="mlx5_0\n"), "rdma_nics[0]['name']", "malformed"),
    ("pci-newline", nic(pci="0000:17:00.0\n"), "rdma_nics[0]['pci']", "malformed"),
    # host names that differ only in case are one host to DNS, Slurm and /etc/hosts
    ("host-case", rename("gpu02", "GPU01"), "host name", "differ only in case"),
    # keys in another case, at the top and inside nested structures
    ("key-case", on("gpu01", GPU_MODEL="H100-PCIE-80GB"), "GPU_MODEL", "did you mean"),
    ("partition-key-typo", partitions({"name": "gpu", "nodes": ["gpu01"], "Default": True}),
     "slurm_partitions[0]['Default']", "did you mean 'default'"),
    ("partition-key-unknown", partitions({"name": "gpu", "nodes": ["gpu01"],
                                          "preempt_mode": "x"}),
     "slurm_partitions[0]['preempt_mode']", "unknown partition setting"),
    ("sharing-key-typo", on("gpu01", gpu_sharing={"mode": "time-slicing", "Replicas": 4}),
     "gpu_sharing['Replicas']", "did you mean 'replicas'"),
    ("nic-key-typo", nic(linklayer="ethernet"), "rdma_nics[0]['linklayer']",
     "did you mean 'link_layer'"),
    # groups and roles
    ("group-typo", lambda s: s.update(gpu02=(("worker",), s["gpu02"][1])), "group",
     "did you mean 'workers'"),
    ("slurm-without-workers", no_workers, "group 'workers'", "no Slurm worker"),
    ("partition-names-head", partitions({"name": "gpu", "nodes": ["gpu01", "head01"],
                                         "gpu": False}),
     "slurm_partitions[0]['nodes']", "not a worker"),
    ("partition-nested-list", partitions({"name": "gpu", "nodes": [["gpu01", "gpu02"]]}),
     "slurm_partitions[0]['nodes']", "host name"),
    # offline sites need real mirrors, not a mapping of None
    ("offline-mirrors-none", everywhere(offline=True, apt_mirror={"debian": None},
                                        nvidia_repo_mirror="http://m.example/nvidia"),
     "apt_mirror", "offline site"),
    # values pasted into apt files
    ("proxy-quote", everywhere(apt_proxy='http://p:3128";\nAPT::Update::Pre-Invoke "id'),
     "apt_proxy", "malformed URL"),
    ("mirror-backslash", everywhere(apt_mirror="http://m.example/debian\\n\\1"),
     "apt_mirror", "malformed URL"),
    # role data at the gate
    ("role-data", everywhere(slurm_db_name="acct; DROP DATABASE x"), "slurm_db_name",
     "not a database identifier"),
    ("link-layer-unknown", nic(link_layer="token-ring"), "rdma_nics[0]['link_layer']",
     "unknown link layer"),
]


@pytest.mark.parametrize(("mutate", "field", "words"),
                         [pytest.param(m, f, w, id=i) for i, m, f, w in CASES])
def test_bad_input_is_refused_and_named(mutate, field, words):
    site = copy.deepcopy(valid_site())
    mutate(site)
    problems = spec_problems(hosts(site))  # never raises anything but SpecInvalid inside
    matching = [p for p in problems if p.field == field]
    assert matching, f"no error on {field!r}; got {[str(p) for p in problems]}"
    assert any(words in p.problem for p in matching), [str(p) for p in matching]


@pytest.mark.parametrize("layer", ["InfiniBand", "Ethernet", "ETHERNET", "infiniband"])
def test_link_layer_as_ibv_devinfo_prints_it_is_accepted(layer):
    site = valid_site()
    nic(link_layer=layer)(site)
    spec = build_spec(hosts(site))
    assert spec.node("gpu01").rdma_nics[0].link_layer == layer.lower()


def test_a_huge_value_is_cut_in_every_message():
    site = valid_site()
    everywhere(cluster_name="x" * 1_000_000)(site)
    with pytest.raises(SpecInvalid) as exc:
        build_spec(hosts(site))
    assert len(str(exc.value)) < 2000
    assert len(format_errors(exc.value.errors)) < 2000


@pytest.mark.parametrize("mirror", ["http://m.example/\\1", "http://m.example/\\g<0>",
                                    "http://m.example/a\\nb"])
def test_mirror_is_never_a_replacement_template(mirror):
    """The library function itself (called with a value the gate would refuse) pastes the
    mirror literally: `\\1` does not crash, `\\n` adds no line."""
    text = "deb http://deb.debian.org/debian bookworm main\n"
    out = point_at_mirror(text, "debian", mirror)
    assert out == f"deb {mirror} bookworm main\n"


@pytest.mark.parametrize("proxy", ['http://p:3128";\nAPT::Update::Pre-Invoke {"id";};//',
                                   "http://p:3128\nx", "http://p:3128;"])
def test_the_apt_proxy_file_never_carries_a_directive(proxy):
    """The file builder itself refuses what the gate refuses (a role called with raw data)."""
    from gpuinfra.apt.files import apt_proxy_conf
    from gpuinfra.errors import GpuinfraError

    with pytest.raises(GpuinfraError):
        file_text(apt_proxy_conf(proxy))
    assert file_text(apt_proxy_conf("http://u:pw@p.example:3128")).count('"') == 4


# ----------------------------------------------------------------------------- node addresses

def _at(**addresses: str) -> list[HostInput]:
    site = valid_site()
    for name, address in addresses.items():
        site[name][1]["node_address"] = address
    return hosts(site)


@pytest.mark.parametrize("address,words", [
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("127.0.0.1", "loopback"), ("::1", "loopback"),
    ("255.255.255.255", "broadcast"), ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
    ("169.254.10.1", "link-local"), ("fe80::1", "link-local"),
])
def test_a_node_address_that_is_not_one_nodes_is_refused(address, words):
    errors = [e for e in spec_problems(_at(gpu01=address)) if e.field == "node_address"]
    assert len(errors) == 1 and errors[0].host == "gpu01" and words in errors[0].problem, errors


def test_one_address_on_two_hosts_is_refused_naming_both():
    errors = [e for e in spec_problems(_at(gpu01="10.0.0.5", gpu02="10.0.0.5"))
              if e.field == "node_address"]
    assert len(errors) == 1 and "gpu01, gpu02" in errors[0].problem, errors
    assert not spec_problems(_at(gpu01="10.0.0.5", gpu02="10.0.0.6", head01="fd00::1"))


@pytest.mark.parametrize("limit", ["\u0661\u0660G", "1\u06f0G"])
def test_unicode_digits_are_not_digits_to_the_files_they_land_in(limit):
    """`\\d` matches Arabic-Indic digits; the MPS limit lands in a unit file and
    nvidia-cuda-mps-control: ASCII digits only."""
    site = valid_site()
    site["gpu02"][1]["gpu_sharing"] = {"mode": "mps", "clients": 4,
                                       "pinned_mem_limit": limit}
    assert [e for e in spec_problems(hosts(site)) if "pinned_mem_limit" in e.field]
