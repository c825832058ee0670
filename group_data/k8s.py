"""Site-wide values of the Kubernetes example site (inventory/k8s.py)."""

cluster_name = "k8s"
schedulers = ["kubernetes"]
# The HGX node's MIG layout gives each GPU its own profile mix: the device plugin advertises
# nvidia.com/mig-<profile> per profile.
mig_strategy = "mixed"
# The site's load balancer (or VIP) in front of the three control planes' API servers.
kubernetes_control_plane_endpoint = "k8s-api.example.internal:6443"
driver_branch = "580"
