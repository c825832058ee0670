"""Writes gpuinfra/knowledge/slurm_keys.py: the keys each Slurm release's own parsers read, and
the plugins it ships, from a checkout of SchedMD's repository (a maintenance step, run by hand;
the module is committed, naming the tag and commit of each release)::

    .venv/bin/python -m gpuinfra_lab.slurm_keys /path/to/SchedMD/slurm.git

For each tag in TAGS: slurm.conf's keys (``slurm_conf_options[]`` in src/common/read_config.c),
a NodeName line's (``_nodename_options[]``) and a PartitionName line's
(``_partition_options[]``); cgroup.conf's (the ``s_p_options_t`` table of
src/{common,interfaces}/cgroup.c); gres.conf's (``_gres_options[]`` of src/{common,interfaces}/
gres.c); and the plugins of each kind (the folders under src/plugins/<kind>/), as
``<kind>/<name>``. The slurm role checks what it renders for a node against the file of that
node's Slurm (gpuinfra/slurm/versions.py ``unread_keys``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "gpuinfra" / "knowledge" / "slurm_keys.py"
# The release the others are written as differences from (the newest).
BASE = "24.11"
TABLES = ("slurm.conf", "NodeName", "PartitionName", "cgroup.conf", "gres.conf", "plugins",
          "none_is_unset")
# Debian 11, Ubuntu 22.04, Debian 12, Ubuntu 24.04, Debian 13: the Slurm of each (the same
# upstream release as the distributions' packages).
TAGS = {"20.11": "slurm-20-11-4-1", "21.08": "slurm-21-08-5-1", "22.05": "slurm-22-05-8-1",
        "23.11": "slurm-23-11-4-1", "24.11": "slurm-24-11-5-1"}
_KEY = re.compile(r'\{\s*"([A-Za-z0-9_]+)"\s*,')
_NONE = re.compile(r'xstrcasestr\(conf->(\w+), "none"\)')
PLUGIN_KINDS = ("accounting_storage", "auth", "cred", "jobacct_gather", "mpi", "proctrack",
                "sched", "select", "task", "topology", "gres", "switch", "cgroup")


def show(repo: str, tag: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], capture_output=True,
                          text=True, check=True).stdout


def table(text: str, name: str) -> list[str]:
    """The keys of the ``s_p_options_t <name>[] = { ... };`` table in ``text``."""
    start = re.search(rf"s_p_options_t\s+{name}\[\]\s*=\s*\{{", text)
    if start is None:
        raise SystemExit(f"no table {name}")
    end = text.index("};", start.end())
    return sorted(set(_KEY.findall(text[start.end():end])))


def first(repo: str, tag: str, *paths: str) -> str:
    listed = set(subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", tag],
                                capture_output=True, text=True, check=True).stdout.split())
    return next(p for p in paths if p in listed)


def plugins(repo: str, tag: str) -> list[str]:
    out = []
    for kind in PLUGIN_KINDS:
        listed = subprocess.run(["git", "-C", repo, "ls-tree", "-d", "--name-only",
                                 f"{tag}:src/plugins/{kind}"], capture_output=True, text=True,
                                check=False).stdout.split()
        out += [f"{kind}/{name}" for name in listed if name != "common"]
    return sorted(out)


def extract(repo: str, version: str, tag: str) -> dict:
    read_config = show(repo, tag, "src/common/read_config.c")
    cgroup = show(repo, tag, first(repo, tag, "src/interfaces/cgroup.c", "src/common/cgroup.c",
                                   "src/common/xcgroup_read_config.c"))
    gres = show(repo, tag, first(repo, tag, "src/interfaces/gres.c", "src/common/gres.c"))
    commit = subprocess.run(["git", "-C", repo, "rev-list", "-n1", tag], capture_output=True,
                            text=True, check=True).stdout.strip()
    cgroup_table = re.search(r"s_p_options_t\s+(\w+)\[\]\s*=\s*\{[^;]*CgroupPlugin", cgroup)
    return {
        "version": version, "source": f"SchedMD/slurm tag {tag} (commit {commit})",
        "slurm.conf": table(read_config, "slurm_conf_options"),
        "NodeName": table(read_config, "_nodename_options"),
        "PartitionName": table(read_config, "_partition_options"),
        "cgroup.conf": table(cgroup, cgroup_table.group(1)) if cgroup_table else
        sorted(set(_KEY.findall(cgroup))),
        "gres.conf": table(gres, "_gres_options"),
        "plugins": plugins(repo, tag),
        # Keys whose value "<kind>/none" read_config.c itself reads as unset (no plugin
        # loaded): ``xstrcasestr(conf->accounting_storage_type, "none")`` from 23.11 on.
        "none_is_unset": sorted(set(_NONE.findall(read_config))),
    }


def _words(names: list[str] | set[str], indent: str) -> str:
    """``names`` as one space-separated string literal, wrapped at 100 columns."""
    text = " ".join(sorted(names))
    lines, line = [], ""
    for word in text.split():
        if len(indent) + len(line) + len(word) + 4 > 96:
            lines.append(line)
            line = ""
        line += word + " "
    lines.append(line.rstrip())
    return "\n".join(f'{indent}"{chunk}"' for chunk in lines) if text else f'{indent}""'


def module(found: dict[str, dict]) -> str:
    """The Python module: the newest release's tables whole, each other one as what it adds
    and lacks."""
    out = ['"""The keys each Slurm release\'s own parsers read and the plugins it ships, by table',
           "(slurm.conf, NodeName and PartitionName lines, cgroup.conf, gres.conf), written by",
           "gpuinfra_lab/slurm_keys.py from SchedMD's tag of each release (SOURCES): the newest",
           "whole (BASE), the others as what they add to it and lack of it. Read by",
           'gpuinfra.slurm.versions (unread_settings). Generated: do not edit by hand."""',
           "", "from __future__ import annotations", "",
           "SOURCES = {"]
    out += [f'    "{v}": "{d["source"]}",' for v, d in found.items()]
    out += ["}", f'BASE_VERSION = "{BASE}"', "BASE = {"]
    for table in TABLES:
        out += [f'    "{table}": (', _words(found[BASE][table], "        "), "    ),"]
    out += ["}", "# version -> table -> (what it reads beyond BASE, what of BASE it lacks)",
            "DIFF = {"]
    for version, data in found.items():
        if version == BASE:
            continue
        out.append(f'    "{version}": {{')
        for table in TABLES:
            more = set(data[table]) - set(found[BASE][table])
            less = set(found[BASE][table]) - set(data[table])
            out += [f'        "{table}": (', _words(more, "            ") + ",",
                    _words(less, "            ") + ",", "        ),"]
        out.append("    },")
    out.append("}")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    found = {version: extract(argv[0], version, tag) for version, tag in TAGS.items()}
    OUT.write_text(module(found))
    for version, data in found.items():
        print(f"{version}: {len(data['slurm.conf'])} slurm.conf keys, "
              f"{len(data['plugins'])} plugins ({data['source']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
