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
