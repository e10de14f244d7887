#!/bin/sh
# /init of the test VM (the initramfs of lib/make-initramfs.sh; busybox sh).
#
# Mounts the pseudo filesystems, runs the payload script named on the kernel
# command line with its output on the console, then prints the kernel log and
# the payload's exit status between markers that lib/run-vm.sh reads:
#
#   === DMESG BEGIN ===
#   ...dmesg...
#   === DMESG END ===
#   === GUEST EXIT <status> ===
#
# and powers the VM off.  Kernel command line parameters (all optional):
#
#   restriper.run=<script>        what to run (default /selftests/run-in-guest.sh)
#   restriper.loglevel=<n>        console log level while it runs (default 5:
#                                 warnings and worse reach the console at once,
#                                 info messages only the log; 8 shows all).
#                                 Keeps btrfs' info messages from cutting into
#                                 the TAP lines on the shared console.
#   restriper.test_timeout=<s>    exported as RESTRIPER_TEST_TIMEOUT (per-test
#                                 limit of run-in-guest.sh; default none)
#   restriper.tests=<dir>         exported as RESTRIPER_TESTS_DIR: the folder
#                                 whose programs run-in-guest.sh runs (default
#                                 its own, /selftests; the crash stage of
#                                 run_selftests.sh: /selftests/crash)
#
# PID 1 must never exit (the kernel would panic): every path ends in poweroff.

PATH=/usr/sbin:/usr/bin:/sbin:/bin
HOME=/root
export PATH HOME

mount -t proc proc /proc
mount -t sysfs sysfs /sys
# The initramfs ships a /dev/console node; devtmpfs brings the disks.
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# Reopen the console: works even when the kernel found no /dev/console.
exec </dev/console >/dev/console 2>&1
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs tmpfs /mnt
mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm

RUN=/selftests/run-in-guest.sh
LOGLEVEL=5
set -f # no globbing of the command line words
# shellcheck disable=SC2013 # words, not lines
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	restriper.run=*) RUN=${arg#restriper.run=} ;;
	restriper.loglevel=*) LOGLEVEL=${arg#restriper.loglevel=} ;;
	restriper.test_timeout=*) export RESTRIPER_TEST_TIMEOUT="${arg#restriper.test_timeout=}" ;;
	restriper.tests=*) export RESTRIPER_TESTS_DIR="${arg#restriper.tests=}" ;;
	esac
done
set +f

disks=
for d in /sys/block/vd*; do
	[ -e "$d" ] && disks="$disks${d#/sys/block/} "
done
echo "=== GUEST START $(uname -r), $(grep -c '^processor' /proc/cpuinfo) CPU(s)," \
	"$(awk '/MemTotal/ { print int($2 / 1024) " MiB" }' /proc/meminfo)," \
	"disks: ${disks:-none} ==="
echo "guest-init: running $RUN (console log level $LOGLEVEL)"

dmesg -n "$LOGLEVEL" 2>/dev/null
if [ -f "$RUN" ]; then
	if [ -x "$RUN" ]; then
		"$RUN" </dev/null
	else
		sh "$RUN" </dev/null
	fi
	rc=$?
else
	echo "guest-init: $RUN does not exist"
	rc=127
fi
echo "guest-init: $RUN exited with status $rc"

# Leave the filesystems on the disks consistent for the host-side check:
# commit, and unmount what the payload left mounted (innermost first).
sync
# shellcheck disable=SC2013 # mount points have no blanks here
for mnt in $(awk '$3 == "btrfs" { print $2 }' /proc/mounts | sort -r); do
	echo "guest-init: unmounting $mnt (left mounted by $RUN)"
	umount "$mnt" || echo "guest-init: umount $mnt failed"
done
sync

echo "=== DMESG BEGIN ==="
dmesg -s 16777216
echo "=== DMESG END ==="
echo "=== GUEST EXIT $rc ==="
# The console is drained by interrupts: give it time to send the last lines
# before the machine stops.
sleep 1

# ACPI: power off, QEMU exits.  Without ACPI a power off would only halt; a
# reboot ends QEMU as well (it runs with -no-reboot).
if [ -d /sys/firmware/acpi ]; then
	poweroff -f
fi
reboot -f
# Not reached; never let PID 1 exit.
while :; do sleep 60; done
