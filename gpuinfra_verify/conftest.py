"""The verify suite's harness: any inventory of the project becomes testinfra hosts.

    .venv/bin/pytest gpuinfra_verify --inventory inventory/<site>.py [-n 4]

The inventory is read with the deploy's own loader (gpuinfra_deploy.run.inventory.load_hosts, in a
child process: see inventory_json.py) and turned into the typed cluster spec
(gpuinfra.spec.build_cluster): the expectations. Each test
runs once per host (test id ``test_x[HOST]``); a module may set ``VERIFY_NODES = "gpu"`` to
run only on hosts whose spec lists GPUs (``"workers"``: only the workers group; ``"hypervisors"``:
only the hypervisors group; ``"rdma"``: only hosts with rdma_nics), and
``VERIFY_SCHEDULER = "slurm"`` only on the nodes of that scheduler (node_schedulers). Hosts are
reached with testinfra's paramiko backend (one connection per host and process) on a client
connected as the deploy connects (the host's ssh_* data, then its ssh_config entry: HostName,
ProxyJump, ProxyCommand) that checks each host's SSH key, and each jump host's, against the
site's known_hosts (gpuinfra_verify/ssh.py: a changed key fails every test of that host).
Under pytest-xdist every test of one host runs on the same worker (scheduler below), so each
host is probed once.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from testinfra.host import Host

from gpuinfra.spec import NodeSpec, SpecInvalid, format_errors
from gpuinfra_deploy.run.learned import learned_folder
from gpuinfra_verify.batch import Batches, install
from gpuinfra_verify.expect import NO_HOST, SiteUnderTest, host_of, site_from_json
from gpuinfra_verify.ssh import ReachProblem, describe, resolve, testinfra_host

_SITE = pytest.StashKey[SiteUnderTest]()
_SITE_JSON_KEY = pytest.StashKey[str]()
_SITE_JSON = "gpuinfra_verify_site"
# Hosts named by --local: reached through testinfra's local backend (this machine).
_LOCAL_HOSTS: set[str] = set()
_SUDO: list[bool] = []  # testinfra's --sudo, as pytest_configure read it
# Each host's commands, read-only ones asked in one round trip (gpuinfra_verify/batch.py), and
# the SSH round trips each host was sent, this process; summed over xdist's workers by the
# controller and printed at the end ("commands sent over SSH").
_BATCHES = Batches(None)
_COMMANDS: Counter[str] = _BATCHES.sent
_COMMANDS_KEY = "gpuinfra_verify_commands"
_PROBLEMS_KEY = "gpuinfra_verify_batch_problems"
_PROBLEMS: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--inventory", metavar="FILE",
                     help="pyinfra inventory to verify (inventory/<site>.py)")
    parser.addoption("--local", metavar="HOST", action="append", default=[],
                     help="HOST is the machine pytest runs on: its checks run here, through "
                          "testinfra's local backend, not over SSH (repeatable; on a node "
                          "with no SSH from the laptop, or to prove a node from itself)")
    parser.addoption("--no-batch", action="store_true",
                     help="send every command in an SSH round trip of its own (testinfra's "
                          "way) instead of each node's read-only commands in one "
                          "(gpuinfra_verify/batch.py)")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("inventory", default=None)
    if not path:
        if _named(config):
            raise pytest.UsageError("verify needs --inventory inventory/<site>.py")
        return  # collected as part of a wider run (`pytest tests`): its tests skip
    worker_input = getattr(config, "workerinput", {})
    text = worker_input.get(_SITE_JSON) or _inventory_json(path, config.rootpath)
    config.stash[_SITE_JSON_KEY] = text
    try:
        config.stash[_SITE] = site_from_json(path, text)
    except SpecInvalid as exc:
        raise pytest.UsageError(format_errors(exc.errors)) from None
    local = config.getoption("local", default=[]) or []
    known = {n.name for n in config.stash[_SITE].spec.nodes}
    unknown = [name for name in local if name not in known]
    if unknown:
        raise pytest.UsageError(
            f"--local {unknown[0]}: no such host in {path} (hosts: {', '.join(sorted(known))}); "
            "fix: name the inventory host this machine is")
    _LOCAL_HOSTS.update(local)
    _SUDO.append(bool(config.getoption("sudo", default=False)))  # testinfra's --sudo
    if not config.getoption("no_batch", default=False):
        _BATCHES.folder = _learned_folder(path)


def _learned_folder(inventory: str) -> Path:
    """Where each host's learned commands are kept between runs: the folder
    GPUINFRA_VERIFY_CACHE names, else gpuinfra/verify-commands in the user's cache folder
    ($XDG_CACHE_HOME, else ~/.cache), one folder per inventory file."""
    return learned_folder(inventory, "verify-commands", "GPUINFRA_VERIFY_CACHE")


def pytest_sessionfinish(session: pytest.Session) -> None:
    try:
        _BATCHES.save()
    except OSError as exc:  # the next run reads each node command by command: say why
        _PROBLEMS.append(f"the learned commands could not be kept: {exc}")
    _PROBLEMS.extend(_BATCHES.problems())
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the counts to the controller
        workeroutput[_COMMANDS_KEY] = dict(_COMMANDS)
        workeroutput[_PROBLEMS_KEY] = list(_PROBLEMS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    output = getattr(node, "workeroutput", {})
    _COMMANDS.update(output.get(_COMMANDS_KEY, {}))
    _PROBLEMS.extend(output.get(_PROBLEMS_KEY, []))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    site = config.stash.get(_SITE, None)
    proxied = _proxied(site) if site is not None else []
    if proxied:
        terminalreporter.write_line("reached through a proxy: " + "; ".join(proxied))
    for problem in dict.fromkeys(_PROBLEMS):
        terminalreporter.write_line(problem)
    if not _COMMANDS:
        return
    per_host = ", ".join(f"{name} {count}" for name, count in sorted(_COMMANDS.items()))
    terminalreporter.write_line(f"commands sent over SSH: {sum(_COMMANDS.values())} "
                                f"({per_host})")


def _proxied(site: SiteUnderTest) -> list[str]:
    """The routes of the hosts reached through a jump host or a ProxyCommand (ssh_config)."""
    routes = []
    for node in site.spec.nodes:
        if node.name in _LOCAL_HOSTS:
            continue
        try:
            route = resolve(site.target(node.name))
        except Exception:  # an unreadable ssh_config: the host's own tests say it
            continue
        if route.jumps or route.proxy_command:
            routes.append(describe(route))
    return routes


def _named(config: pytest.Config) -> bool:
    """True when the command line names this folder or a file in it."""
    here = Path(__file__).resolve().parent
    return any((config.invocation_params.dir / arg.split("::")[0]).resolve().is_relative_to(here)
               for arg in config.args)


def _inventory_json(path: str, root: Path) -> str:
    """The inventory as JSON, read in a child process (see gpuinfra_verify/inventory_json.py)."""
    run = subprocess.run(
        [sys.executable, "-m", "gpuinfra_verify.inventory_json", str(Path(path).resolve())],
        cwd=root, capture_output=True, text=True, check=False,
    )
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or [f"{path}: cannot be loaded"])[-1]
        raise pytest.UsageError(last)
    return run.stdout


def pytest_configure_node(node: Any) -> None:
    """xdist: hand the workers the inventory the controller already read."""
    if _SITE_JSON_KEY in node.config.stash:
        node.workerinput[_SITE_JSON] = node.config.stash[_SITE_JSON_KEY]


def pytest_report_header(config: pytest.Config) -> str | None:
    site = config.stash.get(_SITE, None)
    return f"inventory: {site.inventory} ({len(site.spec.nodes)} hosts)" if site else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "node_name" not in metafunc.fixturenames:
        return
    site = metafunc.config.stash.get(_SITE, None)
    if site is None:
        skip = pytest.mark.skip(reason="run as: pytest gpuinfra_verify --inventory FILE")
        metafunc.parametrize("node_name", [pytest.param("", marks=skip)], ids=["no-inventory"])
        return
    nodes = site.spec.nodes
    which = getattr(metafunc.module, "VERIFY_NODES", "all")
    if which == "gpu":
        nodes = tuple(n for n in nodes if n.gpus is not None)
    elif which == "workers":
        nodes = tuple(n for n in nodes if n.is_worker)
    elif which == "hypervisors":
        nodes = tuple(n for n in nodes if n.is_hypervisor)
    elif which == "login":
        nodes = tuple(n for n in nodes if n.is_login)
    elif which == "rdma":
        nodes = tuple(n for n in nodes if n.rdma_nics)
    scheduler = getattr(metafunc.module, "VERIFY_SCHEDULER", None)
    if scheduler:
        nodes = tuple(n for n in nodes if scheduler in n.schedulers)
    names = [n.name for n in nodes]
    if not names:  # one skipped case that names why, not pytest's "NOTSET"
        kind = {"gpu": "with GPUs in its spec", "workers": "in the workers group",
                "hypervisors": "in the hypervisors group", "rdma": "with rdma_nics",
                "login": "in the login group"}
        why = " and ".join(filter(None, [kind.get(which, ""),
                                         f"running {scheduler}" if scheduler else ""]))
        skip = pytest.mark.skip(reason=f"no host of this site {why or 'applies'}")
        metafunc.parametrize("node_name", [pytest.param("", marks=skip)], ids=[NO_HOST],
                             scope="module")
        return
    metafunc.parametrize("node_name", names, ids=names, scope="module")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `-n N` (xdist's default `load` mode) send all tests of a host to one worker."""
    if config.getvalue("dist") != "load":
        return None  # another --dist mode (loadscope, loadgroup, ...) wins
    from xdist.scheduler import LoadScopeScheduling

    class ByHost(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return host_of(nodeid) or nodeid

    return ByHost(config, log)


@pytest.fixture(scope="session")
def site(pytestconfig: pytest.Config) -> SiteUnderTest:
    return pytestconfig.stash[_SITE]


@pytest.fixture(scope="module")
def node(site: SiteUnderTest, node_name: str) -> NodeSpec:
    """The host's spec (groups, GPUs)."""
    return site.spec.node(node_name)


@pytest.fixture(scope="module")
def node_data(site: SiteUnderTest, node_name: str) -> Mapping[str, Any]:
    """The host's merged pyinfra data (inventory, group_data)."""
    return site.data[node_name]


def _reach(site: SiteUnderTest, name: str) -> Host:
    """The testinfra host ``name``, reached as the deploy reaches it (ssh_config, ProxyJump), its
    SSH key (and each jump host's) checked; a key the site does not trust fails the test with
    both fingerprints and the fix, a hop that fails names the hop and the fix (no traceback)."""
    if name in _LOCAL_HOSTS:
        import testinfra

        return testinfra.get_host("local://")
    try:
        host = testinfra_host(site.target(name), sudo=any(_SUDO))
    except ReachProblem as exc:
        pytest.fail(str(exc), pytrace=False)
    problem = _not_root(host, name)
    if problem:
        pytest.fail(problem, pytrace=False)
    install(host.backend, _BATCHES.host(name, _kind(site.spec.node(name))), _COMMANDS)
    return host


_ROOT: dict[str, str] = {}  # host -> "" (root, or through sudo) or why not, once per process


def _not_root(host: Host, name: str) -> str:
    """Why the suite cannot judge ``name`` as it reaches it ("" when it can): its checks read
    what only root may (the MUNGE key, journals, containerd, sysctls), so a non-root SSH user
    without --sudo would fail them for the user, not the node, each under a wrong cause."""
    if name not in _ROOT:
        uid = host.run("id -u")
        user = host.run("id -un").stdout.strip() or "?"
        _ROOT[name] = "" if uid.rc == 0 and uid.stdout.strip() == "0" else (
            f"{name}: the SSH user {user} is not root and the suite runs without --sudo\n"
            "  cause: the checks read what only root may (the MUNGE key, journals, "
            "containerd, sysctls): as this user they would fail for the user, not the node\n"
            "  fix: run `gpuinfra report --inventory <site> --sudo` (`pytest gpuinfra_verify "
            "--sudo`); the user needs passwordless sudo, as `gpuinfra deploy --sudo` does")
    return _ROOT[name]


def _kind(node: NodeSpec) -> str:
    """Hosts of one kind are sent the same commands (a host never seen borrows the list)."""
    return repr((node.groups, node.gpus, node.schedulers, node.rdma_nics, node.vfio,
                 sorted((k, repr(v)) for k, v in node.settings.items())))


@pytest.fixture(scope="session")
def reach(site: SiteUnderTest) -> Callable[[str], Host]:
    """Another host of the site by name (for checks between two hosts: ib_write_bw)."""
    return lambda name: _reach(site, name)


@pytest.fixture(scope="module")
def host(site: SiteUnderTest, node_name: str) -> Host:
    """The testinfra host (paramiko backend; one connection per host and process)."""
    return _reach(site, node_name)


@pytest.fixture(scope="module")
def slurm_site(site: SiteUnderTest) -> None:
    """Skip a Slurm/munge module on a site whose schedulers do not include Slurm."""
    if "slurm" not in site.spec.schedulers:
        pytest.skip("schedulers has no 'slurm'")


@pytest.fixture(scope="session")
def controller(site: SiteUnderTest) -> Host:
    """The head (Slurm controller) as a testinfra host, for checks run from the controller."""
    if len(site.spec.head) != 1:
        pytest.skip(f"{len(site.spec.head)} hosts in 'head': no single controller")
    return _reach(site, site.spec.head[0].name)


@pytest.fixture
def note(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """Record a value in the test's junit XML properties (read by `gpuinfra report`)."""

    def add(name: str, value: object) -> None:
        request.node.user_properties.append((name, value))

    return add
