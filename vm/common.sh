# shellcheck shell=bash
# Helpers of run_selftests.sh and demo.sh.  Source it after ci/lib.sh.
#
# A VM run keeps its files in $CACHE/vm-logs/<name>-<timestamp>/: console.log,
# dmesg.log, the kernel and initramfs it booted, the disk images, ...

VM_LOGS=$CACHE/vm-logs
DMESG_IGNORE=$RESTRIPER_ROOT/vm/dmesg-ignore.txt

# new_run_dir NAME: make and print a fresh run folder.
new_run_dir() {
	local dir
	dir=$VM_LOGS/$1-$(date +%Y%m%d-%H%M%S)
	[ ! -e "$dir" ] || dir=$dir-$$
	mkdir -p "$dir"
	echo "$dir"
}

# drop_run_artifacts DIR: remove the big files of a run (disk images, kernel,
# initramfs), keep the logs.
drop_run_artifacts() {
	rm -f "$1"/*.img "$1/bzImage" "$1/initramfs.cpio.gz" "$1/blkid.tab"
	rm -rf "$1/payload"
}

# prune_old_runs: only the 3 newest runs keep their big files (a failed run
# keeps them for a look at the images); logs are kept.
prune_old_runs() {
	local dir
	[ -d "$VM_LOGS" ] || return 0
	find "$VM_LOGS" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' | sort -rn |
		tail -n +4 | cut -d' ' -f2- | while IFS= read -r dir; do
		drop_run_artifacts "$dir"
	done
}

# build_vm_kernel DEST: build the VM kernel (vm/build-kernel.sh: prepares the
# tree, holds the build lock) and copy it to DEST, so that the run does not
# depend on the build folder (another build may change it meanwhile).
build_vm_kernel() {
	local bz
	bz=$(bash "$RESTRIPER_ROOT/vm/build-kernel.sh") || die "the kernel build failed"
	cp "$bz" "$1"
}

# scan_dmesg DMESG: print the lines of the kernel log that make the run fail
# ("line-number: text"), minus those matching vm/dmesg-ignore.txt.  A "Call
# Trace:" counts on its own only when no report header came shortly before.
scan_dmesg() {
	local ignore=/dev/null
	[ -f "$DMESG_IGNORE" ] && ignore=$DMESG_IGNORE
	awk '
		FNR == NR { if ($0 !~ /^[ \t]*(#|$)/) ign[++ni] = $0; next }
		{
			for (i = 1; i <= ni; i++) if ($0 ~ ign[i]) next
			if ($0 ~ /WARNING:|BUG:|Oops|kernel BUG|general protection fault|possible circular locking dependency|possible recursive locking|inconsistent lock state|INFO: trying to register non-static key|INFO: lockdep is turned off|INFO: task .* blocked for more than|rcu: INFO:|self-detected stall|KASAN|UBSAN|Kernel panic|Transaction aborted|BTRFS critical/) {
				print FNR ": " $0
				last = FNR
			} else if ($0 ~ /Call Trace:/ && (last == 0 || FNR - last > 60)) {
				print FNR ": " $0 "   (a stack trace with no report above it)"
				last = FNR
			}
		}
	' "$ignore" "$1"
}
