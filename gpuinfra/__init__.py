"""gpuinfra: the pure library behind the gpuinfra toolkit.

Subpackages: ``parsers`` (vendor tool output to typed results, one module per tool), ``spec``
(the cluster-spec model and its validation), ``knowledge`` (GPU, topology, driver, package,
network and NCCL tables) and ``monitoring`` (what the monitoring role writes). Domain modules:
``slurmconf`` and ``nccl_job`` (Slurm), ``kubeadm``, ``manifests``, ``containerd``,
``runtimes`` and ``deviceplugin`` (Kubernetes and containers), ``migconfig``, ``migplan`` and
``mps`` (GPU sharing), ``rdma``, ``vfio``, ``aptsources`` and ``aptmirror`` (apt), ``render``,
``units``, ``reboot`` and ``platforms`` (host files and distributions); ``verdicts``,
``nccl_verdict`` and ``perftest`` judge parsed output. Nothing here imports pyinfra, touches
the network or reads files: callers hand it text and data.
"""

__version__ = "0.1.0"
