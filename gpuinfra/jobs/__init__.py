"""Jobs run to prove a cluster: NCCL all-reduce, the training smoke job, and the jobs' container
runtimes."""
