#!/bin/sh
# The demo of ./demo.sh, run inside the VM (busybox sh) with 4 empty disks:
#
#  1. a 3-device btrfs (vda vdb vdc): data "single", metadata "raid1"
#  2. ~200 MiB of files with known content (md5sum list kept in /tmp)
#  3. a 4th device added, a dry run of the convert (tools/balance-status -n:
#     what it would relocate, per type), then "btrfs balance start
#     -dconvert=raid1": the restriper rewrites every data chunk as raid1 over
#     the 4 devices, with the progress (tools/balance-status -w) every second
#  4. "btrfs balance pause" half way, unmount: the balance item stays on disk
#  5. mount again: the kernel resumes the balance by itself; wait for the end
#  6. checks: no data left in "single", every checksum right (read back from
#     disk after a remount), scrub finds both copies good, btrfs check clean
#
# Tunables (environment): DEMO_DATA_MB (default 200), DEMO_PAUSE_AFTER
# (seconds of balancing before the pause, default 10; the pause comes earlier
# once a first chunk is done).  Exit status 0 when every check passed.

MNT=/mnt/demo
DATA_MB=${DEMO_DATA_MB:-200}
PAUSE_AFTER=${DEMO_PAUSE_AFTER:-10}
BIG_MB=5 # size of the big files

now() { cut -d' ' -f1 /proc/uptime; }
T0=$(now)
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
step() {
	echo
	echo "==> [$(since "$T0") s] $*"
}
fail() {
	echo
	echo "DEMO FAILED: $*"
	exit 1
}
run() { # show and run a command
	echo "# $*"
	"$@"
}
# poll: one "btrfs balance status"; sets ST (running, paused, none, unknown)
# and P (its second line: "N out of about M chunks balanced ...").
poll() {
	out=$(btrfs balance status "$MNT" 2>&1)
	case "$(echo "$out" | head -n1)" in
	*"is running"*) ST=running ;;
	*"is paused"*) ST=paused ;;
	*"No balance found"*) ST=none ;;
	*) ST=unknown ;;
	esac
	P=$(echo "$out" | sed -n '2s/^ *//p')
	[ -n "$P" ] || [ "$ST" = none ] || P="(no progress reported yet)"
}

# start_watch: tools/balance-status -w in the background, once a balance runs: a
# line per second (bar, rate, time left) until it no longer runs.
BS=/selftests/balance-status
WPID=''
start_watch() {
	[ -z "$WPID" ] && [ "$ST" = running ] || return 0
	# through a pipe: a line per report (on the console, a tty, it would
	# redraw one line)
	"$BS" -w "$MNT" | sed 's/^/  /' &
	WPID=$!
}
end_watch() {
	[ -n "$WPID" ] || return 0
	wait "$WPID"
	WPID=''
}

for d in /dev/vda /dev/vdb /dev/vdc /dev/vdd; do
	[ -b "$d" ] || fail "$d is missing: the demo needs 4 disks"
done
mkdir -p "$MNT"

# --- 1. filesystem ------------------------------------------------------------
step "mkfs: 3 devices, data single, metadata raid1"
run mkfs.btrfs -q -f -L demo -d single -m raid1 /dev/vda /dev/vdb /dev/vdc || fail "mkfs.btrfs"
run mount /dev/vda "$MNT" || fail "mount"

# --- 2. data ------------------------------------------------------------------
step "writing ~$DATA_MB MiB of random data: ${BIG_MB} MiB files, plus small files"
T=$(now)
mkdir -p "$MNT/big" "$MNT/small"
n=0
while [ $((n * BIG_MB)) -lt "$DATA_MB" ]; do
	n=$((n + 1))
	head -c $((BIG_MB * 1024 * 1024)) /dev/urandom >"$MNT/big/file$n" || fail "writing big/file$n"
done
i=0
while [ $i -lt 200 ]; do
	i=$((i + 1))
	# 1 byte to ~100 KiB: inline extents, partial pages, several extents
	head -c $((i * i * 2 + 1)) /dev/urandom >"$MNT/small/file$i" || fail "writing small/file$i"
done
sync
(cd "$MNT" && find . -type f | sort | xargs md5sum) >/tmp/demo.md5 || fail "md5sum"
NFILES=$(wc -l </tmp/demo.md5)
echo "$NFILES files written in $(since "$T") s, checksums in /tmp/demo.md5"
run btrfs filesystem df "$MNT"

# --- 3. add a device, convert ----------------------------------------------------
step "adding a 4th device"
run btrfs device add -f /dev/vdd "$MNT" || fail "device add"
run btrfs filesystem show "$MNT"

step "dry run: what converting data to raid1 would relocate (nothing moves)"
run "$BS" -n -dconvert=raid1 "$MNT" || fail "balance-status -n (dry run)"

step "balance: converting data from single to raid1 (progress every second)"
T_BAL=$(now)
echo "# btrfs balance start -dconvert=raid1 $MNT &"
btrfs balance start -dconvert=raid1 "$MNT" >/tmp/balance-start.log 2>&1 &
BPID=$!
paused=0
while :; do
	sleep 1
	poll
	start_watch
	if [ "$ST" = none ]; then
		break
	fi
	if [ "$ST" = running ]; then
		done_chunks=$(echo "$P" | awk '{ print $1 }')
		if [ "${done_chunks:-0}" -ge 1 ] 2>/dev/null ||
			awk -v t="$(since "$T_BAL")" -v lim="$PAUSE_AFTER" 'BEGIN { exit !(t >= lim) }'; then
			step "pausing the balance"
			run btrfs balance pause "$MNT" && paused=1
			break
		fi
	fi
done
wait "$BPID"
brc=$?
end_watch
echo "# balance start exited with status $brc: $(cat /tmp/balance-start.log)"
T_PAUSED=$(since "$T_BAL")
poll
PAUSED_AT=$P

if [ "$paused" = 1 ]; then
	run btrfs balance status "$MNT"
	[ "$ST" = paused ] || fail "balance not paused after 'btrfs balance pause' (state: $ST)"

	# --- 4. unmount with a paused balance ----------------------------------------
	step "unmounting: the paused balance is kept on disk"
	run umount "$MNT" || fail "umount"
	echo "# btrfs inspect-internal dump-tree -t root /dev/vda | grep BALANCE"
	btrfs inspect-internal dump-tree -t root /dev/vda | grep BALANCE ||
		fail "no balance item on disk after the pause"

	# --- 5. mount: the kernel resumes it -----------------------------------------
	step "mounting again: the kernel resumes the balance"
	T_RES=$(now)
	run mount /dev/vda "$MNT" || fail "mount"
	run btrfs balance status "$MNT"
	paused_for=0
	while :; do
		poll
		[ "$ST" = none ] && break
		start_watch
		if [ "$ST" = paused ]; then
			paused_for=$((paused_for + 1))
			[ $paused_for -lt 15 ] || fail "the kernel did not resume the balance"
		else
			paused_for=0
		fi
		sleep 1
	done
	end_watch
	echo "  [$(since "$T_RES") s] balance finished"
	T_RESUMED=$(since "$T_RES")
else
	echo "NOTE: the balance finished before it could be paused (${T_PAUSED} s):" \
		"the pause/resume part was not shown; DEMO_DATA_MB=400 makes it longer"
	[ "$brc" -eq 0 ] || fail "btrfs balance start failed (status $brc)"
fi
# What the kernel logged at the end; prefixed, so that it is not taken for
# one of the kernel's own console lines (the host hides those).
dmesg | grep 'balance: ended with status' | tail -n1 | sed 's/^/kernel log: /'

# --- 6. checks ------------------------------------------------------------------
step "result of the conversion"
run btrfs filesystem df "$MNT"
DF=$(btrfs filesystem df "$MNT")
echo "$DF" | grep -q '^Data, RAID1:' || fail "no raid1 data"
left=$(echo "$DF" | awk -F'[=,]' '/^Data, single:/ { print $5 }')
case "$left" in "" | 0.00B) ;; *) fail "data still in single chunks: $left" ;; esac

step "verifying every file (remounted first: the data is read from disk)"
run umount "$MNT" || fail "umount"
run mount /dev/vda "$MNT" || fail "mount"
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
T=$(now)
(cd "$MNT" && md5sum -c /tmp/demo.md5) >/tmp/verify.log 2>&1
vrc=$?
ok=$(grep -c ': OK$' /tmp/verify.log)
echo "$ok of $NFILES files OK ($(since "$T") s)"
if [ $vrc -ne 0 ] || [ "$ok" -ne "$NFILES" ]; then
	grep -v ': OK$' /tmp/verify.log | head -n 20
	fail "checksum mismatch"
fi

step "scrub: reads both copies of everything and checks them"
run btrfs scrub start -B "$MNT" || fail "scrub found errors"

step "final layout"
run btrfs filesystem show "$MNT"
run btrfs device usage "$MNT"
run umount "$MNT" || fail "umount"

step "btrfs check (userspace, unmounted, all 4 devices)"
run btrfs check --readonly /dev/vda || fail "btrfs check"

echo
echo "=== demo summary ==="
echo "filesystem:  3 devices (data single, metadata raid1), 4th device added"
echo "data:        $NFILES files, ~$DATA_MB MiB"
if [ "$paused" = 1 ]; then
	echo "balance:     -dconvert=raid1 paused after $T_PAUSED s at \"$PAUSED_AT\","
	echo "             unmounted, resumed by the kernel at mount, done $T_RESUMED s later"
else
	echo "balance:     -dconvert=raid1 finished in $T_PAUSED s (before the pause)"
fi
echo "verified:    all $NFILES checksums OK after the conversion; scrub and btrfs check clean"
echo "profiles:    $(echo "$DF" | awk -F: '!/GlobalReserve/ { printf "%s%s", sep, $1; sep = "; " }')"
echo "total time:  $(since "$T0") s"
echo "DEMO: PASS"
