#!/usr/bin/env bash
# The balance item across kernels: a balance paused by one kernel and
# resumed by another, the series and the unpatched base (tag "base") built
# with the same config (tinyconfig + lib/kernel.config), on the same three
# disks (512 MiB each).  The guest side is compat-in-guest.sh; each
# scenario is a sequence of boots:
#
#   base-to-series    base: a data convert paused after a chunk;
#                     series: resumed at mount, finished, verified
#   series-to-base    the same, the other way round
#   stale-counts      series: paused after a chunk; base: resumed at mount,
#                     paused after one more chunk; series: mounted with
#                     skip_balance, the item's counts must be ignored
#                     (stamped with other chunks below the bound), resumed,
#                     verified
#   counts-kept       series: paused after a chunk; series: mounted with
#                     skip_balance, the counts must be kept; resumed,
#                     verified
#
# "verified": every file reads back right, no data chunk is single, no
# balance is left, scrub and "btrfs check --check-data-csum" pass; every
# boot's images also pass the host's "btrfs check --readonly", and no
# kernel log has a splat or a data error.
#
#   ./run_compat.sh [-v] [--only SCENARIO] [--timeout SECS]
#                   [--kernel BZIMAGE] [--base-kernel BZIMAGE]
#
#   --only SCENARIO   run one scenario
#   --timeout SECS    each boot is killed after SECS (default 900)
#   --kernel, --base-kernel   boot these instead of building them (the base
#                     kernel is built in $CACHE/build/vm-base from the
#                     worktree $CACHE/base-tree, once, then incrementally)
#
# One line per boot; logs in $CACHE/vm-logs/compat-<time>/<scenario>/.
# Ends with "compat: N scenarios, M failed"; exits non-zero when M > 0.
# Not part of the gate (it builds a second kernel): run it when the item or
# its resume change.
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

SCENARIOS=(base-to-series series-to-base stale-counts counts-kept)
declare -A BOOTS=(
	[base-to-series]="base:start series:resume"
	[series-to-base]="series:start base:resume"
	[stale-counts]="series:start base:step series:stale"
	[counts-kept]="series:start series:kept"
)

ONLY='' TIMEOUT=900 KERNEL='' BASE_KERNEL=''
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--only) ONLY=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--kernel) KERNEL=$2; shift 2 ;;
	--base-kernel) BASE_KERNEL=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
[ -z "$ONLY" ] || [ -n "${BOOTS[$ONLY]:-}" ] ||
	die "--only $ONLY: no such scenario (${SCENARIOS[*]})"
[ -z "$ONLY" ] || SCENARIOS=("$ONLY")
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout: seconds, not $TIMEOUT"
for k in "$KERNEL" "$BASE_KERNEL"; do
	[ -z "$k" ] || [ -f "$k" ] || die "$k: no such file"
done

# build_base_kernel DEST: the unpatched kernel, same config, copied to DEST.
build_base_kernel() {
	local bz
	base_worktree
	bz=$(bash "$RESTRIPER_ROOT/lib/build-kernel.sh" --log "$STEPS_LOG" --name vm-base \
		--tree "$BASE_TREE") || die "the base kernel was not built (log: $STEPS_LOG)"
	cp "$bz" "$1"
}

# boot_problems BOOT_DIR: what of one boot fails the scenario, one line each.
boot_problems() {
	local dir=$1 pass fail plan
	[ -f "$dir/vm-result.txt" ] || { echo "it did not run"; return; }
	vm_run_problems "$dir" "$TIMEOUT"
	split_tap "$dir/console.log" "$dir" >/dev/null
	if [ -f "$dir/compat.tap" ]; then
		read -r pass fail _ plan _ _ < <(tap_counts "$dir/compat.tap")
		grep -a '^not ok' "$dir/compat.tap" || true
		[ "$plan" != - ] && [ "$pass" -eq "$plan" ] || [ "$fail" -gt 0 ] ||
			echo "fewer results than its plan ($pass of $plan)"
	else
		echo "no TAP section (see $dir/console.log)"
	fi
	[ -z "$(scan_dmesg "$dir/dmesg.log")" ] || echo "the kernel log has a splat ($dir/dmesg.log)"
	[ -z "$(scan_data_errors "$dir/dmesg.log")" ] ||
		echo "the kernel log has a data error ($dir/dmesg.log)"
}

# run_scenario NAME: its boots in turn, on the same disks; prints a line per
# boot, returns non-zero when one failed (the boots after it do not run).
run_scenario() {
	local name=$1 dir=$RUN_DIR/$1 n=0 b kernel phase bz reuse=() problems t0
	mkdir -p "$dir"
	for b in ${BOOTS[$name]}; do
		n=$((n + 1)) kernel=${b%%:*} phase=${b#*:} t0=$SECONDS
		[ "$kernel" = base ] && bz=$RUN_DIR/bzImage-base || bz=$RUN_DIR/bzImage-series
		run_vm "$dir/boot$n" --kernel "$bz" --initrd "$RUN_DIR/initramfs.cpio.gz" \
			--disks 3 --disk-size 512M --disk-dir "$dir" "${reuse[@]}" \
			--timeout "$TIMEOUT" --check-images \
			--append "restriper.run=/selftests/compat-in-guest.sh restriper.compat_phase=$phase" \
			>>"$STEPS_LOG" 2>&1 || true
		reuse=(--reuse-disks)
		problems=$(boot_problems "$dir/boot$n")
		if [ -z "$problems" ]; then
			log "$name, boot $n: $kernel $phase: ok ($((SECONDS - t0)) s)"
		else
			log "$name, boot $n: $kernel $phase: FAILED (logs: $dir/boot$n)"
			sed 's/^/    - /' <<<"$problems" >&2
			return 1
		fi
	done
}

main() {
	local failed=0 s
	ensure_packages "${PACKAGES[@]}"
	RUN_DIR=$(new_run_dir compat)
	STEPS_LOG=$RUN_DIR/steps.log
	log "run folder: $RUN_DIR (output of the steps: steps.log)"
	if [ -n "$KERNEL" ]; then
		cp "$KERNEL" "$RUN_DIR/bzImage-series"
	else
		build_vm_kernel "$RUN_DIR/bzImage-series" "$STEPS_LOG"
	fi
	if [ -n "$BASE_KERNEL" ]; then
		cp "$BASE_KERNEL" "$RUN_DIR/bzImage-base"
	else
		with_build_lock step "building the base kernel (tag $BASE_TAG, same config)" \
			"$STEPS_LOG" build_base_kernel "$RUN_DIR/bzImage-base"
	fi
	step "the initramfs (compat-in-guest.sh)" "$STEPS_LOG" \
		bash "$RESTRIPER_ROOT/lib/make-initramfs.sh" "$RUN_DIR/initramfs.cpio.gz" \
		"$RESTRIPER_ROOT/compat-in-guest.sh"
	exec 3>/dev/null # run_vm's console: in the boot folders only
	for s in "${SCENARIOS[@]}"; do
		run_scenario "$s" || failed=$((failed + 1))
	done
	if [ "$failed" -eq 0 ]; then
		find "$RUN_DIR" -name '*.img' -delete
		rm -f "$RUN_DIR"/bzImage-* "$RUN_DIR/initramfs.cpio.gz"
	fi
	prune_old_runs
	echo "compat: ${#SCENARIOS[@]} scenarios, $failed failed"
	[ "$failed" -eq 0 ]
}

main
