"""molecule/roles/roles.yml, the one list of how CI converges each role alone, names every role
of roles/ once (the registry's roles), with a scenario that exists and a verify module that
exists; the roles scenario converges its roles in deploy.py's order."""

from __future__ import annotations

import yaml

from gpuinfra_deploy.run.knobs import role_names
from tests.conftest import REPO, deploy_roles

LIST = REPO / "molecule" / "roles" / "roles.yml"


def entries() -> list[dict]:
    return yaml.safe_load(LIST.read_text())["roles"]


def problems(found: list[dict]) -> list[str]:
    out = []
    named = [e["role"] for e in found]
    out += [f"{r}: not in roles.yml" for r in role_names() if r not in named]
    out += [f"{r}: listed {named.count(r)} times" for r in set(named) if named.count(r) > 1]
    out += [f"{r}: no such role" for r in named if r not in role_names()]
    order = deploy_roles()  # the roles scenario converges one after another, as deploy.py
    converged = [e["role"] for e in found if e["scenario"] == "roles" and e["role"] in order]
    if converged != sorted(converged, key=order.index):
        out.append(f"scenario roles: not in deploy.py's order "
                   f"({', '.join(sorted(converged, key=order.index))})")
    for e in found:
        if e["scenario"] == "plan":
            if not e.get("why"):
                out.append(f"{e['role']}: plan-only without a reason")
            continue
        if not (REPO / "molecule" / e["scenario"] / "molecule.yml").is_file():
            out.append(f"{e['role']}: no scenario molecule/{e['scenario']}")
        if not (REPO / e["verify"]).is_file():
            out.append(f"{e['role']}: no verify module {e['verify']}")
    return out


def test_every_role_has_its_way_to_converge_alone():
    assert problems(entries()) == []


def test_the_check_can_fail():
    found = [e for e in entries() if e["role"] != "slurm"]
    found.append({"role": "munge", "scenario": "nowhere", "verify": "gpuinfra_verify/x.py"})
    assert problems(found) == ["slurm: not in roles.yml", "munge: listed 2 times",
                               "munge: no scenario molecule/nowhere",
                               "munge: no verify module gpuinfra_verify/x.py"]
    logs_first = sorted(entries(), key=lambda e: e["role"] != "logs")
    assert [p.split(" (")[0] for p in problems(logs_first)] == [
        "scenario roles: not in deploy.py's order"]
