"""The one template engine (gpuinfra_deploy/templates): where a template is found, what a value
may hold, XML escaping, the names of its errors, and the index in templates/README.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuinfra.text import Block, FileText
from gpuinfra_deploy import templates
from gpuinfra_deploy.run.knobs import role_names
from gpuinfra_deploy.templates import TemplateProblem, render, shipped, text
from gpuinfra_deploy.templates.index import BEGIN, END, table
from tests.conftest import REPO


@pytest.fixture
def site(tmp_path):
    """An empty site templates folder in use; the default (the checkout's) put back after."""
    templates.use_site([tmp_path])
    yield tmp_path
    templates.use_site(templates.site_folders(cwd=str(REPO)))


def _write(folder: Path, name: str, text_: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text_)
    return path


def test_the_search_order_is_the_site_then_the_role_then_the_shared_ones(site):
    name = "slurm/etc/slurm/cgroup.conf.j2"
    ours = render(name, settings={"cgroup_plugin": "cgroup/v2"})
    assert not ours.override and ours.origin == REPO / "roles/slurm/templates/etc/slurm" \
        / "cgroup.conf.j2" and "CgroupPlugin=cgroup/v2" in ours
    _write(site, name, "site {{ settings.cgroup_plugin }}\n")
    theirs = render(name, settings={"cgroup_plugin": "cgroup/v2"})
    assert theirs == "site cgroup/v2\n" and theirs.override and theirs.origin == site / name
    assert theirs.about == f"the site's template {site / name}"
    shared = render("systemd/unit.j2", about=[], sections=[])
    assert shared.origin.is_relative_to(templates.SHARED) and not shared.override


def test_a_value_with_a_line_break_is_refused_unless_the_data_says_it_is_a_block(site):
    _write(site, "t/plain.j2", "Key={{ value }}\n")
    with pytest.raises(TemplateProblem, match=r"plain\.j2.*has a line break: it would add "
                                              r"lines"):
        render("t/plain.j2", value="a\nExecStartPre=/tmp/evil")
    with pytest.raises(TemplateProblem, match="line break"):
        render("t/plain.j2", value="a\rb")
    assert render("t/plain.j2", value=Block("a\nb")) == "Key=a\nb\n"


def test_a_name_the_data_lacks_is_an_error_never_an_empty_value(site):
    _write(site, "t/strict.j2", "{{ header }}\nA={{ missing }}\n")
    with pytest.raises(TemplateProblem, match=r"strict\.j2, line 2: 'missing' is undefined"):
        render("t/strict.j2")


def test_xml_templates_are_escaped_and_others_are_not(site):
    _write(site, "t/vm.xml.j2", "<name>{{ name }}</name>\n")
    _write(site, "t/vm.conf.j2", "name={{ name }}\n")
    assert render("t/vm.xml.j2", name="a<b & 'c'") == \
        "<name>a&lt;b &amp; &#39;c&#39;</name>\n"
    assert render("t/vm.conf.j2", name="a<b&c") == "name=a<b&c\n"


def test_the_sh_filter_quotes_for_the_shell(site):
    _write(site, "t/run.j2", "#!/bin/sh\nls {{ path | sh }} {{ safe | sh }}\n")
    assert render("t/run.j2", path="/tmp/a b;rm -rf /", safe="/etc/x") == \
        "#!/bin/sh\nls '/tmp/a b;rm -rf /' /etc/x\n"


def test_an_unknown_template_is_named_with_the_nearest_one():
    with pytest.raises(TemplateProblem, match=r"no template slurm/etc/slurm/slurm\.cnf\.j2 "
                                              r"\(did you mean slurm/etc/slurm/slurm\.conf\.j2"):
        render("slurm/etc/slurm/slurm.cnf.j2")
    for bad in ("/etc/x.j2", "slurm/../x.j2", "slurm/x.conf"):
        with pytest.raises(TemplateProblem, match="not a template name"):
            render(bad)


def test_file_text_renders_the_librarys_data():
    unit = FileText("systemd/unit.j2", {"about": ["why"], "sections": [
        {"name": "Service", "lines": [("Restart", "on-failure"), ("#", ["a", "b"])]}]})
    assert text(unit) == ("# Managed by gpuinfra: local edits are overwritten on the next "
                          "deploy.\n# why\n[Service]\nRestart=on-failure\n# a\n# b\n")


def test_every_shipped_template_parses_and_shared_folders_are_no_role_names():
    env = templates._environment(())
    for name, path in shipped().items():
        env.parse(path.read_text(), name, str(path))
    assert not set(templates.shared_formats()) & set(role_names())
    assert {name.split("/")[0] for name in shipped()} >= {"systemd", "slurm", "vfio"}


def test_the_site_folder_readme_lists_every_shipped_template():
    """templates/README.md's table is the index (python -m gpuinfra_deploy.templates.index
    --write templates/README.md); a template added or removed shows here."""
    readme = (REPO / "templates" / "README.md").read_text()
    listed = readme[readme.index(BEGIN) + len(BEGIN):readme.index(END)].strip() + "\n"
    assert listed == table(), "run python -m gpuinfra_deploy.templates.index --write " \
        "templates/README.md"


def test_the_site_folders_are_found_as_group_data_is(tmp_path):
    (tmp_path / "site" / "inventory").mkdir(parents=True)
    (tmp_path / "site" / "templates").mkdir()
    inventory = tmp_path / "site" / "inventory" / "x.py"
    assert templates.site_folders(str(inventory), cwd=str(tmp_path)) == \
        [tmp_path / "site" / "templates"]
    (tmp_path / "templates").mkdir()
    assert templates.site_folders(str(inventory), cwd=str(tmp_path)) == \
        [tmp_path / "templates", tmp_path / "site" / "templates"]


def test_a_refused_override_is_named_by_the_check_as_the_shell_runs_it(site, tmp_path):
    """The consumer's check (check_script: it ends with its own `exit 1`) refuses a staged
    file made by the site's template: the script says the consumer's error, gpuinfra's
    refusal, then names the template, and fails; a check that passes says nothing."""
    import subprocess

    from gpuinfra_deploy.ops.checked import check_script, overrides_named

    path = _write(site, "slurm/etc/slurm/cgroup.conf.j2", "CgroupPlugin=broken\n")
    made = render("slurm/etc/slurm/cgroup.conf.j2")
    refused = overrides_named(check_script("echo 'error: bad plugin'; false", "Slurm", "/x"),
                              [made])
    run = subprocess.run(["sh", "-c", refused], capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "error: bad plugin",
        "gpuinfra: Slurm refused the new configuration (checked on the files staged in /x); "
        "nothing was installed and the running service keeps its current configuration. Fix "
        "the site data and deploy again.",
        f"gpuinfra: the refused files came from the site's template {path}: fix it (the "
        "message above is the consumer's), or remove it to use gpuinfra's own, and deploy "
        "again."]
    accepted = overrides_named(check_script("true", "Slurm", "/x"), [made])
    assert subprocess.run(["sh", "-c", accepted], capture_output=True, text=True,
                          check=False).returncode == 0
    assert overrides_named("true", ["gpuinfra's own text"]) == "true"  # no override: as is
