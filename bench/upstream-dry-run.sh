#!/usr/bin/env bash
# A dry-run balance request (BTRFS_BALANCE_DRY_RUN, bit 8 of the top-level
# flags of BTRFS_IOC_BALANCE_V2) on the unpatched 6.12 kernel and on the
# series, the same config: upstream must refuse it with EINVAL and start or
# relocate nothing; the series must return 0 with the estimate and relocate
# nothing either (docs/abi.md).
#
#   bench/upstream-dry-run.sh [-v] [--kernels "base series"] [--series-rev REV]
#                             [--timeout SECS] [--docs]
#
#   -v               show everything (builds, the whole VM console)
#   --kernels LIST   which kernels to build and run (default "base series")
#   --series-rev REV the series kernel from revision REV of the kernel tree
#                    (a git worktree $CACHE/series-tree, build folder
#                    $CACHE/build/bench-series-rev) instead of the tree as it
#                    is: a result that names a commit, and a build that work
#                    going on in the tree cannot break.  REV "exported": the
#                    commit lib/prepare-tree.sh made from kernel-patches/ as
#                    committed in this repo (refused while kernel-patches/ has
#                    uncommitted changes, or when the tree was prepared from
#                    other patches since)
#   --timeout SECS   VM timeout per kernel (default 600)
#   --docs           write the result table into docs/abi.md (the part
#                    between its "dry-run:begin" and "dry-run:end" markers)
#
# Steps, one line each with its time (their output: steps.log of the run
# folder, whose path is printed first):
#   1. the two kernels exactly as bench/run.sh builds them (bench/lib.sh:
#      tinyconfig + lib/kernel.config + bench/kernel-nodebug.config, under the
#      build lock, incrementally in $CACHE/build/bench-base and
#      $CACHE/build/bench-series (bench-series-rev with --series-rev); base
#      from the worktree $CACHE/base-tree of tag "base", series from the
#      kernel tree as it is or --series-rev);
#   2. bench/upstream_dry_run.c, static (the flag and the series' layout of
#      the args from tools/balance-abi.h: one program for both kernels), and
#      an initramfs with it (lib/make-initramfs.sh);
#   3. each kernel booted once (lib/run-vm.sh, 2 sparse 1G virtio disks, the
#      images btrfs-checked on the host afterwards): the program makes a
#      2-device btrfs (data single, metadata raid1), writes 16 MiB, records
#      the chunk tree, asks for a dry run of a full data balance
#      (flags = DATA | 1<<8, data.flags = 0) and checks, printing PASS/FAIL
#      for each: base -1/EINVAL and ext_flags 0, series 0, ext_flags bit 0
#      and an estimate of every data chunk; both: no chunk moved,
#      exclusive_operation "none", BTRFS_IOC_BALANCE_PROGRESS ENOTCONN, no
#      balance item; then, as a control, a real data balance (no bit 8) must
#      move chunks;
#   4. the table (kernel, return, errno, ext_flags, estimate, chunks moved,
#      exclusive_operation, dmesg line) -> results.md of the run folder and
#      stdout; with --docs, into docs/abi.md.
# Exit status 0 only when every check of every kernel passed, the guest
# finished, the images passed their check and the kernel log has no report.
#
# Run folder: $CACHE/bench/dry-run-<time>/ (steps.log, results.md,
# guest-<kernel>.txt: the program's output, vm-<kernel>/: console.log,
# dmesg.log, ... of each VM run; the disk images are deleted).
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"
# shellcheck source=bench/lib.sh
. "$RESTRIPER_ROOT/bench/lib.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

TIMEOUT=600
KERNELS="base series"
DOCS=0
ARGS_GIVEN=("$@")
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--kernels) KERNELS=$2; shift 2 ;;
	--series-rev) SERIES_REV=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--docs) DOCS=1; shift ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout: seconds, not $TIMEOUT"
for k in $KERNELS; do
	case "$k" in series | base) ;; *) die "--kernels: base and/or series, not $k" ;; esac
done
[ -n "$KERNELS" ] || die "--kernels: base and/or series"

RUN=$CACHE/bench/dry-run-$(date +%Y%m%d-%H%M%S)
STEPS_LOG=$RUN/steps.log
RESULTS=$RUN/results.md
T0=$SECONDS

# The command that reproduces the run (-v and --docs left out).
command_line() { reproducing_command bench/upstream-dry-run.sh -v --docs; }

# What the guest program is told to expect of each kernel.
expectation() { case "$1" in base) echo einval ;; series) echo estimate ;; esac; }

build_payload() {
	mkdir -p "$RUN/payload"
	gcc -static -O2 -Wall -Wextra -Werror -o "$RUN/payload/upstream_dry_run" \
		"$BENCH/upstream_dry_run.c"
}

# result KERNEL KEY: a value of the guest's RESULT line.
result() {
	sed -n "s/^RESULT kernel=$1 .*\<$2=\([^ ]*\).*/\1/p" "$RUN/guest-$1.txt" 2>/dev/null | head -n1
}

# The guest's first kernel log line with "balance" after the dry run, for a
# table cell: no timestamp, no '|'.
dmesg_cell() {
	sed -n "s/^RESULT_DMESG kernel=$1 //p" "$RUN/guest-$1.txt" 2>/dev/null | head -n1 |
		sed 's/^\[ *[0-9.]*\] //; s/|/\\|/g'
}

FAILED=()
run_one() { # KERNEL
	local k=$1 dir=$RUN/vm-$1 rc=0 st fails dm
	mkdir -p "$dir"
	timed "VM run, $k kernel" vm_step "VM run, $k kernel (expect: $(expectation "$k"))" "$dir" "$STEPS_LOG" \
		--kernel "$RUN/bzImage-$k" --initrd "$RUN/initramfs.cpio.gz" \
		--disks 2 --disk-size 1G --timeout "$TIMEOUT" --check-images \
		--append "restriper.run=/selftests/upstream_dry_run dryrun.kernel=$k dryrun.expect=$(expectation "$k")" || rc=$?
	grep -a -E '^(# |PASS: |FAIL: |RESULT|DMESG|DRYRUN |SETUP FAILED)' "$dir/console.log" >"$RUN/guest-$k.txt" || true
	drop_run_artifacts "$dir"
	st=$(sed -n 's/^guest_status=//p' "$dir/vm-result.txt" 2>/dev/null || true)
	fails=$(grep -E '^(FAIL: |SETUP FAILED)' "$RUN/guest-$k.txt" || true)
	dm=$(scan_dmesg "$dir/dmesg.log" 2>/dev/null || true)
	[ "$rc" = 0 ] || FAILED+=("$k: the VM run failed (status $rc; $dir/console.log)")
	[ "$st" = 0 ] || FAILED+=("$k: the guest program exited with status ${st:-none} ($RUN/guest-$k.txt)")
	[ -z "$fails" ] || FAILED+=("$k: $(wc -l <<<"$fails") check(s) failed: $(paste -sd';' <<<"$fails")")
	grep -q '^PASS: ' "$RUN/guest-$k.txt" || FAILED+=("$k: no check passed (no PASS line)")
	[ -n "$(result "$k" ret)" ] || FAILED+=("$k: no RESULT line")
	grep -q '^images_failed=0' "$dir/vm-result.txt" 2>/dev/null ||
		FAILED+=("$k: btrfs check of the disk images failed or did not run ($dir/check-*.log)")
	[ -z "$dm" ] || FAILED+=("$k: the kernel log has $(wc -l <<<"$dm") report line(s), first: $(head -n1 <<<"$dm")")
	log "$k: $(grep -c '^PASS: ' "$RUN/guest-$k.txt" || true) passed, $(grep -c '^FAIL: ' "$RUN/guest-$k.txt" || true) failed; guest output: $RUN/guest-$k.txt"
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

table() {
	local k ret est
	echo "| kernel | return | errno | ext_flags | estimate (data chunks, bytes used) | chunks moved | exclusive_operation | progress ioctl | kernel log line with \"balance\" |"
	echo "| --- | ---: | --- | --- | --- | ---: | --- | --- | --- |"
	for k in $KERNELS; do
		ret=$(result "$k" ret)
		est='-'
		if [ "$(result "$k" ext_flags)" != 0x0 ] && [ -n "$ret" ]; then
			est="$(result "$k" est_data_chunks), $(result "$k" est_data_bytes)"
		fi
		printf '| %s | %s | %s | %s | %s | %s of %s | %s | %s | %s |\n' \
			"$k" "${ret:-?}" "$(result "$k" errno)" "$(result "$k" ext_flags)" "$est" \
			"$(result "$k" chunks_moved)" "$(result "$k" chunks_before)" \
			"$(result "$k" exclusive_operation)" "$(result "$k" progress)" \
			"$(dmesg_cell "$k")"
	done
}

write_results() {
	local k t
	{
		echo "# A dry-run balance request, $(date '+%F %T %Z')"
		echo
		echo "Reproduce: \`$(command_line)\`"
		echo
		for k in $KERNELS; do echo "- $k: $(state_of "$k")"; done
		echo "- config: tinyconfig + lib/kernel.config + bench/kernel-nodebug.config; ${CONFIG_NOTE:-configs not compared}"
		echo "- request: BTRFS_IOC_BALANCE_V2, flags = BTRFS_BALANCE_DATA | 1<<8, data.flags = 0, on 2 x 1 GiB (data single, metadata raid1, 16 MiB of files)"
		echo
		table
		echo
		echo "Control, the same request without bit 8 (a real data balance):"
		echo
		for k in $KERNELS; do
			printf -- '- %s: %s; log: %s\n' "$k" \
				"$(sed -n "s/^RESULT_CONTROL kernel=$k ret=\([^ ]*\) errno=[^ ]* chunks_moved=\([^ ]*\).*/returned \1, moved \2 chunk(s)/p" "$RUN/guest-$k.txt" 2>/dev/null)" \
				"$(sed -n "s/^DMESG_CONTROL kernel=$k: //p" "$RUN/guest-$k.txt" 2>/dev/null | sed 's/^\[ *[0-9.]*\] //' | head -n 4 | paste -sd'|' | sed 's/|/ \/ /g')"
		done
		echo
		echo "Checks:"
		echo
		for k in $KERNELS; do
			grep -E '^(PASS|FAIL): ' "$RUN/guest-$k.txt" 2>/dev/null | sed "s/^/- $k: /"
		done
		echo
		steps_and_failures
	} >"$RESULTS"
}

# --docs: the table and the command into docs/abi.md, between the markers.
update_docs() {
	local doc=$RESTRIPER_ROOT/docs/abi.md block=$RUN/docs-block.md k
	{
		echo "<!-- dry-run:begin (written by bench/upstream-dry-run.sh --docs) -->"
		echo
		echo "Run of $(date '+%F') ($(basename "$RUN")), reproduced by:"
		echo
		echo "    $(command_line)"
		echo
		for k in $KERNELS; do echo "- $k: $(state_of "$k")"; done
		echo
		table
		echo
		echo "<!-- dry-run:end -->"
	} >"$block"
	if ! grep -q '^<!-- dry-run:begin' "$doc" || ! grep -q '^<!-- dry-run:end' "$doc"; then
		die "docs/abi.md has no dry-run:begin/dry-run:end markers (the block is in $block)"
	fi
	awk -v block="$block" '
		/^<!-- dry-run:begin/ { while ((getline l < block) > 0) print l; skip = 1; next }
		/^<!-- dry-run:end/ { skip = 0; next }
		!skip { print }
	' "$doc" >"$doc.new"
	mv "$doc.new" "$doc"
	log "docs/abi.md: the dry-run block written"
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
	for k in $KERNELS; do run_one "$k"; done
	rm -f "$RUN/initramfs.cpio.gz" "$RUN"/bzImage-*
	write_results
	echo
	cat "$RESULTS"
	echo
	if [ ${#FAILED[@]} -gt 0 ]; then
		for k in $KERNELS; do
			if grep -qE '^(FAIL: |SETUP FAILED)' "$RUN/guest-$k.txt" 2>/dev/null ||
				! grep -q '^DRYRUN DONE status=0' "$RUN/guest-$k.txt" 2>/dev/null; then
				log "the end of the $k guest's output ($RUN/guest-$k.txt):"
				tail -n 25 "$RUN/guest-$k.txt" 2>/dev/null | sed 's/^/    | /' >&2 || true
			fi
		done
		die "$((${#FAILED[@]})) problem(s), after $((SECONDS - T0)) s (results: $RESULTS, log: $STEPS_LOG):" \
			"$(printf '%s\n' "${FAILED[@]}")"
	fi
	[ "$DOCS" = 0 ] || update_docs
	log "PASS in $((SECONDS - T0)) s; results: $RESULTS (log: $STEPS_LOG)"
}

main
