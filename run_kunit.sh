#!/usr/bin/env bash
# Build and run the KUnit suites of kunit.config in qemu (x86_64), in the
# prepared kernel tree (series + kunit/*.c), build folder $CACHE/build/kunit.
#
#   ./run_kunit.sh                    everything in kunit.config
#   ./run_kunit.sh 'btrfs_balance*'   extra arguments go to "kunit.py run"
#                                     (a suite glob, --raw_output, ...)
#
# Sets up everything itself (packages, tree).  Local work in the tree that is
# not exported yet is kept and tested, as long as the series did not change
# (prepare-tree.sh --allow-work).  Ends with a line "kunit: X passed, Y failed";
# exits non-zero on any failure, or when no test ran.
set -euo pipefail
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/ci/lib.sh"

# Print "kunit: X passed, Y failed" from kunit.py's summary line
# "Testing complete. Ran N tests: passed: X, failed: Y, crashed: Z, ..."
# (zero counts are left out by kunit.py).  Returns 1 on failure or no tests.
summarize() { # LOG
	local line total passed failed crashed skipped errors
	line=$(sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -o 'Testing complete\. Ran [0-9]* tests:.*' | tail -n1 || true)
	if [ -z "$line" ]; then
		echo "kunit: 0 passed, 0 failed (no test results: see the build/boot output above)"
		return 1
	fi
	count() { grep -o "$1: [0-9]*" <<<"$line" | grep -o '[0-9]*$' || echo 0; }
	total=$(grep -o 'Ran [0-9]*' <<<"$line" | grep -o '[0-9]*$')
	passed=$(count passed)
	failed=$(count failed)
	crashed=$(count crashed)
	skipped=$(count skipped)
	errors=$(count errors)
	echo "kunit: $passed passed, $((failed + crashed)) failed"
	if [ $((crashed + skipped + errors)) -gt 0 ]; then
		echo "kunit: ($crashed crashed, $skipped skipped, $errors errors)"
	fi
	[ "$total" -gt 0 ] && [ $((failed + crashed + errors)) -eq 0 ]
}

run() {
	local log rc=0
	bash "$RESTRIPER_ROOT/ci/prepare-tree.sh" --allow-work >/dev/null
	mkdir -p "$BUILD_ROOT/kunit"
	log=$(mktemp)
	# shellcheck disable=SC2064 # expand now: $log is local
	trap "rm -f '$log'" EXIT
	(
		cd "$TREE"
		python3 tools/testing/kunit/kunit.py run --arch=x86_64 \
			--kunitconfig="$RESTRIPER_ROOT/kunit.config" \
			--build_dir="$BUILD_ROOT/kunit" --jobs="$(nproc)" "$@"
	) 2>&1 | tee "$log" || rc=$?
	summarize "$log" || { [ "$rc" -ne 0 ] || rc=1; }
	[ "$rc" -eq 0 ] || log "KUnit FAILED (exit $rc)"
	return "$rc"
}

with_build_lock run "$@"
