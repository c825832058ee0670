"""The `gpuinfra` command line and the code that reads files for the pure library."""
