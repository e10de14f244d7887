#!/usr/bin/env bash
# "btrfs balance start -musage=50" on a nearly full filesystem with one
# metadata profile (raid1), on the unpatched 6.12 kernel and on the series,
# the same config and the same layout: the series must relocate at least as
# many metadata chunks as the base.  The room check (`skip a chunk whose profile would be left without room`) skips a metadata
# or system chunk whose relocation would leave its profile without room; its
# first version also did that with one profile, where upstream relocates
# (docs/differences.md); it now takes effect only where the type
# has two profiles or more.
#
#   bench/usage-full-fs.sh [-v] [--kernels "base series"] [--series-rev REV]
#                          [--seed N] [--target-pct P] [--accel auto|kvm|tcg]
#                          [--timeout SECS]
#
#   -v               show everything (builds, the whole VM console)
#   --kernels LIST   which kernels to build and run (default "base series")
#   --series-rev REV the series kernel from revision REV of the kernel tree
#                    (a git worktree $CACHE/series-tree, build folder
#                    $CACHE/build/bench-series-rev) instead of the tree as it
#                    is (the default, as bench/upstream-dry-run.sh); REV
#                    "exported": the commit lib/prepare-tree.sh made from
#                    kernel-patches/ as committed in this repo
#   --seed N         the order in which the guest deletes directories
#                    (default 1)
#   --target-pct P   delete until the other metadata chunks have P% of the
#                    global reserve free beyond the used bytes of the top
#                    one (default 200: on the base, the top chunk's
#                    relocation just fits; under 100: where the first
#                    version of the room check skipped it)
#   --accel MODE     QEMU accelerator (lib/run-vm.sh --accel; default auto,
#                    or $RESTRIPER_VM_ACCEL)
#   --timeout SECS   VM timeout per boot (default 1800; the layout boot
#                    takes 1-4 minutes under TCG, a balance boot well under
#                    one)
#
# Steps, one line each with its time (their output: steps.log of the run
# folder, whose path is printed first):
#   1. the two kernels exactly as bench/run.sh builds them (bench/lib.sh:
#      tinyconfig + lib/kernel.config + bench/kernel-nodebug.config, under the
#      build lock, incrementally in $CACHE/build/bench-base and
#      $CACHE/build/bench-series (bench-series-rev with --series-rev));
#   2. bench/bg_list.c, static, and bench/usage-full-fs-in-guest.sh in an
#      initramfs (lib/make-initramfs.sh);
#   3. the layout, once, on 3 fresh sparse 1 GiB images, booting the base
#      kernel (the series when --kernels has no base; lib/run-vm.sh, 768 MiB
#      of memory, the images btrfs-checked on the host afterwards): the
#      guest (bench/usage-full-fs-in-guest.sh, usagefull.phase=layout) makes
#      3 x 160 MiB, data single, metadata raid1, 40000 inline files, data
#      until the devices are full, deletes directories (in an order drawn
#      from --seed) until the top metadata chunk is under 50% used and the
#      other metadata chunks have --target-pct of the global reserve free
#      beyond its used bytes, writes data again, unmounts;
#   4. each kernel booted on its own copy of those images
#      (usagefull.phase=balance): mount, the block groups, "btrfs balance
#      start -musage=50", the block groups again, the kernel log of the
#      balance; the images btrfs-checked afterwards;
#   5. the table (kernel, balance exit status, metadata chunks and those
#      under 50% before, relocated metadata and system chunks, ENOSPC
#      errors, chunks skipped by the room check, chunks that could not go
#      read-only, the end status the kernel logged, transaction aborts) and
#      the verdict "series relocated >= base: yes/no" -> results.md of the
#      run folder and stdout.
# Exit status 0 only when both guests ran the balance, the images passed
# their check, the kernel logs have no report, and the series relocated at
# least as many metadata chunks as the base.
#
# Run folder: $CACHE/bench/usage-full-fs-<time>/ (steps.log, results.md,
# guest-layout.txt, guest-<kernel>.txt: the guest's output (block groups
# before and after, the balance's kernel log), vm-layout/, vm-<kernel>/:
# console.log, dmesg.log, ... of each VM run; the disk images are deleted).
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"
# shellcheck source=bench/lib.sh
. "$RESTRIPER_ROOT/bench/lib.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

TIMEOUT=1800
KERNELS="base series"
SEED=1
TARGET_PCT=200
ACCEL=${RESTRIPER_VM_ACCEL:-auto}
ARGS_GIVEN=("$@")
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--kernels) KERNELS=$2; shift 2 ;;
	--series-rev) SERIES_REV=$2; shift 2 ;;
	--seed) SEED=$2; shift 2 ;;
	--target-pct) TARGET_PCT=$2; shift 2 ;;
	--accel) ACCEL=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout: seconds, not $TIMEOUT"
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed: a number, not $SEED"
[[ "$TARGET_PCT" =~ ^[0-9]+$ ]] || die "--target-pct: a number, not $TARGET_PCT"
case "$ACCEL" in auto | kvm | tcg) ;; *) die "--accel: auto, kvm or tcg, not $ACCEL" ;; esac
for k in $KERNELS; do
	case "$k" in series | base) ;; *) die "--kernels: base and/or series, not $k" ;; esac
done
[ -n "$KERNELS" ] || die "--kernels: base and/or series"

RUN=$CACHE/bench/usage-full-fs-$(date +%Y%m%d-%H%M%S)
STEPS_LOG=$RUN/steps.log
RESULTS=$RUN/results.md
T0=$SECONDS

# The command that reproduces the run (-v left out).
command_line() { reproducing_command bench/usage-full-fs.sh -v; }

build_payload() {
	mkdir -p "$RUN/payload"
	# bench/bg_list.c uses kselftests/btrfs_util.h, which includes the
	# tree's kselftest.h
	gcc -static -O2 -Wall -Wextra -Werror -I "$TREE/tools/testing/selftests" \
		-o "$RUN/payload/bg_list" "$BENCH/bg_list.c"
	install -m 0755 "$BENCH/usage-full-fs-in-guest.sh" "$RUN/payload/usage-full-fs-in-guest.sh"
}

# result KERNEL KEY: a value of the guest's result line.
result() {
	sed -n "s/^# usage-full-fs: kernel=.* label=$1 .*\<$2=\([^ ]*\).*/\1/p" "$RUN/guest-$1.txt" 2>/dev/null | head -n1
}

# layout KERNEL STAGE: the guest's block groups under "== STAGE".
layout() {
	awk -v s="== $2" '$0 == s { on = 1; next } /^== / { on = 0 } on && /^BG /' "$RUN/guest-$1.txt" 2>/dev/null
}

FAILED=()
VM_ARGS=(--disks 3 --disk-size 1G --mem 768M --timeout "$TIMEOUT" --check-images)

# guest_lines DIR OUT: the guest's own lines of DIR/console.log, from its
# start to the kernel log dump.
guest_lines() {
	sed 's/\r$//' "$1/console.log" 2>/dev/null |
		awk '/^=== GUEST START/ { on = 1 } /^=== DMESG BEGIN/ { on = 0 } on' >"$2" || true
}

# vm_checks NAME DIR RC GUEST-OUTPUT: what makes a boot fail.
vm_checks() {
	local k=$1 dir=$2 rc=$3 out=$4 st dm
	st=$(sed -n 's/^guest_status=//p' "$dir/vm-result.txt" 2>/dev/null || true)
	dm=$(scan_dmesg "$dir/dmesg.log" 2>/dev/null || true)
	[ "$rc" = 0 ] || FAILED+=("$k: the VM run failed (status $rc; $dir/console.log)")
	[ "$st" = 0 ] || FAILED+=("$k: the guest exited with status ${st:-none} ($out)")
	if grep -q '^SETUP FAILED' "$out"; then FAILED+=("$k: $(grep -m1 '^SETUP FAILED' "$out")"); fi
	grep -q '^images_failed=0' "$dir/vm-result.txt" 2>/dev/null ||
		FAILED+=("$k: btrfs check of the disk images failed or did not run ($dir/check-*.log)")
	[ -z "$dm" ] || FAILED+=("$k: the kernel log has $(wc -l <<<"$dm") report line(s), first: $(head -n1 <<<"$dm")")
}

# The kernel that makes the layout.
LAYOUT_KERNEL=base
[[ " $KERNELS " == *" base "* ]] || LAYOUT_KERNEL=series

# layout_value KEY: a value of the layout boot's result line.
layout_value() {
	sed -n "s/^# usage-full-fs-layout: .*\<$1=\([^ ]*\).*/\1/p" "$RUN/guest-layout.txt" 2>/dev/null | head -n1
}

run_layout() {
	local dir=$RUN/vm-layout rc=0
	mkdir -p "$dir"
	timed "VM run, the layout ($LAYOUT_KERNEL kernel)" vm_step "VM run, the layout ($LAYOUT_KERNEL kernel)" "$dir" "$STEPS_LOG" \
		--kernel "$RUN/bzImage-$LAYOUT_KERNEL" --initrd "$RUN/initramfs.cpio.gz" --accel "$ACCEL" "${VM_ARGS[@]}" \
		--append "restriper.run=/selftests/usage-full-fs-in-guest.sh usagefull.phase=layout usagefull.kernel=$LAYOUT_KERNEL usagefull.seed=$SEED usagefull.target_pct=$TARGET_PCT" || rc=$?
	guest_lines "$dir" "$RUN/guest-layout.txt"
	vm_checks "layout" "$dir" "$rc" "$RUN/guest-layout.txt"
	[ -n "$(layout_value w)" ] || FAILED+=("layout: no result line ($RUN/guest-layout.txt)")
	log "layout: $(sed -n 's/^# usage-full-fs-layout: //p' "$RUN/guest-layout.txt" | head -n1)"
	[ ${#FAILED[@]} = 0 ]
}

run_one() { # KERNEL
	local k=$1 dir=$RUN/vm-$1 rc=0 img
	mkdir -p "$dir"
	for img in vda vdb vdc; do
		cp --sparse=always "$RUN/vm-layout/$img.img" "$dir/$img.img"
	done
	timed "VM run, $k kernel" vm_step "VM run, $k kernel" "$dir" "$STEPS_LOG" \
		--kernel "$RUN/bzImage-$k" --initrd "$RUN/initramfs.cpio.gz" --accel "$ACCEL" "${VM_ARGS[@]}" \
		--reuse-disks \
		--append "restriper.run=/selftests/usage-full-fs-in-guest.sh usagefull.phase=balance usagefull.kernel=$k" || rc=$?
	guest_lines "$dir" "$RUN/guest-$k.txt"
	drop_run_artifacts "$dir"
	vm_checks "$k" "$dir" "$rc" "$RUN/guest-$k.txt"
	[ -n "$(result "$k" relocated_meta)" ] || FAILED+=("$k: no result line")
	[ "$(result "$k" meta_profiles)" = 1 ] ||
		FAILED+=("$k: metadata had $(result "$k" meta_profiles) profiles before the balance, not one")
	log "$k: $(sed -n 's/^# usage-full-fs: \(kernel=\)/\1/p' "$RUN/guest-$k.txt" | head -n1)"
}

state_of() { # KERNEL
	local src=$TREE n
	case "$1" in
	series)
		[ -z "$SERIES_REV" ] || src=$SERIES_TREE
		n=$(git -C "$src" rev-list --count "$BASE_TAG..HEAD" 2>/dev/null || echo '?')
		echo "${SERIES_STATE:-?} ($n commits over tag $BASE_TAG${SERIES_REV:+; --series-rev $SERIES_REV})"
		;;
	base) echo "${BASE_STATE:-?} (tag $BASE_TAG)" ;;
	esac
}

mib() { [ -n "$1" ] && awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }' || echo '?'; }

table() {
	local k
	echo "| kernel | \`balance start\` exit | metadata chunks before (under 50%) | top chunk: used, W / R (MiB) | metadata chunks relocated | system relocated (of under 50%) | enospc errors | skipped (room check) | could not go read-only | kernel's end status | transaction aborts |"
	echo "| --- | ---: | --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: |"
	for k in $KERNELS; do
		printf '| %s | %s | %s (%s) | %s%%, %s / %s | **%s** | %s (of %s) | %s | %s | %s | %s | %s |\n' \
			"$k" "$(result "$k" status)" "$(result "$k" meta_chunks)" "$(result "$k" considered)" \
			"$(result "$k" top_pct)" "$(mib "$(result "$k" w)")" "$(mib "$(result "$k" reserve)")" \
			"$(result "$k" relocated_meta)" "$(result "$k" relocated_sys)" "$(result "$k" considered_sys)" \
			"$(result "$k" enospc)" "$(result "$k" skipped)" "$(result "$k" not_ro)" \
			"$(result "$k" ended)" "$(result "$k" aborts)"
	done
}

# VERDICT: "yes" / "no" / "?" (a kernel without a result).
VERDICT='?' SAME_LAYOUT='?'
verdict() {
	local b s
	b=$(result base relocated_meta)
	s=$(result series relocated_meta)
	if [ -n "$b" ] && [ -n "$s" ]; then
		if [ "$s" -ge "$b" ]; then VERDICT=yes; else VERDICT=no; fi
	fi
	if [ -f "$RUN/guest-base.txt" ] && [ -f "$RUN/guest-series.txt" ]; then
		if [ "$(layout base 'before the balance')" = "$(layout series 'before the balance')" ]; then
			SAME_LAYOUT=yes
		else
			SAME_LAYOUT=no
		fi
	fi
}

write_results() {
	local k t
	{
		echo "# btrfs balance start -musage=50 on a nearly full filesystem, one metadata profile, $(date '+%F %T %Z')"
		echo
		echo "Reproduce: \`$(command_line)\`"
		echo
		for k in $KERNELS; do echo "- $k: $(state_of "$k")"; done
		echo "- config: tinyconfig + lib/kernel.config + bench/kernel-nodebug.config; ${CONFIG_NOTE:-configs not compared}"
		echo "- layout, made once by the $LAYOUT_KERNEL kernel, each kernel balancing its own copy of the images: 3 x 160 MiB, data single, metadata raid1, 40000 inline files, data until the devices are full, directories deleted (seed $SEED) until the top metadata chunk is under 50% used and the other metadata chunks' free bytes exceed its used bytes by W >= $TARGET_PCT% of the global reserve R, data written again: $(layout_value deleted_dirs) directories deleted, W = $(mib "$(layout_value w)") MiB, R = $(mib "$(layout_value reserve)") MiB, $(layout_value unalloc) bytes unallocated on the 3 devices; then \`btrfs balance start -musage=50\`"
		echo
		table
		echo
		if [[ " $KERNELS " == *" base "* ]] && [[ " $KERNELS " == *" series "* ]]; then
			echo "series relocated >= base: $VERDICT"
			echo
			echo "the same block groups before the balance on both kernels (after the mount): $SAME_LAYOUT"
			echo
		fi
		for k in $KERNELS; do
			echo "$k, the block groups before the balance (start, length, used, type, profile; metadata and system):"
			echo
			layout "$k" 'before the balance' | awk '/type=(metadata|system)/' | sed 's/^BG /    /'
			echo
			echo "$k, after:"
			echo
			layout "$k" 'after the balance' | awk '/type=(metadata|system)/' | sed 's/^BG /    /'
			echo
			echo "$k, \`btrfs balance start\` and the kernel log of the balance:"
			echo
			sed -n 's/^  | /    /p' "$RUN/guest-$k.txt"
			sed -n 's/^KLOG: /    /p' "$RUN/guest-$k.txt" | grep -v -E '^    +(total|space_info|block group)' |
				grep -v -E 'BTRFS info \(device [a-z]+\): (space_info|global_block_rsv|trans_block_rsv|chunk_block_rsv|delayed_block_rsv|delayed_refs_rsv|block group [0-9]+ has|[0-9]+ bytes used|entry offset)' || true
			echo
		done
		steps_and_failures
	} >"$RESULTS"
}

main() {
	local k
	ensure_packages "${PACKAGES[@]}"
	mkdir -p "$RUN"
	: >"$RUN/timings.txt"
	log "run folder: $RUN (output of the steps: steps.log)"
	prepare_run
	exec 3>&1 # the screen, for the console with -v (see run_vm)
	local VM_SHOW='' # read by vm_step (lib/vm.sh)
	# shellcheck disable=SC2034 # read by vm_step
	[ "$VERBOSE" = 1 ] || VM_SHOW=none
	if run_layout; then
		for k in $KERNELS; do run_one "$k"; done
	fi
	drop_run_artifacts "$RUN/vm-layout"
	rm -f "$RUN/initramfs.cpio.gz" "$RUN"/bzImage-*
	verdict
	if [[ " $KERNELS " == *" base "* ]] && [[ " $KERNELS " == *" series "* ]]; then
		[ "$VERDICT" = yes ] || FAILED+=("series relocated >= base: $VERDICT")
	fi
	write_results
	echo
	cat "$RESULTS"
	echo
	if [ ${#FAILED[@]} -gt 0 ]; then
		for k in $KERNELS; do
			if ! grep -q '^USAGEFULL DONE status=0' "$RUN/guest-$k.txt" 2>/dev/null; then
				log "the end of the $k guest's output ($RUN/guest-$k.txt):"
				tail -n 25 "$RUN/guest-$k.txt" 2>/dev/null | sed 's/^/    | /' >&2 || true
			fi
		done
		die "$((${#FAILED[@]})) problem(s), after $((SECONDS - T0)) s (results: $RESULTS, log: $STEPS_LOG):" \
			"$(printf '%s\n' "${FAILED[@]}")"
	fi
	log "PASS in $((SECONDS - T0)) s: series relocated >= base: $VERDICT; results: $RESULTS (log: $STEPS_LOG)"
}

main
