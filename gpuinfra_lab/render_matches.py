"""Lab proof: `gpuinfra render` writes what the deploy writes, byte for byte.

    .venv/bin/python -m gpuinfra_lab.render_matches [inventory/lab.py]

On a deployed lab: the facts of every lab host are recorded once (as `gpuinfra render
--record-facts` does: one connection, nothing executed), the site is rendered offline from
them, and each rendered file is compared with the host's own copy, read over the lab's SSH
(``base64`` of the file: every byte). A managed block must stand between its markers in the
host's file. Exit 0 when every rendered file is equal (the count is printed), 1 listing each
file that differs or is missing.
"""

from __future__ import annotations

import base64
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from gpuinfra_deploy.render import Render, record_facts, render_site

Reader = Callable[[str, str], "bytes | None"]


def compare(render: Render, read: Reader) -> tuple[int, list[str]]:
    """(files equal, one line per file that is not) for every file and block of ``render``;
    ``read(host, path)``: the host's bytes of ``path``, None when it has no such file."""
    equal, problems = 0, []
    for f in render.written():
        live = read(f.host, f.path)
        assert f.content is not None
        if live is None:
            problems.append(f"{f.host}:{f.path}: rendered, absent on the host")
        elif f.kind == "block" and f.content in live:
            equal += 1
        elif f.kind == "file" and live == f.content:
            equal += 1
        else:
            problems.append(f"{f.host}:{f.path}: the rendered {f.kind} differs from the "
                            f"host's ({len(f.content)} bytes rendered, {len(live)} there)")
    return equal, problems


def lab_reader() -> Reader:
    from gpuinfra_lab.refusal import lab_ssh

    def read(host: str, path: str) -> bytes | None:
        run = lab_ssh(host, f"if [ -f '{path}' ]; then base64 -w0 '{path}'; else echo ABSENT; fi")
        if run.returncode != 0:
            raise SystemExit(f"render_matches: cannot read {path} on {host}: {run.stderr}")
        out = run.stdout.strip()
        return None if out == "ABSENT" else base64.b64decode(out)

    return read


def main(argv: list[str]) -> int:
    inventory = argv[0] if argv else "inventory/lab.py"
    with tempfile.TemporaryDirectory(prefix="gpuinfra-render-lab-") as facts:
        record_facts(inventory, Path(facts))
        rendered = render_site(inventory, Path(facts))
    equal, problems = compare(rendered, lab_reader())
    for line in problems:
        print(line)
    hosts = len(rendered.files)
    if problems:
        print(f"render_matches: {len(problems)} of {equal + len(problems)} rendered files "
              f"differ from the lab's ({hosts} hosts)")
        return 1
    print(f"render_matches: {equal} rendered files of {hosts} hosts equal to the lab's, "
          "byte for byte")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
