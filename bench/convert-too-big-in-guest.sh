#!/bin/sh
# The layout of balance_test's convert_too_big: 2 x 256 MiB, data single,
# metadata raid1, 300 MiB of data; then "btrfs balance start -dconvert=raid1".
# Runs in the VM as /selftests/convert-too-big-in-guest.sh: on the unpatched
# kernel the convert starts and stops with ENOSPC errors, half converted; on
# the series it is refused before anything moves (docs/abi.md).
MNT=/mnt/t
mkdir -p $MNT
mkfs.btrfs -q -f -b 256M -d single -m raid1 /dev/vda /dev/vdb >/dev/null 2>&1 || echo "mkfs failed"
mount /dev/vda $MNT || echo "mount failed"
fallocate -l 300M $MNT/data 2>/dev/null || dd if=/dev/zero of=$MNT/data bs=1M count=300 2>/dev/null
sync
echo "== before"; btrfs filesystem df $MNT
T0=$(cut -d' ' -f1 /proc/uptime)
btrfs balance start -dconvert=raid1 $MNT > /tmp/out 2>&1; rc=$?
T1=$(cut -d' ' -f1 /proc/uptime)
echo "== balance start -dconvert=raid1: exit $rc, $(awk -v a="$T0" -v b="$T1" 'BEGIN{print b-a}') s"; cat /tmp/out
echo "== after"; btrfs filesystem df $MNT
echo "== dmesg"; dmesg | grep -i "balance\|enospc\|relocating" | sed 's/^\[[ 0-9.]*\] //'
umount $MNT
