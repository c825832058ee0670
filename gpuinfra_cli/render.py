"""`gpuinfra render INVENTORY --out DIR`: every file each host would get, without connecting.

    gpuinfra render inventory/<site>.py --out DIR --os debian-12   fresh hosts assumed
    gpuinfra render inventory/<site>.py --out DIR --facts FACTS    facts recorded on the site
    gpuinfra render inventory/<site>.py --record-facts FACTS       connect once, record them
    gpuinfra render inventory/<site>.py --diff                     what a deploy would change

The deploy itself (deploy.py) is planned on fake hosts (gpuinfra_deploy/render/): DIR/<host>/
<path> holds each file it would upload, DIR/render.json lists per host each file, its mode,
owner, sha256, the consumer that judges it on the host, what was judged here, and the facts it
was built from (``assumed_facts``: from the assumed fresh host, not recorded). docs/render.md.
Exit 0 rendered, 1 an invalid spec or a deploy that refuses the site, 2 unusable input.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gpuinfra.errors import GpuinfraError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="every file each host would get, without connecting",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("inventory", metavar="INVENTORY", help="inventory/<site>.py")
    p.add_argument("--out", metavar="DIR", type=Path,
                   help="where to write DIR/<host>/<path> and DIR/render.json")
    p.add_argument("--facts", metavar="FACTS", type=Path,
                   help="facts recorded on the site: a folder of <host>.json (what "
                   "--record-facts writes) or one file for every host")
    p.add_argument("--os", dest="os_name", metavar="DISTRO",
                   help="assume fresh hosts of this distribution where no facts were "
                   "recorded: debian-12, debian-13, ubuntu-22.04 or ubuntu-24.04")
    p.add_argument("--group-data", metavar="DIR",
                   help="the site's group_data folder (default: found as pyinfra does)")
    p.add_argument("--record-facts", metavar="FACTS", type=Path,
                   help="connect to every host (as `pyinfra --dry`), record each fact the "
                   "deploy asks into FACTS/<host>.json, and stop")
    p.add_argument("--diff", action="store_true",
                   help="connect to every host and print, per host and file, the unified diff "
                   "of what a deploy would change")
    p.add_argument("--sudo", action="store_true", help="read facts with sudo (connecting runs)")
    p.set_defaults(func=run)


def _writable(out: Path) -> None:
    probe = out
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise GpuinfraError(f"--out {out}: cannot write there ({probe} is not a writable "
                            "folder); give a folder you can write")


def _site_templates(inventory: str) -> list[str]:
    """What the site's own templates did in this render: each used, and each that no file
    came from (a path that overrides nothing this site renders)."""
    from gpuinfra_deploy import templates

    folders = templates.site_folders(inventory)
    lines = [f"site template used: {p}" for p in templates.overrides_used()]
    lines += [f"warning: site template {p} made no file of this site (check its path against "
              "templates/README.md, or the role is not on any host)"
              for p in templates.overrides_unused(folders)]
    return lines


def run(args: argparse.Namespace) -> int:
    from pyinfra.api.exceptions import PyinfraError

    from gpuinfra.spec import SpecInvalid, format_errors
    from gpuinfra_deploy import render
    from gpuinfra_deploy.run.site import site_warnings

    if not Path(args.inventory).is_file():
        raise GpuinfraError(f"{args.inventory}: no such inventory file (give "
                            "inventory/<site>.py)")
    modes = [m for m in ("out", "record_facts", "diff") if getattr(args, m)]
    if len(modes) != 1:
        raise GpuinfraError("give one of --out DIR (render), --record-facts DIR (record the "
                            "site's facts) or --diff (compare with the live hosts)")
    try:
        if args.record_facts:
            _writable(args.record_facts)
            facts = render.record_facts(args.inventory, args.record_facts, args.group_data,
                                        args.sudo)
            print(f"recorded the facts of {len(facts)} hosts in {args.record_facts}; render "
                  f"offline with: gpuinfra render {args.inventory} --facts "
                  f"{args.record_facts} --out DIR")
            return 0
        if args.diff:
            result, current = render.diff_live(args.inventory, args.group_data, args.sudo)
            lines = render.unified_diffs(result, current)
            sys.stdout.writelines(lines)
            changed = sum(1 for line in lines if line.startswith("+++ "))
            print(f"{changed} files would change", file=sys.stderr)
            return 0
        _writable(args.out)
        if args.facts is None and args.os_name is None:
            raise GpuinfraError("no facts to render with: give --facts DIR (recorded with "
                                "--record-facts) or --os "
                                "debian-12|debian-13|ubuntu-22.04|ubuntu-24.04 to assume "
                                "fresh hosts")
        result = render.render_site(args.inventory, args.facts, args.os_name, args.group_data)
        render.judge_here(result)
        warnings = site_warnings(args.inventory, args.group_data)
        if warnings:  # what validate warns of (a driver branch past its end of life...)
            print(warnings, file=sys.stderr)
        try:
            render.write_render(result, args.out)
        except OSError as exc:
            raise GpuinfraError(f"--out {args.out}: cannot write there ({exc.strerror}); give "
                                "a folder you can write") from None
    except SpecInvalid as exc:
        print(format_errors(exc.errors, args.inventory), file=sys.stderr)
        return 1
    except render.MissingFact as exc:
        raise GpuinfraError(str(exc)) from None
    except PyinfraError as exc:
        print(f"gpuinfra: the deploy refuses this site: {exc}", file=sys.stderr)
        return 1
    for line in render.summary(result):
        print(line)
    for line in _site_templates(args.inventory):
        print(line)
    files = sum(1 for _ in result.written())
    print(f"{files} files of {len(result.files)} hosts in {args.out} (list: "
          f"{args.out / 'render.json'})")
    return 0
