"""bench/fleet_cost.py: the node side's readings and the no-op model bench.fleet prints."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.fleet_cost import (
    Costs,
    busy_seconds,
    cgroup_cpu_path,
    command_spans,
    fit_controller,
    machine_busy_s,
    model_error,
    on_a_laptop,
    on_this_machine,
    pyinfra_forks,
    read_cpu_seconds,
    spent,
)

CONTAINER = "libpod_parent/libpod-8c4a"
V1 = (f"4:memory:/{CONTAINER}\n2:cpuacct:/{CONTAINER}\n1:cpu:/{CONTAINER}\n"
      f"0::/{CONTAINER}/init.scope\n")
V2 = f"0::/{CONTAINER}/init.scope\n"


def test_cgroup_v1_reads_cpuacct_usage_in_nanoseconds(tmp_path: Path) -> None:
    usage = tmp_path / "cpuacct" / CONTAINER / "cpuacct.usage"
    usage.parent.mkdir(parents=True)
    usage.write_text("2500000000\n")
    assert cgroup_cpu_path(V1, tmp_path) == usage
    assert read_cpu_seconds(usage) == 2.5


def test_cgroup_v2_reads_the_container_above_systemds_init_scope(tmp_path: Path) -> None:
    stat = tmp_path / CONTAINER / "cpu.stat"
    stat.parent.mkdir(parents=True)
    stat.write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    assert cgroup_cpu_path(V2, tmp_path) == stat
    assert read_cpu_seconds(stat) == 1.5


def test_no_cgroup_file_is_none(tmp_path: Path) -> None:
    assert cgroup_cpu_path(V1, tmp_path) is None


def test_the_counting_shells_lines_become_spans_and_busy_time() -> None:
    spans = command_spans(["10.0 11.0", "", "10.5 12.0", "13.0 13.5", "14.0"])
    assert spans == [(10.0, 11.0), (10.5, 12.0), (13.0, 13.5)]
    # overlapping commands count once: 10-12 and 13-13.5
    assert busy_seconds(spans) == pytest.approx(2.5)
    assert busy_seconds([]) == 0.0


def test_a_nodes_run_cost_is_less_its_idle_use_never_negative() -> None:
    got = spent({"a": 10.0, "b": 5.0}, {"a": 12.0, "b": 5.1}, 10.0, {"a": 0.05, "b": 0.05})
    assert got == {"a": pytest.approx(1.5), "b": 0.0}


def test_forks_follow_pyinfras_default() -> None:
    # pyinfra/api/state.py: min(20 per CPU, hosts, (open files - 10) / 3)
    assert pyinfra_forks(8, 1000, 1024) == 160
    assert pyinfra_forks(8, 1000, 256) == 82
    assert pyinfra_forks(2, 13, 20000) == 13


def costs(hosts: int, controller: float, nodes: float = 0.0, busy: float = 0.0,
          idle: float = 0.0, cores: int = 2) -> Costs:
    return Costs(hosts, controller, nodes, busy, idle, cores)


def test_on_this_machine_the_largest_bound_wins() -> None:
    # the controller alone: one process
    assert on_this_machine(costs(13, 6.0, 1.0)) == 6.0
    # everything over the cores the idle containers leave: (6 + 10) / (2 - 0.4)
    assert on_this_machine(costs(43, 6.0, 10.0, idle=0.4)) == pytest.approx(10.0)
    # a node's own commands, one after the other
    assert on_this_machine(costs(13, 1.0, 0.5, busy=4.0)) == 4.0


def test_the_controllers_cpu_is_fitted_as_fixed_plus_per_host() -> None:
    fixed, per_host = fit_controller([costs(13, 2.0 + 13 * 0.1), costs(43, 2.0 + 43 * 0.1)])
    assert (fixed, per_host) == (pytest.approx(2.0), pytest.approx(0.1))
    assert fit_controller([costs(10, 5.0)]) == (0.0, 0.5)


def test_a_laptop_pays_the_controllers_cpu_not_the_nodes() -> None:
    sizes = [costs(13, 3.3, nodes=50.0, busy=0.5, idle=1.0),
             costs(43, 6.3, nodes=150.0, busy=0.5, idle=1.5)]
    # 2 s + 100 ms per host: 102 s for 1,000 nodes, the nodes' CPU nowhere in it
    assert on_a_laptop(sizes, 1000) == pytest.approx(102.0)
    # when a node's commands are the longer chain: 1,000 / 160 forks = 7 rounds of 20 s
    slow = [costs(13, 1.3, busy=20.0), costs(43, 4.3, busy=20.0)]
    assert on_a_laptop(slow, 1000) == pytest.approx(math.ceil(1000 / 160) * 20.0)


def test_the_error_is_against_the_measured_wall_time() -> None:
    assert model_error(costs(13, 6.0), 5.0) == pytest.approx(20.0)
    assert model_error(costs(13, 6.0), 6.0) == 0.0


def test_the_rest_of_the_machine_takes_cores_from_the_run() -> None:
    # 4 s of controller, 16 s of nodes and 4 s of another job over 2 cores: 12 s
    busy = Costs(13, 4.0, 16.0, 1.0, 0.0, 2, others_s=4.0)
    assert on_this_machine(busy) == pytest.approx(12.0)


def test_machine_busy_seconds_leave_out_idle_and_iowait() -> None:
    # user nice system idle iowait irq softirq steal (USER_HZ)
    assert machine_busy_s("cpu  500 10 90 1000 50 0 0 0 0 0\ncpu0 1 2 3 4\n") == 6.0


def test_one_size_is_fitted_with_its_3_node_noop_as_fixed_plus_per_host() -> None:
    """bench.fleet fits the controller on each size and the 3-node no-op of the same run: the
    figures of 2026-12-07 (13 hosts 2.25 CPU s, 3 hosts 1.11 s) give 0.77 s + 114 ms a host,
    not 173 ms a host for all of it."""
    from bench.fleet import Measured, Size, fitted_on, last_lines

    def run(cpu: float) -> Measured:
        return Measured(wall=11.45, cpu=cpu, peak=80 * 1024, node_cpu={"lab-fleet1": 1.2},
                        busy={"lab-fleet1": 8.51}, commands={"lab-fleet1": 1}, others=0.5)

    size = Size(10, run(2.25), run(1.11), (0.0, 0.0), run(32.1), 0.12)
    fixed, per_host = fit_controller(fitted_on([size]))
    assert fixed == pytest.approx(0.768, abs=0.001)
    assert per_host == pytest.approx(0.114, abs=0.001)
    line = last_lines([size])[-1]
    assert "controller 173 ms/host/noop (0.07x Ansible's)" in line
    assert "predicted 1000-node noop 115 s" in line
