"""`gpuinfra health breaker|reset-breaker` (gpuinfra_cli/health.py) with the head faked: what
it says and what it runs. Live in the lab: gpuinfra_lab/breaker.py."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from gpuinfra_cli.main import main

TRIPPED = ("gpu1|drained|gpu:h100:8|gpuinfra: GPU0 Xid 79|gpuinfra-drained: {now}|"
           "2026-12-07T08:00:00|\n"
           "gpu2|idle|gpu:h100:8|none|gpuinfra-breaker: tripped {now}: 1 of 2 GPU nodes|"
           "Unknown|\nhead|idle|(null)|none|(null)|Unknown|\n")


@pytest.fixture
def head(monkeypatch):
    """The head's answers: ``out`` for sinfo (``rc``), every command it ran in ``ran``."""
    import time

    import gpuinfra_cli.roll as roll

    seen = NS(out=TRIPPED.format(now=int(time.time())), rc=0, ran=[])

    class Head:
        def __init__(self, target, sudo=False):
            self.sudo = sudo

        def run(self, command, timeout=120):
            seen.ran.append(command)
            return (seen.rc, seen.out, "sinfo: error: slurm_load_partitions") \
                if command.startswith("sinfo") else (0, "", "")

        def close(self):
            pass

    site = NS(spec=NS(head=[NS(name="h1")], nodes=[NS(settings={"health_breaker_window": 600})],
                      schedulers=("slurm",)),
              target=lambda name: name)
    monkeypatch.setattr(roll, "Ssh", Head)
    monkeypatch.setattr(roll, "load_site", lambda inventory: site)
    return seen


def test_a_tripped_breaker_is_said_with_what_to_do(head, capsys) -> None:
    assert main(["health", "breaker", "--inventory", "inventory/x.py"]) == 1
    out = capsys.readouterr().out
    assert "the breaker is TRIPPED (gpu2: gpuinfra-breaker: tripped" in out
    assert "gpuinfra health reset-breaker --inventory inventory/x.py" in out


def test_the_reset_clears_the_trip_only(head, capsys) -> None:
    assert main(["health", "reset-breaker", "--inventory", "inventory/x.py"]) == 0
    assert head.ran[1:] == ["scontrol update NodeName=gpu2 Comment="]
    out = capsys.readouterr().out
    assert "the breaker is reset (it held gpu2)" in out
    assert "Still drained automatically within 600 s: gpu1" in out  # the site's window


def test_nothing_tripped_nothing_reset(head, capsys) -> None:
    head.out = "gpu1|idle|gpu:h100:8|none|(null)|Unknown|\n"
    assert main(["health", "breaker", "--inventory", "inventory/x.py"]) == 0
    assert main(["health", "reset-breaker", "--inventory", "inventory/x.py"]) == 0
    assert head.ran == [head.ran[0]] * 2  # sinfo twice, nothing else
    assert "nothing to reset" in capsys.readouterr().out


def test_a_head_that_cannot_answer_is_said_in_one_line(head, capsys) -> None:
    head.rc = 1
    assert main(["health", "breaker", "--inventory", "inventory/x.py"]) == 2
    err = capsys.readouterr().err
    assert "on the head: `sinfo -h -N -O" in err and "slurm_load_partitions" in err
    assert "Traceback" not in err


def _k8s(head, monkeypatch, nodes: list[dict]) -> None:
    """A Kubernetes-only site: the head answers `kubectl get nodes -o json` with ``nodes``."""
    import json

    import gpuinfra_cli.roll as roll

    site = NS(spec=NS(head=[NS(name="cp1")], nodes=[NS(settings={"health_breaker_window": 600})],
                      schedulers=("kubernetes",)), target=lambda name: name)
    monkeypatch.setattr(roll, "load_site", lambda inventory: site)

    class Head:
        def __init__(self, target, sudo=False):
            pass

        def run(self, command, timeout=120):
            head.ran.append(command)
            if command.endswith("get nodes -o json"):
                return 0, json.dumps({"kind": "NodeList", "items": nodes}), ""
            return 0, "", ""

        def close(self):
            pass

    monkeypatch.setattr(roll, "Ssh", Head)


def test_kubernetes_taints_have_their_breaker_said_and_reset(head, monkeypatch, capsys) -> None:
    """Issue 48: on a Kubernetes site the trip is the node annotation the taint controller
    set (gpuinfra.health.taint); `breaker` says it, `reset-breaker` removes it with kubectl."""
    import time

    now = str(int(time.time()))
    tainted = {"metadata": {"name": "gpu1", "annotations": {"gpuinfra.io/tainted-at": now}},
               "spec": {"taints": [{"key": "gpuinfra.io/unhealthy", "value": "true",
                                    "effect": "NoSchedule"}]}}
    held = {"metadata": {"name": "gpu2", "annotations": {
        "gpuinfra.io/breaker-tripped": f"{now}: 1 GPU nodes tainted within 600 s (gpu1)"}},
        "spec": {}}
    _k8s(head, monkeypatch, [tainted, held])
    assert main(["health", "breaker", "--inventory", "inventory/k8s.py"]) == 1
    out = capsys.readouterr().out
    assert "Kubernetes: the breaker is TRIPPED (gpu2: " in out and "reset-breaker" in out
    assert main(["health", "reset-breaker", "--inventory", "inventory/k8s.py"]) == 0
    assert head.ran[-1] == ("kubectl --kubeconfig /etc/kubernetes/admin.conf annotate node gpu2 "
                            "gpuinfra.io/breaker-tripped-")
    assert "Still tainted within 600 s: gpu1" in capsys.readouterr().out
    head.ran.clear()
    _k8s(head, monkeypatch, [tainted])
    assert main(["health", "breaker", "--inventory", "inventory/k8s.py"]) == 0
    assert main(["health", "reset-breaker", "--inventory", "inventory/k8s.py"]) == 0
    assert not [c for c in head.ran if "annotate" in c]
    assert "nothing to reset" in capsys.readouterr().out
