#!/usr/bin/env bash
# The second stage: the kselftests of kselftests/ inside a VM (QEMU) running
# the patched kernel, with 4 empty virtio disks.
#
#   ./run_selftests.sh [-v] [--timeout SECS] [--append ARGS]...
#
# Steps: prepare the tree and build the kernel (vm/build-kernel.sh), build the
# kselftests (make -C kselftests, into $CACHE/build/kselftests), make the
# initramfs (vm/make-initramfs.sh), boot it (vm/run-vm.sh, 4 x 1G disks,
# timeout 900 s or $RESTRIPER_VM_TIMEOUT; the images are btrfs-checked on the
# host afterwards), then judge.  Logs: $CACHE/vm-logs/selftests-<time>/
# (steps.log: the output of the steps; console.log, dmesg.log,
# tap/<test>.tap, summary.txt; after a failure also the disk images, kernel
# and initramfs of the run).
#
# Quiet by default: one line per step with its time, then the summary (a
# line per test program, the "not ok" lines, what failed the run); a failed
# step shows the end of its log.  -v shows everything: the builds and the
# whole console (the TAP stream, the kernel's messages).
#
# The run fails when: the guest's exit status is not 0 (a test program
# failed), a TAP line says "not ok", a test's results do not match its plan
# or it did not finish, no TAP result was seen at all, the VM timed out or
# panicked, an image fails btrfs check, or the kernel log has a splat
# (WARNING:, BUG:, Oops, lockdep, hung task, ...; vm/dmesg-ignore.txt lists
# exceptions).  Ends with "selftests: N passed, M failed, K skipped": N/M/K
# count the TAP results ("ok", "not ok", "# SKIP"); M also counts each test
# program that failed without a "not ok" line.
#
# For trying the harness itself:
#   --kernel BZIMAGE   boot this kernel instead of building one
#   --payload PATH     put PATH (folder or file) into /selftests instead of
#                      the built kselftests (repeatable)
# With both, nothing is built and the kernel tree is not needed.
set -euo pipefail
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/ci/lib.sh"
# shellcheck source=vm/common.sh
. "$RESTRIPER_ROOT/vm/common.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

TIMEOUT=${RESTRIPER_VM_TIMEOUT:-900}
KERNEL=''
PAYLOAD=()
APPEND=()
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--append) APPEND+=(--append "$2"); shift 2 ;;
	--kernel) KERNEL=$2; shift 2 ;;
	--payload) PAYLOAD+=("$2"); shift 2 ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done

[ -z "$KERNEL" ] || [ -f "$KERNEL" ] || die "--kernel $KERNEL: no such file"
for p in "${PAYLOAD[@]}"; do
	[ -e "$p" ] || die "--payload $p: no such file or folder"
done

KSFT_SRC=$RESTRIPER_ROOT/kselftests
KSFT_OUT=$BUILD_ROOT/kselftests

# --- build (under the build lock) -------------------------------------------

build_kselftests() {
	[ -d "$KSFT_SRC" ] || die "kselftests/ does not exist in the repository: no tests to build." \
		"(The kselftests are written in kselftests/, built by its Makefile with" \
		" make -C kselftests KSFT_DIR=<tree>/tools/testing/selftests OUTPUT=<folder>.)"
	[ -f "$KSFT_SRC/Makefile" ] || die "kselftests/Makefile is missing: cannot build the kselftests"
	mkdir -p "$KSFT_OUT"
	log "building the kselftests into $KSFT_OUT"
	make -C "$KSFT_SRC" KSFT_DIR="$TREE/tools/testing/selftests" OUTPUT="$KSFT_OUT"
}

# stage_kselftests DIR: what goes to /selftests: the build output (the
# compiled tests) plus the scripts and files of kselftests/ that a kselftest
# install would add (TEST_PROGS *.sh, "settings"), scripts made executable.
# A step's command (no errexit): checks its commands itself.
stage_kselftests() {
	local f
	rm -rf "$1" && mkdir -p "$1" && cp -a "$KSFT_OUT/." "$1/" || return
	for f in "$KSFT_SRC"/*.sh "$KSFT_SRC/settings"; do
		[ -f "$f" ] || continue
		cp "$f" "$1/" || return
		case "$f" in *.sh) chmod +x "$1/$(basename "$f")" || return ;; esac
	done
	find "$1" -name '*.o' -delete || return
	log "kselftests: $(cd "$1" && find . -maxdepth 1 -type f -perm -u+x -printf '%P\n' | sort | tr '\n' ' ')"
}

# The kselftests step, in a subshell: a die() in it ends the step.
build_and_stage_kselftests() ( # DIR
	build_kselftests && stage_kselftests "$1"
)

build_all() { # RUN_DIR STEPS_LOG
	if [ -n "$KERNEL" ]; then
		cp "$KERNEL" "$1/bzImage"
	else
		build_vm_kernel "$1/bzImage" "$2"
	fi
	if [ ${#PAYLOAD[@]} -eq 0 ]; then
		# The kselftests use the tree's headers (build-kernel.sh has
		# prepared it already, unless --kernel: then this does).
		[ -z "$KERNEL" ] || prepare_tree_step "$2" || die "the kernel tree is not ready (log: $2)"
		step "building the kselftests" "$2" build_and_stage_kselftests "$1/payload" ||
			die "the kselftests do not build (log: $2)"
		PAYLOAD=("$1/payload")
	fi
	step "making the initramfs" "$2" \
		bash "$RESTRIPER_ROOT/vm/make-initramfs.sh" "$1/initramfs.cpio.gz" "${PAYLOAD[@]}" ||
		die "no initramfs (log: $2)"
}

# --- judging ----------------------------------------------------------------

# split_tap CONSOLE TAPDIR: write each "=== TAP BEGIN x ===" ... "=== TAP END x
# rc=n ===" section of the console to TAPDIR/x.tap (without the kernel's
# lines, which share the console) and print "x rc" per test, in order; rc is
# "none" when the section did not end (the guest died in the test).
split_tap() {
	awk -v dir="$2" '
		function name_after(s, tag,   t) {
			t = substr(s, index(s, tag) + length(tag))
			sub(/ .*/, "", t)
			return t
		}
		/=== TAP BEGIN [^ ]+ ===/ {
			cur = name_after($0, "=== TAP BEGIN ")
			file = dir "/" cur ".tap"
			printf "" >file
			order[++n] = cur
			next
		}
		/=== TAP END [^ ]+ rc=[0-9]+ ===/ {
			t = name_after($0, "=== TAP END ")
			r = $0
			sub(/.*rc=/, "", r)
			sub(/ .*/, "", r)
			rc[t] = r
			if (file != "") close(file)
			cur = ""
			file = ""
			next
		}
		cur != "" && !/^\[ *[0-9]+\.[0-9]+\] / { print >file }
		END {
			for (i = 1; i <= n; i++)
				print order[i], ((order[i] in rc) ? rc[order[i]] : "none")
		}
	' "$1"
}

# tap_counts TAPFILE: "pass fail skip plan results bailout" of the top-level
# TAP lines (subtests are indented and not counted).  A "# SKIP" or "# TODO"
# directive counts as skipped; plan is "-" when there is none.
tap_counts() {
	awk '
		function directive(s) { s = tolower(s); return s ~ /#[ \t]*(skip|todo)/ }
		/^ok( |$)/ { results++; if (directive($0)) skip++; else pass++; next }
		/^not ok( |$)/ { results++; if (directive($0)) skip++; else fail++; next }
		/^1\.\.[0-9]+/ { if (plan == "") { plan = $0; sub(/^1\.\./, "", plan); sub(/[^0-9].*/, "", plan) } next }
		/^Bail out!/ { bail = 1 }
		END { print pass + 0, fail + 0, skip + 0, (plan == "" ? "-" : plan), results + 0, bail + 0 }
	' "$1"
}

vm_result() { sed -n "s/^$1=//p" "$dir/vm-result.txt"; } # KEY (dir: judge's)

judge() { # RUN_DIR VM_STATUS
	local dir=$1 vm_rc=$2 name rc pass fail skip plan results bail own
	local tp=0 tf=0 ts=0 nres=0 ntests=0 problems=() dm
	mkdir -p "$dir/tap"
	while read -r name rc; do
		ntests=$((ntests + 1))
		read -r pass fail skip plan results bail < <(tap_counts "$dir/tap/$name.tap")
		tp=$((tp + pass)) tf=$((tf + fail)) ts=$((ts + skip)) nres=$((nres + results))
		if [ "$rc" = 4 ] && [ "$results" -eq 0 ]; then
			printf '  %-28s skipped as a whole (exit status 4)\n' "$name"
		else
			printf '  %-28s %3d passed, %3d failed, %3d skipped  (exit status %s)\n' \
				"$name" "$pass" "$fail" "$skip" "$rc"
		fi
		if [ "$fail" -gt 0 ]; then
			grep '^not ok' "$dir/tap/$name.tap" | grep -vi '#[[:space:]]*\(skip\|todo\)' |
				head -n 20 | sed 's/^/      /'
		fi
		own=''
		if [ "$rc" = none ]; then
			own="$name did not finish (the guest died or timed out in it)"
		elif [ "$rc" = 4 ] && [ "$results" -eq 0 ]; then
			ts=$((ts + 1)) # the whole program skipped (KSFT_SKIP)
			continue
		elif [ "$bail" = 1 ]; then
			own="$name: Bail out!"
		elif [ "$plan" = - ]; then
			own="$name printed no TAP plan (1..N)"
		elif [ "$plan" != "$results" ]; then
			own="$name planned $plan results, printed $results"
		elif [ "$rc" != 0 ] && [ "$rc" != 4 ] && [ "$fail" -eq 0 ]; then
			own="$name exited with status $rc without a 'not ok' line"
		fi
		if [ -n "$own" ]; then
			problems+=("$own")
			[ "$fail" -gt 0 ] || tf=$((tf + 1))
		fi
	done < <(split_tap "$dir/console.log" "$dir/tap")

	[ "$tf" -eq 0 ] || problems+=("$tf failed test(s)")
	if [ "$ntests" -eq 0 ] || { [ "$nres" -eq 0 ] && [ "$ts" -eq 0 ]; }; then
		problems+=("no TAP result at all (tests run: $ntests)")
	fi
	if [ -f "$dir/vm-result.txt" ]; then
		[ "$(vm_result timed_out)" = 0 ] || problems+=("the VM timed out (killed after $TIMEOUT s)")
		[ "$(vm_result panic)" = 0 ] || problems+=("kernel panic (see console.log)")
		case "$(vm_result guest_status)" in
		0) ;;
		none) problems+=("the guest did not finish (no exit status)") ;;
		*) problems+=("guest exit status $(vm_result guest_status) (a test program failed)") ;;
		esac
		[ "$(vm_result images_failed)" = 0 ] ||
			problems+=("btrfs check failed on $(vm_result images_failed) filesystem(s) left on the disk images (check-*.log)")
	elif [ "$vm_rc" -ne 0 ]; then
		problems+=("vm/run-vm.sh failed (status $vm_rc)")
	fi
	dm=$(scan_dmesg "$dir/dmesg.log")
	if [ -n "$dm" ]; then
		problems+=("the kernel log has $(wc -l <<<"$dm") suspicious line(s)")
		echo "dmesg.log lines that fail the run (exceptions: vm/dmesg-ignore.txt):"
		head -n 40 <<<"$dm" | sed 's/^/  /'
	fi

	if [ ${#problems[@]} -gt 0 ]; then
		echo "FAILED:"
		printf '  - %s\n' "${problems[@]}"
	fi
	echo "selftests: $tp passed, $tf failed, $ts skipped"
	[ ${#problems[@]} -eq 0 ]
}

# --- main -------------------------------------------------------------------

main() {
	local dir steps_log vm_rc=0 ok=0
	ensure_packages "${PACKAGES[@]}"
	dir=$(new_run_dir selftests)
	steps_log=$dir/steps.log
	log "run folder: $dir (output of the steps: steps.log)"
	if [ -n "$KERNEL" ] && [ ${#PAYLOAD[@]} -gt 0 ]; then
		build_all "$dir" "$steps_log"
	else
		with_build_lock build_all "$dir" "$steps_log"
	fi
	# The VM runs without the lock: it uses the copies in $dir.  Quiet, the
	# console is not shown (the TAP stream is in tap/, the rest in
	# console.log): the summary below says what happened.
	exec 3>&1 # the screen, for the console with -v (see run_vm)
	local VM_SHOW=''
	[ "$VERBOSE" = 1 ] || VM_SHOW=none
	vm_step "running the VM" "$dir" "$steps_log" --kernel "$dir/bzImage" --initrd "$dir/initramfs.cpio.gz" \
		--disks 4 --disk-size 1G --timeout "$TIMEOUT" --check-images \
		--append "restriper.run=/selftests/run-in-guest.sh" "${APPEND[@]}" || vm_rc=$?
	echo
	echo "==================== selftests summary ===================="
	judge "$dir" "$vm_rc" | tee "$dir/summary.txt" || ok=1
	if [ "$ok" -eq 0 ]; then
		drop_run_artifacts "$dir"
		log "PASS; logs in $dir"
	else
		log "FAIL; logs, disk images, kernel and initramfs kept in $dir"
	fi
	prune_old_runs
	return "$ok"
}

main
