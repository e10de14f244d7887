#!/usr/bin/env bash
# Boot a kernel + initramfs (lib/make-initramfs.sh) in QEMU with N empty
# virtio disks and collect what the guest reports.
#
#   lib/run-vm.sh --kernel BZIMAGE --initrd CPIO --log DIR [options]
#
#   --disks N          number of virtio disks (default 4): DIR/vda.img, ... are
#                      made anew (sparse), the guest sees /dev/vda, ...
#   --disk-size SIZE   size of each (truncate syntax, default 1G)
#   --disk-dir DDIR    the images are DDIR/vda.img, ... (default: DIR)
#   --reuse-disks      boot with the images in DDIR as they are (an earlier
#                      run's: they must all exist), instead of new ones
#   --kill-on STRING   kill QEMU (SIGKILL: no shutdown, nothing flushed by
#                      the guest) as soon as a console line contains STRING;
#                      the console up to there is in console.log
#   --kill-count K     ... at the K-th console line containing STRING
#                      (default 1)
#   --kill-delay MS    ... MS milliseconds after that line (default 0); the
#                      console is recorded until then
#   --timeout SECS     kill QEMU after SECS seconds (default 900)
#   --append ARGS      more kernel command line (repeatable), e.g.
#                      "restriper.run=/selftests/demo-in-guest.sh"
#   --mem SIZE         guest memory (default 2G)
#   --accel auto|kvm|tcg  (default: $RESTRIPER_VM_ACCEL, else auto: KVM when
#                      this kernel boots under it to its initramfs within
#                      30 s, else TCG; decided once per kernel image)
#   --check-images     afterwards, "btrfs check --readonly" every filesystem
#                      found on the disk images (host side, userspace only)
#   --show all|guest|none  what of the console to show on stdout: all of it,
#                      the guest's own lines (from "=== GUEST START", without
#                      the kernel's messages and the kernel log dump), or
#                      nothing (default: guest; all with -v or
#                      RESTRIPER_VERBOSE=1).  console.log has it all anyway.
#   -v                 --show all
#
# Writes DIR/console.log (the serial console, shown on stdout as --show says),
# DIR/dmesg.log (the kernel log the guest printed at the end; when the guest
# did not get that far: the kernel lines of the console), DIR/vm-result.txt
# (key=value: guest_status, timed_out, panic, images_checked, images_failed,
# ...) and, with --check-images, DIR/check-<fsid>.log.
#
# Exit status: the guest's (its "=== GUEST EXIT n ===" line) when it finished,
# else 124 when the timeout killed it, 125 after a kernel panic, 126 when QEMU
# ended without an exit line; 123 when the guest passed but an image check
# failed.  With --kill-on: 0 when QEMU was killed on STRING (and the images
# passed their check); otherwise as above, but 121 instead of 0 (the guest
# finished without printing STRING).
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/common.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

KERNEL='' INITRD='' LOG='' DISKS=4 DISK_SIZE=1G TIMEOUT=900 MEM=2G CHECK=0
DISK_DIR='' REUSE=0 KILL_ON='' KILL_COUNT=1 KILL_DELAY=0
SHOW=guest
[ "$VERBOSE" != 1 ] || SHOW=all
ACCEL_MODE=${RESTRIPER_VM_ACCEL:-auto}
APPEND=()
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) KERNEL=$2; shift 2 ;;
	--initrd) INITRD=$2; shift 2 ;;
	--log) LOG=$2; shift 2 ;;
	--disks) DISKS=$2; shift 2 ;;
	--disk-size) DISK_SIZE=$2; shift 2 ;;
	--disk-dir) DISK_DIR=$2; shift 2 ;;
	--reuse-disks) REUSE=1; shift ;;
	--kill-on) KILL_ON=$2; shift 2 ;;
	--kill-count) KILL_COUNT=$2; shift 2 ;;
	--kill-delay) KILL_DELAY=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--append) APPEND+=("$2"); shift 2 ;;
	--mem) MEM=$2; shift 2 ;;
	--accel) ACCEL_MODE=$2; shift 2 ;;
	--check-images) CHECK=1; shift ;;
	--show) SHOW=$2; shift 2 ;;
	-v) SHOW=all; shift ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
if [ -z "$KERNEL" ] || [ -z "$INITRD" ] || [ -z "$LOG" ]; then usage 2; fi
[ -f "$KERNEL" ] || die "no kernel $KERNEL"
[ -f "$INITRD" ] || die "no initramfs $INITRD"
[[ "$DISKS" =~ ^([0-9]|1[0-9]|2[0-6])$ ]] || die "--disks: 0 to 26, not $DISKS"
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout: seconds, not $TIMEOUT"
[[ "$KILL_COUNT" =~ ^[1-9][0-9]*$ ]] || die "--kill-count: a number from 1, not $KILL_COUNT"
[[ "$KILL_DELAY" =~ ^[0-9]+$ ]] || die "--kill-delay: milliseconds, not $KILL_DELAY"
case "$SHOW" in all | guest | none) ;; *) die "--show: all, guest or none, not $SHOW" ;; esac

ensure_packages qemu-system-x86 coreutils
[ "$CHECK" = 0 ] || ensure_packages btrfs-progs util-linux

mkdir -p "$LOG"
LOG=$(cd "$LOG" && pwd)
[ -n "$DISK_DIR" ] || DISK_DIR=$LOG
mkdir -p "$DISK_DIR"
DISK_DIR=$(cd "$DISK_DIR" && pwd)
case "$DISK_DIR" in *,*) die "the disk folder must not contain a comma (QEMU -drive syntax): $DISK_DIR" ;; esac

# --- disks ----------------------------------------------------------------
IMAGES=()
DRIVES=()
letters=abcdefghijklmnopqrstuvwxyz
for ((i = 0; i < DISKS; i++)); do
	img=$DISK_DIR/vd${letters:i:1}.img
	if [ "$REUSE" = 1 ]; then
		[ -f "$img" ] || die "--reuse-disks: $img does not exist"
	else
		rm -f "$img"
		truncate -s "$DISK_SIZE" "$img"
	fi
	IMAGES+=("$img")
	# cache=unsafe: the guest's flushes are not forwarded (fast); what it
	# wrote is still in the image once QEMU has exited.
	DRIVES+=(-drive "file=$img,if=virtio,format=raw,cache=unsafe")
done

# --- accelerator ----------------------------------------------------------
CPU=max
# kvm_boots: does this kernel boot under KVM with this CPU model?  /dev/kvm
# may open, and a tiny probe may even run, while the kernel itself stops at
# a KVM "emulation failure" (nested virtualization: seen on an xrstor in
# its first boot lines).  So boot the kernel and initramfs of the run with
# busybox sh as init, which prints a marker and powers off; no marker
# within 30 s means no.  The answer is kept per kernel image and QEMU
# version ($CACHE/vm-accel/), so that the runs after the first do not boot
# twice.  Sets ACCEL_WHY.
ACCEL_MARKER=RESTRIPER-KVM-BOOTED
kvm_boots() {
	local key file out rc=0
	ACCEL_WHY=''
	if ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
		ACCEL_WHY='no usable /dev/kvm'
		return 1
	fi
	key=$({ sha256sum <"$KERNEL"; qemu-system-x86_64 --version; echo "$CPU"; } | sha256sum | cut -c1-16)
	file=$CACHE/vm-accel/$key
	if [ -f "$file" ]; then
		ACCEL_WHY="$(sed -n 2p "$file") (decided earlier for this kernel: $file)"
		[ "$(sed -n 1p "$file")" = kvm ]
		return
	fi
	mkdir -p "$CACHE/vm-accel"
	out=$(mktemp)
	# In a subshell with stderr kept apart: a QEMU that aborts makes bash
	# print "Aborted ..." otherwise.
	(timeout 30 qemu-system-x86_64 -accel kvm -cpu "$CPU" -m 256 -smp 1 \
		-nographic -no-reboot -vga none -nic none \
		-kernel "$KERNEL" -initrd "$INITRD" \
		-append "console=ttyS0 panic=-1 kunit.enable=0 rdinit=/bin/sh -- -c \"echo $ACCEL_MARKER; poweroff -f\"" \
		</dev/null >"$out" 2>&1) || rc=$?
	if grep -q "^$ACCEL_MARKER" "$out"; then
		printf 'kvm\nthe kernel booted under KVM\n' >"$file"
		ACCEL_WHY='the kernel booted under KVM'
	else
		ACCEL_WHY="KVM could not boot the kernel ($( (grep -m1 -io 'emulation failure\|KVM internal error\|failed to initialize kvm[^.]*' "$out" || echo "no marker within 30 s, status $rc") | head -n1))"
		printf 'tcg\n%s\n' "$ACCEL_WHY" >"$file"
	fi
	rm -f "$out"
	[ "$(sed -n 1p "$file")" = kvm ]
}

case "$ACCEL_MODE" in
auto) if kvm_boots; then ACCEL=kvm; else ACCEL=tcg; fi ;;
kvm | tcg) ACCEL=$ACCEL_MODE ACCEL_WHY="forced (--accel or RESTRIPER_VM_ACCEL)" ;;
*) die "--accel: auto, kvm or tcg, not $ACCEL_MODE" ;;
esac

# kunit.enable=0: the gate's kernel has the KUnit suites built in
# (ci/gate.sh runs them with kunit.py); here they would run at every boot.
# A kernel without KUnit ignores the unknown module parameter.
# A log buffer that holds a whole run: dmesg.log is scanned from boot on.
CMDLINE="console=ttyS0 panic=-1 oops=panic kunit.enable=0 log_buf_len=16M ${APPEND[*]}"
PIDFILE=$LOG/qemu.pid
KILLED_FILE=$LOG/killed-on-marker
rm -f "$PIDFILE" "$KILLED_FILE"
QEMU=(qemu-system-x86_64 -m "$MEM" -smp 2 -cpu "$CPU" -accel "$ACCEL"
	-nographic -no-reboot -vga none -nic none -pidfile "$PIDFILE"
	-kernel "$KERNEL" -initrd "$INITRD" -append "$CMDLINE"
	"${DRIVES[@]}")
printf '%q ' "${QEMU[@]}" >"$LOG/qemu-cmdline.txt"
echo >>"$LOG/qemu-cmdline.txt"
log "booting $(basename "$KERNEL") with $DISKS x $DISK_SIZE disks, timeout ${TIMEOUT}s, accel $ACCEL: $ACCEL_WHY"
log "command line: $CMDLINE"
[ "$REUSE" = 0 ] || log "disks: the images in $DISK_DIR as they are"
[ -z "$KILL_ON" ] || log "QEMU is killed $KILL_DELAY ms after console line $KILL_COUNT with \"$KILL_ON\""

# --- run --------------------------------------------------------------------
# show: the console as --show says, without the terminal control sequences
# of the firmware (SeaBIOS resets and clears the terminal).
show() {
	local strip='s/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g'
	case "$SHOW" in
	all) sed -u "$strip" ;;
	guest)
		sed -u -n -e "$strip" \
			-e '/=== DMESG BEGIN ===/,/=== DMESG END ===/d' \
			-e '/^\[ *[0-9]*\.[0-9]*\] /d' \
			-e '/=== GUEST START/,$p'
		;;
	none) cat >/dev/null ;;
	esac
}

# kill_on: pass the console through; KILL_DELAY ms after the KILL_COUNT-th
# line with $KILL_ON, kill QEMU (by the pid it wrote) and leave $KILLED_FILE
# as the record (with the console line number of the kill).
kill_on() {
	local line pid seen=0 n=0
	if [ -z "$KILL_ON" ]; then
		cat
		return
	fi
	while IFS= read -r line || [ -n "$line" ]; do
		printf '%s\n' "$line"
		n=$((n + 1))
		[[ $line == *"$KILL_ON"* ]] || continue
		seen=$((seen + 1))
		[ "$seen" -ge "$KILL_COUNT" ] && break
	done
	[ "$seen" -ge "$KILL_COUNT" ] || return 0
	(
		[ "$KILL_DELAY" -eq 0 ] || sleep "$(awk -v ms="$KILL_DELAY" 'BEGIN { printf "%.3f", ms / 1000 }')"
		pid=$(cat "$PIDFILE" 2>/dev/null || true)
		if [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; then
			echo "$n" >"$KILLED_FILE"
		else
			log "the console showed \"$KILL_ON\", but QEMU (pid '$pid') could not be killed: it had ended"
		fi
	) &
	cat
	wait
}

# stdin from /dev/null: QEMU leaves the terminal alone and Ctrl-C stops it.
# The console's CR LF line ends become LF.  timeout ends the way QEMU did:
# killed by SIGKILL, it would make bash report "Killed" on stderr; in a
# group that exits with its status, it does not (its stderr is in the pipe).
start=$(date +%s)
set +e
{
	timeout --kill-after=10 "$TIMEOUT" "${QEMU[@]}" </dev/null 2>&1
	exit $?
} 2>/dev/null | sed -u 's/\r$//' | tee "$LOG/console.log" | kill_on | show
status=("${PIPESTATUS[@]}")
set -e
qemu_rc=${status[0]}
elapsed=$(($(date +%s) - start))
rm -f "$PIDFILE"

# --- what happened --------------------------------------------------------
killed=0
[ ! -e "$KILLED_FILE" ] || killed=1
timed_out=0
# 137: QEMU got SIGKILL, from timeout --kill-after, or from kill_on.
[ "$killed" = 1 ] || case "$qemu_rc" in 124 | 137) timed_out=1 ;; esac
exit_line=$(grep -a -o '=== GUEST EXIT [0-9]* ===' "$LOG/console.log" | tail -n1 || true)
guest_rc=
[ -z "$exit_line" ] || guest_rc=$(grep -o '[0-9][0-9]*' <<<"$exit_line")
panic=$(grep -a -m1 'Kernel panic - not syncing' "$LOG/console.log" || true)

# dmesg.log: the guest's dump, or else the kernel lines of the console.
if grep -aq '=== DMESG END ===' "$LOG/console.log"; then
	awk '/=== DMESG END ===/ { on = 0 } on { print } /=== DMESG BEGIN ===/ { on = 1 }' \
		"$LOG/console.log" >"$LOG/dmesg.log"
else
	grep -a '^\[ *[0-9]*\.[0-9]*\]' "$LOG/console.log" >"$LOG/dmesg.log" || true
	log "no complete kernel log from the guest: dmesg.log holds the kernel lines of the console"
fi

rc=0
if [ -n "$panic" ]; then
	log "KERNEL PANIC after ${elapsed}s: ${panic#*\] }"
	rc=125
elif [ "$killed" = 1 ]; then
	log "killed QEMU after ${elapsed}s: the console showed \"$KILL_ON\""
elif [ -n "$guest_rc" ]; then
	rc=$guest_rc
	[ "$timed_out" = 0 ] || log "WARNING: the guest finished but did not power off (killed after ${TIMEOUT}s)"
elif [ "$timed_out" = 1 ]; then
	log "TIMEOUT: guest killed after $TIMEOUT s"
	rc=124
else
	log "QEMU exited (status $qemu_rc) without a '=== GUEST EXIT n ===' line"
	rc=126
fi
if [ -n "$KILL_ON" ] && [ "$killed" = 0 ]; then
	log "the console never showed \"$KILL_ON\": QEMU was not killed on it"
	[ "$rc" -ne 0 ] || rc=121
fi

# --- host-side check of the images ----------------------------------------
# btrfs check reads image files like devices, without the kernel.  For a
# filesystem on several images it must find the other members: it looks them
# up in libblkid's cache, which normally holds block devices only.  A private
# cache (BLKID_FILE) that lists the images makes them findable: no loop
# device, no kernel module, nothing registered with the host's kernel.
# (Without it, btrfs-progs 6.2 checks a raid1 member alone, "device 2 is
# missing", and may even pass.)
#
# A filesystem is checked only when all its devices are among the images: a
# later mkfs on some of the disks leaves the superblocks of an older
# filesystem on the others, and that one is no longer whole.  Such leftovers
# are listed and skipped.
CHECKED=0 CHECK_FAILS=0
check_images() {
	local img type fsid tab fails=0 n=0 want have
	local -A first=() count=() total=()
	local -a members=()
	for img in "${IMAGES[@]}"; do
		type=$(blkid -p -o value -s TYPE "$img" 2>/dev/null || true)
		[ "$type" = btrfs ] || continue
		fsid=$(blkid -p -o value -s UUID "$img")
		members+=("$img")
		[ -n "${first[$fsid]:-}" ] || first[$fsid]=$img
		count[$fsid]=$((${count[$fsid]:-0} + 1))
		total[$fsid]=$(btrfs inspect-internal dump-super "$img" | awk '$1 == "num_devices" { print $2 }')
	done
	if [ ${#members[@]} -eq 0 ]; then
		log "check-images: no btrfs on the images"
		return 0
	fi
	tab=$LOG/blkid.tab
	rm -f "$tab" "$tab.old"
	BLKID_FILE=$tab blkid -c "$tab" "${members[@]}" >/dev/null || true
	for fsid in "${!first[@]}"; do
		want=${total[$fsid]:-?} have=${count[$fsid]}
		if [ "$want" != "$have" ]; then
			log "check-images: btrfs $fsid: $have of $want devices on the images (left over from an earlier mkfs?): not checked"
			continue
		fi
		n=$((n + 1))
		if BLKID_FILE=$tab btrfs check --readonly "${first[$fsid]}" >"$LOG/check-$fsid.log" 2>&1; then
			log "check-images: btrfs $fsid ($have device(s), $(basename "${first[$fsid]}")...): OK"
		else
			log "check-images: btrfs $fsid: btrfs check FAILED (log: $LOG/check-$fsid.log):"
			tail -n 20 "$LOG/check-$fsid.log" | sed 's/^/    /' >&2
			fails=$((fails + 1))
		fi
	done
	rm -f "$tab.old"
	CHECKED=$n CHECK_FAILS=$fails
	log "check-images: $n filesystem(s) checked, $fails failed"
	[ "$fails" -eq 0 ]
}

if [ "$CHECK" = 1 ]; then
	if ! check_images && [ "$rc" -eq 0 ]; then
		rc=123
	fi
fi

cat >"$LOG/vm-result.txt" <<EOF
exit_status=$rc
guest_status=${guest_rc:-none}
qemu_status=$qemu_rc
timed_out=$timed_out
killed_on_marker=$killed
panic=$([ -n "$panic" ] && echo 1 || echo 0)
images_checked=$CHECKED
images_failed=$CHECK_FAILS
seconds=$elapsed
accel=$ACCEL
EOF
log "guest status ${guest_rc:-none}, ${elapsed}s; logs in $LOG; exit $rc"
exit "$rc"
