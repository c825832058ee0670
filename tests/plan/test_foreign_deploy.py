"""Each role, used alone in another project's own pyinfra deploy, from the installed wheel.

The project lives in a temporary folder outside the checkout: its own deploy file (the one in
docs/reuse.md, "Use one role in your own deploy", with the role's name put in), its own
group names (given to the role as data), its own unrelated host data, no config.py and no
gpuinfra group_data. gpuinfra is built into a wheel and installed into a folder of its own;
the deploy is planned by a Python that cannot see the checkout (``-S``, the checkout off
sys.path), with the plan harness of tests/plan on the same recorded facts as the role's own
plan tests.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import sysconfig
from datetime import datetime
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest

from gpuinfra_deploy.run.knobs import role_names
from tests.plan.harness import REPO, load_facts

README = REPO / "docs" / "reuse.md"
HARNESS = REPO / "tests" / "plan" / "harness.py"

# The operator's own keys, which no gpuinfra role reads: each is left alone unless it carries
# the prefix of a role the deploy runs ("monitoring_enabled" is judged by the monitoring role).
THEIRS = {"gpu_mode": "compute", "monitoring_enabled": "yes", "common_packages": "vim htop",
          "rack": "r12", "owner": "team-a"}


def readme_block(name: str) -> str:
    """A Python block of the README's section, between its ``<!-- name -->`` markers."""
    found = re.search(rf"<!-- {name} -->\n```python\n(.*?)```\n<!-- /{name} -->",
                      README.read_text(), re.S)
    assert found, f"docs/reuse.md lost its 'Use one role in your own deploy' block {name}"
    return found.group(1)


def readme_deploy() -> str:
    """The README's foreign deploy file."""
    return readme_block("foreign-deploy")


def test_the_readme_inventory_uses_the_groups_its_deploy_names():
    """The README's inventory and deploy file belong together: every group of the inventory
    is one the deploy hands the role (GROUPS), and the tests use those group names."""
    inventory: dict[str, Any] = {}
    exec(readme_block("foreign-inventory"), inventory)  # noqa: S102 - our own README
    groups = {k for k, v in inventory.items() if not k.startswith("__") and isinstance(v, list)}
    assigned = re.search(r"^GROUPS = (\{.*\})$", readme_deploy(), re.M)
    assert assigned and groups and groups <= set(ast.literal_eval(assigned.group(1)).values())
    assert {"login", "gpu_nodes"} <= groups


@pytest.fixture(scope="session")
def wheel_site(tmp_path_factory) -> Path:
    """gpuinfra built into a wheel (offline, from a copy of this checkout's files: a stale
    build/ of the checkout cannot leak in) and installed into a folder."""
    source = tmp_path_factory.mktemp("source") / "gpuinfra"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".lab", "build", "*.egg-info", "__pycache__", ".pytest_cache",
        ".ruff_cache"))
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            "--no-build-isolation", "-w", str(out), str(source)],
                           capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(out.glob("gpuinfra-*.whl"))
    site = tmp_path_factory.mktemp("site-packages")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                              "--target", str(site), str(wheel)],
                             capture_output=True, text=True, check=False)
    assert install.returncode == 0, install.stderr[-2000:]
    return site


def test_the_wheel_holds_only_project_prefixed_packages(wheel_site):
    tops = sorted(p.name for p in wheel_site.iterdir()
                  if p.is_dir() and p.name != "bin"  # the console script
                  and not p.name.endswith((".dist-info", "__pycache__")))
    assert tops and all(t == "gpuinfra" or t.startswith("gpuinfra_") for t in tops), tops
    assert {"gpuinfra_roles", "gpuinfra_deploy"} <= set(tops)
    # templates travel beside their role
    assert (wheel_site / "gpuinfra_roles/slurm/templates/etc/slurm/slurm.conf.j2").is_file()


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"__datetime__": value.isoformat()}
    raise TypeError(type(value))


DRIVER = '''
import json, sys
from pathlib import Path
import harness
from pyinfra.api.exceptions import PyinfraError

import gpuinfra_roles
assert Path(gpuinfra_roles.__file__).is_relative_to(Path(sys.argv[1])), gpuinfra_roles.__file__
site = json.loads(Path("hosts.json").read_text(), object_hook=harness._decode)
hosts = [harness.FakeHost(h["name"], tuple(h["groups"]), h["facts"], h["data"])
         for h in site["hosts"]]
try:
    result = harness.plan_hosts(Path("deploy.py").resolve(), hosts, site["targets"])
except PyinfraError as exc:
    print(exc)
    sys.exit(3)
print(json.dumps({name: [[op.name, list(op.commands)] for op in plan.ops]
                  for name, plan in result.plans.items()}))
'''


def plan_foreign(wheel_site: Path, project: Path, role: str,
                 hosts: list[dict[str, Any]]) -> tuple[int, str]:
    """Plan the README's deploy file for ``role`` in ``project`` (outside the checkout)."""
    project.mkdir(parents=True, exist_ok=True)
    (project / "deploy.py").write_text(readme_deploy().replace("nvidia_driver", role))
    shutil.copy(HARNESS, project / "harness.py")
    (project / "plan_it.py").write_text(DRIVER)
    (project / "hosts.json").write_text(json.dumps(
        {"hosts": hosts, "targets": [h["name"] for h in hosts]}, default=_encode))
    assert not project.resolve().is_relative_to(REPO)
    deps = sysconfig.get_paths()["purelib"]  # pyinfra and the rest; its .pth files unread
    run = subprocess.run([sys.executable, "-S", "plan_it.py", str(wheel_site)], cwd=project,
                         env={"PYTHONPATH": f"{wheel_site}:{deps}", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=False, timeout=120)
    assert run.returncode in (0, 3), run.stderr[-3000:]
    return run.returncode, run.stdout


# ----------------------------------------------------------------------------- the sites

GPU = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all"}


def _host(name: str, groups: tuple[str, ...], facts: dict, data: dict) -> dict[str, Any]:
    return {"name": name, "groups": list(groups), "facts": facts, "data": data}


def site_for(role: str) -> tuple[list[dict[str, Any]], set[str]]:
    """(hosts in the operator's own groups, the hosts the role must plan changes on)."""
    base = ("base-fresh", "debian-12")
    if role in ("nvidia_driver", "fabric_manager", "container_toolkit", "gpu_sharing"):
        facts = load_facts(*base, "gpu-fresh", "gpu-debian-12", "slurm-lab-worker2")
        data = {**GPU, "ssh_hostname": "10.1.0.2"}
        if role == "gpu_sharing":
            data = {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "pcie-only",
                    "gpu_sharing": {"mode": "mps", "clients": 4}, "ssh_hostname": "10.1.0.2"}
        return [_host("gpu01", ("gpu_nodes",), facts, data)], {"gpu01"}
    if role == "monitoring":
        return [_host("mgmt1", ("login",), load_facts(*base, "monitoring-fresh"),
                      {"ssh_hostname": "10.1.0.1"}),
                _host("gpu01", ("gpu_nodes",), load_facts(*base, "monitoring-fresh"),
                      {"ssh_hostname": "10.1.0.2"})], {"mgmt1", "gpu01"}
    if role == "logs":
        # It reads monitoring_enabled (its stale-logs metric): the operator's own value of
        # that key ("yes") would be judged, so the site sets it.
        data = {"monitoring_enabled": True}
        return [_host("mgmt1", ("login",), load_facts(*base), {"ssh_hostname": "10.1.0.1",
                                                               **data}),
                _host("gpu01", ("gpu_nodes",), load_facts(*base),
                      {"ssh_hostname": "10.1.0.2", **data})], {"mgmt1", "gpu01"}
    if role == "containerd":
        from tests.plan.test_containerd_plan import fresh

        return [_host("web1", ("frontends",), fresh("debian-12"),
                      {"containerd_everywhere": True})], {"web1"}
    if role == "job_containers":
        head = load_facts(*base, "munge-fresh", "slurm-fresh")
        node = load_facts(*base, "gpu-fresh", "gpu-debian-12", "munge-fresh", "slurm-fresh",
                          "slurm-lab-worker1")
        data = {"job_containers_runtime": "oci", "container_toolkit_enabled": False}
        return [_host("ctl1", ("login",), head, {"ssh_hostname": "10.1.0.1", **data}),
                _host("gpu01", ("gpu_nodes",), node, {**GPU, "ssh_hostname": "10.1.0.2",
                                                      **data})], {"gpu01"}
    if role in ("munge", "slurm", "health"):
        head = load_facts(*base, "munge-fresh", "slurm-fresh")
        node = load_facts(*base, "gpu-fresh", "gpu-debian-12", "munge-fresh", "slurm-fresh",
                          "slurm-lab-worker1")
        hosts = [_host("ctl1", ("login",), head, {"ssh_hostname": "10.1.0.1"}),
                 _host("gpu01", ("gpu_nodes",), node, {**GPU, "ssh_hostname": "10.1.0.2"})]
        # The health check runs on the workers only (slurmd runs it), not on the head.
        return hosts, {"gpu01"} if role == "health" else {"ctl1", "gpu01"}
    if role == "kubernetes":
        from tests.plan.test_kubernetes_plan import DATA, GPU1, HEAD, fresh

        head, gpu = fresh("debian-12"), fresh("debian-12")
        return [_host(HEAD, ("login",), head, DATA[HEAD]),
                _host(GPU1, ("gpu_nodes",), gpu, DATA[GPU1])], {HEAD, GPU1}
    if role == "rdma":
        from tests.plan.test_rdma_plan import GPU_NODE, NIC
        from tests.plan.test_rdma_plan import fresh as rdma_fresh

        return [_host("ib1", ("gpu_nodes",), rdma_fresh("debian-12"),
                      {**GPU_NODE, "rdma_nics": [NIC]})], {"ib1"}
    if role == "vfio":
        from tests.plan.test_vfio_plan import HV_SPEC
        from tests.plan.test_vfio_plan import fresh as vfio_fresh

        return [_host("kvm1", ("kvm_hosts",), vfio_fresh("debian-12"), HV_SPEC)], {"kvm1"}
    # Any other role (common, a new one): one plain host in the operator's own group, which it
    # must change. A role for particular hosts (GPUs, a head...) gets its own site above.
    return [_host("web1", ("frontends",), load_facts(*base), {})], {"web1"}


@pytest.mark.parametrize("role", role_names())
def test_one_role_in_a_foreign_deploy(role, wheel_site, tmp_path):
    hosts, changing = site_for(role)
    # The role judges its own keys and those of the roles it reads (Role.knob_roles: the slurm
    # role reads health_* and monitoring_*, which name its Prolog and Epilog).
    judged = tuple(f"{r}_" for r in import_module(f"gpuinfra_roles.{role}").ROLE.knob_roles)
    for host in hosts:  # the operator's own keys beside the spec's
        host["data"] = {**{k: v for k, v in THEIRS.items() if not k.startswith(judged)},
                        **host["data"]}
    code, out = plan_foreign(wheel_site, tmp_path / "their-project", role, hosts)
    assert code == 0, out
    plans = json.loads(out)
    for name, ops in plans.items():
        assert all(op.startswith(f"{role} |") for op, _ in ops), (name, ops)
        assert bool([op for op, commands in ops if commands]) == (name in changing), \
            (name, ops, "a role for particular hosts needs its own site in site_for")


def test_a_foreign_deploy_still_refuses_the_roles_own_bad_keys(wheel_site, tmp_path):
    """Left alone: the operator's keys. Judged before anything runs: the role's own keys and
    the spec keys it reads, with host, field, value and fix."""
    hosts, _ = site_for("nvidia_driver")
    hosts[0]["data"] = {**hosts[0]["data"], "nvidia_driver_device_grup": "video",
                        "gpu_count": "eight", **THEIRS}
    code, out = plan_foreign(wheel_site, tmp_path / "their-project", "nvidia_driver", hosts)
    assert code == 3, out
    assert "no host was touched" in out
    assert "[gpu01] nvidia_driver_device_grup = 'video': unknown key (did you mean " \
           "'nvidia_driver_device_group'?)" in out
    assert "[gpu01] gpu_count = 'eight'" in out
    assert not any(key in out for key in THEIRS), out


# ------------------------------------------------------------------ gpuinfra installed as a tool

CLI = "import sys; from gpuinfra_cli.main import main; sys.exit(main(sys.argv[1:]))"


def installed(wheel_site: Path, site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``gpuinfra ARGV`` from the installed wheel (the checkout off sys.path), run in
    ``site``: a site repository outside the checkout."""
    deps = sysconfig.get_paths()["purelib"]
    return subprocess.run([sys.executable, "-S", "-c", CLI, *argv], cwd=site,
                          env={"PYTHONPATH": f"{wheel_site}:{deps}",
                               "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                               "HOME": str(site)},
                          capture_output=True, text=True, check=False, timeout=300)


def test_an_installed_gpuinfra_validates_renders_and_checks_a_site_of_its_own(
        wheel_site, tmp_path):
    """Issue 44: `pip install gpuinfra` (a wheel, not editable), then the commands from a site
    folder that holds only its inventory and group_data: the deploy's entry files come from
    the wheel (gpuinfra_deploy/entry.py), never from a checkout."""
    site = tmp_path / "my-site"
    (site / "inventory").mkdir(parents=True)
    shutil.copy(REPO / "inventory" / "example.py", site / "inventory" / "example.py")
    shutil.copytree(REPO / "group_data", site / "group_data",
                    ignore=shutil.ignore_patterns("lab.py", "__pycache__"))
    assert not site.resolve().is_relative_to(REPO)
    run = installed(wheel_site, site, "validate", "inventory/example.py")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    run = installed(wheel_site, site, "render", "inventory/example.py", "--out", "out",
                    "--os", "debian-12")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    # the example's driver branch (535, the mission's) is past NVIDIA's end of life: said
    assert "branch 535 reached NVIDIA's end of life in June 2026" in run.stderr
    assert "driver_branch = '580'" in run.stderr
    rendered = json.loads((site / "out" / "render.json").read_text())
    assert rendered and (site / "out").is_dir()
    assert any((site / "out").glob("*/etc/slurm/slurm.conf"))
    capture = REPO / "tests/fixtures/real/mlxconfig" / (
        "connectx7-mt4129-q-grep-ats-enabled-false-nvidia-vm-inference-doc.txt")
    run = installed(wheel_site, site, "check", "--mlxconfig", str(capture), "--nic",
                    "mlx5_0:ats=yes")
    assert run.returncode == 1 and "ATS_ENABLED Next-Boot False" in run.stdout
    where = subprocess.run(
        [sys.executable, "-S", "-c", "from gpuinfra_deploy.entry import pyinfra_command; "
         "print(pyinfra_command('inventory/example.py'))"], cwd=site,
        env={"PYTHONPATH": f"{wheel_site}:{sysconfig.get_paths()['purelib']}"},
        capture_output=True, text=True, check=True)
    shipped = str(wheel_site / "gpuinfra_deploy" / "entry_files")
    assert f"{shipped}/config.py" in where.stdout and f"{shipped}/deploy.py" in where.stdout
    for name in ("deploy.py", "config.py"):  # the wheel's entry files are the checkout's
        assert (wheel_site / "gpuinfra_deploy/entry_files" / name).read_bytes() == \
            (REPO / name).read_bytes()
