#!/bin/sh
# "btrfs balance start -musage=50" on a nearly full filesystem with one
# metadata profile, on whatever kernel the VM booted: the unpatched base or
# the series (bench/usage-full-fs.sh boots both and compares).  Runs in the
# VM as /selftests/usage-full-fs-in-guest.sh (busybox sh), with
# /selftests/bg_list (bench/bg_list.c: block groups and devices, live).
#
# The layout, on /dev/vda, /dev/vdb, /dev/vdc (the same on every kernel: no
# randomness but the seed's):
#   1. mkfs.btrfs -b SIZE -d single -m raid1 on the three disks (mounted
#      without enospc_debug: its space info dumps use up btrfs' rate limit
#      of info messages, and the balance's end lines would be dropped);
#   2. FILES inline files of 2000 bytes, PERDIR to a directory: metadata
#      grows to several raid1 chunks;
#   3. data written until ENOSPC (dd, again after a sync, up to 6 rounds,
#      until no device has more than 2 MiB unallocated);
#   4. whole directories deleted, in an order drawn from SEED, one at a time
#      (each followed by a sync), until the top metadata chunk X (the
#      balance relocates from the top down, so X comes first) is under 50%
#      used and the other metadata chunks have W >= TARGET bytes free beyond
#      its used bytes (W = their free bytes - X's used bytes; TARGET
#      defaults to twice the global reserve R, as btrfs filesystem usage
#      reports it: measured, X's relocation fails with ENOSPC at W = 1.76 R
#      and succeeds at W = 1.96 R, on the base and the series alike, so by
#      default the first chunk just fits).  With W under R, the first version of the
#      room check (before it was limited to types with two profiles or more)
#      skipped X;
#   5. data written again (a metadata chunk emptied by the deletes may
#      have been removed), sync;
#   6. the layout: every block group (bg_list) and btrfs filesystem usage -b;
#   7. "btrfs balance start -musage=50 MNT" (btrfs-progs also gives the
#      system chunks the metadata filter), its exit status and output;
#   8. the layout again, the kernel log of the balance.
#
# usagefull.phase=layout does steps 1-5 and unmounts; usagefull.phase=balance
# mounts what an earlier boot left on the disks and does steps 6-8: so that
# each kernel balances a copy of the same images (bench/usage-full-fs.sh
# makes the layout once, on the base kernel).  Default: all steps.
#
# Kernel command line (all optional):
#   usagefull.kernel=LABEL   the kernel's name in the output (base, series)
#   usagefull.seed=N         the order of the deletes (default 1)
#   usagefull.size=SIZE      of each device, mkfs -b (default 160M: raid1
#                            metadata chunks of 48 MiB, 10% of the 480 MiB)
#   usagefull.files=N        (default 40000)
#   usagefull.perdir=N       (default 500)
#   usagefull.target_pct=P   TARGET of step 4 as P% of R (default 200)
#   usagefull.target=BYTES   TARGET of step 4 in bytes (overrides the above)
#   usagefull.phase=PHASE    layout, balance or all (default all)
#   usagefull.maxdel=PCT     never delete more than PCT% of the directories
#                            (default 70)
#
# Output: "# ..." progress lines, "BG ..."/"DEV ..." layouts between
# "== <stage>" headers, "KLOG: <line>" for the kernel's balance lines, and
# the result line
#   # usage-full-fs: kernel=<uname -r> label=<LABEL> status=<balance exit> relocated_meta=<n> considered=<n> enospc=<n> skipped=<n> ...
# (the fields after skipped: see the end of this script), then
# "USAGEFULL DONE status=<n>".  Exit status 0 when the layout was made and
# the balance ran (whatever it returned), 2 when the set-up failed.
MNT=/mnt/usagefull
BG=/selftests/bg_list
DEVS="/dev/vda /dev/vdb /dev/vdc"
LABEL=unknown SEED=1 SIZE=160M FILES=40000 PERDIR=500 TARGET='' MAXDEL=70
TARGET_PCT=200 PHASE=all
FSIZE=2000
MIB=1048576

set -f
# shellcheck disable=SC2013 # words, not lines
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	usagefull.kernel=*) LABEL=${arg#*=} ;;
	usagefull.seed=*) SEED=${arg#*=} ;;
	usagefull.size=*) SIZE=${arg#*=} ;;
	usagefull.files=*) FILES=${arg#*=} ;;
	usagefull.perdir=*) PERDIR=${arg#*=} ;;
	usagefull.target=*) TARGET=${arg#*=} ;;
	usagefull.target_pct=*) TARGET_PCT=${arg#*=} ;;
	usagefull.phase=*) PHASE=${arg#*=} ;;
	usagefull.maxdel=*) MAXDEL=${arg#*=} ;;
	esac
done
set +f
case "$PHASE" in layout | balance | all) ;; *) PHASE=all ;; esac

now() { cut -d' ' -f1 /proc/uptime; }
T0=$(now)
say() { echo "# [$(awk -v a="$T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s] $*"; }
fail() {
	echo "SETUP FAILED: $*"
	echo "# usage-full-fs: kernel=$(uname -r) label=$LABEL status=setup-failed"
	echo "USAGEFULL DONE status=2"
	exit 2
}

# layout FILE: the block groups and devices now, into FILE and the output.
layout() {
	$BG $MNT >"$1" || fail "bg_list $MNT"
	cat "$1"
}

# The numbers of a layout file, as shell assignments:
#   meta_n meta_profiles meta_low (metadata chunks under 50% used)
#   x_start x_len x_used x_pct (the top metadata chunk)
#   f_others (free bytes of the other metadata chunks)
#   sys_n sys_low unalloc_max unalloc_sum
numbers() {
	awk '
		function v(k,  i, a) {
			for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == k) return a[2] }
			return ""
		}
		/^BG / && v("type") == "metadata" {
			n++; s[n] = v("start") + 0; l[n] = v("length") + 0; u[n] = v("used") + 0
			if (!(v("profile") in prof)) { prof[v("profile")] = 1; np++ }
			if (u[n] * 100 < l[n] * 50) low++
		}
		/^BG / && v("type") == "system" {
			sn++
			if (v("used") * 100 < v("length") * 50) slow++
		}
		/^DEV / {
			ua = v("unallocated") + 0; sum += ua
			if (ua > max) max = ua
		}
		END {
			xi = 0
			for (i = 1; i <= n; i++) if (!xi || s[i] > s[xi]) xi = i
			f = 0
			for (i = 1; i <= n; i++) if (i != xi) f += l[i] - u[i]
			printf "meta_n=%d meta_profiles=%d meta_low=%d ", n, np, low
			printf "x_start=%.0f x_len=%.0f x_used=%.0f x_pct=%d f_others=%.0f ", \
				s[xi], l[xi], u[xi], (l[xi] ? u[xi] * 100 / l[xi] : 0), f
			printf "sys_n=%d sys_low=%d unalloc_max=%.0f unalloc_sum=%.0f\n", sn, slow, max, sum
		}
	' "$1"
}

# fill_data: write data until ENOSPC, until no device has over 2 MiB
# unallocated (6 rounds at most).
FILL_ROUND=0
meta_n=0 meta_profiles=0 meta_low=0 x_start=0 x_len=0 x_used=0 x_pct=0 f_others=0
sys_n=0 sys_low=0 unalloc_max=0 unalloc_sum=0
fill_data() {
	r=0
	while [ $r -lt 6 ]; do
		dd if=/dev/zero of=$MNT/data/fill$FILL_ROUND bs=1M 2>/dev/null
		FILL_ROUND=$((FILL_ROUND + 1))
		sync
		$BG $MNT >/tmp/fill.txt || fail "bg_list $MNT"
		eval "$(numbers /tmp/fill.txt)"
		[ "$unalloc_max" -gt $((2 * MIB)) ] || return 0
		r=$((r + 1))
	done
}

# make_layout: steps 1-5.
make_layout() {
	# --- 1. the filesystem ------------------------------------------------
	# shellcheck disable=SC2086 # three devices
	mkfs.btrfs -q -f -b "$SIZE" -d single -m raid1 $DEVS >/tmp/mkfs.out 2>&1 ||
		{ cat /tmp/mkfs.out; fail "mkfs.btrfs"; }
	mount /dev/vda $MNT || fail "mount"
	mkdir $MNT/data $MNT/meta || fail "mkdir"

	# --- 2. metadata: inline files ------------------------------------------
	payload=$(head -c $FSIZE /dev/zero | tr '\0' x)
	ndirs=$(((FILES + PERDIR - 1) / PERDIR))
	d=0 n=0
	while [ $d -lt $ndirs ]; do
		mkdir $MNT/meta/d$d || fail "mkdir d$d"
		i=0
		while [ $i -lt "$PERDIR" ] && [ $n -lt "$FILES" ]; do
			echo "$payload" >$MNT/meta/d$d/f$i || fail "file d$d/f$i"
			i=$((i + 1))
			n=$((n + 1))
		done
		d=$((d + 1))
	done
	sync
	say "$n files in $ndirs directories"
	echo "== after the files"
	layout /tmp/l-files.txt

	# --- 3. data: the rest of the devices ----------------------------------
	fill_data
	say "data written ($FILL_ROUND rounds)"
	echo "== after the data"
	layout /tmp/l-data.txt

	# --- 4. deletes, until the top metadata chunk can just be relocated ---
	R=$(btrfs filesystem usage -b $MNT | awk '/Global reserve:/ { print $3 }')
	[ -n "$R" ] || fail "no global reserve in btrfs filesystem usage"
	[ -n "$TARGET" ] || TARGET=$((R * TARGET_PCT / 100))
	say "global reserve R = $R bytes; deleting directories until W >= $TARGET and the top metadata chunk is under 50% used"
	awk -v s="$SEED" -v n="$ndirs" 'BEGIN {
		srand(s)
		for (i = 0; i < n; i++) o[i] = i
		for (i = n - 1; i > 0; i--) { j = int(rand() * (i + 1)); t = o[i]; o[i] = o[j]; o[j] = t }
		for (i = 0; i < n; i++) print o[i]
	}' >/tmp/order
	deleted=0 reached=no
	maxdel=$((ndirs * MAXDEL / 100))
	eval "$(numbers /tmp/l-data.txt)"
	# shellcheck disable=SC2013 # one number a line
	for d in $(cat /tmp/order); do
		if [ $((f_others - x_used)) -ge "$TARGET" ] && [ "$x_pct" -lt 50 ]; then
			reached=yes
			break
		fi
		[ $deleted -lt $maxdel ] || break
		rm -rf "$MNT/meta/d$d"
		sync
		deleted=$((deleted + 1))
		$BG $MNT >/tmp/del.txt || fail "bg_list $MNT"
		eval "$(numbers /tmp/del.txt)"
	done
	say "deleted $deleted of $ndirs directories; W = $((f_others - x_used)) bytes (target $TARGET, reached: $reached)"

	# --- 5. data again ------------------------------------------------------
	fill_data
	sync
	# The cleaner removes emptied block groups after a commit: give it one.
	sleep 1
	sync
}

# mount_layout: mount what an earlier boot made (phase balance).
mount_layout() {
	btrfs device scan >/dev/null 2>&1
	mount /dev/vda $MNT || fail "mount (the layout of an earlier boot)"
	# What the mount starts (the cleaner, the free space tree) settles.
	sleep 1
	sync
	R=$(btrfs filesystem usage -b $MNT | awk '/Global reserve:/ { print $3 }')
	[ -n "$R" ] || fail "no global reserve in btrfs filesystem usage"
}

mkdir -p $MNT
deleted='-' ndirs='-'
if [ "$PHASE" = balance ]; then
	echo "# usage-full-fs: $(uname -r), label $LABEL, phase balance: the layout an earlier boot left on the disks"
	mount_layout
else
	echo "# usage-full-fs: $(uname -r), label $LABEL, phase $PHASE, seed $SEED, 3 x $SIZE, $FILES files of $FSIZE bytes, $PERDIR per directory"
	make_layout
fi
if [ "$PHASE" = layout ]; then
	echo "== the layout"
	layout /tmp/l-layout.txt
	eval "$(numbers /tmp/l-layout.txt)"
	echo "# usage-full-fs-layout: kernel=$(uname -r) label=$LABEL meta_chunks=$meta_n" \
		"meta_profiles=$meta_profiles considered=$meta_low top_pct=$x_pct" \
		"w=$((f_others - x_used)) reserve=$R target=$TARGET reached=$reached" \
		"deleted_dirs=$deleted/$ndirs unalloc=$unalloc_sum"
	umount $MNT || fail "umount"
	echo "USAGEFULL DONE status=0"
	exit 0
fi

# --- 6. the layout ----------------------------------------------------------------
echo "== before the balance"
layout /tmp/l-before.txt
btrfs filesystem usage -b $MNT
eval "$(numbers /tmp/l-before.txt)"
B_META_N=$meta_n B_PROFILES=$meta_profiles B_LOW=$meta_low B_SYS_LOW=$sys_low
B_X_START=$x_start B_X_LEN=$x_len B_X_USED=$x_used B_X_PCT=$x_pct B_SYS_N=$sys_n B_W=$((f_others - x_used))
B_UNALLOC_MAX=$unalloc_max B_UNALLOC_SUM=$unalloc_sum
if [ "$B_W" -lt "$R" ] && [ "$B_UNALLOC_MAX" -le $((2 * MIB)) ]; then
	OLD_CHECK_SKIPS=yes
else
	OLD_CHECK_SKIPS=no
fi
say "metadata: $B_META_N chunks, $B_PROFILES profile(s), $B_LOW under 50% used; top chunk $B_X_START ${B_X_PCT}% used, W = $B_W (R = $R): the first version of the room check would skip it: $OLD_CHECK_SKIPS"

# --- 7. the balance -----------------------------------------------------------
dmesg -c >/dev/null
TB=$(now)
btrfs balance start -musage=50 $MNT >/tmp/balance.out 2>&1
rc=$?
TE=$(now)
say "btrfs balance start -musage=50 $MNT: exit $rc after $(awk -v a="$TB" -v b="$TE" 'BEGIN { printf "%.2f", b - a }') s"
sed 's/^/  | /' /tmp/balance.out
dmesg >/tmp/balance.dmesg
sync

# --- 8. after ---------------------------------------------------------------------
echo "== after the balance"
layout /tmp/l-after.txt
btrfs filesystem usage -b $MNT
eval "$(numbers /tmp/l-after.txt)"
grep -E 'balance|relocat|enospc|skipping|unable to make block group|BTRFS (warning|error|critical)|WARNING|forced readonly|Transaction aborted' \
	/tmp/balance.dmesg | sed 's/^\[ *[0-9.]*\] //; s/^/KLOG: /'

# The block groups of TYPE in $1 that are not in $2: relocated.
gone() {
	awk -v t="$3" '
		FNR == NR { if ($0 ~ "type=" t " ") after[$2] = 1; next }
		$0 ~ "type=" t " " && !($2 in after) { n++ }
		END { print n + 0 }
	' "$2" "$1"
}
relocated_meta=$(gone /tmp/l-before.txt /tmp/l-after.txt metadata)
relocated_sys=$(gone /tmp/l-before.txt /tmp/l-after.txt system)
lines_meta=$(grep -c 'relocating block group [0-9]* flags metadata' /tmp/balance.dmesg)
lines_sys=$(grep -c 'relocating block group [0-9]* flags system' /tmp/balance.dmesg)
enospc=$(sed -n 's/.* \([0-9]*\) enospc errors during balance.*/\1/p' /tmp/balance.dmesg | tail -n 1)
skipped=$(grep -c 'balance: skipping block group' /tmp/balance.dmesg)
not_ro=$(grep -c 'unable to make block group [0-9]* ro' /tmp/balance.dmesg)
ended=$(sed -n 's/.*balance: ended with status: \(-*[0-9]*\).*/\1/p' /tmp/balance.dmesg | tail -n 1)
aborted=$(grep -c -E 'Transaction aborted|forced readonly|BTRFS critical' /tmp/balance.dmesg)
# The result line:
#   status            exit status of "btrfs balance start"
#   relocated_meta    metadata block groups of before the balance that are
#                     gone after it: relocated (a chunk whose relocation
#                     failed stays)
#   considered        metadata block groups under 50% used before the
#                     balance (the filter's candidates; a relocation into a
#                     candidate below can lift it over 50% before the walk
#                     reaches it)
#   enospc            the kernel's "N enospc errors during balance" (0: none)
#   skipped           the series' "balance: skipping block group" lines
#   relocated_sys, considered_sys   the same for system block groups
#   reloc_lines_meta, reloc_lines_sys   "relocating block group" lines: the
#                     relocations started (their chunk went read-only)
#   not_ro            "unable to make block group N ro" lines (enospc_debug
#                     only: 0 here)
#   ended             the "balance: ended with status" value, none if absent
#   aborts            transaction aborts, forced read-only, BTRFS critical
#   meta_chunks, meta_chunks_after, meta_profiles, sys_chunks   the layout
#   top_start, top_len, top_used, top_pct   the top metadata chunk, which
#                     the walk reaches first
#   w, reserve        W and R of step 4, before the balance
#   old_check_skips_top   yes when W < R on full devices: the first version
#                     of the room check would have skipped the top chunk
#   unalloc_before, unalloc_after   unallocated bytes of all devices
#   deleted_dirs      directories deleted in step 4, of all
echo "# usage-full-fs: kernel=$(uname -r) label=$LABEL status=$rc relocated_meta=$relocated_meta" \
	"considered=$B_LOW enospc=${enospc:-0} skipped=$skipped relocated_sys=$relocated_sys" \
	"considered_sys=$B_SYS_LOW reloc_lines_meta=$lines_meta reloc_lines_sys=$lines_sys" \
	"not_ro=$not_ro ended=${ended:-none} aborts=$aborted meta_chunks=$B_META_N" \
	"meta_chunks_after=$meta_n meta_profiles=$B_PROFILES sys_chunks=$B_SYS_N top_start=$B_X_START" \
	"top_len=$B_X_LEN top_used=$B_X_USED top_pct=$B_X_PCT w=$B_W reserve=$R" \
	"old_check_skips_top=$OLD_CHECK_SKIPS unalloc_before=$B_UNALLOC_SUM unalloc_after=$unalloc_sum" \
	"deleted_dirs=$deleted/$ndirs"
umount $MNT || echo "umount failed"
echo "USAGEFULL DONE status=0"
exit 0
