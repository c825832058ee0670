"""Lab proof: gpuinfra installed as a tool (a wheel in a fresh virtual environment, not the
checkout) validates, renders and deploys the lab from a site folder of its own.

    .venv/bin/python -m gpuinfra_lab.installed_deploy [inventory/lab.py]

On a converged lab: builds the wheel from this checkout, installs it (with its dependencies)
into a new virtual environment, and makes a site folder outside the checkout holding only the
lab's inventory, its group_data and a link to the lab's connection data (.lab/). From that
folder, with the new environment's programs: `gpuinfra validate`, `gpuinfra render --os
debian-12`, and the deploy itself (pyinfra with the wheel's own deploy.py and config.py,
gpuinfra_deploy/entry.py), which must reach every host and change nothing (the lab is
converged). Exit 0 when all hold, 1 listing what did not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gpuinfra_lab.deploys import changed_operations

REPO = Path(__file__).resolve().parents[1]


def _run(argv: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          check=False, timeout=timeout)


def prove(inventory: str = "inventory/lab.py") -> list[str]:
    """What did not hold (empty: the proof holds)."""
    lab = REPO / ".lab"
    if not (lab / "hosts.json").is_file():
        return ["no lab is up (.lab/hosts.json): run `gpuinfra lab up` and deploy first"]
    work = Path(tempfile.mkdtemp(prefix="gpuinfra-installed-"))
    try:
        wheels, source = work / "wheels", work / "source"
        # A copy of the checkout's files: a stale build/ of the checkout cannot leak in.
        shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
            ".git", ".venv", ".lab", "build", "*.egg-info", "__pycache__", ".pytest_cache",
            ".ruff_cache"))
        built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                      "--no-build-isolation", "-w", str(wheels), str(source)], work)
        if built.returncode != 0:
            return [f"the wheel did not build: {built.stderr[-800:]}"]
        wheel = next(wheels.glob("gpuinfra-*.whl"))
        venv = work / "venv"
        made = _run([sys.executable, "-m", "venv", str(venv)], work)
        if made.returncode != 0:
            return [f"no virtual environment: {made.stderr[-400:]}"]
        installed = _run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], work)
        if installed.returncode != 0:
            return [f"pip install {wheel.name} failed: {installed.stderr[-800:]}"]
        site = work / "site"
        (site / "inventory").mkdir(parents=True)
        shutil.copy(REPO / inventory, site / "inventory" / Path(inventory).name)
        shutil.copytree(REPO / "group_data", site / "group_data",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (site / ".lab").symlink_to(lab)
        inv = f"inventory/{Path(inventory).name}"
        return _from_the_site(venv, site, inv)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _from_the_site(venv: Path, site: Path, inv: str) -> list[str]:
    problems = []
    tool = str(venv / "bin" / "gpuinfra")
    where = _run([str(venv / "bin" / "python"), "-c", "import gpuinfra_deploy.entry as e, "
                  "json; print(json.dumps([str(e.entry_file('deploy.py')), "
                  f"e.pyinfra_command({inv!r}, '--json')]))"], site)
    if where.returncode != 0:
        return [f"the installed gpuinfra does not import: {where.stderr[-600:]}"]
    deploy_file, command = json.loads(where.stdout)
    if not deploy_file.startswith(str(venv)):
        problems.append(f"the deploy file is {deploy_file}, not the installed wheel's")
    validated = _run([tool, "validate", inv], site)
    if validated.returncode != 0:
        problems.append(f"gpuinfra validate exited {validated.returncode}: "
                        f"{validated.stderr[-600:]}")
    rendered = _run([tool, "render", inv, "--out", "out", "--os", "debian-12"], site)
    if rendered.returncode != 0 or not (site / "out" / "render.json").is_file():
        problems.append(f"gpuinfra render exited {rendered.returncode}: "
                        f"{rendered.stderr[-600:]}")
    deployed = _run(command, site, timeout=1500)
    try:
        results = json.loads(deployed.stdout)["results"]
    except (ValueError, KeyError):
        return [*problems, f"the deploy from the wheel printed no JSON (exit "
                f"{deployed.returncode}): {deployed.stderr[-1200:]}"]
    if deployed.returncode != 0 or results.get("failed_hosts"):
        problems.append(f"the deploy from the wheel failed (exit {deployed.returncode}, "
                        f"failed hosts {results.get('failed_hosts')}): "
                        f"{deployed.stderr[-800:]}")
    changed = changed_operations(results)
    if changed:
        problems.append("the deploy from the wheel changed a converged lab: " + "; ".join(
            f"{name} on {', '.join(hosts)}" for name, hosts in changed))
    if not problems:
        totals = results.get("totals", {})
        print(f"installed-deploy: ok: the wheel in a fresh venv validated, rendered and "
              f"deployed the lab from {site.name}/ outside the checkout "
              f"({totals.get('no_change', 0)} operations, none changed)")
    return problems


def main(argv: list[str]) -> int:
    problems = prove(*argv[:1])
    for problem in problems:
        print(f"installed-deploy: FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
