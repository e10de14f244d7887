# shellcheck shell=bash
# Building, booting and judging a VM run, for the runners (run_selftests.sh,
# run_powercut.sh, run_fuzz.sh), demo.sh and ci/gate.sh: run folders, the
# kselftests and the initramfs, QEMU (lib/run-vm.sh), and reading what a
# run left.  Source it after lib/common.sh.
#
# A VM run keeps its files in $CACHE/vm-logs/<name>-<timestamp>/: console.log,
# dmesg.log, the kernel and initramfs it booted, the disk images, ...

VM_LOGS=$CACHE/vm-logs
DMESG_IGNORE=$RESTRIPER_ROOT/lib/dmesg-ignore.txt

# new_run_dir NAME: make and print a fresh run folder.  Its ".running" file
# holds the pid of the script that made it.
new_run_dir() {
	local dir
	dir=$VM_LOGS/$1-$(date +%Y%m%d-%H%M%S)
	[ ! -e "$dir" ] || dir=$dir-$$
	mkdir -p "$dir"
	echo "$$" >"$dir/.running"
	echo "$dir"
}

# run_in_progress DIR: is the script that made DIR still running?
run_in_progress() {
	local pid
	pid=$(cat "$1/.running" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# drop_run_artifacts DIR: remove the big files of a run (disk images, kernel,
# initramfs), keep the logs.  The crash stage of run_selftests.sh has its
# images and logs in subfolders.
drop_run_artifacts() {
	rm -f "$1/bzImage" "$1/initramfs.cpio.gz"
	find "$1" -maxdepth 3 -type f \( -name '*.img' -o -name blkid.tab \) -delete
	rm -rf "$1/payload"
}

# prune_old_runs: only the 3 newest runs keep their big files (a failed run
# keeps them for a look at the images), and runs still going on; logs are
# kept.
prune_old_runs() {
	local dir
	[ -d "$VM_LOGS" ] || return 0
	find "$VM_LOGS" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' | sort -rn |
		tail -n +4 | cut -d' ' -f2- | while IFS= read -r dir; do
		# Another run going on beside this one still needs its files.
		run_in_progress "$dir" || drop_run_artifacts "$dir"
	done
}

# prepare_tree_step LOG: lib/prepare-tree.sh --allow-work as a step (one line,
# its output into LOG).  Its loud warning (the pinned base is not offered by
# apt any more, another version is used) is shown on screen all the same.
prepare_tree_step() {
	local lines=0 rc=0
	[ ! -f "$1" ] || lines=$(wc -l <"$1")
	step "preparing the kernel tree" "$1" prepare_tree_and_say || rc=$?
	if [ "$VERBOSE" != 1 ]; then
		tail -n +"$((lines + 1))" "$1" | grep '^!!!' >&2 || true
	fi
	return "$rc"
}
prepare_tree_and_say() {
	bash "$RESTRIPER_ROOT/lib/prepare-tree.sh" --allow-work || return
	log "tree: $(git_tree log -1 --format='%h %s' HEAD)$([ -z "$(tree_changes)" ] || echo ' + uncommitted changes')"
}

# make_kselftests OUTPUT [TARGET...]: kselftests/ built into OUTPUT against
# the prepared tree's uapi headers (installed into OUTPUT/usr by "make
# headers_install", out of the tree): the tests use what the series adds
# to them, which the distribution's headers lack.  The caller holds the
# build lock.
make_kselftests() {
	local out=$1
	shift
	make -C "$TREE" O="$BUILD_ROOT/headers" INSTALL_HDR_PATH="$out/usr" \
		headers_install || return
	make -C "$RESTRIPER_ROOT/kselftests" KSFT_DIR="$TREE/tools/testing/selftests" \
		OUTPUT="$out" KHDR_INCLUDES="-isystem $out/usr/include" "$@"
}

# build_vm_kernel DEST LOG: build the VM kernel (lib/build-kernel.sh: prepares
# the tree, holds the build lock; one line per step, its output appended to
# LOG) and copy it to DEST, so that the run does not depend on the build
# folder (another build may change it meanwhile).
build_vm_kernel() {
	local bz
	bz=$(bash "$RESTRIPER_ROOT/lib/build-kernel.sh" --log "$2") ||
		die "the VM kernel was not built (log: $2)"
	cp "$bz" "$1"
}

# The screen, for the guest's output while the steps' output goes to a log:
# the scripts open it with "exec 3>&1" before the VM step.
SCREEN_FD=3

# run_vm RUN_DIR RUN-VM-ARGS...: lib/run-vm.sh --log RUN_DIR, meant to run as
# a step: its own messages go to stderr (the step's log), the console to
# SCREEN_FD (the guest's lines only, or everything with -v; all of it is in
# RUN_DIR/console.log either way).  Returns 0 when the guest finished and the
# images passed their check: the guest's own exit status is the caller's to
# judge (RUN_DIR/vm-result.txt); else run-vm.sh's status.
run_vm() {
	local dir=$1 rc=0 show=guest
	shift
	[ "$VERBOSE" != 1 ] || show=all
	[ -z "${VM_SHOW:-}" ] || show=$VM_SHOW
	bash "$RESTRIPER_ROOT/lib/run-vm.sh" --log "$dir" --show "$show" "$@" >&"$SCREEN_FD" || rc=$?
	[ "$rc" -ne 0 ] || return 0
	[ -f "$dir/vm-result.txt" ] || return "$rc"
	if [ "$(sed -n 's/^guest_status=//p' "$dir/vm-result.txt")" != none ] &&
		[ "$(sed -n 's/^timed_out=//p' "$dir/vm-result.txt")" = 0 ] &&
		[ "$(sed -n 's/^panic=//p' "$dir/vm-result.txt")" = 0 ] &&
		[ "$(sed -n 's/^images_failed=//p' "$dir/vm-result.txt")" = 0 ]; then
		return 0
	fi
	return "$rc"
}

# vm_step LABEL RUN_DIR LOG RUN-VM-ARGS...: run_vm as a step.  When the guest
# did not finish (timeout, panic, no exit line) and the console was not all
# on screen, the end of the console follows the end of LOG: it shows why
# (only the kernel's lines when the guest's were on screen already).
vm_step() {
	local label=$1 dir=$2 steplog=$3 rc=0
	shift 3
	RESTRIPER_TAIL=12 step "$label" "$steplog" run_vm "$dir" "$@" || rc=$?
	if [ "$rc" -ne 0 ] && [ "$VERBOSE" != 1 ] && [ -s "$dir/console.log" ] &&
		grep -qx 'guest_status=none' "$dir/vm-result.txt" 2>/dev/null; then
		if [ "${VM_SHOW:-guest}" = none ]; then
			log "the end of $dir/console.log:"
			sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g' "$dir/console.log" | tail -n 30
		else
			log "the kernel's last messages ($dir/console.log):"
			grep -a '\[ *[0-9]*\.[0-9]*\] ' "$dir/console.log" | tail -n 30
		fi | sed 's/^/    | /' >&2
	fi
	return "$rc"
}

# scan_dmesg DMESG: print the lines of the kernel log that make the run fail
# ("line-number: text"), minus those matching lib/dmesg-ignore.txt.  A "Call
# Trace:" counts on its own only when no report header came shortly before.
# A log that does not begin at boot (timestamp 0) fails too: the ring buffer
# wrapped, and what it lost was not scanned.
scan_dmesg() {
	local ignore=/dev/null
	[ -f "$DMESG_IGNORE" ] && ignore=$DMESG_IGNORE
	awk '
		FILENAME == ARGV[1] { if ($0 !~ /^[ \t]*(#|$)/) ign[++ni] = $0; next }
		FNR == 1 && $0 !~ /^\[ *0\.000000\]/ {
			print "1: the kernel log does not begin at boot (its ring buffer wrapped?): " $0
		}
		{
			for (i = 1; i <= ni; i++) if ($0 ~ ign[i]) next
			if ($0 ~ /WARNING:|BUG:|Oops|kernel BUG|general protection fault|possible circular locking dependency|possible recursive locking|inconsistent lock state|INFO: trying to register non-static key|INFO: lockdep is turned off|INFO: task .* blocked for more than|rcu: INFO:|self-detected stall|KASAN|UBSAN|Kernel panic|Transaction aborted|BTRFS critical/) {
				print FNR ": " $0
				last = FNR
			} else if ($0 ~ /Call Trace:/ && (last == 0 || FNR - last > 60)) {
				print FNR ": " $0 "   (a stack trace with no report above it)"
				last = FNR
			}
		}
	' "$ignore" "$1"
}

# scan_data_errors DMESG: the lines of a power-cut or crash run's kernel log
# that say data was bad on a device: a checksum failure, a read error
# corrected from another copy, any BTRFS error (a scrub logs what it fixed
# up as one).  The selftests provoke BTRFS errors on purpose; these runs
# must have none.  "N: line" each, as scan_dmesg.
scan_data_errors() {
	grep -naE 'csum failed|read error corrected|BTRFS error' "$1" 2>/dev/null |
		sed 's/^\([0-9]*\):/\1: /' || true
}

# --- what a run left: lib/run-vm.sh's vm-result.txt, lib/run-in-guest.sh's TAP

# vm_result RUN_DIR KEY: a value of RUN_DIR/vm-result.txt ("" if none).
vm_result() { sed -n "s/^$2=//p" "$1/vm-result.txt" 2>/dev/null || true; }

# vm_run_problems RUN_DIR TIMEOUT: what of vm-result.txt fails the run, one
# line each (the VM killed by its timeout of TIMEOUT s, a panic, the guest's
# exit status, btrfs check of the images).
vm_run_problems() {
	local status
	[ "$(vm_result "$1" timed_out)" = 0 ] || echo "the VM timed out (killed after $2 s)"
	[ "$(vm_result "$1" panic)" = 0 ] || echo "kernel panic (see $1/console.log)"
	status=$(vm_result "$1" guest_status)
	case "$status" in
	0) ;;
	none) echo "the guest did not finish (no exit status)" ;;
	*) echo "guest exit status $status (a test program failed)" ;;
	esac
	[ "$(vm_result "$1" images_failed)" = 0 ] ||
		echo "btrfs check failed on $(vm_result "$1" images_failed) filesystem(s) left on the disk images (check-*.log)"
}

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

# --- the kselftests and their staging ---------------------------------------

KSFT_SRC=$RESTRIPER_ROOT/kselftests
KSFT_OUT=$BUILD_ROOT/kselftests

# The crash stage's program, in a subfolder of /selftests: run-in-guest.sh
# runs only the programs of the folder it is given, so the normal run does
# not run it.
CRASH_SUBDIR=crash
CRASH_PROG=crash_resume_test
# The same for the power-cut stage (run_powercut.sh boots it).
POWERCUT_SUBDIR=powercut
POWERCUT_PROG=powercut_test

# --- the VM's payload: kernel, kselftests, initramfs (under the build lock) --
# build_all RUN_DIR STEPS_LOG puts bzImage, payload/ and initramfs.cpio.gz
# in RUN_DIR, for run_selftests.sh and run_powercut.sh; KERNEL (a bzImage
# to take instead of building one, or empty) and PAYLOAD (folders to put in
# /selftests instead of the kselftests, or none) are the caller's.

build_kselftests() {
	[ -d "$KSFT_SRC" ] || die "kselftests/ does not exist in the repository: no tests to build." \
		"(The kselftests are written in kselftests/, built by its Makefile with" \
		" make -C kselftests KSFT_DIR=<tree>/tools/testing/selftests OUTPUT=<folder>.)"
	[ -f "$KSFT_SRC/Makefile" ] || die "kselftests/Makefile is missing: cannot build the kselftests"
	mkdir -p "$KSFT_OUT"
	log "building the kselftests into $KSFT_OUT"
	make_kselftests "$KSFT_OUT"
}

# stage_kselftests DIR: what goes to /selftests: the build output (the
# compiled tests) plus the scripts and files of kselftests/ that a kselftest
# install would add (TEST_PROGS *.sh, TEST_FILES *.inc and "settings",
# kselftest/ktap_helpers.sh), scripts made executable, and
# tools/balance-status (built by make) in bin/.
# A step's command (no errexit): checks its commands itself.
stage_kselftests() {
	local f
	rm -rf "$1" && mkdir -p "$1" && cp -a "$KSFT_OUT/." "$1/" || return
	for f in "$KSFT_SRC"/*.sh "$KSFT_SRC"/*.inc "$KSFT_SRC/settings"; do
		[ -f "$f" ] || continue
		cp "$f" "$1/" || return
		case "$f" in *.sh) chmod +x "$1/$(basename "$f")" || return ;; esac
	done
	find "$1" -name '*.o' -delete || return
	# The tree's ktap_helpers.sh for the shell tests, where a kselftest
	# install puts it beside them; in a subfolder: not a test
	mkdir -p "$1/kselftest" &&
		cp "$TREE/tools/testing/selftests/kselftest/ktap_helpers.sh" "$1/kselftest/" || return
	# tools/balance-status for status_tool_test.sh; in a subfolder: not a test
	make -C "$RESTRIPER_ROOT" tools/balance-status || return
	mkdir -p "$1/bin" && cp "$RESTRIPER_ROOT/tools/balance-status" "$1/bin/" || return
	mkdir -p "$1/$CRASH_SUBDIR" && mv "$1/$CRASH_PROG" "$1/$CRASH_SUBDIR/" || return
	mkdir -p "$1/$POWERCUT_SUBDIR" && mv "$1/$POWERCUT_PROG" "$1/$POWERCUT_SUBDIR/" || return
	log "kselftests: $(cd "$1" && find . -maxdepth 1 -type f -perm -u+x -printf '%P\n' | sort | tr '\n' ' ')"
	log "crash stage: $CRASH_SUBDIR/$CRASH_PROG, power-cut stage: $POWERCUT_SUBDIR/$POWERCUT_PROG"
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
		bash "$RESTRIPER_ROOT/lib/make-initramfs.sh" "$1/initramfs.cpio.gz" "${PAYLOAD[@]}" ||
		die "no initramfs (log: $2)"
}

# --- judging the VM stage ---------------------------------------------------

# The programs whose rows the VM stage's summary must show: the kselftests
# run in the guest, and the crash stage's test.  A row missing (its program
# was not built, or the stage was left out) fails the gate like a failure.
VM_STAGE_TESTS=(balance_test progs_test.sh balance_fuzz concurrency_test
	lifecycle_test status_tool_test.sh crash_resume_test)

# judge_vm_stage LOG: reads the output of run_selftests.sh; prints one
# line per reason for failing, nothing when all is well.  Returns 1 when
#   - a row of VM_STAGE_TESTS is missing, ran nothing, or counts a failure
#     or a skip (the gate's VM has the disks and the debug interfaces: a
#     test that skips there did not test);
#   - a closing line is missing, or counts a failure or a skip, or no run:
#     "selftests: N passed, 0 failed, 0 skipped", "powercut: N runs, 0
#     failed", "fuzz: N calls, 0 failed", each with N > 0.
judge_vm_stage() {
	local log=$1 t line bad=0
	for t in "${VM_STAGE_TESTS[@]}"; do
		line=$(grep -E "^  $t +[0-9]+ passed, +[0-9]+ failed, +[0-9]+ skipped" "$log" | tail -n1 || true)
		if [ -z "$line" ]; then
			echo "no result for $t"
			bad=1
		elif ! grep -Eq " [1-9][0-9]* passed, +0 failed, +0 skipped" <<<"$line"; then
			echo "$t: $(grep -Eo '[0-9]+ passed, +[0-9]+ failed, +[0-9]+ skipped' <<<"$line" | tr -s ' ')"
			bad=1
		fi
	done
	line=$(grep -E '^selftests: [0-9]+ passed' "$log" | tail -n1 || true)
	if ! grep -Eq '^selftests: [1-9][0-9]* passed, 0 failed, 0 skipped' <<<"$line"; then
		echo "${line:-no selftests line}"
		bad=1
	fi
	line=$(grep -E '^powercut: [0-9]+ runs' "$log" | tail -n1 || true)
	if ! grep -Eq '^powercut: [1-9][0-9]* runs, 0 failed' <<<"$line"; then
		echo "${line:-no powercut line}"
		bad=1
	fi
	line=$(grep -E '^fuzz: [0-9]+ calls' "$log" | tail -n1 || true)
	if ! grep -Eq '^fuzz: [1-9][0-9]* calls, 0 failed' <<<"$line"; then
		echo "${line:-no fuzz line}"
		bad=1
	fi
	return "$bad"
}
