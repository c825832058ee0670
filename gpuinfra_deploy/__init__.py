"""gpuinfra_deploy: the pyinfra-side code the roles share (below the roles, above the
pure library ``gpuinfra``): ``ops`` (shared operations), ``facts`` (shared facts by family),
``run`` (the run machinery) and ``pyinfra_patches`` (the only place pyinfra internals are
patched).
"""
