"""gpuinfra_lab/fleet.py and the fleet's place in the lab's plan (gpuinfra_lab/profiles.py);
the fleet itself runs in bench/fleet.py only."""

from __future__ import annotations

from pathlib import Path

from gpuinfra_lab import fleet
from gpuinfra_lab.profiles import (
    FLEET_PREFIX,
    WORKER_PROFILES,
    host_address,
    plan_hosts,
)


def test_the_fleet_follows_the_workers_with_the_healthy_profiles_and_its_own_addresses():
    hosts = plan_hosts(2, fleet=3)
    fleet_hosts = [h for h in hosts if h.name.startswith(FLEET_PREFIX)]
    assert [h.name for h in fleet_hosts] == ["lab-fleet1", "lab-fleet2", "lab-fleet3"]
    assert all(h.groups == ("workers",) for h in fleet_hosts)
    assert [h.profile for h in fleet_hosts] == [*WORKER_PROFILES, WORKER_PROFILES[0]][:3]
    subnet = "10.89.0.0/24"
    assert host_address(subnet, "lab-fleet1") == "10.89.0.101"
    assert host_address(subnet, "lab-fleet120") == "10.89.0.220"
    assert host_address(subnet, "lab-worker16") == "10.89.0.26"  # below the fleet's
    assert plan_hosts(2) == [h for h in hosts if not h.name.startswith(FLEET_PREFIX)]


def test_packages_are_read_from_the_install_commands():
    commands = [
        "apt-get update",
        'DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Options::="--force-confdef" '
        "install --no-install-recommends slurmd slurm-client 'nvidia-smi=535.261.03-1'",
        "apt-mark hold nvidia-smi",
        "apt-get -y install munge && systemctl start munge",
    ]
    assert fleet.install_packages(commands) == ["munge", "nvidia-smi", "slurm-client", "slurmd"]


def test_the_image_key_changes_with_the_base_and_the_packages():
    a = fleet.image_tag("localhost/gpuinfra-lab:1", ["munge", "slurmd"])
    assert a.startswith(f"{fleet.FLEET_REPO}:")
    assert a == fleet.image_tag("localhost/gpuinfra-lab:1", ["munge", "slurmd"])
    assert a != fleet.image_tag("localhost/gpuinfra-lab:2", ["munge", "slurmd"])
    assert a != fleet.image_tag("localhost/gpuinfra-lab:1", ["munge"])


def test_host_limits_are_raised_only_where_lower(tmp_path: Path):
    (tmp_path / "fs" / "inotify").mkdir(parents=True)
    low = tmp_path / "fs" / "inotify" / "max_user_instances"
    high = tmp_path / "fs" / "inotify" / "max_user_watches"
    low.write_text("128\n")
    high.write_text("4194304\n")
    fleet.raise_host_limits(tmp_path)
    assert low.read_text() == "8192\n" and high.read_text() == "4194304\n"


def test_the_fleet_image_holds_what_the_deploy_installs_on_a_worker():
    """Read from a render of the lab site on fresh Debian 12 facts: the driver, Slurm's
    node daemon, MUNGE, the exporter, the job runtime; nothing only the head installs."""
    from tests.conftest import REPO

    packages = fleet.fleet_packages(REPO)
    for name in ("nvidia-smi", "nvidia-kernel-dkms", "slurmd", "munge",
                 "prometheus-node-exporter", "crun"):
        assert name in packages, packages
    assert "slurmctld" not in packages and "mariadb-server" not in packages
