"""RDMA: ATS, ACS and the GPUDirect path on a node, its verdicts, ib_write_bw floors."""
