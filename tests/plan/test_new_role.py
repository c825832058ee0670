"""A new role is its folder and one line in deploy.py: nothing else to register.

The product (its packages, roles/, deploy.py, config.py, inventory/, group_data/, templates/)
is copied to a temporary folder; a small role is dropped into the copy's roles/ (a knob
``hello_enabled``, a template ``etc/hello.conf.j2``, a README) and named on one new line of
the copy's deploy.py. The copy's own ``gpuinfra validate`` and ``gpuinfra render`` then judge
its knob (a bad value, a misspelt key), render its file and plan its operation. They run in a
subprocess whose PYTHONPATH puts the copy first (and ``gpuinfra_roles``, a link to the copy's
roles/): the venv's editable install maps the package names to this checkout, but its finder
comes after sys.path. The test checks that the copy's code and role were the ones loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PRODUCT_FOLDERS, REPO, deploy_roles

ROLE = {
    "__init__.py": '''"""The `hello` role: /etc/hello.conf on every host with hello_enabled."""

from io import StringIO

from pyinfra.api import deploy
from pyinfra.operations import files

from gpuinfra.spec import NodeSpec
from gpuinfra_deploy.run.role import Role
from gpuinfra_deploy.run.site import Site
from gpuinfra_deploy.templates import role_file

CONF = "/etc/hello.conf"


@deploy("hello")
def hello(site: Site, node: NodeSpec) -> None:
    text = role_file("hello", CONF, node=node.short_name, cluster=site.spec.name)
    files.put(name="Greet from /etc/hello.conf", dest=CONF, src=StringIO(text), mode="644")


def applies(site: Site, node: NodeSpec) -> bool:
    return node.settings["hello_enabled"]


ROLE = Role("hello", hello, applies)
apply = ROLE.apply
''',
    "defaults.py": '''"""Data keys of the `hello` role."""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean

KNOBS = (Knob("hello_enabled", True, boolean(), "/etc/hello.conf on the host"),)

DEFAULTS = defaults(KNOBS)
''',
    "deploy.py": '''from gpuinfra_deploy.run.role import entry
from gpuinfra_roles.hello import ROLE

entry(ROLE)
''',
    "README.md": "# Role `hello`\n\nA greeting in /etc/hello.conf.\n",
    "templates/etc/hello.conf.j2": "{{ header }}\nhello from {{ node }} of {{ cluster }}\n",
}
LINE = '    "hello",  # /etc/hello.conf (hello_enabled)\n'

SITE = {"ssh_hostname": "10.0.0.10", "cluster_name": "greet", "schedulers": [],
        "monitoring_enabled": False, "logs_enabled": False}
BAD = {**SITE, "hello_enabled": "yes", "hello_enabeld": True}

LOADED = '''import json, gpuinfra_deploy, gpuinfra_roles
from gpuinfra_deploy.plan import DEPLOY
from gpuinfra_deploy.run.knobs import role_names, role_knobs, roles_folder
print(json.dumps({"roles": str(roles_folder().resolve()), "names": role_names(),
                  "deploy_code": gpuinfra_deploy.__file__, "deploy": str(DEPLOY),
                  "knobs": [k.key for k in role_knobs("hello")]}))
'''


def _inventory(data: dict) -> str:
    return f"head = [('head01', {data!r})]\n"


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The product copied, the hello role dropped in, its line added to deploy.py."""
    root = tmp_path_factory.mktemp("product")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in PRODUCT_FOLDERS:
        if not folder.name.endswith(".egg-info"):
            shutil.copytree(folder, root / folder.name, ignore=skip)
    for name in ("inventory", "group_data", "templates"):
        shutil.copytree(REPO / name, root / name, ignore=skip)
    for name in ("deploy.py", "config.py"):
        shutil.copy(REPO / name, root / name)
    for name, text in ROLE.items():
        (root / "roles" / "hello" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "roles" / "hello" / name).write_text(text)
    deploy = (root / "deploy.py").read_text()
    end = deploy.index(")]\n", deploy.index("ROLES = "))
    (root / "deploy.py").write_text(deploy[:end] + LINE + deploy[end:])  # its one line
    (root / "inventory" / "hello.py").write_text(_inventory(SITE))
    (root / "inventory" / "bad.py").write_text(_inventory(BAD))
    links = root / "links"
    links.mkdir()
    (links / "gpuinfra_roles").symlink_to(root / "roles", target_is_directory=True)
    return root


def _run(copy: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{copy / 'links'}{os.pathsep}{copy}"}
    return subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True,
                          text=True, check=False, timeout=120)


def test_the_copy_names_the_role_on_one_line(copy):
    assert deploy_roles(copy / "deploy.py") == [*deploy_roles(), "hello"]


def test_the_copys_role_is_the_one_loaded(copy):
    run = _run(copy, "-c", LOADED)
    assert run.returncode == 0, run.stderr
    loaded = json.loads(run.stdout)
    assert Path(loaded["roles"]) == (copy / "roles").resolve()
    assert "hello" in loaded["names"] and loaded["knobs"] == ["hello_enabled"]
    assert Path(loaded["deploy_code"]).is_relative_to(copy)
    assert Path(loaded["deploy"]) == copy / "deploy.py"


def test_validate_judges_its_knob(copy):
    good = _run(copy, "-m", "gpuinfra_cli.main", "validate", "inventory/hello.py")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "inventory/hello.py: valid (1 hosts" in good.stdout
    bad = _run(copy, "-m", "gpuinfra_cli.main", "validate", "inventory/bad.py")
    out = bad.stdout + bad.stderr
    assert bad.returncode == 1, out
    assert "[head01] hello_enabled = 'yes': " in out  # the knob's rule, naming the key
    assert "[head01] hello_enabeld = True: unknown key (did you mean 'hello_enabled'?)" in out


def test_render_writes_its_file_and_plans_its_operation(copy):
    run = _run(copy, "-m", "gpuinfra_cli.main", "render", "inventory/hello.py", "--os",
               "debian-12", "--out", "out")
    assert run.returncode == 0, run.stdout + run.stderr
    text = (copy / "out" / "head01" / "etc" / "hello.conf").read_text()
    assert text.splitlines()[1:] == ["hello from head01 of greet"]
    assert text.startswith("# Managed by gpuinfra")
    files = json.loads((copy / "out" / "render.json").read_text())["hosts"]["head01"]["files"]
    assert {"path": "/etc/hello.conf", "operation": "hello | Greet from /etc/hello.conf"}.items() \
        <= next(f for f in files if f["path"] == "/etc/hello.conf").items()
