#!/bin/sh
# The guest side of ./run_compat.sh: one boot of a scenario in which two
# kernels (the series and the unpatched base) take turns with one balance on
# three disks.  The boot's phase comes from restriper.compat_phase=:
#
#   start   a new filesystem (data single, metadata raid1, 10 files of
#           32 MiB with their sha256 in SUMS), "btrfs balance start
#           -dconvert=raid1 --bg", paused once its first chunk is relocated,
#           unmounted: the balance item stays on disk
#   resume  mount: the kernel resumes the balance by itself; wait for its
#           end, then verify
#   step    mount (the balance resumes), pause it once it relocated a chunk,
#           unmount
#   stale   mount -o skip_balance: the log must say that the item's counts
#           are ignored (a kernel without them relocated chunks since they
#           were written); "btrfs balance resume", then verify
#   kept    the same, but the log must not say it (nothing relocated them)
#
# verify: every file reads back right, no data chunk is left single, no
# balance is left, scrub finds no error, and after the unmount "btrfs check
# --readonly --check-data-csum" passes.
#
# TAP between "=== TAP BEGIN compat ===" and "=== TAP END compat rc=N ===";
# exit status 0 when every check passed.

MNT=/mnt/compat
PHASE=
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	restriper.compat_phase=*) PHASE=${arg#restriper.compat_phase=} ;;
	esac
done
# How long a balance may take to relocate a chunk or to finish (emulation
# is slow; this only catches a hang).
WAIT_S=600
STALE_LINE='ignoring the counts of the balance item'

N=0
FAILED=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
not_ok() { N=$((N + 1)); FAILED=$((FAILED + 1)); echo "not ok $N - $*"; }
# check DESCRIPTION CMD...: one result, from CMD's exit status.
check() {
	desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}
finish() {
	echo "1..$N"
	echo "=== TAP END compat rc=$FAILED ==="
	[ "$FAILED" = 0 ]
	exit $?
}
# bail WHY: a step the next ones need failed.
bail() {
	not_ok "$*"
	finish
}

# mount_fs [OPTIONS]: the three devices are scanned first (no udev here).
mount_fs() {
	btrfs device scan /dev/vda /dev/vdb /dev/vdc >/dev/null &&
		mount ${1:+-o "$1"} /dev/vda "$MNT"
}

relocations() { dmesg | grep -c 'relocating block group'; }
state() {
	case "$(btrfs balance status "$MNT" 2>&1 | head -n1)" in
	*"is running"*) echo running ;;
	*"is paused"*) echo paused ;;
	*"No balance found"*) echo none ;;
	*) echo unknown ;;
	esac
}

# pause_after_one_chunk: once this boot's balance has relocated a chunk
# (the log names a second one), pause it.
pause_after_one_chunk() {
	first=$(relocations)
	t=0
	while [ "$(relocations)" -lt $((first + 2)) ]; do
		[ "$(state)" = running ] || [ "$t" -lt 50 ] ||
			bail "the balance ended before a chunk was relocated: nothing to pause ($(state))"
		[ "$t" -lt $((WAIT_S * 10)) ] || bail "no chunk relocated in $WAIT_S s"
		sleep 0.1
		t=$((t + 1))
	done
	btrfs balance pause "$MNT"
	check "paused after $(( $(relocations) - first - 1 )) chunk(s) relocated in this boot" \
		[ "$(state)" = paused ]
}

wait_balance_end() {
	t=0
	while [ "$(state)" = running ] && [ "$t" -lt "$WAIT_S" ]; do
		sleep 1
		t=$((t + 1))
	done
	check "the balance ended ($t s)" [ "$(state)" = none ]
}

no_single_data() { ! btrfs filesystem df "$MNT" | grep -q '^Data, single'; }
sums_match() { (cd "$MNT" && sha256sum -c SUMS >/dev/null); }

verify() {
	btrfs filesystem df "$MNT"
	check "every file reads back right" sums_match
	check "no data chunk is left single" no_single_data
	check "no balance is left" [ "$(state)" = none ]
	check "scrub finds no error" btrfs scrub start -Bd "$MNT"
	umount "$MNT" || bail "umount failed"
	check "btrfs check --check-data-csum passes" \
		btrfs check --readonly --check-data-csum /dev/vda
}

make_fs() {
	mkfs.btrfs -q -f -d single -m raid1 /dev/vda /dev/vdb /dev/vdc ||
		bail "mkfs.btrfs failed"
	mount_fs || bail "mount failed"
	for i in 1 2 3 4 5 6 7 8 9 10; do
		dd if=/dev/urandom of="$MNT/f$i" bs=1M count=32 2>/dev/null
		sync
	done
	(cd "$MNT" && sha256sum f* >SUMS) || bail "sha256sum failed"
	sync
	btrfs filesystem df "$MNT"
}

echo "=== TAP BEGIN compat ==="
echo "# phase $PHASE on $(uname -r)"
mkdir -p "$MNT"
case "$PHASE" in
start)
	make_fs
	btrfs balance start -dconvert=raid1 --bg "$MNT" ||
		bail "btrfs balance start failed"
	pause_after_one_chunk
	umount "$MNT" || bail "umount failed"
	;;
resume)
	mount_fs || bail "mount failed"
	wait_balance_end
	verify
	;;
step)
	mount_fs || bail "mount failed"
	pause_after_one_chunk
	umount "$MNT" || bail "umount failed"
	;;
stale | kept)
	mount_fs skip_balance || bail "mount failed"
	check "the balance is paused" [ "$(state)" = paused ]
	btrfs balance status -v "$MNT"
	if [ "$PHASE" = stale ]; then
		check "the log says the item's counts are ignored" \
			sh -c "dmesg | grep -q '$STALE_LINE'"
	else
		check "the log does not say the item's counts are ignored" \
			sh -c "! dmesg | grep -q '$STALE_LINE'"
	fi
	check "btrfs balance resume finishes it" btrfs balance resume "$MNT"
	verify
	;;
*)
	bail "unknown phase '$PHASE' (restriper.compat_phase=)"
	;;
esac
dmesg | grep -i 'balance' | tail -n 20 | sed 's/^/# /'
finish
