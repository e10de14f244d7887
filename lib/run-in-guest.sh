#!/bin/sh
# Runs inside the test VM as /selftests/run-in-guest.sh (busybox sh; started
# by /init, see lib/guest-init.sh).  Runs every executable file of the folder
# it is in (/selftests), each printing TAP, in a fixed order: balance_test,
# then progs_test.sh, then the others in name order.  Only the files of the
# folder itself: the programs in its subfolders are not run, e.g. those of
# /selftests/crash, the two phases of a test that needs the machine killed
# in between (run_selftests.sh's crash stage).  With RESTRIPER_TESTS_DIR
# (restriper.tests=<dir> on the kernel command line) it runs the programs of
# that folder instead, in the same way.  Each test's output is framed by
#
#   === TAP BEGIN <name> ===
#   ...
#   === TAP END <name> rc=<exit status> ===
#
# Environment of the tests:
#   BTRFS_TEST_DEVS   the virtio disks, in order ("/dev/vda /dev/vdb ...")
#   BTRFS_TEST_MNT    an empty directory to mount on (/mnt/test)
#   RESTRIPER_TEST_TIMEOUT  if set (> 0): a test running longer is killed
#                     (restriper.test_timeout=<s> on the kernel command line)
# The working directory is the folder of the tests (/selftests).
#
# Exit status: 0 when every test exited 0 or 4 (KSFT_SKIP), else 1.

SELF=$(basename "$0")
DIR=$(cd "${RESTRIPER_TESTS_DIR:-$(dirname "$0")}" && pwd) || {
	echo "run-in-guest: no folder ${RESTRIPER_TESTS_DIR:-}"
	exit 1
}

devs=
for d in /dev/vd[a-z]; do
	[ -b "$d" ] && devs="$devs $d"
done
BTRFS_TEST_DEVS=${devs# }
BTRFS_TEST_MNT=/mnt/test
export BTRFS_TEST_DEVS BTRFS_TEST_MNT
mkdir -p "$BTRFS_TEST_MNT"

# The order: the known tests first, then the rest by name.
tests=
for name in balance_test progs_test.sh $(cd "$DIR" && LC_ALL=C ls); do
	case " $tests " in *" $name "*) continue ;; esac
	[ "$name" = "$SELF" ] && continue
	if [ -f "$DIR/$name" ] && [ -x "$DIR/$name" ]; then
		tests="$tests $name"
	fi
done

echo "run-in-guest: BTRFS_TEST_DEVS=\"$BTRFS_TEST_DEVS\" BTRFS_TEST_MNT=$BTRFS_TEST_MNT"
[ -z "${RESTRIPER_TESTS_DIR:-}" ] || echo "run-in-guest: the tests of $DIR"
if [ -z "$tests" ]; then
	echo "run-in-guest: no executable test in $DIR"
	exit 1
fi
echo "run-in-guest: tests:$tests"

failed=0
count=0
for name in $tests; do
	count=$((count + 1))
	echo "=== TAP BEGIN $name ==="
	start=$(cut -d' ' -f1 /proc/uptime)
	if [ "${RESTRIPER_TEST_TIMEOUT:-0}" -gt 0 ] 2>/dev/null; then
		(cd "$DIR" && exec timeout -s KILL "$RESTRIPER_TEST_TIMEOUT" "./$name") </dev/null 2>&1
	else
		(cd "$DIR" && exec "./$name") </dev/null 2>&1
	fi
	rc=$?
	end=$(cut -d' ' -f1 /proc/uptime)
	echo "=== TAP END $name rc=$rc ==="
	echo "run-in-guest: $name: exit status $rc after $(awk "BEGIN { printf \"%.1f\", $end - $start }") s"
	case $rc in
	0 | 4) ;; # 4: KSFT_SKIP
	*) failed=$((failed + 1)) ;;
	esac
	# A test that left the mount point in use would break the next one.
	if awk -v m="$BTRFS_TEST_MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; then
		echo "run-in-guest: $name left $BTRFS_TEST_MNT mounted: unmounting it"
		umount "$BTRFS_TEST_MNT" || echo "run-in-guest: umount $BTRFS_TEST_MNT failed"
	fi
done

echo "run-in-guest: $count test program(s), $failed failed"
[ "$failed" -eq 0 ]
