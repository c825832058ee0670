"""Keys valid alone but contradicting each other are refused at validate (gpuinfra.spec.cross),
every independent problem is listed in one run, and one cause is said once."""

from __future__ import annotations

from typing import Any

from gpuinfra.spec import HostInput
from gpuinfra_deploy.run.knobs import spec_problems

PCIE = {"gpu_model": "H100-PCIE-80GB", "gpu_count": 2, "gpu_topology": "bridged-pairs"}


def site(head: dict[str, Any] | None = None, everywhere: dict[str, Any] | None = None,
         **workers: dict[str, Any]) -> list[HostInput]:
    every = everywhere or {}
    hosts = [HostInput("head01", ("head",), {"node_address": "10.0.0.1", **every,
                                             **(head or {})})]
    for i, (name, data) in enumerate((workers or {"gpu01": {}}).items(), 2):
        hosts.append(HostInput(name, ("workers",), {"node_address": f"10.0.0.{i}", **PCIE,
                                                    **every, **data}))
    return hosts


def problems(hosts: list[HostInput]) -> list:
    return spec_problems(hosts)


def about(hosts: list[HostInput], field: str) -> list:
    return [e for e in problems(hosts) if e.field == field]


def test_the_plain_site_is_valid() -> None:
    assert problems(site()) == []


def test_a_head_left_out_of_a_scheduler_it_controls_is_refused() -> None:
    both = {"schedulers": ["slurm", "kubernetes"], "scheduler_sharing": "drain"}
    found = about(site(head={"node_schedulers": ["kubernetes"]}, everywhere=both),
                  "node_schedulers")
    assert len(found) == 1 and found[0].host == "head01"
    assert "leaves the head out of slurm" in found[0].problem and "slurmctld" in found[0].problem
    assert "remove node_schedulers from the head" in found[0].fix
    assert not about(site(head={"node_schedulers": ["slurm", "kubernetes"]}, everywhere=both),
                     "node_schedulers")


def test_an_mps_node_in_both_schedulers_is_refused() -> None:
    both = {"schedulers": ["slurm", "kubernetes"], "scheduler_sharing": "drain"}
    mps = {"gpu_sharing": {"mode": "mps", "clients": 4}}
    found = about(site(everywhere=both, gpu01=mps), "gpu_sharing['mode']")
    assert len(found) == 1 and "two MPS control daemons" in found[0].problem
    one = about(site(everywhere=both, gpu01={**mps, "node_schedulers": ["slurm"]}),
                "gpu_sharing['mode']")
    assert one == []


def test_monitoring_needs_an_address_on_every_host_said_once() -> None:
    dns = {"node_address": None}
    hosts = [HostInput(h.name, h.groups, {**h.data, **dns, "ssh_hostname": f"{h.name}.dc"})
             for h in site(gpu01={}, gpu02={})]
    found = about(hosts, "node_address")
    assert len(found) == 1, found
    assert found[0].host == "every host" and "monitoring is on" in found[0].problem
    assert "monitoring_enabled = False" in found[0].fix
    off = [HostInput(h.name, h.groups, {**h.data, "monitoring_enabled": False}) for h in hosts]
    assert about(off, "node_address") == []


def test_a_refused_address_is_not_also_reported_as_missing() -> None:
    found = about(site(gpu01={"node_address": "127.0.0.1"}), "node_address")
    assert [(e.host, e.value) for e in found] == [("gpu01", "127.0.0.1")]


def test_kernel_modules_the_gpu_cannot_run_are_refused_at_validate() -> None:
    b200 = {"gpu_model": "B200-180GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all",
            "nvidia_driver_open_modules": False}
    volta = {"gpu_model": "V100-SXM2-32GB", "gpu_count": 8, "gpu_topology": "fixed-mesh",
             "nvidia_driver_open_modules": True}
    found = about(site(everywhere={"driver_branch": "570"}, gpu01=b200, gpu02=volta),
                  "nvidia_driver_open_modules")
    assert {e.host for e in found} == {"gpu01", "gpu02"}
    assert any("only with NVIDIA's open kernel modules" in e.problem for e in found)
    assert any("cannot run the open kernel modules" in e.problem for e in found)


def test_a_topology_error_does_not_hide_the_sharing_problems_of_the_host() -> None:
    bad = {"gpu_count": 3, "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 9}}}
    fields = [e.field for e in problems(site(gpu01=bad))]
    assert "gpu_count/gpu_topology" in fields
    assert "gpu_sharing['mig_layout']" in fields


def test_a_site_wide_typo_is_said_once() -> None:
    typo = {"monitoring_enabeld": False}
    found = about(site(everywhere=typo, gpu01={}, gpu02={}), "monitoring_enabeld")
    assert len(found) == 1 and found[0].host == "every host"
    assert "did you mean 'monitoring_enabled'" in found[0].problem


def test_the_same_problem_on_some_hosts_names_them() -> None:
    bad = {"gpu_count": 3}
    found = about(site(gpu01=bad, gpu02=bad, gpu03={}), "gpu_count/gpu_topology")
    assert [e.host for e in found] == ["gpu01, gpu02"]


def test_one_warning_per_cause_naming_its_hosts() -> None:
    from gpuinfra.spec import SpecWarning, format_warnings

    same = "no GPUDirect RDMA: because"
    text = format_warnings([SpecWarning("hgx01", "rdma_nics", same),
                            SpecWarning("hgx02", "rdma_nics", same),
                            SpecWarning("pcie01", "gpu_model", "other")])
    assert text.splitlines() == [f"gpuinfra: warning: [hgx01, hgx02] rdma_nics: {same}",
                                 "gpuinfra: warning: [pcie01] gpu_model: other"]


def test_two_daemons_on_one_port_are_refused() -> None:
    clash = {"monitoring_grafana_port": 9093}  # Alertmanager's
    found = about(site(everywhere=clash), "monitoring_alertmanager_port, monitoring_grafana_port")
    assert len(found) == 1 and found[0].host == "head01" and found[0].value == 9093
    assert "Alertmanager and Grafana" in found[0].problem
    slurmd = {"monitoring_node_exporter_port": 6818}  # slurmd's, on every worker
    found = about(site(everywhere=slurmd, gpu01={}, gpu02={}), "monitoring_node_exporter_port")
    assert [(e.host, "slurmd" in e.problem) for e in found] == [("gpu01, gpu02", True)]
    assert about(site(everywhere={"monitoring_grafana_port": 3001}),
                 "monitoring_grafana_port") == []


def test_durations_and_smtp_ports_are_bounded() -> None:
    for key, value in (("monitoring_retention", "99999y"), ("monitoring_retention", "1m"),
                       ("monitoring_scrape_interval", "10m")):
        found = about(site(everywhere={key: value}), key)
        assert found and "outside" in found[0].problem, (key, value, found)
    mail = [{"name": "mail", "email_to": "ops@site.org", "email_from": "am@site.org",
             "smarthost": "mail.site.org:99999"}]
    found = [e for e in problems(site(everywhere={"monitoring_alert_receivers": mail}))
             if e.field.startswith("monitoring_alert_receivers")]
    assert found and "99999" in found[0].problem, found


def test_a_health_key_in_slurm_conf_extra_clashes_with_its_knob() -> None:
    """C2 (test audit e4dd2f2): with the health role's knob on, slurm.conf's key it writes is
    refused in slurm_conf_extra (Slurm would keep one of the two), in any case, naming both;
    with the knob off the site's own is accepted."""
    mine = {"HealthCheckProgram": "/usr/sbin/site-check"}
    on = {"health_enabled": True, "slurm_conf_extra": mine}
    found = about(site(everywhere=on), "slurm_conf_extra['HealthCheckProgram']")
    assert len(found) == 1 and "health_enabled is True" in found[0].problem
    assert "set health_enabled = False" in found[0].fix
    lower = {"health_enabled": True, "slurm_conf_extra": {"healthcheckprogram": "/usr/sbin/x"}}
    assert about(site(everywhere=lower), "slurm_conf_extra['healthcheckprogram']")
    off = {"health_enabled": False, "slurm_conf_extra": mine}
    assert not about(site(everywhere=off), "slurm_conf_extra['HealthCheckProgram']")
    epilog = {"health_enabled": True, "health_slurm_epilog": False,
              "slurm_conf_extra": {"Epilog": "/etc/slurm/epilog.d/*"}}
    assert not about(site(everywhere=epilog), "slurm_conf_extra['Epilog']")
