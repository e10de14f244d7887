#!/usr/bin/env bash
# The long run of the balance fuzzer, on demand: kselftests/balance_fuzz.c
# on the debug kernel (lib/kernel.config + lib/kernel-debug.config: KASAN,
# UBSAN, lockdep, DEBUG_VM) in QEMU, 4 empty virtio disks.
#
#   ./run_fuzz.sh [-v] [--calls N] [--seed S] [--epoch N] [--timeout SECS]
#                 [--kernel BZIMAGE]
#
#   --calls N         calls the fuzzer makes (default 10000)
#   --epoch N         calls per filesystem: a new one every N calls (default
#                     the fuzzer's, 1000; 0: one filesystem for all)
#   --seed S          its seed (default: a random one, chosen here and
#                     printed, so that a run that dies still names it)
#   --timeout SECS    the VM is killed after SECS, a guard against hangs
#                     (default: 900 + 1 s per 4 calls, or
#                     $RESTRIPER_FUZZ_TIMEOUT)
#   --kernel BZIMAGE  boot this kernel instead of building the debug kernel
#   -v                show everything: the builds, the whole console
#
# Steps: build the debug kernel (lib/build-kernel.sh --fragment
# lib/kernel-debug.config --name vm-debug: $CACHE/build/vm-debug, under the
# build lock, incremental), build the fuzzer (make -C kselftests, into
# $CACHE/build/fuzz), make an initramfs whose /selftests holds only the
# fuzzer (lib/make-initramfs.sh), boot it (lib/run-vm.sh) with
# restriper.fuzz_calls=N restriper.fuzz_seed=S on the kernel command line;
# lib/run-in-guest.sh runs it; the disk images are btrfs-checked on the host
# afterwards.
#
# The run fails when: the guest's exit status is not 0, the fuzzer's TAP
# has a "not ok" or does not match its plan, its line "# fuzz: N calls, M
# failed" is missing, says fewer calls than asked or M > 0, the VM timed
# out or panicked, an image fails "btrfs check --readonly", or the kernel
# log has a report: WARNING, BUG, Oops, KASAN, UBSAN, lockdep, hung task,
# RCU stall, transaction abort (scan_dmesg of lib/vm.sh, with the
# exceptions of lib/dmesg-ignore.txt), in the log the guest printed at the
# end (dmesg.log) or in the kernel's lines of the console (console.log: a
# long run can overflow the log buffer, the console keeps every warning).
#
# Quiet by default: one line per step with its time, then a summary; a
# failed step shows the end of its log.  Logs: $CACHE/vm-logs/fuzz-<time>/
# (steps.log, console.log, dmesg.log, fuzz.tap, summary.txt; after a
# failure also the disk images, kernel and initramfs).  The last line is
# "fuzz: N calls, M failed", the fuzzer's own count ("fuzz: 0 calls, 1
# failed (no result)" when it printed none, as in run_selftests.sh); the
# exit status is 0 only when the run passed.
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

CALLS=10000
SEED=''
EPOCH=''
TIMEOUT=${RESTRIPER_FUZZ_TIMEOUT:-}
KERNEL=''
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--calls) CALLS=$2; shift 2 ;;
	--seed) SEED=$2; shift 2 ;;
	--epoch) EPOCH=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--kernel) KERNEL=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
[[ "$CALLS" =~ ^[1-9][0-9]*$ ]] || die "--calls: a number of calls, not '$CALLS'"
[ -n "$SEED" ] || SEED=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed: a decimal number, not '$SEED'"
[ -z "$EPOCH" ] || [[ "$EPOCH" =~ ^[0-9]+$ ]] || die "--epoch: a number of calls, not '$EPOCH'"
[ -n "$TIMEOUT" ] || TIMEOUT=$((900 + CALLS / 4))
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout: seconds, not '$TIMEOUT'"
[ -z "$KERNEL" ] || [ -f "$KERNEL" ] || die "--kernel $KERNEL: no such file"

PROG=balance_fuzz
FUZZ_OUT=$BUILD_ROOT/fuzz
DEBUG_FRAGMENT=$RESTRIPER_ROOT/lib/kernel-debug.config

# --- build ------------------------------------------------------------------

# The debug kernel: lib/build-kernel.sh prints its own step lines.
build_debug_kernel() { # DEST LOG
	local bz
	bz=$(bash "$RESTRIPER_ROOT/lib/build-kernel.sh" --fragment "$DEBUG_FRAGMENT" \
		--name vm-debug --log "$2") || die "the debug kernel was not built (log: $2)"
	cp "$bz" "$1"
}

# The fuzzer alone, with the tree's kselftest headers; staged in DIR.
build_fuzzer() ( # DIR
	mkdir -p "$FUZZ_OUT" "$1" || exit
	make_kselftests "$FUZZ_OUT" "$FUZZ_OUT/$PROG" || exit
	cp "$FUZZ_OUT/$PROG" "$1/" || exit
	log "payload: $PROG ($(stat -c %s "$1/$PROG") bytes)"
)

build_fuzz_run() { # RUN_DIR STEPS_LOG
	if [ -n "$KERNEL" ]; then
		cp "$KERNEL" "$1/bzImage"
	else
		build_debug_kernel "$1/bzImage" "$2"
	fi
	step "building the fuzzer" "$2" build_fuzzer "$1/payload" ||
		die "the fuzzer does not build (log: $2)"
}

# --- judging ----------------------------------------------------------------

PROBLEMS=()
N=0 M=1 NOTE=' (no result)'

# show_lines REGEX FILE [MAX]: the matching lines, indented (none is fine).
show_lines() {
	{ grep -E "$1" "$2" || true; } | head -n "${3:-100}" | sed 's/^/  /'
}

judge() { # RUN_DIR
	local dir=$1 tap=$1/tap/$PROG.tap line pass fail skip plan results bail dm kern
	mkdir -p "$dir/tap"
	split_tap "$dir/console.log" "$dir/tap" >/dev/null
	[ -f "$tap" ] || : >"$tap"
	read -r pass fail skip plan results bail < <(tap_counts "$tap")
	[ "$plan" != - ] || plan=
	echo "fuzzer (seed $SEED, $CALLS calls asked): $pass passed, $fail failed of ${plan:-no} plan"
	show_lines '^(not ok|ok) ' "$tap"
	show_lines '^# (FAILED|kernel:|calls stopped)' "$tap" 30
	show_lines '^# +[0-9]+ calls in|^#   |^# calls that met' "$tap"
	[ "$fail" -eq 0 ] || PROBLEMS+=("$fail failed result(s) of $PROG")
	[ "$skip" -eq 0 ] || PROBLEMS+=("$skip skipped result(s) of $PROG")
	[ "$bail" -eq 0 ] || PROBLEMS+=("$PROG bailed out")
	[ -n "$plan" ] && [ "$plan" = "$results" ] ||
		PROBLEMS+=("$PROG planned ${plan:-nothing}, printed $results result(s)")
	line=$(grep -E '^# fuzz: [0-9]+ calls, [0-9]+ failed$' "$tap" | tail -n1 || true)
	if [ -z "$line" ]; then
		PROBLEMS+=("no '# fuzz: N calls, M failed' line (the fuzzer did not finish)")
	else
		N=$(sed -E 's/^# fuzz: ([0-9]+) calls.*/\1/' <<<"$line")
		M=$(sed -E 's/.* calls, ([0-9]+) failed$/\1/' <<<"$line")
		NOTE=
		[ "$N" -ge "$CALLS" ] || PROBLEMS+=("the fuzzer made $N calls of $CALLS")
		[ "$M" -eq 0 ] || PROBLEMS+=("$M call(s) returned a result outside their documented set")
	fi
	if [ -f "$dir/vm-result.txt" ]; then
		mapfile -t -O "${#PROBLEMS[@]}" PROBLEMS < <(vm_run_problems "$dir" "$TIMEOUT")
	else
		PROBLEMS+=("lib/run-vm.sh left no result (see $dir/steps.log)")
	fi
	# The kernel log: the dump at the end, and the console's kernel lines
	# (they have every warning even when the log buffer overflowed).
	grep -a '^\[ *[0-9]*\.[0-9]*\] ' "$dir/console.log" >"$dir/console-kernel.log" 2>/dev/null || true
	dm=$( { [ ! -f "$dir/dmesg.log" ] || scan_dmesg "$dir/dmesg.log"; }
		scan_dmesg "$dir/console-kernel.log"; )
	if [ -n "$dm" ]; then
		kern=$(sed -E 's/^[0-9]+: //' <<<"$dm" | sort -u)
		PROBLEMS+=("the kernel log has $(wc -l <<<"$kern") report line(s)")
		echo "kernel log lines that fail the run (dmesg.log, console-kernel.log; exceptions: lib/dmesg-ignore.txt):"
		head -n 40 <<<"$kern" | sed 's/^/  /'
	fi
}

# --- main -------------------------------------------------------------------

# A failure before the fuzzer ran: still the closing line.
no_run() { # MESSAGE
	log "ERROR: $1"
	echo "fuzz: 0 calls, 1 failed (no result)"
	exit 1
}

main() {
	local dir steps_log rc=0 t0=$SECONDS kernel_desc
	ensure_packages "${PACKAGES[@]}"
	dir=$(new_run_dir fuzz)
	steps_log=$dir/steps.log
	log "run folder: $dir (output of the steps: steps.log)"
	log "seed $SEED, $CALLS calls, VM timeout $TIMEOUT s"
	with_build_lock build_fuzz_run "$dir" "$steps_log" || no_run "build failed (log: $steps_log)"
	if [ -n "$KERNEL" ]; then
		kernel_desc=$KERNEL
	else
		kernel_desc="$BUILD_ROOT/vm-debug, tree $(git_tree log -1 --format='%h %s' HEAD)"
		[ -z "$(tree_changes)" ] || kernel_desc="$kernel_desc + uncommitted changes"
	fi
	step "making the initramfs (the fuzzer only)" "$steps_log" \
		bash "$RESTRIPER_ROOT/lib/make-initramfs.sh" "$dir/initramfs.cpio.gz" "$dir/payload" ||
		no_run "no initramfs (log: $steps_log)"
	exec 3>&1 # the screen, for the console with -v (see run_vm)
	local VM_SHOW=''
	[ "$VERBOSE" = 1 ] || VM_SHOW=none
	vm_step "fuzzing in the VM ($CALLS calls, seed $SEED)" "$dir" "$steps_log" \
		--kernel "$dir/bzImage" --initrd "$dir/initramfs.cpio.gz" \
		--disks 4 --disk-size 1G --timeout "$TIMEOUT" --check-images \
		--append "restriper.run=/selftests/run-in-guest.sh restriper.fuzz_calls=$CALLS restriper.fuzz_seed=$SEED${EPOCH:+ restriper.fuzz_epoch=$EPOCH}" ||
		true # judged below
	{
		echo "==================== fuzz summary ===================="
		echo "kernel: $kernel_desc"
		judge "$dir"
		if [ ${#PROBLEMS[@]} -gt 0 ]; then
			echo "FAILED:"
			printf '  - %s\n' "${PROBLEMS[@]}"
			echo "replay: ./run_fuzz.sh --calls $CALLS --seed $SEED${EPOCH:+ --epoch $EPOCH}"
		fi
		echo "total time: $((SECONDS - t0)) s"
	} >"$dir/summary.txt"
	cat "$dir/summary.txt"
	if [ ${#PROBLEMS[@]} -eq 0 ]; then
		drop_run_artifacts "$dir"
		log "PASS; logs in $dir"
	else
		rc=1
		log "FAIL; logs, disk images, kernel and initramfs kept in $dir"
	fi
	prune_old_runs
	echo "fuzz: $N calls, $M failed$NOTE"
	return "$rc"
}

main
