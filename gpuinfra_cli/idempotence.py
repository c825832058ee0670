"""Deploy once more and prove nothing changes: `python -m gpuinfra_cli.idempotence INVENTORY`.

Runs `pyinfra -y --json INVENTORY deploy.py`, checks the exit code first (when every host
fails pyinfra prints no JSON), and reads `results.totals.success`: the operations that changed
something. Exit 0 when that is zero, 1 (listing each changing operation and its hosts) when
not, 2 when the deploy itself failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpuinfra_lab.deploys import changed_operations


def run(inventory: str, deploy: str = "deploy.py") -> int:
    pyinfra = str(Path(sys.executable).with_name("pyinfra"))
    proc = subprocess.run([pyinfra, "-y", "--json", inventory, deploy], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        print(f"idempotence: the deploy failed (exit {proc.returncode})", file=sys.stderr)
        return 2
    try:
        results = json.loads(proc.stdout)["results"]
    except (ValueError, KeyError) as exc:
        print(f"idempotence: pyinfra printed no JSON results ({exc})", file=sys.stderr)
        return 2
    totals = results.get("totals", {})
    changed = changed_operations(results)
    if totals.get("success", 0) or changed:
        print(f"idempotence: FAIL, the second deploy changed {totals.get('success')} "
              "operation(s):")
        for name, hosts in changed:
            print(f"  {name}: {', '.join(hosts)}")
        return 1
    print(f"idempotence: ok, second deploy changed nothing ({totals.get('no_change', 0)} "
          "operations already in place)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print("usage: python -m gpuinfra_cli.idempotence INVENTORY [DEPLOY]", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(*sys.argv[1:]))
