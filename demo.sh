#!/usr/bin/env bash
# The restriper at work: boots the patched kernel in QEMU with 4 empty disks
# and runs demo-in-guest.sh there:
#
#   a 3-device btrfs (data single, metadata raid1) with ~200 MiB of files of
#   known content; a 4th device is added and the data converted to raid1 with
#   "btrfs balance start -dconvert=raid1", progress shown every second; the
#   balance is paused half way and the filesystem unmounted; at the next mount
#   the kernel resumes the balance by itself; when it is done every file's
#   checksum is verified, scrub reads both copies, btrfs check runs, and a
#   summary is printed.
#
#   ./demo.sh [-v]
#
# Builds what it needs first (packages, tree, kernel: lib/build-kernel.sh), a
# few minutes on a warm cache, longer on the first run.  The VM runs under
# TCG when there is no usable KVM: expect ~5-10 minutes.
#
# Quiet by default: one line per step with its time (installing packages,
# preparing the kernel tree, building the VM kernel, making the initramfs,
# running the VM), then what the demo prints in the guest (its progress and
# summary; the kernel's own messages stay in console.log and dmesg.log).
# With -v everything is on screen: the builds and the whole console.  Logs:
# $CACHE/vm-logs/demo-<time>/ (steps.log: the output of the steps;
# console.log, dmesg.log); apt's in $CACHE/logs/apt.log.  A failed step
# shows the end of its log.  Exit status 0 when the demo passed and the
# kernel log has no splat (WARNING:, BUG:, lockdep, ...; see scan_dmesg in
# lib/vm.sh).
#
# Options, mostly for trying the harness: --kernel BZIMAGE (boot this kernel
# instead of building one), --timeout SECS (default 1200).
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

KERNEL=''
TIMEOUT=1200
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--kernel) KERNEL=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
[ -z "$KERNEL" ] || [ -f "$KERNEL" ] || die "--kernel $KERNEL: no such file"

ensure_packages "${PACKAGES[@]}"
dir=$(new_run_dir demo)
steps_log=$dir/steps.log
log "run folder: $dir (output of the steps: steps.log)"
if [ -n "$KERNEL" ]; then
	cp "$KERNEL" "$dir/bzImage"
else
	build_vm_kernel "$dir/bzImage" "$steps_log"
fi
step "building tools/balance-status (make)" "$steps_log" make -C "$RESTRIPER_ROOT" ||
	die "make failed (log: $steps_log)"
step "making the initramfs" "$steps_log" \
	bash "$RESTRIPER_ROOT/lib/make-initramfs.sh" "$dir/initramfs.cpio.gz" "$RESTRIPER_ROOT/demo-in-guest.sh" \
	"$RESTRIPER_ROOT/tools/balance-status" ||
	die "no initramfs (log: $steps_log)"

# 512M disks: the data chunks are then ~150 MiB (10% of the filesystem), so
# the ~200 MiB of data sit in a few chunks and the progress has steps.
exec 3>&1 # the screen, for the guest's output (see run_vm)
[ "$VERBOSE" = 1 ] ||
	log "running the VM: the demo's output follows (the kernel's: $dir/console.log)"
rc=0
vm_step "running the VM" "$dir" "$steps_log" --kernel "$dir/bzImage" --initrd "$dir/initramfs.cpio.gz" \
	--disks 4 --disk-size 512M --timeout "$TIMEOUT" --check-images \
	--append "restriper.run=/selftests/demo-in-guest.sh" || rc=$?
# The guest's own status (the demo's checks), when the VM step itself passed.
[ "$rc" -ne 0 ] || rc=$(vm_result "$dir" exit_status)
[ -n "$rc" ] || rc=1
dm=''
[ ! -f "$dir/dmesg.log" ] || dm=$(scan_dmesg "$dir/dmesg.log")
if [ -n "$dm" ]; then
	echo
	echo "The kernel log has suspicious lines (exceptions: lib/dmesg-ignore.txt):"
	head -n 40 <<<"$dm" | sed 's/^/  /'
	[ "$rc" -ne 0 ] || rc=1
fi

echo
if [ "$rc" -eq 0 ]; then
	drop_run_artifacts "$dir"
	echo "demo: PASS (logs: $dir)"
else
	echo "demo: FAIL, status $rc (logs, disk images, kernel and initramfs: $dir)"
fi
prune_old_runs
exit "$rc"
