#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# tools/balance-status (the repository's userspace program, staged as
# /selftests/bin/balance-status) against the patched kernel: the byte
# progress bar, the chunk being relocated, the table per type, a paused
# balance, and bad input.  KTAP (ktap_helpers.sh).  Runs as root in the
# test VM (busybox sh); it reformats the devices.
#
# The balance is held before each chunk by the debug hold point
# (/sys/fs/btrfs/<fsid>/debug/balance_hold, CONFIG_BTRFS_DEBUG), so that
# what the program sees does not depend on the speed of the machine.
#
# Environment: BTRFS_TEST_DEVS (the first 2 are used), BTRFS_TEST_MNT,
# BALANCE_STATUS (default: bin/balance-status next to this script).
# shellcheck disable=SC2317 # the t_* functions are called through run_test

DEVS=${BTRFS_TEST_DEVS:-}
MNT=${BTRFS_TEST_MNT:-/mnt/test}
BS=${BALANCE_STATUS:-$(dirname "$0")/bin/balance-status}
HOLD= # the mounted filesystem's: hold_file
HOLD_RELOCATION=1	# before each chunk
HOLD_IN_RELOCATION=4	# inside a relocation, after each extent
PLAN=4
NUM=0
BAL_PID=

# diag, failed, run_expect, expect_out
# shellcheck source=kselftests/test_helpers.inc
. "$(dirname "$0")/test_helpers.inc"
# The results: ktap_print_header, ktap_set_plan, ktap_test_result, ...
# shellcheck source=/dev/null # the tree's, staged by run_selftests.sh
. "$(dirname "$0")/kselftest/ktap_helpers.sh"

ktap_print_header
# shellcheck disable=SC2086 # a list of devices
set -- $DEVS
if [ $# -lt 2 ]; then
	ktap_skip_all "needs 2 block devices in BTRFS_TEST_DEVS"
	exit "$KSFT_SKIP"
fi
DEV1=$1 DEV2=$2
if [ ! -x "$BS" ]; then
	ktap_exit_fail_msg "$BS not found (make at the top of the repository)"
fi
mkdir -p "$MNT"
ktap_set_plan "$PLAN"

# expect_line REGEX: a line of OUT matches the extended regular expression.
expect_line() {
	printf '%s\n' "$OUT" | grep -Eq "$1" || failed "no line matches /$1/ in:"
}

# hold_file: HOLD, the hold points of the filesystem mounted on MNT (the one
# with DEV1).  The tests need them: without them they test nothing, a
# failure.
hold_file() {
	for d in /sys/fs/btrfs/*/devices/"$(basename "$DEV1")"; do
		HOLD=${d%/devices/*}/debug/balance_hold
	done
	[ -w "$HOLD" ] && return 0
	OUT="no $HOLD (a kernel without CONFIG_BTRFS_DEBUG's hold points)"
	failed "setup"
	return 1
}

# The filesystem: data single in several chunks (files of 48 MiB), then a
# convert to raid1 started in the background, held before its first chunk.
start_held_convert() {
	if ! mkfs.btrfs -q -f -d single -m raid1 "$DEV1" "$DEV2" >/dev/null 2>&1 ||
		! mount "$DEV1" "$MNT"; then
		OUT="mkfs or mount failed"
		failed "setup"
		return 1
	fi
	hold_file || return 1
	for i in 1 2 3 4; do
		dd if=/dev/urandom of="$MNT/f$i" bs=1M count=48 2>/dev/null ||
			{ OUT="dd failed"; failed "setup"; return 1; }
	done
	sync
	echo "$HOLD_RELOCATION" >"$HOLD"
	btrfs balance start -dconvert=raid1 "$MNT" >/dev/null 2>&1 &
	BAL_PID=$!
	wait_held
}

# wait_held [POINT]: wait (up to 5 minutes: only a hang takes that long)
# until the balance thread is held at POINT (default: before a chunk).
wait_held() {
	n=0
	while [ "$n" -lt 3000 ]; do
		read -r _ held <"$HOLD"
		[ $((held & ${1:-$HOLD_RELOCATION})) -ne 0 ] && return 0
		kill -0 "$BAL_PID" 2>/dev/null ||
			{ OUT="btrfs balance start has exited"; failed "not held"; return 1; }
		sleep 0.1
		n=$((n + 1))
	done
	OUT="never held"
	failed "the balance was not held"
}

# Let the held balance take one chunk and hold it again before the next.
step_one_chunk() {
	echo 0 >"$HOLD"
	while read -r _ held <"$HOLD" && [ $((held & HOLD_RELOCATION)) -ne 0 ]; do
		sleep 0.05
	done
	echo "$HOLD_RELOCATION" >"$HOLD"
	wait_held
}

cleanup() {
	echo 0 >"$HOLD" 2>/dev/null
	[ -n "$BAL_PID" ] && { btrfs balance cancel "$MNT" >/dev/null 2>&1; wait "$BAL_PID"; }
	BAL_PID=
	umount "$MNT" 2>/dev/null
	return 0
}

run_test() { # DESCRIPTION FUNCTION
	NUM=$((NUM + 1))
	ktap_test_result "$1" "$2"
	cleanup
}

t_running() {
	start_held_convert && step_one_chunk || return 1
	run_expect 0 "$BS" "$MNT" || return 1
	# One chunk of the expected ones is done; the bar counts bytes.
	expect_line "^$MNT: running \[#*\.*\] +[0-9.]+% [0-9.]+ MiB of [0-9.]+ MiB, 1 of [0-9]+ chunks, " || return 1
	expect_line '^data +1/[0-9]+ ' || return 1
	expect_line '^metadata +0/0 +0 B/0 B' || return 1
	expect_line '^total +1/[0-9]+ ' || return 1
	expect_line '^started 20[0-9-]+ [0-9:]+, ran [0-9hms]+ \(pauses left out\)$' || return 1
	case $OUT in *"reports chunks, not bytes"*) failed "fell back to chunks:"; return 1 ;; esac
	# Released, -w follows it to the end: a line per report in a log.
	echo 0 >"$HOLD"
	run_expect 0 "$BS" -w -i 0.2 "$MNT" || return 1
	wait "$BAL_PID"
	RC=$?
	BAL_PID=
	[ "$RC" -eq 0 ] || { failed "btrfs balance start exited $RC"; return 1; }
	expect_line "^$MNT: (running|no balance)" || return 1
}

t_relocating_now() {
	start_held_convert || return 1
	# Held inside the relocation of the first chunk, after an extent.
	echo "$HOLD_IN_RELOCATION" >"$HOLD"
	wait_held "$HOLD_IN_RELOCATION" || return 1
	run_expect 0 "$BS" "$MNT" || return 1
	expect_line ", relocating data single chunk at [0-9.]+ [KMG]iB \([0-9.]+ MiB used\)$" || return 1
	expect_line "^$MNT: running .* 0 of [0-9]+ chunks, " || return 1
}

t_paused() {
	start_held_convert && step_one_chunk || return 1
	btrfs balance pause "$MNT" >/dev/null 2>&1 &
	PAUSE_PID=$!
	# Released once the pause is requested: it stops before the next chunk.
	n=0
	until btrfs balance status "$MNT" 2>&1 | grep -q "pause requested"; do
		n=$((n + 1))
		[ "$n" -lt 3000 ] || { OUT="no pause requested"; failed "pause"; return 1; }
		sleep 0.1
	done
	echo 0 >"$HOLD"
	wait "$PAUSE_PID" || { OUT="pause failed"; failed "btrfs balance pause"; return 1; }
	# -w stops at once on a paused balance and prints the table.
	run_expect 0 "$BS" -w "$MNT" || return 1
	expect_line "^$MNT: paused .* 1 of [0-9]+ chunks" || return 1
	expect_line '^data +1/[0-9]+ ' || return 1
}

t_bad_input() {
	if ! mkfs.btrfs -q -f "$DEV1" >/dev/null 2>&1 || ! mount "$DEV1" "$MNT"; then
		OUT="mkfs or mount failed"
		failed "setup"
		return 1
	fi
	run_expect 0 "$BS" "$MNT" && expect_out "$MNT: no balance" || return 1
	run_expect 2 "$BS" && expect_out "usage:" || return 1
	run_expect 2 "$BS" -i 0 "$MNT" && expect_out "-i: seconds" || return 1
	run_expect 2 "$BS" -i 1x "$MNT" || return 1
	run_expect 2 "$BS" -n -dfoo=1 "$MNT" || return 1
	run_expect 2 "$BS" -d "$MNT" && expect_out "usage:" || return 1
	run_expect 1 "$BS" /nonexistent && expect_out "/nonexistent: No such file or directory" || return 1
	run_expect 1 "$BS" /proc && expect_out "progress of /proc:" || return 1
}

run_test "a running convert: the byte bar, the table and -w to the end" t_running
run_test "inside a relocation: the chunk being relocated is named" t_relocating_now
run_test "a paused convert: -w stops and shows what was done" t_paused
run_test "bad input: usage errors exit 2, a path that is not btrfs exits 1" t_bad_input

ktap_finished
