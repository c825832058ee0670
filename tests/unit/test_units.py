"""systemd units (gpuinfra.units): the one builder, oneshot units, boot drop-ins (order and a
bounded restart; unit names checked), and the monitoring daemons' units built on it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.header import HEADER
from gpuinfra.monitoring import units as monitoring
from gpuinfra.units import boot_dropin, dropin_path, oneshot_unit, path_unit, unit_file
from gpuinfra_deploy.templates import text as file_text


def test_dropin_orders_pulls_in_and_bounds_restarts():
    text = file_text(boot_dropin("munged first", ("munge.service", "network-online.target"),
                       ("munge.service",)))
    assert text.splitlines()[1:] == [
        "[Unit]", "# munged first", "After=munge.service network-online.target",
        "Wants=munge.service", "StartLimitIntervalSec=600", "StartLimitBurst=30", "",
        "[Service]",
        "# Restarted when it fails (a dependency not ready yet), a bounded number of",
        "# times.", "Restart=on-failure", "RestartSec=10"]
    assert dropin_path("slurmctld.service") == \
        "/etc/systemd/system/slurmctld.service.d/gpuinfra-boot.conf"


@pytest.mark.parametrize("unit", ["munge", "x.service\nExecStart=/bin/sh", "../x.service", ""])
def test_a_unit_name_that_is_not_one_is_refused(unit):
    with pytest.raises(GpuinfraError):
        file_text(boot_dropin("why", (unit,)))


def test_unit_file_sections_lines_and_comments_in_order():
    text = file_text(unit_file({
        "Unit": [("#", "two\nlines"), ("Description", "x"), ("After", ("a.service", "b.target")),
                 ("Wants", ()), ("Before", None)],
        "Service": [("ExecStart", ""), ("ExecStart", "/bin/true"), ("RestartSec", 10)],
    }, about="what this file is"))
    assert text == (HEADER + "# what this file is\n[Unit]\n# two\n# lines\nDescription=x\n"
                    "After=a.service b.target\n\n[Service]\nExecStart=\nExecStart=/bin/true\n"
                    "RestartSec=10\n")


@pytest.mark.parametrize("value", ["/bin/true\nExecStartPre=/bin/sh", ("a.service", "b\rc")])
def test_unit_file_refuses_a_newline_in_a_value(value):
    with pytest.raises(GpuinfraError, match="newline in the systemd setting ExecStart"):
        file_text(unit_file({"Service": [("ExecStart", value)]}))


def test_oneshot_unit():
    assert file_text(oneshot_unit("d", "/usr/local/sbin/x", after=("a.service",),
                                  wants=("a.service",), before=("b.service", "c.service"))
                     ).splitlines()[1:] == [
        "[Unit]", "Description=d", "After=a.service", "Wants=a.service",
        "Before=b.service c.service", "", "[Service]", "Type=oneshot", "RemainAfterExit=yes",
        "ExecStart=/usr/local/sbin/x", "", "[Install]", "WantedBy=multi-user.target"]
    assert "After=" not in file_text(oneshot_unit("d", "/x"))


def test_monitoring_units():
    service = file_text(monitoring.collector_service("/lib/c", "/t/gpu.prom", "/t"))
    assert "ExecStart=/usr/bin/python3 -I /lib/c/collect.py --out /t/gpu.prom" in \
        service.splitlines()
    assert "ReadWritePaths=/t" in service.splitlines()
    # Never root: a transient user with the textfile directory's, the GPUs' and the journal's
    # groups, and no capability
    assert {"DynamicUser=yes", "SupplementaryGroups=gpuinfra-metrics video systemd-journal",
            "CapabilityBoundingSet="} <= set(service.splitlines())
    assert "[Install]" not in service  # started by the timer only
    assert "WantedBy=timers.target" in file_text(monitoring.collector_timer()).splitlines()
    assert file_text(monitoring.dcgm_exporter_dropin("10.0.0.5:9400")).splitlines()[2:] == [
        "[Service]", "ExecStart=", "ExecStart=/usr/bin/dcgm-exporter -f "
        "/etc/dcgm-exporter/default-counters.csv -a 10.0.0.5:9400"]
    grafana = file_text(monitoring.grafana_dropin("10.0.0.1", 3000, "/etc/grafana/x/pw"))
    assert grafana.splitlines()[2:] == [
        "[Service]", "Environment=GF_SERVER_HTTP_ADDR=10.0.0.1",
        "Environment=GF_SERVER_HTTP_PORT=3000",
        "Environment=GF_SECURITY_ADMIN_PASSWORD=$__file{/etc/grafana/x/pw}"]
    exporter = file_text(monitoring.slurm_exporter_unit("/opt/exporter-1.2", "1.2",
                                                        "10.0.0.1:9092"))
    assert exporter.splitlines()[1] == "# rivosinc/prometheus-slurm-exporter 1.2 (monitoring role)."
    assert "ExecStart=/opt/exporter-1.2 -web.listen-address=10.0.0.1:9092 -slurm.cli-fallback" \
        in exporter.splitlines()


@pytest.mark.parametrize(("path", "unit"), [
    # as `systemd-escape --path PATH` printed them (systemd 252, Debian 12)
    ("/sys/subsystem/net/devices/eth-0.100", "sys-subsystem-net-devices-eth\\x2d0.100.device"),
    ("/sys/subsystem/net/devices/.x", "sys-subsystem-net-devices-.x.device"),
    ("/sys/subsystem/net/devices/e th", "sys-subsystem-net-devices-e\\x20th.device"),
    ("/sys/subsystem/net/devices/enp0s3", "sys-subsystem-net-devices-enp0s3.device"),
    ("/", "-.device"),
])
def test_a_path_is_named_as_systemd_names_it(path, unit):
    assert path_unit(path, "device") == unit
    escape = shutil.which("systemd-escape")
    if escape:  # and as this machine's systemd does, where it has one
        done = subprocess.run([escape, "--path", path], capture_output=True, text=True,
                              check=True)
        assert f"{done.stdout.strip()}.device" == unit


def test_a_ready_port_makes_the_start_wait_until_the_daemon_listens():
    """slurmdbd's drop-in (roles/slurm): ExecStartPost waits for its port, so a
    unit After= it starts when it answers. The line systemd runs, run here: it returns once a
    socket listens, and times out (exit 124, which the leading '-' keeps from failing the
    daemon) when none does."""
    import shlex
    import socket
    import time

    from gpuinfra.units import listening_wait

    text = file_text(boot_dropin("MariaDB answering", ("mariadb.service",), ready_port=6819))
    posts = [line for line in text.splitlines() if line.startswith("ExecStartPost=")]
    assert posts == ["ExecStartPost=" + listening_wait(6819, 60)]
    assert "$" not in posts[0] and "%" not in posts[0]  # systemd expands both
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        argv = shlex.split(listening_wait(port, 1).lstrip("-"))
        assert subprocess.run(argv).returncode == 124  # bound, not listening: timed out
        server.listen()
        start = time.monotonic()
        assert subprocess.run(argv).returncode == 0
        assert time.monotonic() - start < 0.9
    for bad in (0, 65536, "6819", True):
        with pytest.raises(GpuinfraError):
            listening_wait(bad, 60)
