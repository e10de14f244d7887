#!/usr/bin/env bash
# Build and run the KUnit suites of kunit.config in QEMU (x86_64), in the
# prepared kernel tree (the series, whose last patches carry the tests),
# build folder $CACHE/build/kunit.
#
#   ./run_kunit.sh [-v]                   everything in kunit.config
#   ./run_kunit.sh [-v] 'btrfs_balance*'  extra arguments go to "kunit.py run"
#                                         (a suite glob, --raw_output, ...)
#
# -v shows the build and the test output; without it, one line per step and
# the output in $CACHE/logs/kunit-<time>.log.  Sets up everything itself
# (packages, tree).  Local work in the tree that is not exported yet is kept
# and tested, as long as the series did not change (prepare-tree.sh
# --allow-work).  Ends with a line "kunit: X passed, Y failed"; exits
# non-zero on any failure, or when no test ran.
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0; }
case "${1:-}" in -h | --help) usage ;; esac

if [ "${1:-}" = -v ]; then
	VERBOSE=1
	export RESTRIPER_VERBOSE=1
	shift
fi

run() {
	local log rc=0
	log=$LOGS/kunit-$(date +%Y%m%d-%H%M%S).log
	step "preparing the kernel tree" "$log" \
		bash "$RESTRIPER_ROOT/lib/prepare-tree.sh" --allow-work || return 1
	step "KUnit: building the kernel and running the tests in QEMU" "$log" \
		kunit_py run "$RESTRIPER_ROOT/kunit.config" "$@" || rc=$?
	if [ "$rc" -ne 0 ] && [ "$VERBOSE" != 1 ]; then
		grep -E '\[FAILED\]|FAILED at|Expected .* but|error:' "$log" | head -n 30 >&2 || true
	fi
	log "full output: $log"
	kunit_summary "$log" || { [ "$rc" -ne 0 ] || rc=1; }
	return "$rc"
}

ensure_packages "${PACKAGES[@]}"
with_build_lock run "$@"
