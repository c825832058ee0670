"""Print an inventory's hosts and merged data as JSON: `python -m gpuinfra_verify.inventory_json
FILE`.

The verify suite reads the inventory through this child process because importing pyinfra_cli
(the deploy's own inventory loader) monkey-patches threads with gevent, which deadlocks
pytest-xdist's workers. Exit 2 with one line on stderr when the file cannot be loaded.
"""

from __future__ import annotations

import json
import sys

from gpuinfra.errors import GpuinfraError
from gpuinfra_deploy.run.inventory import load_hosts


def main(argv: list[str]) -> int:
    try:
        hosts, duplicates = load_hosts(argv[0])
    except GpuinfraError as exc:
        print(exc, file=sys.stderr)
        return 2
    hosts_json = [{"name": h.name, "groups": list(h.groups), "data": dict(h.data)} for h in hosts]
    print(json.dumps({"hosts": hosts_json, "duplicates": duplicates}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
