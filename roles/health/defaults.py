"""Data keys of the `health` role: default and rule of each (override them in group_data).

The role installs the node health check (gpuinfra-health) on every Slurm worker and GPU node;
the slurm role reads these keys too (slurm.conf's HealthCheckProgram, Prolog, Epilog). Keys
that land in slurm.conf must agree on every host.
"""

from typing import Any

from gpuinfra.health.expectation import BREAKER_SHARE, BREAKER_WINDOW_S
from gpuinfra.health.thresholds import ACTIONS, ECC_MAX
from gpuinfra.knowledge.xids import policy_problem
from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import Rule, boolean, choice, integer, text

# slurm.conf(5) HealthCheckNodeState: ALLOC, ANY, IDLE, MIXED, NONDRAINED_IDLE, plus CYCLE
# (spread the checks over the interval instead of every node at once); comma separated.
NODE_STATES = ("ALLOC", "ANY", "IDLE", "MIXED", "NONDRAINED_IDLE", "CYCLE")


def _share(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "must be a number"
    return None if 0 < value <= 1 else "out of range"

KNOBS = (
    # What an XID does, over NVIDIA's catalog (gpuinfra/knowledge/xids.py DEFAULT_XID_POLICY:
    # 48, 64, 74, 79, 95, 119, 120, 140 drain; 63, 92, 94 and every other XID warn):
    # {94: "drain"} drains on contained ECC errors too, {74: "warn"} keeps a node with NVLink
    # errors in service. The node health check, the Prolog/Epilog, `gpuinfra check --dmesg`
    # with the site and the GpuFatalXid alert all read it. Xid 154's recovery action always
    # drains.
    Knob("health_xid_policy", {}, Rule("a dict of XID number -> 'drain' or 'warn', e.g. "
                                       "{94: 'drain'}", policy_problem),
         "what each XID does (over NVIDIA's catalog)", site_wide=True),
    # The health check on the nodes, wired into Slurm (HealthCheckProgram, Prolog, Epilog) and
    # into node_exporter's textfile directory. False: nothing installed, nothing in slurm.conf.
    Knob("health_enabled", True, boolean(), "the node health check", site_wide=True),
    # What a failed check does: "drain" the Slurm node with the cause (and resume it once the
    # check passes), or only "report" (journal and metrics; the node keeps taking jobs).
    Knob("health_on_failure", "drain", choice("drain", "report"),
         "what a failed health check does to the node"),
    # Seconds between two checks of a node (slurm.conf HealthCheckInterval). The check reads
    # the node in well under a second (bench/health.py), so a short interval costs little.
    Knob("health_check_interval", 300, integer(10, 86400), "HealthCheckInterval in seconds",
         site_wide=True),
    # Which nodes Slurm checks (HealthCheckNodeState): ANY by default, CYCLE spreads them.
    Knob("health_check_node_state", "ANY,CYCLE",
         text(r"(ALLOC|ANY|IDLE|MIXED|NONDRAINED_IDLE|CYCLE)(,(ALLOC|ANY|IDLE|MIXED|"
              r"NONDRAINED_IDLE|CYCLE))*", "states of slurm.conf's HealthCheckNodeState, comma "
              "separated: " + ", ".join(NODE_STATES)),
         "HealthCheckNodeState", site_wide=True),
    # Slurm's Prolog (the job's GPUs present and healthy before it starts; a failure drains the
    # node and requeues the job) and Epilog (a fatal XID logged during the job drains the node
    # naming the job). Off: the keys are free for the site's own (slurm_conf_extra).
    Knob("health_slurm_prolog", True, boolean(), "the GPU check in Slurm's Prolog",
         site_wide=True),
    Knob("health_slurm_epilog", True, boolean(), "the XID check in Slurm's Epilog",
         site_wide=True),
    # Kubernetes GPU nodes: node-problem-detector runs the check every health_check_interval
    # and sets the node condition GpuinfraUnhealthy with its cause (the kubernetes role applies
    # its DaemonSet: gpuinfra.kubernetes.manifests.health_objects).
    Knob("health_kubernetes", True, boolean(),
         "node-problem-detector's GpuinfraUnhealthy condition on Kubernetes GPU nodes",
         site_wide=True),
    # With health_kubernetes: a controller on the control plane taints a node whose condition
    # is True gpuinfra.io/unhealthy=true:NoSchedule and takes that taint off when it is False
    # again (gpuinfra.health.taint; manifests.health_taint_objects). False: no controller, and
    # the role removes that taint from the GPU nodes; the condition stays.
    Knob("health_kubernetes_taint", True, boolean(),
         "the NoSchedule taint gpuinfra.io/unhealthy that follows the GpuinfraUnhealthy "
         "condition", site_wide=True),
    # DCGM's quick diagnostic (`dcgmi diag -r 1`) in the periodic check where DCGM is
    # installed: 0 off, 1 on.
    Knob("health_dcgm_diag_level", 0, integer(0, 1), "DCGM's diagnostic level in the check"),
    # The circuit breaker (gpuinfra/health/breaker.py): the periodic check and the Epilog
    # drain at most this share of the GPU nodes (rounded down, at least one) within
    # health_breaker_window seconds; past it the breaker trips, nothing more is drained
    # automatically, HealthBreakerTripped fires, and a person resets it (`gpuinfra health
    # reset-breaker`). 1.0: no bound. A failing node the breaker holds is still reported.
    Knob("health_breaker_share", BREAKER_SHARE, Rule("a share of the GPU nodes above 0, at "
                                                     "most 1, e.g. 0.1", _share),
         "the most GPU nodes automatic drains take within the window", site_wide=True),
    Knob("health_breaker_window", BREAKER_WINDOW_S, integer(60, 7 * 86400),
         "the breaker's window in seconds", site_wide=True),
    # The GPU thresholds (gpuinfra/health/thresholds.py), each judged by the check with the
    # alert's number: a GPU hotter than monitoring_gpu_temperature_max (GpuTemperatureHigh),
    # uncorrectable ECC errors since the driver loaded above health_gpu_ecc_max
    # (GpuUncorrectableEcc). "warn": said (verdict, metrics, journal), the node keeps its jobs;
    # "drain": the check fails and drains; "off": not read.
    Knob("health_gpu_temperature", "warn", choice(*ACTIONS),
         "what a GPU above monitoring_gpu_temperature_max does to the check", site_wide=True),
    Knob("health_gpu_ecc", "warn", choice(*ACTIONS),
         "what uncorrectable ECC errors above health_gpu_ecc_max do to the check",
         site_wide=True),
    Knob("health_gpu_ecc_max", ECC_MAX, integer(0, 1_000_000),
         "uncorrectable ECC errors since the driver loaded that pass (the check and "
         "GpuUncorrectableEcc)", site_wide=True),
)

DEFAULTS = defaults(KNOBS)
