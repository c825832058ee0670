"""A render written out (DIR/<host>/<path> and DIR/render.json) and summed up per host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuinfra_deploy.render.model import Render


def write_render(render: Render, out: Path) -> dict[str, Any]:
    """DIR/<host>/<path> for every rendered file, and DIR/render.json: per host each file,
    its kind, mode, owner, sha256, judge, what was checked here and the facts it depended on
    (``assumed_facts``: answered from an assumed fresh host, not recorded)."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"hosts": {}}
    for host, files in render.files.items():
        for f in files:
            if f.kind in ("file", "block") and f.content is not None:
                target = out / host / f.path.lstrip("/")
                if f.kind == "block":
                    target = target.with_name(target.name + ".gpuinfra-block")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(f.content)
        manifest["hosts"][host] = {"facts": render.facts_from.get(host),
                                   "files": [f.manifest() for f in files]}
    (out / "render.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def summary(render: Render) -> list[str]:
    """Per host: how many files, which were judged here, which depended on assumed facts."""
    lines = []
    for host, files in render.files.items():
        kept = [f for f in files if f.kind in ("file", "block")]
        assumed = [f for f in kept if f.assumed]
        other = [f for f in files if f.kind in ("command", "made-on-host")]
        lines.append(f"{host}: {len(kept)} files, facts {render.facts_from.get(host)}"
                     + (f"; {len(assumed)} built from assumed facts" if assumed else "")
                     + (f"; {len(other)} made on the host (listed, not rendered)"
                        if other else ""))
        for f in kept:
            notes = [f.local_check] if f.judge else []
            if f.assumed:
                names = dict.fromkeys(a.split(": ", 1)[1].split("[")[0].rsplit(".", 1)[-1]
                                      for a in f.assumed)
                notes.append(f"assumed: {', '.join(names)}")
            tail = f"  ({'; '.join(notes)})" if notes else ""
            lines.append(f"  {f.path}{' [block]' if f.kind == 'block' else ''}{tail}")
    return lines
