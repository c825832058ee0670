#!/bin/sh
# Runs inside a copy of the lab image's root (chroot) once, when `gpuinfra lab up` builds the
# QEMU guests' disk image (gpuinfra_lab/vmimage.py). Part of the VM image recipe: editing this file
# changes the image's key and forces a rebuild. It turns the container root into a machine that
# boots Debian 12's own kernel from its own disk: the generic kernel (it has vfio and rdma_rxe),
# an initramfs, GRUB on the disk's MBR (installed by the first boot, gpuinfra_lab/vmimage.py), a serial
# console, DHCP on the management NIC, and a boot unit that takes the guest's name, root's SSH
# key, its SSH host key and its private segment address from QEMU's fw_cfg (`gpuinfra lab up`
# passes them).
set -eu
export DEBIAN_FRONTEND=noninteractive

apt-get update -qq
# zstd first: the initramfs below is generated with it (the default, and fast to unpack).
apt-get install -y -qq --no-install-recommends zstd >/dev/null
# The initramfs carries what boots the guest (virtio disk, ext4) and what
# /etc/initramfs-tools/modules adds (the vfio role adds vfio there). Debian's default, MODULES=most,
# takes minutes to build under emulation; the chroot cannot detect the guest's devices (dep).
mkdir -p /etc/initramfs-tools/conf.d
printf 'MODULES=list\nCOMPRESS=zstd\n' > /etc/initramfs-tools/conf.d/gpuinfra-lab.conf
printf 'virtio_pci\nvirtio_blk\next4\n' > /etc/initramfs-tools/modules
echo "grub-pc grub-pc/install_devices multiselect" | debconf-set-selections
echo "grub-pc grub-pc/install_devices_empty boolean true" | debconf-set-selections
apt-get install -y -qq --no-install-recommends linux-image-amd64 initramfs-tools grub-pc >/dev/null

# The root file system is the disk's first partition (gpuinfra_lab/vmimage.py labels it).
echo 'LABEL=gpuinfra-root / ext4 errors=remount-ro 0 1' > /etc/fstab

# GRUB boots at once, on the serial console. mitigations=off: the CPU is emulated (TCG), the
# mitigations only cost time. The vfio role adds its arguments in /etc/default/grub.d.
sed -i -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=0/' \
  -e 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=""/' \
  -e 's/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX="console=ttyS0,115200 mitigations=off"/' \
  /etc/default/grub
cat >> /etc/default/grub <<'GRUB'
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB

# The first boot (gpuinfra_lab/vmimage.py) runs this as init: GRUB onto the disk, its configuration,
# then power off.
cat > /usr/local/sbin/gpuinfra-lab-install-bootloader <<'BOOT'
#!/bin/sh
mount -o remount,rw /
grub-install --target=i386-pc /dev/vda && update-grub && echo GPUINFRA-BOOTLOADER-OK
sync
mount -o remount,ro /
echo o > /proc/sysrq-trigger
sleep 60
BOOT
chmod 755 /usr/local/sbin/gpuinfra-lab-install-bootloader

# Management NIC (user-mode network: SSH forwarded from 127.0.0.1, apt through QEMU's NAT).
mkdir -p /etc/systemd/network
cat > /etc/systemd/network/10-gpuinfra-lab-mgmt.network <<'NET'
[Match]
MACAddress=52:54:00:12:34:56

[Network]
DHCP=ipv4
NET
systemctl enable systemd-networkd
systemctl mask systemd-networkd-wait-online.service
# QEMU's user-mode network answers DNS here (no resolver daemon in the image).
echo 'nameserver 10.0.2.3' > /etc/resolv.conf

# One ed25519 host key per guest: `lab up` makes it and hands it over through fw_cfg (below),
# so the lab trusts it without learning it over the network; made here at the first boot only
# for a guest started without one (the container recipe makes all three; an RSA key takes
# seconds under emulation). This drop-in sorts after the image's own.
cat > /etc/systemd/system/ssh.service.d/zz-gpuinfra-lab-guest.conf <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/bin/sh -c 'test -e /etc/ssh/ssh_host_ed25519_key || ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key'
ExecStartPre=/usr/sbin/sshd -t
UNIT

# What `lab up` hands each guest through QEMU's fw_cfg (opt/gpuinfra/*): its name, root's
# authorized key, its SSH host key, and on a private segment "ADDRESS/PREFIX MAC" for the
# second NIC.
cat > /usr/local/sbin/gpuinfra-lab-guest <<'GUEST'
#!/bin/sh
set -eu
modprobe qemu_fw_cfg
cfg=/sys/firmware/qemu_fw_cfg/by_name/opt/gpuinfra
[ -d "$cfg" ] || exit 0
if [ -r "$cfg/hostname/raw" ]; then
  name=$(cat "$cfg/hostname/raw")
  echo "$name" > /etc/hostname
  hostname "$name"
fi
if [ -r "$cfg/authorized_keys/raw" ]; then
  install -d -m 700 /root/.ssh
  cat "$cfg/authorized_keys/raw" > /root/.ssh/authorized_keys
  chmod 600 /root/.ssh/authorized_keys
fi
if [ -r "$cfg/ssh_host_ed25519_key/raw" ]; then
  install -m 600 "$cfg/ssh_host_ed25519_key/raw" /etc/ssh/ssh_host_ed25519_key
  ssh-keygen -y -f /etc/ssh/ssh_host_ed25519_key > /etc/ssh/ssh_host_ed25519_key.pub
fi
segment=/etc/systemd/network/20-gpuinfra-lab-segment.network
if [ -r "$cfg/segment/raw" ]; then
  # "ADDRESS/PREFIX MAC" (fw_cfg strings have no trailing newline: no `read` here).
  set -- $(cat "$cfg/segment/raw")
  printf '[Match]\nMACAddress=%s\n\n[Network]\nAddress=%s\n' "$2" "$1" > "$segment"
else
  rm -f "$segment"
fi
GUEST
chmod 755 /usr/local/sbin/gpuinfra-lab-guest
cat > /etc/systemd/system/gpuinfra-lab-guest.service <<'UNIT'
[Unit]
Description=gpuinfra lab guest: name, SSH keys and segment address from QEMU fw_cfg
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target systemd-networkd.service ssh.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/gpuinfra-lab-guest

[Install]
WantedBy=sysinit.target
UNIT
systemctl enable gpuinfra-lab-guest.service

apt-get clean
rm -rf /var/lib/apt/lists/*
