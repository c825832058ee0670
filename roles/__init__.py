"""gpuinfra's roles: one folder each, nothing else (README.md: the import rule, adding one)."""
