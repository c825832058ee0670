"""The node health check: one reading of a GPU node, judged by the library, on the node.

- :mod:`~gpuinfra.health.expectation`: what the node must be, rendered from the spec at deploy
  time into ``/etc/gpuinfra/health.json`` (model, count, topology profile, NICs, MIG layout,
  persistence mode, Fabric Manager); read back and checked field by field.
- :mod:`~gpuinfra.health.probes`: the commands one reading runs (one table: the health check,
  the verify suite and the GPU metrics collector ask the node the same questions).
- :mod:`~gpuinfra.health.collect`: what one command of a reading gave (Output) and its limits;
  the runner is gpuinfra_node.reader, shipped to the node with this library (the library
  itself starts no process).
- :mod:`~gpuinfra.health.judge`: the verdict on a reading, with the verify suite's own
  judgements (gpuinfra.verdicts, gpuinfra.rdma.verdicts, gpuinfra.sharing.migplan): findings with
  cause and fix, and one short line for the scheduler.
- :mod:`~gpuinfra.health.slurm`: what the check does to the Slurm node (drain with
  ``gpuinfra: <cause>``, resume what it drained, never what an operator drained).
- :mod:`~gpuinfra.health.taint`: what the check's Kubernetes node condition does to the node's
  taints (``gpuinfra.io/unhealthy=true:NoSchedule`` while it is True; an operator's taints
  are never touched).
"""
