"""An example Kubernetes GPU site: three control planes (the head and kubernetes_control_plane,
stacked etcd) behind the site's load balancer, and three GPU workers, one per way of sharing:
an HGX H100 with MIG (mig_strategy mixed) and eight InfiniBand NICs, a pair of L40S
time-sliced, an H100 NVL whole.

Kubernetes cannot run in this project's lab (no kubelet is reachable): `gpuinfra render
inventory/k8s.py --os ubuntu-24.04` shows every file and object the deploy would write and
apply, each judged where a judge runs here (the rendered objects against the pinned
Kubernetes' OpenAPI schema: tests/unit/test_kubernetes_schemas.py).
"""

_HGX = {"gpu_model": "H100-SXM5-80GB", "gpu_count": 8, "gpu_topology": "nvswitch-all-to-all",
        "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 2}},
        # Its eight compute NICs: the RDMA shared device plugin runs there, and a pod asking
        # for rdma/rdma_shared_device_a gets them (gpuinfra smoke manifest --rdma).
        "rdma_nics": [{"name": f"mlx5_{i}", "pci": f"0000:{bus}:00.0", "ats": True,
                       "link_layer": "infiniband", "rate_gbps": 400, "model": "ConnectX-7"}
                      for i, bus in enumerate(("18", "2a", "3a", "5d", "9a", "ab", "ba", "db"))]}
_L40S = {"gpu_model": "L40S", "gpu_count": 2, "gpu_topology": "pcie-only",
         "gpu_sharing": {"mode": "time-slicing", "replicas": 4}}
_NVL = {"gpu_model": "H100-NVL-94GB", "gpu_count": 2, "gpu_topology": "bridged-pairs"}

head = [("k8s-cp01", {"ssh_hostname": "10.2.0.11"})]

kubernetes_control_plane = [("k8s-cp02", {"ssh_hostname": "10.2.0.12"}),
                            ("k8s-cp03", {"ssh_hostname": "10.2.0.13"})]

workers = [("k8s-gpu01", {"ssh_hostname": "10.2.1.1", **_HGX}),
           ("k8s-gpu02", {"ssh_hostname": "10.2.1.2", **_L40S}),
           ("k8s-gpu03", {"ssh_hostname": "10.2.1.3", **_NVL})]
