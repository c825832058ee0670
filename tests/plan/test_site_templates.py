"""A site's own templates (templates/ beside its inventory/ and group_data/): used by render and
deploy before gpuinfra's, judged at the gate (a file that overrides nothing, a template Jinja
cannot parse: refused before any host is touched), and named when the file's consumer refuses
what they made."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuinfra_cli.main import main
from gpuinfra_deploy import render, templates
from tests.plan.harness import REPO

CGROUP = "slurm/etc/slurm/cgroup.conf.j2"
SITE_LINE = "# the site's own line (templates/slurm/etc/slurm/cgroup.conf.j2)"


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """The example site in a folder of its own, with an empty templates/ folder; the engine's
    site folders put back afterwards."""
    for folder, names in (("inventory", ["example.py"]),
                          ("group_data", ["all.py", "example.py"])):
        (tmp_path / folder).mkdir()
        for name in names:
            shutil.copy(REPO / folder / name, tmp_path / folder / name)
    (tmp_path / "templates").mkdir()
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    templates.use_site(templates.site_folders(cwd=str(REPO)))


def _override(site: Path, name: str, text: str) -> Path:
    path = site / "templates" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _shipped(name: str) -> str:
    return templates.shipped()[name].read_text()


def test_an_override_makes_the_file_in_render_and_is_named_in_the_consumers_check(site):
    path = _override(site, CGROUP, _shipped(CGROUP) + SITE_LINE + "\n")
    out = site / "out"
    assert main(["render", "inventory/example.py", "--out", str(out), "--os", "debian-12"]) == 0
    cgroup = (out / "head01/etc/slurm/cgroup.conf").read_text()
    assert cgroup.endswith(SITE_LINE + "\n") and cgroup.startswith("# Managed by gpuinfra")
    assert path.resolve() in templates.overrides_used()
    # The head's staged set (slurm.conf, gres.conf, cgroup.conf) is judged by Slurm before it
    # goes live; a refusal then names the site's template.
    result = render.render_site("inventory/example.py", os_name="debian-12")
    staged = next(f for f in result.files["head01"] if f.path == "/etc/slurm/cgroup.conf")
    said = staged.check.replace("'\"'\"'", "'")  # the message is shell-quoted
    assert f"came from the site's template {path}" in said
    assert staged.check.index("slurmd -G") < staged.check.index("came from")


def test_without_an_override_the_check_names_no_template(site):
    result = render.render_site("inventory/example.py", os_name="debian-12")
    staged = next(f for f in result.files["head01"] if f.path == "/etc/slurm/cgroup.conf")
    assert "slurmd -G" in staged.check and "site's template" not in staged.check


def test_render_says_an_override_that_made_no_file(site, capsys):
    """A role template of a role no host of this site runs (no Kubernetes in the example)."""
    name = "kubernetes/etc/sysctl.d/90-gpuinfra-kubernetes.conf.j2"
    path = _override(site, name, _shipped(name))
    assert main(["render", "inventory/example.py", "--out", str(site / "out"), "--os",
                 "debian-12"]) == 0
    assert f"warning: site template {path} made no file of this site" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "text", "says"), [
    ("slurm/etc/slurm/cgroup.cnf.j2", "x\n",
     "overrides no template gpuinfra ships, so it would never be used; did you mean "),
    (CGROUP, "{{ header }}\n{% if x %}\nno endif\n", "line 3: Unexpected end of template"),
])
def test_validate_refuses_a_bad_override_before_any_host(site, capsys, name, text, says):
    path = _override(site, name, text)
    assert main(["validate", "inventory/example.py"]) == 1
    err = capsys.readouterr().err
    assert str(path) in err and says in err
    assert main(["render", "inventory/example.py", "--out", str(site / "out"), "--os",
                 "debian-12"]) == 2
    assert says in capsys.readouterr().err


def test_an_override_naming_data_the_file_does_not_have_is_refused_naming_its_line(site,
                                                                                   capsys):
    path = _override(site, CGROUP, "{{ header }}\nCgroupPlugin={{ settings.no_such_key }}\n")
    assert main(["render", "inventory/example.py", "--out", str(site / "out"), "--os",
                 "debian-12"]) == 1
    err = capsys.readouterr().err
    assert "gpuinfra: the deploy refuses this site: head01: " in err
    assert f"{path}, line 2: 'dict object' has no attribute 'no_such_key'" in err
    assert "the site's own template: fix it, or remove it to use gpuinfra's" in err


def test_a_shared_template_override_reaches_every_file_of_its_format(site):
    """systemd/unit.j2 renders every unit and drop-in: a site's copy changes them all."""
    name = "systemd/unit.j2"
    _override(site, name, _shipped(name).replace("{{ header }}", "{{ header }}\n# site unit"))
    out = site / "out"
    assert main(["render", "inventory/example.py", "--out", str(out), "--os", "debian-12"]) == 0
    manifest = json.loads((out / "render.json").read_text())
    units = [f["path"] for f in manifest["hosts"]["hgx01"]["files"]
             if f["path"].startswith("/etc/systemd/system/") and f["kind"] == "file"]
    assert units and all((out / "hgx01" / u.lstrip("/")).read_text().split("\n")[1]
                         == "# site unit" for u in units)
