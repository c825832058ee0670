"""Kubernetes: kubeadm's configuration, the objects applied, the device plugin's config."""
