"""An example GB200 NVL72 site: one head node and two NVL72 racks (here four compute trays
each, of the eighteen a full rack holds), each rack one NVLink domain: Slurm's topology/block
keeps a job's nodes in as few racks as it allows (fabric_blocks in group_data/gb200.py).

topology/block needs Slurm 23.11 or newer on the controller: Ubuntu 24.04 (23.11), not Debian
12 (22.05), which the deploy refuses naming the version (gpuinfra/slurm/versions.py).
`gpuinfra render inventory/gb200.py --os ubuntu-24.04` shows every file.
"""

# A GB200 compute tray: 4 GPUs on 2 Grace CPUs (72 Arm cores each), one NVLink domain per rack.
_TRAY = {"gpu_model": "GB200-186GB", "gpu_count": 4, "gpu_topology": "nvlink-domain",
         "node_hardware": {"sockets": 2, "cores_per_socket": 72, "threads_per_core": 1,
                           "memory_gb": 960}}

head = [("gbhead01", {"ssh_hostname": "10.1.0.10"})]

workers = [(f"gb{rack}{tray:02d}", {"ssh_hostname": f"10.1.{rack}.{tray}", **_TRAY})
           for rack in (1, 2) for tray in range(1, 5)]
