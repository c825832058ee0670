"""Slurm from the spec: ``conf`` (slurm.conf as data), ``nodes`` (node and partition lines,
per-GPU defaults), ``gres`` (gres.conf), ``extra`` (what a site may add), ``running``
(configless: the head's running files and what a change asks of which daemon) and
``accounting`` (sacctmgr associations). The roles/slurm templates render them."""
