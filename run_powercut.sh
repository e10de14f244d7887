#!/usr/bin/env bash
# Power cuts during a balance: QEMU killed (SIGKILL: no unmount, nothing
# flushed) at a moment picked from a seed, the machine booted again on the
# same disks, the balance resumed and finished, everything checked.
#
#   ./run_powercut.sh [-v] [--runs N] [--seed S] [--random]
#                     [--kernel BZIMAGE --initrd CPIO] [--timeout SECS]
#
#   --runs N      runs (default 4: one of each kind, in order)
#   --seed S      the seed of the run parameters (default: from the clock;
#                 printed, so that "--runs N --seed S" replays the same
#                 parameters; where a cut lands within the guest's work still
#                 varies with the machine's speed)
#   --random      the kind and the mode of each run from the seed as well
#                 (default: the kinds in turn); the long mode:
#                 ./run_powercut.sh --runs 20 --random
#   --kernel, --initrd   boot these (ci/gate.sh passes the VM stage's: the
#                 initramfs must have /selftests/powercut/powercut_test);
#                 without them they are built first, as the VM stage builds
#                 them (build_all of lib/vm.sh)
#   --timeout SECS  each boot is killed after SECS (default 300)
#
# Kinds of run (kselftests/powercut_test.c is the guest side):
#   random  the cut comes a random 0-1500 ms after the K-th (1-4) "relocating
#           block group" line of the balance;
#   item    0-400 ms after the balance ioctl is issued: while its item is
#           being inserted and committed (or just before, or just after);
#   pause   0-200 ms after a pause (asked once K chunks, 1-3, are relocated)
#           returned: the paused balance's item is on disk;
#   mount   as random, then a second boot is cut 0-2000 ms after the mount
#           that resumes the balance: a cut during the resume at mount.
# Each run converts (data single -> raid1, metadata and system dup -> raid1) or
# balances everything (no filter), on 3 devices, with a writer thread making
# records durable with fdatasync while the balance runs.  The last boot
# verifies (TAP): the balance finished, no chunk it started with is left,
# every chunk has the target profile, every file and every journal record up
# to the last "# synced N" line of the cut boots verify, no balance item is
# left, btrfs check passes.  Here, from the "relocating block group" lines of
# all the boots: no chunk relocated twice (only the one in flight at a cut
# may be redone), nothing at or above the bound (a copy, or a chunk made
# after the start) relocated.  Each boot's images pass a host-side
# "btrfs check --readonly", and no boot's kernel log has a splat.
#
# One line per run; logs in $CACHE/vm-logs/powercut-<time>/run-<i>/boot<j>/.
# Ends with "powercut: N runs, M failed, K cut after the balance had ended"
# (K: runs whose last cut came after the balance had ended, so that it cut
# no relocation; each such run says so on its line); exits non-zero when
# M > 0.
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

RUNS=4 SEED='' RANDOM_KINDS=0 KERNEL='' INITRD='' TIMEOUT=300
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--runs) RUNS=$2; shift 2 ;;
	--seed) SEED=$2; shift 2 ;;
	--random) RANDOM_KINDS=1; shift ;;
	--kernel) KERNEL=$2; shift 2 ;;
	--initrd) INITRD=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "--runs: a number from 1, not $RUNS"
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout: seconds, not $TIMEOUT"
[ -n "$SEED" ] || SEED=$(($(date +%s%N) % 1000000007))
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed: a number, not $SEED"
{ [ -z "$KERNEL" ] && [ -z "$INITRD" ]; } || { [ -f "$KERNEL" ] && [ -f "$INITRD" ]; } ||
	die "--kernel and --initrd go together, and must exist"

KINDS=(random item pause mount)
RELOC='relocating block group '

# boot RUN_DIR N LOG ARGS...: boot N of a run on its disks (made by boot 1).
boot() {
	local dir=$1 n=$2 steps=$3 reuse=()
	shift 3
	[ "$n" = 1 ] || reuse=(--reuse-disks)
	run_vm "$dir/boot$n" --kernel "$KERNEL" --initrd "$INITRD" --disks 3 --disk-size 512M \
		--disk-dir "$dir" "${reuse[@]}" --timeout "$TIMEOUT" --check-images \
		--append "restriper.run=/selftests/run-in-guest.sh restriper.tests=/selftests/powercut restriper.loglevel=7" \
		"$@" >>"$steps" 2>&1
}


# relocation_problems RUN_DIR NBOOTS: from the consoles of the boots,
# in order, what breaks "each chunk relocated once, nothing else": a chunk
# at or above the bound (a copy, or a chunk made after the start, which a
# convert made in its target profile), or a chunk relocated twice in one
# boot.  A chunk relocated again after a cut is one
# whose removal had not committed (a committed one is gone, and the verify
# boot checks that the item counts exactly those): counted as redone.
# Prints "relocations: A,B,C, R redone" (per boot) last.
relocation_problems() {
	local dir=$1 nboots=$2 i files=() bound
	for ((i = 1; i <= nboots; i++)); do files+=("$dir/boot$i/console.log"); done
	# The balance's bound: the highest one printed (the state file's, the
	# balance item's, which the writer may have moved up, or the one of a
	# balance started anew after a cut that came before its item).
	bound=$(cat "${files[@]}" | sed -n 's/^# powercut: bound \([0-9]*\).*/\1/p' | sort -n | tail -n1)
	awk -v reloc="$RELOC" -v bound="${bound:-0}" '
		FNR == 1 { boot++; n[boot] = 0; dump = 0 }
		# The kernel log the guest prints at its end repeats the lines.
		/=== DMESG BEGIN ===/ { dump = 1 }
		dump { next }
		# Only whole lines: the guest'"'"'s output can cut into the kernel'"'"'s.
		match($0, /relocating block group [0-9]+ flags [a-z|0-9]+$/) {
			s = substr($0, RSTART + length(reloc)); sub(/ .*/, "", s)
			flags = $0; sub(/.* flags /, "", flags)
			s += 0; bound += 0
			# Every chunk at or above the bound is a copy or was made
			# after the start, converts included (patches 28-29).
			if (bound == 0 || s >= bound)
				print "boot " boot ": relocated " s " (" flags "), at or above the bound " bound
			if ((boot, s) in seen)
				print "boot " boot ": relocated " s " twice"
			# Again after a cut: its removal had not committed.
			if (s in where && where[s] != boot)
				redone++
			seen[boot, s] = 1; where[s] = boot; n[boot]++
		}
		END {
			line = "relocations:"
			for (i = 1; i <= boot; i++) line = line (i > 1 ? "," : " ") n[i]
			print line ", " redone + 0 " redone"
		}
	' "${files[@]}"
}

# run_one I: one run; prints its line, returns non-zero when it failed.
run_one() {
	local i=$1 dir=$RUN_DIR/run-$1 steps kind mode k d pause=0 d2=0 nboots synced rc=0 t0=$SECONDS
	local problems=() desc b probs relocs pass skip plan
	mkdir -p "$dir"
	steps=$dir/steps.log
	RANDOM=$((SEED + i * 7919))
	# The first values after seeding follow the seed closely: skip them.
	: $RANDOM $RANDOM $RANDOM
	if [ "$RANDOM_KINDS" = 1 ]; then
		kind=${KINDS[RANDOM % 4]}
		mode=$( ((RANDOM % 2)) && echo convert || echo full)
	else
		kind=${KINDS[(i - 1) % 4]}
		case $kind in pause) mode=full ;; *) mode=convert ;; esac
	fi
	local start=(--append "restriper.powercut=start restriper.powercut_mode=$mode")
	case $kind in
	random | mount)
		k=$((1 + RANDOM % 4)) d=$((RANDOM % 1501))
		start+=(--kill-on "$RELOC" --kill-count "$k" --kill-delay "$d")
		desc="cut $d ms after relocation $k"
		;;
	item)
		d=$((RANDOM % 401))
		start+=(--kill-on "=== BALANCE START ===" --kill-delay "$d")
		desc="cut $d ms after the balance ioctl"
		;;
	pause)
		pause=$((1 + RANDOM % 3)) d=$((RANDOM % 201))
		start+=(--append "restriper.powercut_pause=$pause" --kill-on "=== PAUSED ===" --kill-delay "$d")
		desc="paused after $pause chunks, cut $d ms later"
		;;
	esac
	nboots=2
	boot "$dir" 1 "$steps" "${start[@]}" || true
	if [ "$kind" = mount ] && [ "$(vm_result "$dir/boot1" killed_on_marker)" = 1 ]; then
		d2=$((RANDOM % 2001))
		desc="$desc, then $d2 ms after the mount that resumes"
		boot "$dir" 2 "$steps" --append "restriper.powercut=resume" \
			--kill-on "=== MOUNTED ===" --kill-delay "$d2" || true
		nboots=3
	fi
	for ((b = 1; b < nboots; b++)); do
		[ -f "$dir/boot$b/vm-result.txt" ] || { problems+=("boot $b did not run"); continue; }
		[ "$(vm_result "$dir/boot$b" killed_on_marker)" = 1 ] ||
			problems+=("boot $b was not cut (see $dir/boot$b/console.log)")
		[ "$(vm_result "$dir/boot$b" images_failed)" = 0 ] ||
			problems+=("boot $b: btrfs check failed on the images the cut left")
		[ -z "$(scan_dmesg "$dir/boot$b/dmesg.log")" ] ||
			problems+=("boot $b: the kernel log has a splat ($dir/boot$b/dmesg.log)")
		[ -z "$(scan_data_errors "$dir/boot$b/dmesg.log")" ] ||
			problems+=("boot $b: the kernel log has a data error ($dir/boot$b/dmesg.log)")
	done
	if [ ${#problems[@]} -eq 0 ]; then
		synced=$(cat "$dir"/boot*/console.log | sed -n 's/^# synced \([0-9]*\)$/\1/p' | sort -n | tail -n1)
		boot "$dir" "$nboots" "$steps" --append "restriper.powercut=verify restriper.powercut_synced=${synced:-0}" || rc=$?
		b=$dir/boot$nboots
		[ "$rc" -eq 0 ] && [ "$(vm_result "$b" guest_status)" = 0 ] ||
			problems+=("the verify boot failed: guest status $(vm_result "$b" guest_status), images failed $(vm_result "$b" images_failed)")
		grep -a '^not ok' "$b/console.log" | head -n 10 | while IFS= read -r l; do echo "    $l"; done >>"$steps"
		mapfile -t probs < <(grep -a '^not ok' "$b/console.log" | head -n 5)
		problems+=("${probs[@]}")
		read -r pass _ skip plan _ _ < <(tap_counts "$b/console.log")
		[ "$plan" != - ] && [ $((pass + skip)) -eq "$plan" ] || [ ${#probs[@]} -gt 0 ] ||
			problems+=("the verify boot printed fewer results than its plan ($plan)")
		[ -z "$(scan_dmesg "$b/dmesg.log")" ] ||
			problems+=("verify boot: the kernel log has a splat ($b/dmesg.log)")
		[ -z "$(scan_data_errors "$b/dmesg.log")" ] ||
			problems+=("verify boot: the kernel log has a data error ($b/dmesg.log)")
		mapfile -t probs < <(relocation_problems "$dir" "$nboots")
		relocs=${probs[-1]}
		unset 'probs[-1]'
		problems+=("${probs[@]}")
	fi
	if cut_after_the_end "$dir" "$nboots" "$kind"; then
		desc="$desc, after the balance had ended"
		AFTER_END=$((AFTER_END + 1))
	fi
	local line
	line=$(printf 'run %d/%d: %-6s %-7s %s; %s, %d boots, %s synced (%d s)' "$i" "$RUNS" "$kind" \
		"$mode" "$desc" "${relocs:-relocations: -}" "$nboots" "${synced:--}" $((SECONDS - t0)))
	if [ ${#problems[@]} -eq 0 ]; then
		log "$line: ok"
		return 0
	fi
	log "$line: FAILED (logs: $dir)"
	printf '    - %s\n' "${problems[@]}" >&2
	return 1
}

# cut_after_the_end DIR NBOOTS KIND: did the last cut of the run come after
# the balance had ended (the guest said so on the console before the kill)?
# Such a run cut no relocation: it is reported, not taken for one that did.
# A pause run's balance is paused, not ended, when it is cut.
AFTER_END=0
cut_after_the_end() {
	local console=$1/boot$(($2 - 1))/console.log
	case $3 in
	pause) return 1 ;;
	mount) [ "$2" = 3 ] && grep -aq '^# powercut: the resume ended' "$console" ;;
	*) grep -aq '^# powercut: the balance returned' "$console" ;;
	esac
}

main() {
	local i failed=0 steps
	ensure_packages "${PACKAGES[@]}"
	RUN_DIR=$(new_run_dir powercut)
	steps=$RUN_DIR/steps.log
	log "run folder: $RUN_DIR"
	if [ -z "$KERNEL" ]; then
		# The VM stage's build: its initramfs has powercut/powercut_test.
		PAYLOAD=()
		with_build_lock build_all "$RUN_DIR" "$steps"
		KERNEL=$RUN_DIR/bzImage INITRD=$RUN_DIR/initramfs.cpio.gz
	fi
	exec 3>/dev/null # run_vm's console: in the boot folders only
	log "seed $SEED (replay: ./run_powercut.sh --runs $RUNS --seed $SEED$([ "$RANDOM_KINDS" = 0 ] || echo ' --random'))"
	for ((i = 1; i <= RUNS; i++)); do
		run_one "$i" || failed=$((failed + 1))
	done
	if [ "$failed" -eq 0 ]; then
		find "$RUN_DIR" -name '*.img' -delete
		rm -rf "$RUN_DIR/bzImage" "$RUN_DIR/initramfs.cpio.gz" "$RUN_DIR/payload"
	fi
	echo "powercut: $RUNS runs, $failed failed, $AFTER_END cut after the balance had ended"
	[ "$failed" -eq 0 ]
}

main
