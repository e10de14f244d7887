#!/usr/bin/env bash
# The gate's own judging, tried on doctored logs: a log that says less than
# "everything ran and passed" must fail.  Run by ci/gate.sh as its first
# step; takes a second, builds and boots nothing.
#
#   ci/test-judging.sh [-v]     prints one line per case with -v, else only
#                               the cases that went wrong; exits non-zero
#                               when any did
#
# Judges tried: judge_vm_stage (the VM stage's summary), kunit_summary and
# kunit_cases (KUnit), scan_dmesg (the kernel log of a VM run),
# scan_data_errors (that of a power-cut or crash run).
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"

[ "${1:-}" != -v ] || VERBOSE=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
BAD=0 CASES=0

# expect VERDICT NAME CMD...: CMD must return 0 (VERDICT pass) or non-zero
# (VERDICT fail).
expect() {
	local want=$1 name=$2 got=pass
	shift 2
	CASES=$((CASES + 1))
	"$@" >"$WORK/out" 2>&1 || got=fail
	if [ "$got" = "$want" ]; then
		[ "$VERBOSE" = 0 ] || echo "ok: $name ($got)"
	else
		echo "WRONG: $name: $got, expected $want; the judge said:"
		sed 's/^/    | /' "$WORK/out"
		BAD=1
	fi
}

# A VM stage that ran everything and passed (the shape run_selftests.sh
# prints).
good_vm_log() {
	cat <<'EOF'
==================== selftests summary ====================
  balance_test                  47 passed,   0 failed,   0 skipped  (exit status 0)
  progs_test.sh                 11 passed,   0 failed,   0 skipped  (exit status 0)
  balance_fuzz                   6 passed,   0 failed,   0 skipped  (exit status 0)
  concurrency_test              13 passed,   0 failed,   0 skipped  (exit status 0)
  lifecycle_test                27 passed,   0 failed,   0 skipped  (exit status 0)
  status_tool_test.sh            4 passed,   0 failed,   0 skipped  (exit status 0)
crash stage (/tmp/x/crash):
  boot 1 (interrupt)           killed on "=== CRASH ME ===" after 16 s
  crash_resume_test             16 passed,   0 failed,   0 skipped  (exit status 0)
power-cut stage (/tmp/x/powercut.log):
  run 1/4: random convert cut 181 ms after relocation 1: ok
selftests: 124 passed, 0 failed, 0 skipped
powercut: 4 runs, 0 failed
fuzz: 1000 calls, 0 failed
EOF
}

# vm_case NAME SED: the good log changed by SED must fail the judge.
vm_case() {
	good_vm_log | sed "$2" >"$WORK/vm.log"
	expect fail "VM stage: $1" judge_vm_stage "$WORK/vm.log"
}

good_vm_log >"$WORK/vm.log"
expect pass "VM stage: everything ran and passed" judge_vm_stage "$WORK/vm.log"
vm_case "a failed test" 's/ 13 passed,   0 failed/ 12 passed,   1 failed/'
vm_case "a skipped test" 's/ 27 passed,   0 failed,   0 skipped/ 26 passed,   0 failed,   1 skipped/'
vm_case "a test that ran nothing" 's/  4 passed,   0 failed/  0 passed,   0 failed/'
vm_case "a test left out" '/progs_test.sh/d'
vm_case "the crash stage left out" '/crash/d'
vm_case "no selftests line" '/^selftests:/d'
vm_case "a skip in the selftests line" 's/^selftests: 124 passed, 0 failed, 0 skipped/selftests: 123 passed, 0 failed, 1 skipped/'
vm_case "no power-cut line" '/^powercut:/d'
vm_case "a failed power-cut run" 's/^powercut: 4 runs, 0 failed/powercut: 4 runs, 1 failed/'
vm_case "no power-cut run" 's/^powercut: 4 runs/powercut: 0 runs/'
vm_case "no fuzz line" '/^fuzz:/d'
vm_case "a failed fuzz call" 's/^fuzz: 1000 calls, 0 failed/fuzz: 1000 calls, 1 failed/'
vm_case "an empty log" 'd'

# KUnit: kunit.py's closing line.
kunit_case() {
	printf '%s\n' "$3" >"$WORK/kunit.log"
	expect "$1" "KUnit: $2" kunit_summary "$WORK/kunit.log"
}
kunit_case pass "all passed" "Testing complete. Ran 491 tests: passed: 491"
kunit_case fail "a failure" "Testing complete. Ran 491 tests: passed: 490, failed: 1"
kunit_case fail "a skip" "Testing complete. Ran 491 tests: passed: 490, skipped: 1"
kunit_case fail "a crash" "Testing complete. Ran 491 tests: passed: 490, crashed: 1"
kunit_case fail "no closing line" "[PASSED] btrfs-balance"
kunit_case fail "no test ran" "Testing complete. Ran 0 tests"
# shellcheck disable=SC2317 # called through expect()
kunit_cases_is() {
	[ "$(kunit_cases "$WORK/kunit.log")" = "$1" ]
}
printf '%s\n' "Testing complete. Ran 491 tests: passed: 491" >"$WORK/kunit.log"
expect pass "KUnit: the count of cases read" kunit_cases_is 491
: >"$WORK/kunit.log"
expect pass "KUnit: no count read as 0" kunit_cases_is 0

# KUnit suites by name: a tree with two suites, a log that shows them.
mkdir -p "$WORK/tree/fs/btrfs/tests"
cat >"$WORK/tree/fs/btrfs/tests/a-test.c" <<'EOF'
static struct kunit_suite a_suite = {
	.name = "btrfs_balance_a",
	.test_cases = a_cases,
};
static struct kunit_suite b_suite = {
	.name = "btrfs_balance_b",
	.test_cases = b_cases,
};
EOF
# shellcheck disable=SC2317 # called through expect()
no_suite_missing() {
	[ -z "$(kunit_missing_suites "$WORK/tree" "$WORK/kunit.log")" ]
}
suites_case() {
	printf '%s\n' "${@:3}" >"$WORK/kunit.log"
	expect "$1" "KUnit: $2" no_suite_missing
}
suites_case pass "every suite passed" \
	"[04:19:56] ============= [PASSED] btrfs_balance_a ==============" \
	"[04:19:57] ============= [PASSED] btrfs_balance_b ==============="
suites_case fail "a suite that did not run" \
	"[04:19:56] ============= [PASSED] btrfs_balance_a =============="
suites_case fail "a suite that failed" \
	"[04:19:56] ============= [PASSED] btrfs_balance_a ==============" \
	"[04:19:57] ============= [FAILED] btrfs_balance_b ==============="

# The kernel log: scan_dmesg prints what fails a run.
# shellcheck disable=SC2317 # called through expect()
dmesg_clean() {
	[ -z "$(scan_dmesg "$WORK/dmesg.log")" ]
}
dmesg_case() {
	printf '%s\n' "${@:3}" >"$WORK/dmesg.log"
	expect "$1" "kernel log: $2" dmesg_clean
}
dmesg_case pass "clean, from boot" "[    0.000000] Linux version 6.12" \
	"[    9.100000] BTRFS info (device vda): balance: ended with status: 0"
dmesg_case fail "a WARNING on its second line" "[    0.000000] Linux version 6.12" \
	"[    0.200000] WARNING: CPU: 0 PID: 1 at fs/btrfs/balance.c:1 x" \
	"[    9.100000] BTRFS info (device vda): balance: ended with status: 0"
dmesg_case fail "a transaction abort" "[    0.000000] Linux version 6.12" \
	"[    5.000000] BTRFS: Transaction aborted (error -28)"
dmesg_case fail "its beginning lost" \
	"[   11.637510] BTRFS info (device vda): checking UUID tree"

# The kernel log of a power-cut or crash run: scan_data_errors prints the
# lines that say data was bad on a device.
# shellcheck disable=SC2317 # called through expect()
data_clean() {
	[ -z "$(scan_data_errors "$WORK/dmesg.log")" ]
}
data_case() {
	printf '%s\n' "${@:3}" >"$WORK/dmesg.log"
	expect "$1" "durability run's kernel log: $2" data_clean
}
data_case pass "clean" "[    0.000000] Linux version 6.12" \
	"[    9.100000] BTRFS info (device vda): scrub: finished on devid 1 with status: 0"
data_case fail "a checksum failure" \
	"[    7.000000] BTRFS warning (device vda): csum failed root 5 ino 257 off 0 csum 0x1 expected csum 0x2 mirror 1"
data_case fail "a copy repaired by scrub" \
	"[    8.000000] BTRFS error (device vda): fixed up error at logical 30408704 on dev /dev/vdb physical 1048576"
data_case fail "a read error corrected" \
	"[    8.000000] BTRFS info (device vda): read error corrected: ino 257 off 0 (dev /dev/vdb sector 2048)"

if [ "$BAD" = 0 ]; then
	[ "$VERBOSE" = 0 ] || echo "test-judging: $CASES cases, all judged as expected"
	exit 0
fi
echo "test-judging: some of $CASES cases judged wrong"
exit 1
