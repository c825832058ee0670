"""gpuinfra render: the example site rendered offline by the deploy itself (no connection),
its slurm.conf the very upload the plan harness sees, the lab comparison red on one changed
byte, the diff, and bad input refused with exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
from pyinfra.connectors.ssh import SSHConnector

from gpuinfra_cli.main import main
from gpuinfra_deploy import render
from gpuinfra_lab.render_matches import compare
from tests.plan.harness import DEPLOY, REPO, FakeHost, plan_hosts, upload_text

EXAMPLE = str(REPO / "inventory" / "example.py")


def _no_ssh(*_args, **_kwargs):
    raise AssertionError("render connected to a host")


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("render") / "example"
    # Proof of no connection: an SSH connect fails the test (the example's addresses,
    # 10.0.0.x, are reachable from nowhere anyway).
    with mock.patch.object(SSHConnector, "connect", _no_ssh):
        assert main(["render", EXAMPLE, "--out", str(out), "--os", "debian-12"]) == 0
    return out, json.loads((out / "render.json").read_text())


def test_render_writes_every_config_file_of_the_example(example):
    out, manifest = example
    assert set(manifest["hosts"]) == {"head01", "head02", "hgx01", "hgx02", "pcie01", "kvm01"}
    for host, path in [("head01", "etc/slurm/slurm.conf"), ("head01", "etc/slurm/gres.conf"),
                       ("head01", "etc/slurm/cgroup.conf"),
                       ("head01", "etc/prometheus/prometheus.yml"),
                       ("head01", "etc/prometheus/gpuinfra-rules.yml"),
                       ("hgx02", "etc/nvidia-mig-manager/config.yaml"),
                       ("hgx01", "etc/modprobe.d/blacklist-nouveau.conf"),
                       ("kvm01", "etc/default/grub.d/gpuinfra-vfio.cfg"),
                       ("kvm01", "etc/gpuinfra/libvirt/train1.xml")]:
        assert (out / host / path).is_file(), (host, path)
    assert "NodeName=hgx01" in (out / "head01/etc/slurm/slurm.conf").read_text()
    # The backup controller gets the head's files, byte for byte (SlurmctldHost: both).
    for name in ("slurm.conf", "gres.conf", "topology.conf"):
        assert (out / f"head02/etc/slurm/{name}").read_bytes() == \
            (out / f"head01/etc/slurm/{name}").read_bytes(), name
    assert "SlurmctldHost=head02(10.0.0.11)" in (out / "head01/etc/slurm/slurm.conf").read_text()


def test_manifest_lists_mode_sha_judge_and_assumed_facts(example):
    out, manifest = example
    files = {f["path"]: f for f in manifest["hosts"]["head01"]["files"]}
    conf = files["/etc/slurm/slurm.conf"]
    import hashlib

    assert conf["sha256"] == hashlib.sha256(
        (out / "head01/etc/slurm/slurm.conf").read_bytes()).hexdigest()
    assert conf["mode"] == "0644" and conf["judge"] == "Slurm"
    assert conf["local_check"].startswith("not checked here")
    # built from each worker's CPUs and GPUs: assumed, not recorded
    assert any("hgx01: gpuinfra_deploy.facts.system.CpuLayout" in a
               for a in conf["assumed_facts"])
    assert manifest["hosts"]["head01"]["facts"] == "assumed (debian-12)"
    # secrets are made on the host: listed, never rendered
    assert any(f["kind"] == "made-on-host" for f in manifest["hosts"]["head01"]["files"])


def test_rendered_slurm_conf_is_the_upload_the_plan_sees(example):
    out, _ = example
    hosts = render.site_hosts(EXAMPLE)
    assumed = render.assumed_facts("debian-12")
    fakes = [FakeHost(h.name, h.groups, render.merge_facts(assumed, render.spec_hardware(h.data)),
                      h.data) for h in hosts]
    plan = plan_hosts(DEPLOY, fakes, ["head01"]).plans["head01"]
    op = plan.op("Slurm configuration, checked by Slurm")
    uploads = {c.dest.rsplit("/", 1)[1]: upload_text(c.src) for c in op.raw
               if hasattr(c, "src")}
    assert uploads["slurm.conf"] == (out / "head01/etc/slurm/slurm.conf").read_text()
    assert uploads["gres.conf"] == (out / "head01/etc/slurm/gres.conf").read_text()


def test_libvirt_xml_judged_here_only_when_the_tool_is_there():
    result = render.render_site(EXAMPLE, os_name="debian-12")
    render.judge_here(result, which=lambda _tool: None)
    xml = next(f for f in result.files["kvm01"] if f.path.endswith("train1.xml"))
    assert xml.local_check == "not checked here: virt-xml-validate not installed"
    slurm = next(f for f in result.files["head01"] if f.path == "/etc/slurm/slurm.conf")
    assert slurm.local_check == "not checked here: Slurm judges it on the node itself"


def test_the_comparison_goes_red_on_one_changed_byte():
    result = render.render_site(EXAMPLE, os_name="debian-12")
    live = {(f.host, f.path): f.content for f in result.written() if f.kind == "file"}
    live.update({(f.host, f.path): b"# before\n" + f.content + b"# after\n"
                 for f in result.written() if f.kind == "block"})
    equal, problems = compare(result, lambda h, p: live.get((h, p)))
    assert problems == [] and equal == sum(1 for _ in result.written())
    key = ("head01", "/etc/slurm/slurm.conf")
    live[key] = live[key].replace(b"ClusterName=example", b"ClusterName=examplf")
    equal2, problems = compare(result, lambda h, p: live.get((h, p)))
    assert equal2 == equal - 1
    assert problems == ["head01:/etc/slurm/slurm.conf: the rendered file differs from the "
                        f"host's ({len(live[key])} bytes rendered, {len(live[key])} there)"]
    del live[key]
    assert compare(result, lambda h, p: live.get((h, p)))[1] == [
        "head01:/etc/slurm/slurm.conf: rendered, absent on the host"]


def test_recorded_facts_render_the_same_files_offline(tmp_path):
    """--record-facts's recording (here over fake hosts answering as fresh ones) holds every
    fact the render asks: rendered from that folder alone, the same files, none assumed."""
    from pyinfra.api.host import Host

    from gpuinfra_deploy.plan import fake_state

    hosts = render.site_hosts(EXAMPLE)
    answers = render.Answers({}, {h.name: render.merge_facts(
        render.assumed_facts("debian-12"), render.spec_hardware(h.data)) for h in hosts})
    state, inventory = fake_state([FakeHost(h.name, h.groups, {}, h.data) for h in hosts])
    with mock.patch.object(Host, "get_fact", answers.answerer()):
        facts = render.live._recording(state, inventory, DEPLOY)
    for name, values in facts.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(values, default=render.live._encoded))
    recorded = render.render_site(EXAMPLE, tmp_path)
    fresh = render.render_site(EXAMPLE, os_name="debian-12")
    assert [(f.host, f.path, f.content) for f in recorded.written()] == \
        [(f.host, f.path, f.content) for f in fresh.written()]
    conf = next(f for f in recorded.files["head01"] if f.path == "/etc/slurm/slurm.conf")
    assert conf.assumed == () and conf.facts
    assert recorded.facts_from["head01"] == "recorded"


def test_diff_shows_what_the_deploy_would_change():
    result = render.render_site(EXAMPLE, os_name="debian-12")
    conf = next(f for f in result.files["head01"] if f.path == "/etc/slurm/slurm.conf")
    assert conf.content is not None
    current = {("head01", "/etc/slurm/slurm.conf"):
               conf.content.replace(b"ClusterName=example", b"ClusterName=old"),
               ("head01", "/etc/slurm/cgroup.conf"): None}
    cgroup = next(f for f in result.files["head01"] if f.path == "/etc/slurm/cgroup.conf")
    current[("head01", "/etc/slurm/gres.conf")] = next(
        f for f in result.files["head01"] if f.path == "/etc/slurm/gres.conf").content
    text = "".join(render.unified_diffs(result, current))
    assert "--- head01:/etc/slurm/slurm.conf (live)\n+++ head01:/etc/slurm/slurm.conf (deploy)" \
        in text
    assert "-ClusterName=old\n+ClusterName=example\n" in text
    assert "--- head01:/etc/slurm/cgroup.conf (absent)" in text
    assert cgroup.content is not None and "gres.conf" not in text


def test_file_bytes_fact_reads_every_byte():
    from gpuinfra_deploy.facts.system import FileBytes

    assert FileBytes().process(["file", "AAEK"]) == b"\x00\x01\n"
    assert FileBytes().process([]) is None


@pytest.mark.parametrize(("argv", "says"), [
    (["render", "nowhere.py", "--out", "x", "--os", "debian-12"], "no such inventory file"),
    (["render", EXAMPLE, "--out", "x"], "no facts to render with"),
    (["render", EXAMPLE, "--out", "x", "--os", "centos-9"], "--os centos-9: not a distribution"),
    (["render", EXAMPLE], "give one of --out DIR"),
    (["render", EXAMPLE, "--out", "x", "--facts", "/nonexistent"], "no such file or folder"),
])
def test_bad_input_is_refused_with_exit_2(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuinfra: ") and says in err and "Traceback" not in err


def test_a_malformed_facts_file_is_named_with_its_key(capsys, tmp_path):
    (tmp_path / "head01.json").write_text('{"Hostname": "x"}')
    assert main(["render", EXAMPLE, "--out", str(tmp_path / "o"), "--facts",
                 str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}/head01.json: key 'Hostname' is not a fact name" in err
    (tmp_path / "head01.json").write_text('{"server.Hostname": ')
    assert main(["render", EXAMPLE, "--out", str(tmp_path / "o"), "--facts",
                 str(tmp_path)]) == 2
    assert "head01.json: not JSON" in capsys.readouterr().err


def test_an_unwritable_out_is_refused(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["render", EXAMPLE, "--out", str(blocker / "sub"), "--os", "debian-12"]) == 2
    assert "cannot write there" in capsys.readouterr().err


@pytest.mark.parametrize("os_name", ["debian-12", "ubuntu-22.04", "ubuntu-24.04"])
def test_the_lab_site_renders_on_every_distribution(os_name):
    """The lab's site (Slurm accounting with users, MPS, job containers, the health check)
    renders on every distribution with assumed fresh facts: a fact a role asks that the
    assumed layers lack would fail here (the accounting associations once did, with a
    traceback). Ubuntu 22.04's workers get the cgroup v1 kernel argument."""
    from gpuinfra.vfio import CGROUP_V1_ARGS, GRUB_DROPIN

    result = render.render_site("inventory/lab.py", os_name=os_name)
    for worker in ("lab-worker1", "lab-worker2"):
        grub = [f for f in result.files[worker] if f.path == GRUB_DROPIN]
        if os_name == "ubuntu-22.04":
            assert len(grub) == 1 and CGROUP_V1_ARGS[0] in grub[0].content.decode()
        else:
            assert not grub
    assert any("sacctmgr" in c for c in result.commands["lab-head"])


def test_a_host_that_holds_its_files_still_shows_them(tmp_path):
    """R1/R2 (test audit e4dd2f2): rendered from the facts of a host that already holds the
    files (converged: the nouveau blacklist's File and digest, the /etc/hosts block's digest),
    every file is still in the render, and no file depends on a fact of the files' state."""
    import hashlib

    fresh = render.render_site(EXAMPLE, os_name="debian-12")
    hosts_block = next(f for f in fresh.files["hgx01"] if f.path == "/etc/hosts").content
    from gpuinfra_deploy.plan import read_facts

    converged = read_facts(REPO / "tests/plan/facts/gpu-converged.json")
    blacklist = "path=/etc/modprobe.d/blacklist-nouveau.conf"
    holding = {"hgx01": {
        "files.File": {blacklist: converged["files.File"][blacklist]},
        "files.Sha1File": {blacklist: converged["files.Sha1File"][blacklist]},
        "gpuinfra_deploy.ops.block.BlockDigest": {"*": hashlib.sha256(hosts_block).hexdigest()},
    }}
    result = render.render_site(EXAMPLE, os_name="debian-12", recorded=holding)
    paths = {f.path for f in result.files["hgx01"]}
    assert {"/etc/modprobe.d/blacklist-nouveau.conf", "/etc/hosts"} <= paths
    assert [(f.path, f.content) for f in result.files["hgx01"]] == \
        [(f.path, f.content) for f in fresh.files["hgx01"]]
    for f in result.written():
        assert not [d for d in (*f.facts, *f.assumed)
                    if d.split(": ", 1)[1].split("[")[0] in render.FILE_STATE], f.path


def test_a_preview_shows_the_specs_gpus_never_the_labs(example):
    """Issue 45 item 4 (its GPU part): without recorded facts, each GPU node is rendered with
    the GPUs its spec names: pcie01's 4 bridged H100 PCIe (pairs NV12), hgx01's 8 H100 SXM
    (NV18 each), never the lab's 8 NVLink GPUs on every node."""
    out, _ = example
    gres = (out / "head01/etc/slurm/gres.conf").read_text()
    pcie = [line for line in gres.splitlines() if line.startswith("NodeName=pcie01 Name=gpu ")]
    assert [line.rsplit("Links=", 1)[1] for line in pcie] == [
        "-1,12,0,0", "12,-1,0,0", "0,0,-1,12", "0,0,12,-1"]
    hgx = [line for line in gres.splitlines() if line.startswith("NodeName=hgx01 Name=gpu ")]
    assert len(hgx) == 8 and hgx[0].endswith("Links=-1,18,18,18,18,18,18,18")
    assert "the node shows 8" not in gres
    assert "Gres=gpu:h100-pcie-80gb:4,mps:400" in (out / "head01/etc/slurm/slurm.conf"
                                                   ).read_text()


def test_spec_gpus_follow_the_profile():
    from gpuinfra_deploy.render.answers import spec_gpus

    l40s = spec_gpus({"gpu_model": "L40S", "gpu_count": 4, "gpu_topology": "pcie-only"})
    topo = l40s["gpuinfra_deploy.facts.nvidia.NvidiaTopology"]
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert {c for row in topo["links"].values() for c in row.values()} == {"NODE"}
    assert [g["model"] for g in l40s["gpuinfra_deploy.facts.nvidia.NvidiaGpus"]["gpus"]] == \
        ["L40S"] * 4
    assert spec_gpus({"gpu_model": "nope", "gpu_count": 4, "gpu_topology": "pcie-only"}) == {}
    assert spec_gpus({}) == {}
