"""The roll proof's sampler (gpuinfra_lab/rolling.py): a sample in which sinfo named no such
node (it failed while slurmctld restarted) is no evidence that the node was drained."""

from __future__ import annotations

from gpuinfra_lab.rolling import Sampler


def _sampler(*seen: dict[str, str]) -> Sampler:
    sampler = Sampler("lab-head")
    sampler.seen = list(seen)
    return sampler


def test_an_empty_sample_is_no_drain() -> None:
    sampler = _sampler({"w1": "idle", "w2": "idle"}, {}, {"w1": "drain", "w2": "mixed"})
    assert sampler.out("w1") and not sampler.out("w2")
    assert not sampler.both_out(["w1", "w2"])


def test_a_drained_state_is_out_with_its_evidence() -> None:
    sampler = _sampler({"w1": "drng", "w2": "drain*"}, {"w1": "idle", "w2": "idle~"})
    assert sampler.states_out("w2") == ["drain*"]
    assert sampler.both_out(["w1", "w2"])


def test_unknown_after_a_controller_restart_is_out_but_no_drain() -> None:
    """CI once failed the proof with "lab-worker2 was drained by a roll that stopped at
    lab-worker1: states seen ['unknown']": slurmctld restarted (gres.conf changed) and every
    node was unknown until its slurmd registered again. Out of service, not drained."""
    sampler = _sampler({"w1": "drng", "w2": "unknown"}, {"w1": "drained", "w2": "unknown*"},
                       {"w1": "drained", "w2": "idle"})
    assert sampler.out("w2") and sampler.drained("w2") == []
    assert sampler.drained("w1") == ["drng", "drained", "drained"]
    assert not sampler.both_out(["w1", "w2"])  # w2 was never taken out
