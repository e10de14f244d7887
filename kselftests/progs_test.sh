#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# btrfs balance through the real client: Debian's btrfs-progs 6.2 (btrfs,
# mkfs.btrfs), unchanged, against the patched kernel.  KTAP (ktap_helpers.sh).
# Runs as root in the test VM (busybox sh); it reformats the devices.
#
# Environment: BTRFS_TEST_DEVS (block devices; the first 3 are used),
# BTRFS_TEST_MNT (default /mnt/test), PROGS_TEST_BIG_MB (data of the
# pause/cancel tests, default 96: the convert must run long enough under TCG
# to be seen running and paused).
#
# Every test: mkfs, mount, random files (md5sums kept), the balance commands
# with exit status and output checked, the files read back with the page
# cache dropped, umount, "btrfs check --readonly".
#
# btrfs-progs 6.2 semantics relied on (cmds/balance.c): start/resume print
# "Done, had to relocate N out of M chunks"; a failed ioctl prints "error
# during balancing '<path>': <strerror>", exit 1; paused/canceled (ECANCELED)
# print "balance paused|canceled by user", exit 0.  status: exit 0 with "No
# balance found on '<path>'", exit 1 with "Balance on '<path>' is
# running|paused", 2 on error.  pause/cancel with nothing to act on: exit 2,
# "Not running" / "Not in progress".  -m filters also apply to system chunks.
# shellcheck disable=SC2317 # the t_* functions are called through run_test

DEVS=${BTRFS_TEST_DEVS:-}
MNT=${BTRFS_TEST_MNT:-/mnt/test}
BIG_MB=${PROGS_TEST_BIG_MB:-96}
PLAN=11
NUM=0
MOUNTED=0
FS_DEV=
BG_PID=
MARK=
MARKN=0

# diag, failed, run_expect, expect_out
# shellcheck source=kselftests/test_helpers.inc
. "$(dirname "$0")/test_helpers.inc"
# The results: ktap_print_header, ktap_set_plan, ktap_test_result, ...
# shellcheck source=/dev/null # the tree's, staged by run_selftests.sh
. "$(dirname "$0")/kselftest/ktap_helpers.sh"
uptime_s() { cut -d. -f1 /proc/uptime; }

ktap_print_header
ndevs=0
for d in $DEVS; do [ -b "$d" ] && ndevs=$((ndevs + 1)); done
if [ "$ndevs" -lt 3 ]; then
	ktap_skip_all "needs 3 block devices in BTRFS_TEST_DEVS, found $ndevs"
	exit "$KSFT_SKIP"
fi
if [ "$(id -u)" != 0 ]; then
	ktap_skip_all "must run as root"
	exit "$KSFT_SKIP"
fi
for t in btrfs mkfs.btrfs; do
	command -v "$t" >/dev/null || ktap_exit_fail_msg "$t not found"
done
TMP=$(mktemp -d /tmp/progs_test.XXXXXX) || ktap_exit_fail_msg "mktemp"
mkdir -p "$MNT"
ktap_set_plan "$PLAN"
diag "btrfs-progs: $(btrfs --version 2>&1), devices: $DEVS, mount point: $MNT"

# relocated MIN [MAX]: OUT has "Done, had to relocate N out of M chunks" with
# MIN <= N <= MAX (default M), N <= M.
relocated() {
	RL=$(printf '%s\n' "$OUT" | sed -n 's/^Done, had to relocate \([0-9]*\) out of \([0-9]*\) chunks$/\1 \2/p')
	RL_N=${RL% *} RL_M=${RL#* }
	[ -n "$RL" ] || failed "no \"Done, had to relocate N out of M chunks\" in:" || return 1
	diag "relocated $RL_N out of $RL_M chunks"
	{ [ "$RL_N" -ge "$1" ] && [ "$RL_N" -le "${2:-$RL_M}" ] && [ "$RL_N" -le "$RL_M" ]; } ||
		failed "expected $1 <= N <= ${2:-M} and N <= M"
}

# status_is STATUS TEXT: "btrfs balance status" exits STATUS and prints TEXT.
status_is() { run_expect "$1" btrfs balance status "$MNT" && expect_out "$2"; }

# fs_df, then df_total "Data, single": total bytes of that profile line of
# "btrfs filesystem df -b" (empty when there is none).
fs_df() { run_expect 0 btrfs filesystem df -b "$MNT" && DF=$OUT; }
df_total() {
	printf '%s\n' "$DF" | awk -v l="$1:" 'index($0, l) == 1 { sub(/.*total=/, ""); sub(/,.*/, ""); print; exit }'
}
has_profile() { profiles yes "$@"; } # LABEL...: each has chunks (total > 0)
no_profile() { profiles no "$@"; }   # LABEL...: each is absent or empty
profiles() {
	PF_WANT=$1
	shift
	for PF in "$@"; do
		PF_HAS=no
		[ "$(df_total "$PF")" -gt 0 ] 2>/dev/null && PF_HAS=yes
		[ "$PF_HAS" = "$PF_WANT" ] && continue
		OUT=$DF
		failed "chunks of \"$PF:\" expected: $PF_WANT; btrfs filesystem df:"
		return 1
	done
}

# The kernel log since dmesg_mark: a line written to /dev/kmsg (without it,
# the last 50 lines).
dmesg_mark() {
	MARKN=$((MARKN + 1))
	MARK="progs_test: mark $$.$MARKN"
	echo "<6>$MARK" 2>/dev/null >/dev/kmsg
}
expect_dmesg() {
	diag "\$ dmesg (since the command)"
	OUT=$(dmesg | awk -v m="$MARK" 'index($0, m) { n = 0; seen = 1; next }
		{ l[++n] = $0 }
		END { s = (!seen && n > 50) ? n - 49 : 1; for (i = s; i <= n; i++) print l[i] }')
	expect_out "$1"
}
# expect_dmesg_line TEXT: as expect_dmesg, and a line ends with TEXT.
expect_dmesg_line() {
	expect_dmesg "$1" || return 1
	printf '%s\n' "$OUT" | awk -v t="$1" '
		length($0) >= length(t) && substr($0, length($0) - length(t) + 1) == t { f = 1 }
		END { exit !f }' || failed "no line ends with \"$1\":"
}

# mkfs_mount NDEV DATA_PROFILE META_PROFILE [SIZE]: a new filesystem on the
# first NDEV devices (SIZE: of each, mkfs.btrfs -b), mounted on MNT.
mkfs_mount() {
	FS_DEVS=$(echo "$DEVS" | awk -v n="$1" '{ for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? " " : ""), $i }')
	# shellcheck disable=SC2086 # a list of devices
	run_expect 0 mkfs.btrfs -f -q ${4:+-b "$4"} -d "$2" -m "$3" $FS_DEVS || return 1
	FS_DEV=${FS_DEVS%% *}
	# shellcheck disable=SC2086
	run_expect 0 btrfs device scan $FS_DEVS || return 1
	mount_fs
}
mount_fs() { run_expect 0 mount -t btrfs ${1:+-o "$1"} "$FS_DEV" "$MNT" && MOUNTED=1; } # [OPTIONS]
umount_fs() { run_expect 0 umount "$MNT" && MOUNTED=0; }

# write_files MIB: 8 MiB files of random data, the first alone and synced:
# it fills the 8 MiB data chunk of mkfs, so the others land in a second data
# chunk the kernel allocates.  Two small files: inline, and a partial page.
write_files() {
	WF_I=0
	while [ $((WF_I * 8)) -lt "$1" ]; do
		WF_I=$((WF_I + 1))
		head -c $((8 << 20)) /dev/urandom >"$MNT/f$WF_I" || { diag "FAILED: writing f$WF_I"; return 1; }
		[ "$WF_I" -gt 1 ] || sync
	done
	if ! head -c 1000 /dev/urandom >"$MNT/small1" || ! head -c 70001 /dev/urandom >"$MNT/small2" ||
		! sync || ! (cd "$MNT" && md5sum f* small*) >"$TMP/md5"; then
		diag "FAILED: writing or summing the files"
		return 1
	fi
	NFILES=$(wc -l <"$TMP/md5")
	diag "wrote $NFILES files ($((WF_I * 8)) MiB + 2 small ones)"
}
# write_halves: on a filesystem whose data chunks are 16 MiB, f1 (8 MiB,
# synced) fills the 8 MiB data chunk of mkfs, f2 (8 MiB) half fills a new one.
write_halves() {
	if ! head -c $((8 << 20)) /dev/urandom >"$MNT/f1" || ! sync ||
		! head -c $((8 << 20)) /dev/urandom >"$MNT/f2" || ! sync ||
		! (cd "$MNT" && md5sum f1 f2) >"$TMP/md5"; then
		diag "FAILED: writing or summing the files"
		return 1
	fi
	NFILES=2
}
# data_chunks: the logical starts of the data chunks, one a line, in order
# (the chunk tree as on disk: sync first).
data_chunks() {
	btrfs inspect-internal dump-tree -t chunk "$FS_DEV" | awk '
		/CHUNK_ITEM/ { s = $0; sub(/.*CHUNK_ITEM /, "", s); sub(/\).*/, "", s) }
		/ type DATA/ && s != "" { print s; s = "" }'
}
md5_check() { cd "$MNT" && md5sum -c "$TMP/md5"; }
verify_files() { # read back from disk, not from the page cache
	sync
	echo 3 >/proc/sys/vm/drop_caches || { diag "FAILED: drop_caches"; return 1; }
	run_expect 0 md5_check || return 1
	[ "$(printf '%s\n' "$OUT" | grep -c ': OK$')" -eq "$NFILES" ] || failed "not all $NFILES files OK:"
}

# A balance in the background ("btrfs balance start ARGS MNT &"); its output
# and status are kept in files: the status file marks its end (a zombie
# would still pass "kill -0").
bg_start() {
	rm -f "$TMP/bg.out" "$TMP/bg.rc"
	diag "\$ btrfs balance start $* $MNT &"
	(btrfs balance start "$@" "$MNT" >"$TMP/bg.out" 2>&1; echo $? >"$TMP/bg.rc") &
	BG_PID=$!
}
bg_done() { [ -s "$TMP/bg.rc" ]; }
bg_expect() { # STATUS TEXT: wait for it; it exited STATUS and printed TEXT
	wait "$BG_PID"
	BG_PID=
	BG_RC=$(cat "$TMP/bg.rc" 2>/dev/null)
	OUT=$(cat "$TMP/bg.out" 2>/dev/null)
	diag "background balance: exit status ${BG_RC:-?}"
	[ "${BG_RC:-x}" = "$1" ] || failed "expected exit status $1; output:" || return 1
	expect_out "$2"
}
too_fast() { diag "FAILED: the balance ended before the command reached it: make it longer (PROGS_TEST_BIG_MB, now $BIG_MB)"; }

# wait_running: poll "btrfs balance status" until it reports the balance
# running; failing when the background balance ended first (too fast).
wait_running() {
	WR_END=$(($(uptime_s) + 60))
	while :; do
		OUT=$(btrfs balance status "$MNT" 2>&1)
		case $OUT in *"Balance on '$MNT' is running"*)
			diag "running: $(printf '%s\n' "$OUT" | sed -n 2p)"
			return 0 ;;
		esac
		if bg_done; then
			too_fast
			bg_expect 0 "Done" # shows how it ended
			return 1
		fi
		[ "$(uptime_s)" -lt "$WR_END" ] || failed "not seen running within 60 s; last status:" || return 1
		usleep 50000
	done
}

# pause_running ARGS...: start a balance in the background, pause it once it
# runs; it stops with "balance paused by user", exit 0.
pause_running() {
	bg_start "$@"
	wait_running || return 1
	run_expect 0 btrfs balance pause "$MNT" || { too_fast; return 1; }
	bg_expect 0 "balance paused by user"
}

# stop_bg: a test that failed with its balance running: cancel it, reap it.
stop_bg() {
	SB_N=0
	while [ -n "$BG_PID" ] && ! bg_done && [ "$SB_N" -lt 120 ]; do
		btrfs balance cancel "$MNT" >/dev/null 2>&1
		sleep 1
		SB_N=$((SB_N + 1))
	done
	if [ -n "$BG_PID" ] && bg_done; then wait "$BG_PID"; fi
	BG_PID=
}

# cleanup: unmount and btrfs check; fails the test when either fails.
cleanup() {
	CL_RC=0
	stop_bg
	if [ "$MOUNTED" = 1 ] && ! umount_fs; then
		sleep 1
		umount_fs || CL_RC=1
	fi
	if [ -n "$FS_DEV" ]; then
		run_expect 0 btrfs check --readonly "$FS_DEV" || CL_RC=1
	fi
	FS_DEV=
	return $CL_RC
}

run_test() { # DESCRIPTION FUNCTION
	NUM=$((NUM + 1))
	diag "--- $NUM: $1"
	RT_T0=$(uptime_s)
	"$2"
	RT_RC=$?
	cleanup || RT_RC=1
	diag "($(($(uptime_s) - RT_T0)) s)"
	ktap_test_result "$1" [ "$RT_RC" -eq 0 ]
}

final_cleanup() {
	stop_bg
	[ "$MOUNTED" = 1 ] && umount "$MNT" 2>/dev/null
	rm -rf "$TMP"
}
trap final_cleanup EXIT
trap 'exit 1' INT TERM

# --- the tests ------------------------------------------------------------------

t_usage() {
	mkfs_mount 3 single raid1 && write_files 32 || return 1
	run_expect 0 btrfs balance start -dusage=100 "$MNT" && relocated 1 || return 1
	verify_files
}

t_convert() {
	mkfs_mount 3 single raid1 && write_files 32 || return 1
	run_expect 0 btrfs balance start -dconvert=raid1 -mconvert=raid1c3 "$MNT" || return 1
	# Every chunk converts: at least one data, one metadata, one system.
	relocated 3 || return 1
	fs_df && has_profile "Data, RAID1" "Metadata, RAID1C3" "System, RAID1C3" &&
		no_profile "Data, single" "Metadata, RAID1" "System, RAID1" || return 1
	run_expect 0 btrfs filesystem usage -b "$MNT" && expect_out "Data,RAID1:" &&
		expect_out "Metadata,RAID1C3:" || return 1
	verify_files
}

t_soft() {
	mkfs_mount 3 single raid1 && write_files 32 || return 1
	run_expect 0 btrfs balance start -dconvert=raid1 "$MNT" && relocated 1 || return 1
	# soft: chunks already in the target profile are left alone.
	run_expect 0 btrfs balance start -dconvert=raid1,soft "$MNT" && relocated 0 0 || return 1
	fs_df && has_profile "Data, RAID1" && no_profile "Data, single" || return 1
	verify_files
}

t_reduce() {
	mkfs_mount 3 single raid1 && write_files 32 || return 1
	dmesg_mark
	run_expect 1 btrfs balance start -mconvert=single "$MNT" && expect_out "Invalid argument" || return 1
	expect_dmesg "balance: reduces metadata redundancy" || return 1
	fs_df && has_profile "Metadata, RAID1" && no_profile "Metadata, single" || return 1
	dmesg_mark
	# -m is copied to the system chunks: both convert, at least 2 chunks.
	run_expect 0 btrfs balance start -f -mconvert=single "$MNT" && relocated 2 || return 1
	expect_dmesg "balance: force reducing metadata redundancy" || return 1
	fs_df && has_profile "Metadata, single" "System, single" &&
		no_profile "Metadata, RAID1" "System, RAID1" || return 1
	verify_files
}

t_invalid_profile() {
	mkfs_mount 3 single raid1 && write_files 32 || return 1
	dmesg_mark
	run_expect 1 btrfs balance start -dconvert=raid1c4 "$MNT" && expect_out "Invalid argument" || return 1
	expect_dmesg "balance: invalid convert data profile raid1c4" || return 1
	dmesg_mark
	run_expect 1 btrfs balance start -mconvert=raid1c4 "$MNT" || return 1
	expect_dmesg "balance: invalid convert metadata profile raid1c4" || return 1
	fs_df && has_profile "Data, single" "Metadata, RAID1" && no_profile "Data, RAID1C4" || return 1
	verify_files
}

t_pause_resume() {
	mkfs_mount 3 single raid1 && write_files "$BIG_MB" || return 1
	pause_running -dconvert=raid1 || return 1
	status_is 1 "Balance on '$MNT' is paused" || return 1
	PR_DONE=$(printf '%s\n' "$OUT" | sed -n 's/^\([0-9]*\) out of about \([0-9]*\) chunks balanced.*/\1/p')
	PR_EXP=$(printf '%s\n' "$OUT" | sed -n 's/^\([0-9]*\) out of about \([0-9]*\) chunks balanced.*/\2/p')
	{ [ "${PR_EXP:-0}" -ge 1 ] && [ "${PR_DONE:-x}" -le "$PR_EXP" ]; } 2>/dev/null ||
		failed "progress should read \"D out of about E chunks\" with 1 <= E, D <= E" || return 1
	# Paused is not running; a new start is refused while one is paused.
	run_expect 2 btrfs balance pause "$MNT" && expect_out "Not running" || return 1
	# progs 6.2 reads the exclusive operation from sysfs and refuses
	# before it asks the kernel.
	run_expect 1 btrfs balance start -dusage=50 "$MNT" &&
		expect_out "another exclusive operation 'balance paused' in progress" ||
		return 1
	# resume runs in the foreground to the end of the convert.
	run_expect 0 btrfs balance resume "$MNT" && relocated 0 || return 1
	status_is 0 "No balance found on '$MNT'" || return 1
	fs_df && has_profile "Data, RAID1" && no_profile "Data, single" || return 1
	run_expect 2 btrfs balance pause "$MNT" && expect_out "Not running" || return 1
	verify_files
}

t_cancel() {
	mkfs_mount 3 single raid1 && write_files "$BIG_MB" || return 1
	bg_start -dconvert=raid1
	wait_running || return 1
	run_expect 0 btrfs balance cancel "$MNT" || { too_fast; return 1; }
	bg_expect 0 "balance canceled by user" || return 1
	status_is 0 "No balance found on '$MNT'" || return 1
	# Stopped before the end: data is left in single.
	fs_df && has_profile "Data, single" || return 1
	run_expect 2 btrfs balance cancel "$MNT" && expect_out "Not in progress" || return 1
	verify_files
}

t_skip_balance() {
	mkfs_mount 3 single raid1 && write_files "$BIG_MB" || return 1
	pause_running -dconvert=raid1 || return 1
	umount_fs || return 1
	dmesg_mark
	mount_fs skip_balance || return 1
	expect_dmesg "balance: resume skipped" || return 1
	status_is 1 "Balance on '$MNT' is paused" || return 1
	sleep 1 # still paused: the mount did not resume it
	status_is 1 "Balance on '$MNT' is paused" || return 1
	run_expect 0 btrfs balance cancel "$MNT" || return 1
	status_is 0 "No balance found on '$MNT'" || return 1
	# The item is gone: a normal mount has no balance to resume.
	umount_fs && mount_fs || return 1
	status_is 0 "No balance found on '$MNT'" || return 1
	verify_files
}

t_limit() {
	mkfs_mount 3 single raid1 && write_files 32 || return 1
	run_expect 0 btrfs balance start -dlimit=1 "$MNT" && relocated 1 1 || return 1
	# Two data chunks (see write_files): limit=5 takes both.  Upstream 6.12
	# reads limit 5 as limit_min too (union aliasing): with 2 chunks, none.
	run_expect 0 btrfs balance start -dlimit=5 "$MNT" && relocated 2 5 || return 1
	verify_files
}

t_usage_range() {
	# One 160 MiB device: a new data chunk is 16 MiB (10% of it).
	mkfs_mount 1 single dup 160M && write_halves && sync || return 1
	UR_BEFORE=$(data_chunks)
	UR_FULL=$(printf '%s\n' "$UR_BEFORE" | sed -n 1p)
	UR_HALF=$(printf '%s\n' "$UR_BEFORE" | sed -n 2p)
	OUT=$UR_BEFORE
	{ [ "$(printf '%s\n' "$UR_BEFORE" | wc -l)" -eq 2 ] && [ -n "$UR_HALF" ]; } ||
		failed "expected two data chunks (full, half full):" || return 1
	diag "data chunks: full at $UR_FULL, half full at $UR_HALF"
	dmesg_mark
	# progs sends usage=0..60 as USAGE and USAGE_RANGE: the range applies.
	run_expect 0 btrfs balance start -dusage=0..60 "$MNT" && relocated 1 1 || return 1
	expect_dmesg_line "balance: start -dusage=0..60" || return 1
	sync
	OUT=$(data_chunks)
	case "
$OUT
" in
	*"
$UR_HALF
"*) failed "the half full chunk at $UR_HALF is still there:"; return 1 ;;
	esac
	case "
$OUT
" in
	*"
$UR_FULL
"*) ;;
	*) failed "the full chunk at $UR_FULL was relocated:"; return 1 ;;
	esac
	verify_files
}

t_start_message() {
	mkfs_mount 3 single raid1 && write_files 8 || return 1
	dmesg_mark
	# -m without filters: metadata and (copied by progs) system chunks.
	run_expect 0 btrfs balance start -dusage=50 -m "$MNT" && relocated 2 || return 1
	# A type without filters does not repeat the filters of the one before.
	expect_dmesg_line "balance: start -dusage=50 -m -s" || return 1
	verify_files
}

run_test "balance -dusage=100 relocates the data chunks" t_usage
run_test "convert data to raid1 and metadata to raid1c3" t_convert
run_test "soft convert skips chunks already converted" t_soft
run_test "reducing metadata redundancy needs -f" t_reduce
run_test "convert to raid1c4 on 3 devices is rejected" t_invalid_profile
run_test "status, pause, resume of a running convert" t_pause_resume
run_test "cancel of a running convert" t_cancel
run_test "skip_balance keeps a paused balance paused until cancel" t_skip_balance
run_test "limit filter: -dlimit=1 and -dlimit=5" t_limit
run_test "-dusage=0..60 relocates the half full chunk, logged as such" t_usage_range
run_test "the start line logs \"-dusage=50 -m -s\" for -dusage=50 -m" t_start_message

[ "$NUM" -eq "$PLAN" ] || diag "BUG: ran $NUM tests, planned $PLAN"
ktap_finished
