"""The staged files' consumers run here, on this machine, where they are installed and judge
a file's content alone."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from gpuinfra_deploy.render.model import Render, RenderedFile

# Consumers run here, on this machine, when installed: they judge the file's content alone.
# The others need the node itself (slurmd -G reads its GPUs, systemd-analyze its binaries,
# modprobe its kernel, kubectl its API server).
LOCAL_JUDGES = {"promtool": "promtool", "amtool": "amtool",
                "virt-xml-validate": "virt-xml-validate", "kubeadm": "kubeadm",
                "containerd": "containerd"}
_CHECK = re.compile(r"^out=\$\((.*) 2>&1\); rc=\$\?;")


def judge_here(render: Render, which: Callable[[str], str | None] = shutil.which) -> None:
    """Run each staged file set's consumer on this machine where it is installed and judges
    content alone (:data:`LOCAL_JUDGES`); say for each file what ran, or why nothing did."""
    groups: dict[tuple[str, str], list[RenderedFile]] = {}
    for files in render.files.values():
        for f in files:
            if f.judge and f.check and f.stage:
                groups.setdefault((f.check, f.stage), []).append(f)
            elif f.kind in ("file", "block"):
                f.local_check = "no consumer judges it in the deploy"
    done: dict[tuple[str, bytes], str] = {}
    for (check, stage), members in groups.items():
        inner = _CHECK.match(check)
        tool = (inner.group(1).split()[0] if inner else "") if inner else ""
        binary = LOCAL_JUDGES.get(tool)
        if binary is None:
            verdict = f"not checked here: {members[0].judge} judges it on the node itself"
        elif which(binary) is None:
            verdict = f"not checked here: {binary} not installed"
        else:
            key = (check, b"".join(f.path.encode() + (f.content or b"") for f in members))
            if key not in done:
                done[key] = _run_check(inner.group(1) if inner else check, stage, members)
            verdict = done[key]
        for f in members:
            f.local_check = verdict


def _run_check(command: str, stage: str, members: Sequence[RenderedFile]) -> str:
    with tempfile.TemporaryDirectory(prefix="gpuinfra-judge-") as here:
        for f in members:
            (Path(here) / f.path.rsplit("/", 1)[1]).write_bytes(f.content or b"")
        run = subprocess.run(["sh", "-c", command.replace(stage, here)], capture_output=True,
                             text=True, check=False, timeout=120)
    tool = command.split()[0]
    if run.returncode == 0:
        return f"passed: {tool} accepted it here"
    out = (run.stdout + run.stderr).strip().replace(here, stage)
    return f"refused: {tool} here: {out[-400:]}"
