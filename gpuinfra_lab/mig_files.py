"""Lab proof: what the gpu_sharing role does for MIG on a node, as far as it runs without a GPU.

    .venv/bin/python -m gpuinfra_lab.mig_files [inventory/lab.py]

No lab worker is a MIG node (a MIG worker's slurmd needs NVML, which no container has), so
this proof gives one a MIG layout for the length of the test: on a converged lab it deploys
the ``gpu_sharing`` role alone on lab-worker1 through an inventory beside the lab's
(``.lab/mig-proof/lab.py``: the lab's hosts, lab-worker1 with a MIG layout), and then
requires: the deploy stopped at the first step that needs a GPU (switching MIG mode on:
the replayed ``nvidia-smi`` refuses every setter), after mig-parted's config
(``/etc/nvidia-mig-manager/config.yaml``, read back with PyYAML on the node: the node's
layout), the boot script (``sh -n``) and the boot unit (``systemd-analyze verify``; enabled)
went in; a second deploy changes none of those files and stops at the same step; the boot
unit, started by hand, fails with the script's own message for GPU 0 (MIG mode Disabled:
on a real GPU this is where instances are made at boot). The files and the unit are removed
at the end whatever happened, so the lab is as it was. Exit 0 when all hold, 1 listing what
did not.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

from gpuinfra.sharing.migconfig import MIG_PARTED_CONFIG
from gpuinfra.sharing.migplan import BOOT_SCRIPT, BOOT_UNIT, BOOT_UNIT_PATH
from gpuinfra_lab.refusal import REPO, lab_ssh

NODE = "lab-worker1"
LAYOUT = {"mode": "mig", "mig_layout": {"3g.40gb": 2}}
# The lab's inventory with lab-worker1 given LAYOUT (named lab.py: its hosts stay in the "lab"
# group, so group_data/lab.py applies as it does to the lab's own inventory).
INVENTORY = f"""from inventory.lab import head, hypervisors, workers  # noqa: F401
workers = [(_n, {{**_d, "gpu_sharing": {LAYOUT!r}}}) if _n == {NODE!r} else (_n, _d)
           for _n, _d in workers]
"""
READ_BACK = ("import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); "
             "l = c['mig-configs']['gpuinfra-lab-worker1']; "
             "print(c['version'], sorted(l[0]['devices']), l[0]['mig-enabled'], "
             "l[0]['mig-devices'])")
WANT_READ_BACK = "v1 [0, 1, 2, 3, 4, 5, 6, 7] True {'3g.40gb': 2}"
# Where the deploy must stop: switching MIG on needs a GPU (the replay refuses every setter).
STOPS_AT = "failed at gpu_sharing | MIG: GPU 0: MIG mode on"
# The steps that write the files, each judged by its consumer: the second deploy changes none.
FILE_STEPS = ("gpu_sharing | MIG layout as mig-parted config", "gpu_sharing | MIG boot script",
              "gpu_sharing | MIG boot unit", "gpu_sharing | Enable gpuinfra-mig.service")


def on_node(command: str) -> tuple[int, str]:
    run = lab_ssh(NODE, command, timeout=120)
    return run.returncode, (run.stdout + run.stderr).strip()


def deploy(inventory: str) -> tuple[int, str]:
    """(exit code, output) of the gpu_sharing role alone on NODE."""
    run = subprocess.run([str(REPO / ".venv" / "bin" / "pyinfra"), "-y", inventory,
                          "roles/gpu_sharing/deploy.py", "--limit", NODE],
                         cwd=REPO, capture_output=True, text=True, check=False, timeout=600)
    return run.returncode, run.stdout + run.stderr


def outcomes(output: str) -> dict[str, str]:
    """Each operation's first result line on NODE (``Success``, ``No changes``, ...)."""
    found: dict[str, str] = {}
    name = None
    for line in output.splitlines():
        if line.startswith("--> Starting operation: "):
            name = line.removeprefix("--> Starting operation: ").strip()
        elif name and line.strip().startswith(f"[{NODE}]"):
            found.setdefault(name, line.strip().removeprefix(f"[{NODE}]").strip())
    return found


def check(inventory: str) -> list[str]:
    problems = []
    rc, output = deploy(inventory)
    if rc == 0 or STOPS_AT not in output:
        return [f"the deploy did not stop at the first step that needs a GPU ({STOPS_AT!r}): "
                f"exit {rc}", *output.splitlines()[-20:]]
    rc, read = on_node(f"python3 -c {shlex.quote(READ_BACK)} {MIG_PARTED_CONFIG}")
    if read != WANT_READ_BACK:
        problems.append(f"{MIG_PARTED_CONFIG} reads back as {read!r}, not {WANT_READ_BACK!r}")
    rc, out = on_node(f"sh -n {BOOT_SCRIPT}")
    if rc != 0:
        problems.append(f"{BOOT_SCRIPT} does not pass sh -n: {out}")
    rc, out = on_node(f"systemctl is-enabled {BOOT_UNIT}")
    if out != "enabled":
        problems.append(f"{BOOT_UNIT} is {out!r}, not enabled")
    rc, out = on_node(f"systemd-analyze verify {BOOT_UNIT_PATH}")
    if rc != 0:
        problems.append(f"systemd-analyze verify refuses {BOOT_UNIT_PATH}: {out}")
    rc, output = deploy(inventory)
    files_again = {name: result for name, result in outcomes(output).items()
                   if name.startswith(FILE_STEPS)}
    if len(files_again) != len(FILE_STEPS) or set(files_again.values()) != {"No changes"}:
        problems.append(f"the second deploy's file steps: {files_again}, not all 'No changes'")
    rc, out = on_node(f"systemctl start {BOOT_UNIT}")
    _, log = on_node(f"journalctl -u {BOOT_UNIT} -b --no-pager -o cat | tail -n 20")
    if rc == 0:
        problems.append(f"{BOOT_UNIT} succeeded where no GPU can switch MIG on")
    elif "GPU 0: MIG mode is Disabled, not Enabled" not in log:
        problems.append(f"{BOOT_UNIT} failed without the script's message for GPU 0: {log}")
    return problems


def clean() -> None:
    q = shlex.quote
    on_node(f"systemctl disable {BOOT_UNIT}; systemctl reset-failed {BOOT_UNIT}; "
            f"rm -f {q(BOOT_UNIT_PATH)} {q(BOOT_SCRIPT)} {q(MIG_PARTED_CONFIG)}; "
            f"systemctl daemon-reload; rmdir {q(MIG_PARTED_CONFIG.rsplit('/', 1)[0])}")


def main(argv: list[str]) -> int:
    if argv not in ([], ["inventory/lab.py"]):
        print("usage: python -m gpuinfra_lab.mig_files [inventory/lab.py] "
              "(the lab's inventory only)")
        return 2
    inventory = REPO / ".lab" / "mig-proof" / "lab.py"
    inventory.parent.mkdir(exist_ok=True)
    inventory.write_text(INVENTORY)
    try:
        problems = check(str(inventory))
    finally:
        clean()
        inventory.unlink()
    for line in problems:
        print(f"mig-files: {line}")
    if problems:
        return 1
    print(f"mig-files: {NODE} with {LAYOUT['mig_layout']}: {MIG_PARTED_CONFIG} read back, "
          f"{BOOT_SCRIPT} passes sh -n, {BOOT_UNIT} enabled and verified, the second deploy "
          "changes none of them; both deploys stop where a GPU is needed (MIG mode on: the "
          f"replay refuses), and {BOOT_UNIT} started by hand fails with its message for GPU 0; "
          "removed again")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
