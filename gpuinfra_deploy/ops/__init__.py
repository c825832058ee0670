"""Shared pyinfra operations the roles use, one module per concern: ``apt``, ``block`` (a
marked block of cluster-wide lines), ``boot`` (daemons' boot order and restarts), ``checked``
(configs that go live once their tool accepts them), ``cuda_repo``, ``gpu`` (a node's driver
release), ``kernel_args``, ``reboot``, ``remote`` (what execution-time callbacks use) and
``templates``. An operation only one role uses lives in that role.
"""
