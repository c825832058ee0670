"""The local podman lab: image recipe, replayed GPU hardware, nvidia-smi stand-in."""
