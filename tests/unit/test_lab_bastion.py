"""The bastion proof's files (gpuinfra_lab/bastion.py): its ssh_config sends each worker alias
through lab-head with the lab's own key and host-key checking, as pyinfra reads it, and its
inventory variant points the workers there with their addresses kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuinfra_lab import state
from gpuinfra_lab.bastion import write_variant
from gpuinfra_verify.expect import ssh_target
from gpuinfra_verify.ssh import resolve
from tests.conftest import REPO
from tests.unit.test_verify_ssh_route import ours, pyinfra_connections

HOSTS = [{"name": "lab-head", "address": "10.100.1.10", "groups": ["head"]},
         {"name": "lab-worker1", "address": "10.100.1.11", "groups": ["workers"]}]


def lab(tmp_path: Path) -> tuple[state.Paths, Path]:
    paths = state.Paths(tmp_path)
    paths.lab.mkdir()
    paths.ssh_config.write_text(state.ssh_config_text(HOSTS, paths.ssh_key, paths.known_hosts))
    source = tmp_path / "inventory.py"
    source.write_text('head = [("lab-head", {"ssh_hostname": "10.100.1.10"})]\n'
                      'workers = [("lab-worker1", {"ssh_hostname": "10.100.1.11", '
                      '"ssh_user": "root"})]\nhypervisors = []\n')
    return paths, source


def test_each_worker_alias_goes_through_the_head_with_the_labs_checks(tmp_path, monkeypatch):
    paths, source = lab(tmp_path)
    config, _ = write_variant(paths, str(source), "lab-head", {"lab-worker1": "10.100.1.11"})
    data = {"ssh_hostname": "lab-worker1-via-head", "ssh_config_file": str(config),
            "ssh_user": "root", "ssh_known_hosts_file": str(paths.known_hosts),
            "ssh_strict_host_key_checking": "yes"}
    route = resolve(ssh_target("lab-worker1", data))
    (jump,) = route.jumps
    assert (route.node.hostname, route.node.port) == ("10.100.1.11", 22)
    assert (jump.endpoint.hostname, jump.endpoint.user, jump.endpoint.policy) == \
        ("10.100.1.10", "root", "yes")  # Host lab-* of the included .lab/ssh_config
    assert jump.endpoint.known_hosts == (str(paths.known_hosts),)
    assert jump.endpoint.identity_files == (str(paths.ssh_key),)
    assert jump.to == ("10.100.1.11", 22)
    assert ours(route) == pyinfra_connections(monkeypatch, "lab-worker1", data)


def test_the_variant_points_the_workers_at_their_aliases(tmp_path):
    paths, source = lab(tmp_path)
    config, variant = write_variant(paths, str(source), "lab-head",
                                    {"lab-worker1": "10.100.1.11"})
    assert variant.name == "lab.py"  # group_data/lab.py applies to it as to inventory/lab.py
    # read as the verify suite reads it: the deploy's loader in a child process (importing
    # pyinfra_cli here would patch this process's threads with gevent)
    loaded = subprocess.run([sys.executable, "-m", "gpuinfra_verify.inventory_json", str(variant)],
                            cwd=tmp_path, capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    hosts = {h["name"]: h["data"] for h in json.loads(loaded.stdout)["hosts"]}
    assert hosts["lab-head"]["ssh_hostname"] == "10.100.1.10"
    assert "ssh_config_file" not in hosts["lab-head"]
    worker = hosts["lab-worker1"]
    assert (worker["ssh_hostname"], worker["ssh_config_file"], worker["node_address"]) == \
        ("lab-worker1-via-head", str(config), "10.100.1.11")
