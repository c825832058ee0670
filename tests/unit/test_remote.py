"""Files a role's callback writes on a host go as a command's standard input, created 0600
under umask 0077 by that command: never through pyinfra's file transfer (under sudo it stages
the file in /tmp, readable by other users), never printed."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest
from pyinfra.api import StringCommand

from gpuinfra.errors import GpuinfraError
from gpuinfra_deploy.ops.remote import put_text, run


class LocalHost:
    """A pyinfra Host whose commands run here, in a shell (the file's mode is real)."""

    def __init__(self, name: str = "node", sudo: bool = True):
        self.name = name
        self.data = {}
        self.state = SimpleNamespace(config=SimpleNamespace(SUDO=sudo))
        self.kwargs: list[dict] = []

    def run_shell_command(self, command, **kwargs):
        self.kwargs.append(kwargs)
        done = subprocess.run(["sh", "-c", command.get_raw_value()], input=kwargs.get("_stdin"),
                              capture_output=True, text=True, check=False)
        return done.returncode == 0, SimpleNamespace(stdout=done.stdout, stderr=done.stderr)

    def put_file(self, *args, **kwargs):
        raise AssertionError("pyinfra's file transfer was used (it stages files in /tmp)")

    get_file = put_file


def test_a_file_goes_up_as_standard_input_private_from_its_first_byte(tmp_path):
    host, path = LocalHost(), tmp_path / "join.yaml"
    put_text(host, "token: secret\n", str(path), "kubeadm join config")
    assert path.read_text() == "token: secret\n"
    assert path.stat().st_mode & 0o777 == 0o600
    [kwargs] = host.kwargs
    assert kwargs["print_input"] is False and kwargs["print_output"] is False
    assert kwargs["_sudo"] is True


def test_a_failed_write_names_what_and_where(tmp_path):
    with pytest.raises(GpuinfraError, match=r"writing containerd config to .*/none/x failed "
                                            r"on node: .*nonexistent"):
        put_text(LocalHost(), "x", str(tmp_path / "none" / "x"), "containerd config")


def test_run_without_sudo_passes_no_sudo():
    host = LocalHost(sudo=False)
    assert run(host, StringCommand("echo", "ok"), "echo") == "ok\n"
    assert "_sudo" not in host.kwargs[0] and "_stdin" not in host.kwargs[0]
