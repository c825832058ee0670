"""The index of every template gpuinfra ships, as templates/README.md lists it.

    python -m gpuinfra_deploy.templates.index      # print the table
    python -m gpuinfra_deploy.templates.index --write templates/README.md

A role's template renders the file at its own path (``slurm/etc/slurm/slurm.conf.j2``:
``/etc/slurm/slurm.conf``) unless its opening comment says otherwise (one template for several
files); a shared template says what it renders in its opening comment.
tests/unit/test_templates.py holds the README to this table.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gpuinfra_deploy.templates import SHARED, SUFFIX, shipped

BEGIN = "<!-- BEGIN the templates gpuinfra ships (python -m gpuinfra_deploy.templates.index) -->"
END = "<!-- END the templates gpuinfra ships -->"
_COMMENT = re.compile(r"\{#-?\s*(.*?)\s*-?#\}", re.S)


def _first_sentence(path: Path) -> str:
    found = _COMMENT.match(path.read_text())
    if not found:
        return ""
    text = " ".join(found.group(1).split())
    return text.split(". ")[0].rstrip(".")


def table() -> str:
    rows = ["| template | renders | where |", "| --- | --- | --- |"]
    for name, path in shipped().items():
        if path.is_relative_to(SHARED):
            what = _first_sentence(path) or "(shared)"
            where = f"`gpuinfra_deploy/templates/{name}`"
        else:
            role, _, rest = name.partition("/")
            what = _first_sentence(path) or f"`/{rest.removesuffix(SUFFIX)}`"
            where = f"`roles/{role}/templates/{rest}`"
        rows.append(f"| `{name}` | {what} | {where} |")
    return "\n".join(rows) + "\n"


def with_table(readme: str) -> str:
    """``readme`` with the text between :data:`BEGIN` and :data:`END` replaced by the table."""
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[:start] + "\n" + table() + readme[end:]


def main(argv: list[str]) -> int:
    if argv[:1] == ["--write"] and len(argv) == 2:
        path = Path(argv[1])
        path.write_text(with_table(path.read_text()))
        return 0
    sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
