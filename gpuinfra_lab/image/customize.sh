#!/bin/sh
# Runs inside the debootstrapped root (chroot) once, when `gpuinfra lab up` builds the lab image.
# Part of the image recipe: editing this file changes the image tag and forces a rebuild.
# It only makes a fresh Debian 12 install behave as one per container; GPU simulation is added
# per container by `lab up`, never here.
set -eu

# One identity per container: systemd derives the machine id from podman's container_uuid
# when /etc/machine-id is empty; dbus reads the same file.
: > /etc/machine-id
rm -f /var/lib/dbus/machine-id
ln -s /etc/machine-id /var/lib/dbus/machine-id

# One SSH host key set per container, generated at first start instead of baked in the image.
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/systemd/system/ssh.service.d
cat > /etc/systemd/system/ssh.service.d/gpuinfra-lab-hostkeys.conf <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT

# The host's name leaks in through debootstrap; `lab up` writes each container's own.
echo localhost > /etc/hostname
cat > /etc/hosts <<'HOSTS'
127.0.0.1	localhost
::1		localhost ip6-localhost ip6-loopback
ff02::1		ip6-allnodes
ff02::2		ip6-allrouters
HOSTS

# Units that cannot work in a container (no block devices to scrub, no kernel to tune).
systemctl mask e2scrub_reap.service

# A fresh install has no stale package lists: roles run their own `apt-get update`.
apt-get clean
rm -rf /var/lib/apt/lists/*
