"""Data keys of the `kubernetes` role: default and rule of each (override them in group_data).

Also read from the cluster spec (group_data/<site>.py): ``kubernetes_version``,
``kubernetes_pod_cidr``, ``kubernetes_service_cidr``, ``kubernetes_cni``,
``kubernetes_device_plugin_version``, ``kubernetes_image_repository``, ``mig_strategy``,
``scheduler_sharing``, and each node's ``gpu_sharing`` and ``node_schedulers``. Checked by
the spec gate before any host is touched.
"""

from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean, http_url, optional, text

# The scheduler this role belongs to: a deploy running it alone defaults to it.
SCHEDULER = "kubernetes"

KNOBS = (
    # A mirror of pkgs.k8s.io (same layout below it: /core:/stable:/v1.35/deb/) for sites
    # that cannot reach it; None: pkgs.k8s.io itself.
    Knob("kubernetes_repo_mirror", None, optional(http_url()),
         "a mirror of https://pkgs.k8s.io", site_wide=True),
    # Taint GPU nodes nvidia.com/gpu=present:NoSchedule, so only pods that tolerate it (GPU
    # pods, the device plugin) land there.
    Knob("kubernetes_gpu_taint", False, boolean(), "the NoSchedule taint on GPU nodes",
         site_wide=True),
    # GPU Feature Discovery beside the device plugin (labels such as nvidia.com/gpu.product).
    # It writes its labels through Node Feature Discovery, which this role does not deploy:
    # turn it on where NFD runs.
    Knob("kubernetes_gpu_feature_discovery", False, boolean(),
         "GPU Feature Discovery DaemonSets (needs Node Feature Discovery)", site_wide=True),
    # The image of the verify suite's one-GPU pod (it runs nvidia-smi -L).
    Knob("kubernetes_verify_image", "nvcr.io/nvidia/cuda:12.2.0-base-ubuntu22.04",
         text(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?(/[a-z0-9._-]+)+:[A-Za-z0-9._-]+",
              "an image reference registry/path:tag"),
         "the image of the verify suite's GPU pod", site_wide=True),
)

DEFAULTS = defaults(KNOBS)
