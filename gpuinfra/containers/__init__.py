"""Container runtimes on a node: containerd's config.toml, the nvidia runtime and CDI."""
