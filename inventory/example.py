"""An example site: one head node and Slurm's backup controller, two HGX H100 nodes, one PCIe
node with bridged pairs, and a KVM host passing its four NVLink-bridged RTX A6000 to two VMs
(VFIO).

Copy it to inventory/<site>.py, put the site-wide values in group_data/<site>.py, and run
`gpuinfra validate inventory/<site>.py`, then `pyinfra inventory/<site>.py deploy.py`.
"""

_HGX_H100 = {
    "gpu_model": "H100-SXM5-80GB",
    "gpu_count": 8,
    "gpu_topology": "nvswitch-all-to-all",
    # One NDR ConnectX-7 per GPU (roles/rdma): addresses as `lspci -D` lists them.
    "rdma_nics": [{"name": f"mlx5_{i}", "pci": f"0000:{bus}:00.0", "ats": True,
                   "link_layer": "infiniband", "rate_gbps": 400, "model": "ConnectX-7"}
                  for i, bus in enumerate(("18", "2a", "3a", "5d", "9a", "ab", "ba", "db"))],
    # Its CPUs and memory: what `gpuinfra render` writes into slurm.conf before the node's own
    # facts are recorded (the facts win at deploy, and differences are reported).
    "node_hardware": {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 2,
                      "memory_gb": 2048},
}

head = [("head01", {"ssh_hostname": "10.0.0.10"})]

# Slurm's backup controller: it takes over when head01's slurmctld stops answering, from the
# state both mount (slurm_state_save_location in group_data/example.py: the site's NFS).
slurm_backup = [("head02", {"ssh_hostname": "10.0.0.11"})]

workers = [
    ("hgx01", {"ssh_hostname": "10.0.0.21", **_HGX_H100}),
    ("hgx02", {"ssh_hostname": "10.0.0.22", **_HGX_H100,
               "gpu_sharing": {"mode": "mig", "mig_layout": {"3g.40gb": 2}}}),
    ("pcie01", {"ssh_hostname": "10.0.0.31", "gpu_model": "H100-PCIE-80GB", "gpu_count": 4,
                "gpu_topology": "bridged-pairs",
                "gpu_sharing": {"mode": "mps", "clients": 16, "thread_percentage": 50},
                "node_hardware": {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2,
                                  "memory_gb": 512}}),
]

# A KVM host (roles/vfio): each VM gets an NVLink-bridged pair, whole cards (the audio
# function .1 of each card follows its GPU). It keeps no GPU itself: no gpu_model.
_A6000 = ["0000:3b:00.0", "0000:3c:00.0", "0000:5e:00.0", "0000:5f:00.0"]
hypervisors = [
    ("kvm01", {"ssh_hostname": "10.0.0.41", "vfio_devices": _A6000,
               "vms": [{"name": "train1", "devices": _A6000[:2], "vcpus": 16,
                        "memory_mib": 131072},
                       {"name": "train2", "devices": _A6000[2:], "vcpus": 16,
                        "memory_mib": 131072}],
               "vfio_nvlink": [{"gpus": _A6000[:2], "fabric": "bridge"},
                               {"gpus": _A6000[2:], "fabric": "bridge"}]}),
]
