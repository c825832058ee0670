"""Platform helpers: supported distributions and node addresses."""

from __future__ import annotations

import pytest

from gpuinfra.platforms import UnsupportedOS, distro_key, node_address


def test_distro_keys():
    assert distro_key({"release_meta": {"ID": "ubuntu", "VERSION_ID": "24.04"}}) == "ubuntu-24.04"
    with pytest.raises(UnsupportedOS, match="debian-12"):
        distro_key({"name": "Rocky", "release_meta": {"ID": "rocky", "VERSION_ID": "9.4"}})


def test_node_address_prefers_node_address_then_an_ip_ssh_hostname():
    assert node_address({"node_address": "10.0.0.9", "ssh_hostname": "10.0.0.5"}) == "10.0.0.9"
    assert node_address({"ssh_hostname": "10.0.0.5"}) == "10.0.0.5"
    assert node_address({"ssh_hostname": "node1.dc"}) is None
    assert node_address({}) is None


def test_a_loopback_ssh_hostname_is_a_port_forward_not_the_node_address():
    assert node_address({"ssh_hostname": "127.0.0.1", "ssh_port": 40022}) is None
    assert node_address({"ssh_hostname": "::1"}) is None
    assert node_address({"node_address": "10.0.0.9", "ssh_hostname": "127.0.0.1"}) == "10.0.0.9"
