"""gpuinfra_deploy/ops/checked.py's judge: the consumer's verdict on the staged files, run
by bash."""

from __future__ import annotations

import subprocess

from gpuinfra_deploy.ops.checked import check_script


def run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True)


def test_a_passing_tool_lets_the_files_go_in():
    assert run(check_script("true", "Tool", "/stage")).returncode == 0


def test_a_failing_tool_refuses_with_its_own_output_and_gpuinfras_message():
    done = run(check_script("sh -c 'echo bad key >&2; exit 3'", "Tool", "/stage"))
    assert done.returncode == 1
    assert "bad key" in done.stderr
    assert "gpuinfra: Tool refused the new configuration (checked on the files staged in /stage)" \
        in done.stderr


def test_error_lines_refuse_even_with_exit_0():
    script = check_script("printf 'ok\\nwarn: x\\nerror: y\\n'", "Tool", "/s", "(error|fatal):")
    done = run(script)
    assert done.returncode == 1 and "error: y" in done.stderr and "warn: x" not in done.stderr
    clean = check_script("printf 'ok\\nwarn: x\\n'", "Tool", "/s", "(error|fatal):")
    assert run(clean).returncode == 0
