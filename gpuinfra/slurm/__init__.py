"""Slurm from the spec: slurm.conf, gres.conf and friends as data, accounting."""
