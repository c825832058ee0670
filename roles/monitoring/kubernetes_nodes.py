"""Kubernetes' GPUs for node_exporter: runs on the head of a Kubernetes site, every minute, from
gpuinfra-kubernetes-nodes.timer.

    python3 -I /usr/local/lib/gpuinfra-kubernetes-nodes/kubernetes_nodes.py --out FILE \
        --expected /etc/gpuinfra/kubernetes-gpus.json --kubeconfig /etc/kubernetes/admin.conf

The monitoring role installs this file beside ``gpuinfra.zip`` (the library and its node-side
runner, gpuinfra_deploy.nodecode) and renders the expected resources from the spec. It runs
``kubectl get nodes -o json`` once with the node's runner and ``--kubeconfig``, and writes
:func:`gpuinfra.monitoring.k8snodes.gpus_text` to ``FILE`` atomically. A kubectl that fails
gives ``gpuinfra_kubernetes_nodes_query_ok 0`` and no node series; an expected file that
cannot be read is said on stderr (the journal) and judged like a failed query. Python's
standard library only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ZIP_NAME = "gpuinfra.zip"  # gpuinfra_deploy.nodecode.ZIP_NAME, beside this file


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Kubernetes GPUs for node_exporter")
    parser.add_argument("--out", type=Path, help="the .prom file to write")
    parser.add_argument("--expected", required=True, type=Path,
                        help="what the spec implies (the monitoring role renders it)")
    parser.add_argument("--kubeconfig", type=Path, help="the kubeconfig kubectl uses")
    parser.add_argument("--check", action="store_true",
                        help="only judge the expected file (the role's check of its staged copy)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent / ZIP_NAME))
    from gpuinfra.errors import ParseError
    from gpuinfra.monitoring.k8snodes import command, gpus_text, parse_expected
    from gpuinfra_node.reader import run
    from gpuinfra_node.textfile import write_atomically

    if args.check or args.out is None:
        try:
            parse_expected(args.expected.read_text(), str(args.expected))
        except (OSError, ParseError) as exc:
            print(f"gpuinfra-kubernetes-nodes: {exc}", file=sys.stderr)
            return 2
        return 0

    output = None
    try:
        wanted = parse_expected(args.expected.read_text(), str(args.expected))
    except (OSError, ParseError) as exc:
        print(f"gpuinfra-kubernetes-nodes: {exc}", file=sys.stderr)
        wanted = {}
    else:
        if args.kubeconfig is not None:
            output = run(command(str(args.kubeconfig)))
        else:
            print("gpuinfra-kubernetes-nodes: no --kubeconfig: Kubernetes not asked",
                  file=sys.stderr)
    write_atomically(args.out, gpus_text(output, wanted, time.time()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
