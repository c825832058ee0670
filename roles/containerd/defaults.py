"""Data keys of the `containerd` role: default and rule of each (override them in group_data).

Also read from the cluster spec: ``kubernetes_version`` and ``kubernetes_image_repository``
(the sandbox image containerd uses is kubeadm's pause image of that version). Checked by the
spec gate before any host is touched.
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean

KNOBS = (
    # containerd runs on every Kubernetes node. True runs it on every host of the site, with or
    # without Kubernetes (containers without a cluster, or a lab where the kubelet cannot run).
    Knob("containerd_everywhere", False, boolean(),
         "containerd on every host, not only on Kubernetes nodes", site_wide=True),
)

DEFAULTS = defaults(KNOBS)
