"""Code that runs on the nodes themselves, shipped there by the roles with the gpuinfra library
(gpuinfra_deploy.nodecode.node_zip): Python's standard library and gpuinfra, nothing else.

- :mod:`gpuinfra_node.reader`: runs the commands of one reading of a node (the tables of
  gpuinfra.health.probes), for the health check and for the GPU metrics collector alike.
- :mod:`gpuinfra_node.taint_controller`: the controller that taints Kubernetes nodes whose
  health condition is True (it runs in a pod on the control plane, shipped there with only
  gpuinfra/health/taint.py: gpuinfra.kubernetes.manifests.health_taint_objects).
"""
