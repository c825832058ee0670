"""The docs index of the roles, held to the role folders: docs/roles.md's roles table has one
row per role of the registry (each folder of roles/), linking its README, whose first line is
the role's title; no row names a folder that is not there."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from gpuinfra_deploy.run.knobs import role_names
from tests.conftest import REPO

INDEX = REPO / "docs" / "roles.md"
ROW = re.compile(r"^\| \[`([^`]+)`\]\(\.\./roles/([^/)]+)/README\.md\) \|", re.M)


def first_line(role: str) -> str:
    return (REPO / "roles" / role / "README.md").read_text().split("\n", 1)[0]


def problems(index: str, roles: Sequence[str], first: Callable[[str], str]) -> list[str]:
    rows = ROW.findall(index)
    named = [name for name, _ in rows]
    out = [f"{name}: its row links roles/{folder}/README.md" for name, folder in rows
           if name != folder]
    out += [f"{name}: {count} rows" for name, count in Counter(named).items() if count > 1]
    out += [f"{name}: a row, but no folder roles/{name}" for name in named if name not in roles]
    for role in roles:
        title = first(role)
        if role not in named:
            out.append(f"{role}: no row in docs/roles.md's roles table (add | [`{role}`]"
                       f"(../roles/{role}/README.md) | what it does | where it runs |; its "
                       f"README opens {title!r})")
        if not (title.startswith("# ") and f"`{role}`" in title):
            out.append(f"{role}: roles/{role}/README.md opens {title!r}, not its title "
                       f"(# Role `{role}`)")
    return out


def test_every_role_folder_has_its_row():
    assert problems(INDEX.read_text(), role_names(), first_line) == []


def test_the_check_can_fail():
    index = INDEX.read_text().replace("[`slurm`](../roles/slurm/", "[`slurm`](../roles/slrum/")
    titles = {"hello": "Hello"}
    found = problems(index, [*role_names(), "hello"], lambda r: titles.get(r) or first_line(r))
    assert found == [
        "slurm: its row links roles/slrum/README.md",
        "hello: no row in docs/roles.md's roles table (add | [`hello`](../roles/hello/README.md)"
        " | what it does | where it runs |; its README opens 'Hello')",
        "hello: roles/hello/README.md opens 'Hello', not its title (# Role `hello`)"]
    assert problems("| [`gone`](../roles/gone/README.md) |", [], first_line) == [
        "gone: a row, but no folder roles/gone"]


def scenario_problems(roles: Sequence[dict], readme: Callable[[str], str]) -> list[str]:
    """Each role's README says how it is tested, as molecule/roles/roles.yml says: its
    scenario (or why it has none) under "## Tests and scenario"."""
    out = []
    for entry in roles:
        text = readme(entry["role"])
        section = text.split("## Tests and scenario", 1)[1] if "## Tests and scenario" in text \
            else None
        want = ("No lab scenario" if entry["scenario"] == "plan"
                else f"`molecule/{entry['scenario']}`")
        if section is None or want not in section.split("\n## ", 1)[0]:
            out.append(f"{entry['role']}: its README's \"## Tests and scenario\" does not say "
                       f"{want}")
    return out


def _roles_yml() -> list[dict]:
    import yaml

    return yaml.safe_load((REPO / "molecule" / "roles" / "roles.yml").read_text())["roles"]


def test_every_role_readme_points_at_its_scenario():
    def readme(role: str) -> str:
        return (REPO / "roles" / role / "README.md").read_text()

    assert scenario_problems(_roles_yml(), readme) == []
    assert scenario_problems([{"role": "slurm", "scenario": "vfio"}], readme) == [
        'slurm: its README\'s "## Tests and scenario" does not say `molecule/vfio`']
