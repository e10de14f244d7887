#!/usr/bin/env bash
# The race tests can fail: for each race fix of the series, the series tip
# is built with that fix taken out (ci/race-reverts/<fix>.diff: the fix's
# lines only; the hold points and the tests stay) and the kselftest that
# shows the race runs on it, alone, in the VM.  It must fail there.
#
#   ./run_race_reverts.sh [-v] [--only FIX] [--timeout SECS]
#
#   --only FIX        one fix (the name of its diff, without .diff)
#   --timeout SECS    each VM is killed after SECS (default 600)
#
# Steps per fix: the worktree $CACHE/revert-tree at the prepared tree's
# HEAD (the series), reset, the diff applied; its kernel built in
# $CACHE/build/vm-revert (same config as the VM stage, incremental from one
# fix to the next, under the build lock); the kselftests built from
# kselftests/; ./run_selftests.sh --no-crash --kernel <it> with a payload
# that runs only the fix's test (<program> -t <test>).
#
# One line per fix: "FAILED without the fix, as it must" with the test's
# first failed check (or the panic), or "PASSED without the fix" (the test
# does not show that race: the run fails).  Logs in
# $CACHE/vm-logs/race-reverts-<time>/<fix>/.  Ends with "race reverts: N
# fixes, M shown by their test"; exits non-zero unless M = N.  Not part of
# the gate (a second kernel per fix); docs/reliability.md has its output.
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

REVERTS=$RESTRIPER_ROOT/ci/race-reverts
REVERT_TREE=$CACHE/revert-tree
# fix: program fixture test (the kselftest that shows the race; the
# fixture is for the reader, the test's name is unique in its program)
declare -A TESTS=(
	[24-device-add-keeps-its-exclusive-operation]="lifecycle_test lifecycle resume_and_cancel_are_ebusy_while_a_device_add_runs"
	[25-cancel-wins-over-a-racing-pause]="lifecycle_test lifecycle cancel_wins_over_a_racing_pause"
	[26-resume-at-mount-is-running-before-its-thread]="lifecycle_test lifecycle resume_in_the_mount_resume_window_is_einprogress"
	[38-exclusive-operation-under-balance-mutex]="concurrency_test queued a_call_behind_a_resume_of_nothing_gets_its_own_result"
)
FIXES=()
for f in "$REVERTS"/*.diff; do
	FIXES+=("$(basename "$f" .diff)")
done

ONLY='' TIMEOUT=600
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--only) ONLY=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
for f in "${FIXES[@]}"; do
	[ -n "${TESTS[$f]:-}" ] || die "ci/race-reverts/$f.diff has no test in TESTS"
done
[ -z "$ONLY" ] || [ -n "${TESTS[$ONLY]:-}" ] ||
	die "--only $ONLY: no such fix (${FIXES[*]})"
[ -z "$ONLY" ] || FIXES=("$ONLY")
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout: seconds, not $TIMEOUT"

# revert_tree FIX: the worktree at the series tip with FIX's diff applied.
revert_tree() {
	local tip
	tip=$(git_tree rev-parse HEAD)
	if [ ! -e "$REVERT_TREE" ]; then
		git_tree worktree add --detach "$REVERT_TREE" "$tip" || return
	fi
	git -C "$REVERT_TREE" checkout -q --detach "$tip" &&
		git -C "$REVERT_TREE" reset -q --hard &&
		git -C "$REVERT_TREE" apply "$REVERTS/$1.diff"
}

# build_revert FIX DEST: its kernel, copied to DEST.
build_revert() {
	local bz
	revert_tree "$1" || return
	bz=$(bash "$RESTRIPER_ROOT/lib/build-kernel.sh" --log "$STEPS_LOG" \
		--name vm-revert --tree "$REVERT_TREE") || return
	cp "$bz" "$2"
}

# payload FIX DIR: /selftests with the fix's program in bin/ and a script
# that runs its one test.
payload() {
	local prog test
	read -r prog _ test <<<"${TESTS[$1]}"
	rm -rf "$2" && mkdir -p "$2/bin" &&
		cp "$RUN_DIR/ksft/$prog" "$2/bin/" || return
	# -t alone: the harness ORs its filters, -f would add the fixture's all
	printf '#!/bin/sh\nexec ./bin/%s -t %s\n' "$prog" "$test" \
		>"$2/race_test" && chmod +x "$2/race_test"
}

# run_fix FIX: 0 when its test failed without the fix.
run_fix() {
	local fix=$1 dir=$RUN_DIR/$1 t0=$SECONDS why vmdir
	mkdir -p "$dir"
	with_build_lock step "$fix: the series without it, built" "$STEPS_LOG" \
		build_revert "$fix" "$dir/bzImage" || return 1
	step "$fix: the payload" "$STEPS_LOG" payload "$fix" "$dir/payload" || return 1
	if bash "$RESTRIPER_ROOT/run_selftests.sh" --no-crash \
		--timeout "$TIMEOUT" --kernel "$dir/bzImage" --payload "$dir/payload" \
		>"$dir/run.log" 2>&1; then
		log "$fix: PASSED without the fix: its test does not show the race (log: $dir/run.log)"
		return 1
	fi
	why=$(grep -aE '^#  *(race_test|[a-z_]+\.c):[0-9]+:|Expected|not ok|kernel panic|timed out' \
		"$dir/run.log" | head -n 3 | sed 's/^[# ]*//' | tr '\n' ' ')
	# A panic: what the kernel said first, from the console of that run.
	vmdir=$(sed -n 's/.* kept in \(.*\)$/\1/p' "$dir/run.log" | tail -n 1)
	if [ -n "$vmdir" ] && [ -f "$vmdir/console.log" ]; then
		why+=$(grep -aE -m 2 'assertion failed|kernel BUG|BUG:' "$vmdir/console.log" |
			sed 's/^\[ *[0-9.]*\] //' | tr '\n' ' ')
	fi
	log "$fix: FAILED without the fix, as it must ($((SECONDS - t0)) s): ${why:-see $dir/run.log}"
}

main() {
	local shown=0 f
	ensure_packages "${PACKAGES[@]}"
	RUN_DIR=$(new_run_dir race-reverts)
	STEPS_LOG=$RUN_DIR/steps.log
	log "run folder: $RUN_DIR (output of the steps: steps.log)"
	step "preparing the kernel tree" "$STEPS_LOG" \
		bash "$RESTRIPER_ROOT/lib/prepare-tree.sh" --allow-work
	with_build_lock step "the kselftests" "$STEPS_LOG" make_kselftests "$RUN_DIR/ksft"
	for f in "${FIXES[@]}"; do
		run_fix "$f" && shown=$((shown + 1))
	done
	prune_old_runs
	echo "race reverts: ${#FIXES[@]} fixes, $shown shown by their test"
	[ "$shown" -eq "${#FIXES[@]}" ]
}

main
