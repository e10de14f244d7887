#!/usr/bin/env bash
# The CI gate for kernel-patches/series.
#
#   ci/gate.sh [-v] [--no-vm | --no-kunit | --only-kunit] [--from N]
#
#   -v            everything on screen (builds, KUnit, the VM), not only the
#                 steps; the logs are kept either way ($CACHE/gate-logs/)
#   --no-vm       all steps but the VM selftests
#   --no-kunit    no KUnit and no VM: series, per-patch build and checkpatch
#   --only-kunit  the series applies, then KUnit at the tip only
#   --from N      check patches N to the last only (a developer's loop after
#                 changing the end of the series; CI checks every patch)
#
# Steps:
#  0. the gate's own judging fails doctored logs (ci/test-judging.sh: a
#     missing summary line, a failure, a skip, an early WARNING, ...);
#  1. the series applies to the pinned base (lib/prepare-tree.sh; a tree with
#     work that is not exported makes the gate fail, see RESTRIPER_FORCE);
#     kunit/ is a faithful copy of the KUnit sources at the tip;
#  2. the gate kernel is built at the tip ($CACHE/build/gate-kernel: the VM
#     kernel's config, lib/kernel.config, with kunit.config on top, W=1), and
#     the VM stage (3) starts on it in the background;
#  3. for each patch in turn (HEAD detached at it), in the gate kernel's
#     folder, so that a patch recompiles only what it changes:
#     a. "make W=1 C=1" builds, with no W=1 or sparse warning in fs/btrfs/
#        that the base does not have;
#     b. scripts/checkpatch.pl --strict is clean, findings on moved lines
#        aside (ci/checkpatch-filter.py);
#     c. KUnit: once the series has its KUnit option, every case passes
#        (tools/testing/kunit/kunit.py exec on that kernel, in QEMU);
#  4. at the tip, "make W=1 fs/btrfs/" with btrfs, KUnit and the KUnit
#     test option as modules (x86_64_defconfig base, $CACHE/build/
#     gate-modules), with no new warning either: btrfs is a module in
#     distribution kernels;
#  5. ./run_selftests.sh then ./run_powercut.sh at the tip, on the gate
#     kernel: the full kernel in QEMU on real multi-device btrfs
#     (kselftests/ with the fuzzer, btrfs-progs suite, the crash stage; then
#     4 power cuts), running beside steps 3 and 4.
# Prints a summary table; exits non-zero on any failure.  The summary ends
# with "kunit: X passed, Y failed" (the tip), "selftests: N passed, M
# failed, K skipped", "powercut: N runs, M failed" and "fuzz: N calls, M
# failed".
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"

GATE_KERNEL=$BUILD_ROOT/gate-kernel
GATE_MODULES=$BUILD_ROOT/gate-modules
LOG_DIR=$CACHE/gate-logs
JOBS=$(nproc)
# Bump when the way warnings are collected changes: old baselines are unusable.
BASELINE_FORMAT=2
# checkpatch message types that cannot be right here:
#  FILE_PATH_CHANGES  "does MAINTAINERS need updating?" on any new file; the
#                     btrfs entry covers fs/btrfs/ already.
#  UNKNOWN_COMMIT_ID  the tree has no upstream history, so any "Fixes:" or
#                     "commit <sha> (...)" reference would be "unknown".
CHECKPATCH_IGNORE=FILE_PATH_CHANGES,UNKNOWN_COMMIT_ID
# The series' KUnit option.  The gate kernel is the VM kernel with
# kunit.config merged on top; the module build's config goes on top of
# x86_64_defconfig: everything of interest as modules.
KUNIT_OPTION=CONFIG_BTRFS_BALANCE_KUNIT_TEST
KERNEL_FRAGMENTS=("$RESTRIPER_ROOT/lib/kernel.config" "$RESTRIPER_ROOT/kunit.config")
MODULE_CONFIG="CONFIG_BLOCK=y CONFIG_KUNIT=m CONFIG_BTRFS_FS=m $KUNIT_OPTION=m CONFIG_BTRFS_DEBUG=y CONFIG_BTRFS_ASSERT=y"
# W=1 for every build of the gate kernel, the first one too: a change of
# flags would recompile everything at the first patch.
export KBUILD_EXTRA_WARN=1

# Same compiler messages (ASCII quotes) in the baseline and in every run.
export LC_ALL=C

usage() { sed -n '2,11s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }
DO_PATCHES=1
DO_KUNIT=1
DO_VM=1
FROM=1
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1 ;;
	--no-kunit) DO_KUNIT=0 DO_VM=0 ;;
	--only-kunit) DO_PATCHES=0 DO_VM=0 ;;
	--no-vm) DO_VM=0 ;;
	--from) FROM=${2:-}; shift
		[[ "$FROM" =~ ^[1-9][0-9]*$ ]] || die "--from needs a patch number (1 = the first)" ;;
	-h | --help) usage ;;
	*) usage 2 ;;
	esac
	shift
done

# Summary table rows, filled as the steps run.
ROWS=()
FAILED=0
KUNIT_LINE="kunit: 0 passed, 0 failed (not run)"
SELFTESTS_LINE='' POWERCUT_LINE='' FUZZ_LINE=''
row() { ROWS+=("$(printf '%-50.50s %-6s %-5s %-14s %s' "$@")"); }
fail() { FAILED=1; }

print_summary() {
	echo
	echo "==================== gate summary ===================="
	printf '%-50s %-6s %-5s %-14s %s\n' "step / patch" "build" "warn" "checkpatch" "KUnit / result"
	printf '%s\n' "${ROWS[@]}"
	if [ "$FAILED" = 0 ]; then echo "GATE: PASS"; else echo "GATE: FAIL"; fi
	echo "$KUNIT_LINE"
	[ -z "$SELFTESTS_LINE" ] || echo "$SELFTESTS_LINE"
	[ -z "$POWERCUT_LINE" ] || echo "$POWERCUT_LINE"
	[ -z "$FUZZ_LINE" ] || echo "$FUZZ_LINE"
}

# --- the gate kernel ---------------------------------------------------------

kernel_make() { make -C "$TREE" O="$GATE_KERNEL" -j"$JOBS" "$@"; }

# Does the checked out commit have the series' KUnit option yet?
has_kunit_option() { grep -q "^config ${KUNIT_OPTION#CONFIG_}\$" "$TREE/fs/btrfs/Kconfig"; }

# build_tip_kernel LOG: the gate kernel at the tip (lib/build-kernel.sh on the
# prepared tree); its .config is kept as .config.tip, what every patch's
# config is made from.
build_tip_kernel() {
	local f args=()
	for f in "${KERNEL_FRAGMENTS[@]:1}"; do args+=(--fragment "$f"); done
	bash "$RESTRIPER_ROOT/lib/build-kernel.sh" --name "$(basename "$GATE_KERNEL")" \
		--tree "$TREE" "${args[@]}" --log "$1" >/dev/null &&
		cp "$GATE_KERNEL/.config" "$GATE_KERNEL/.config.tip" &&
		echo with >"$GATE_KERNEL/.config.gate-state"
}

# build_patch_kernel LOG: the tip's config, less what the checked out commit's
# Kconfig does not have (the KUnit option before the patch that adds it),
# then an incremental "make W=1 C=1": sparse runs on each recompiled file.
# The config is only made again when the option comes or goes (a kconfig
# run costs seconds, at every patch).
build_patch_kernel() {
	local has=without state=$GATE_KERNEL/.config.gate-state

	if has_kunit_option; then
		has=with
	fi
	: >"$1"
	if [ "$(cat "$state" 2>/dev/null)" != "$has" ]; then
		cp "$GATE_KERNEL/.config.tip" "$GATE_KERNEL/.config" &&
			kernel_make -s olddefconfig >>"$1" 2>&1 &&
			echo "$has" >"$state" || return
	fi
	kernel_make C=1 bzImage >>"$1" 2>&1
}

# --- fs/btrfs as modules -----------------------------------------------------

modules_make() { make -C "$TREE" O="$GATE_MODULES" -j"$JOBS" "$@"; }

# build_btrfs_modules LOG: x86_64_defconfig with MODULE_CONFIG merged in,
# then "make W=1 fs/btrfs/" (sparse has seen every file in the gate kernel;
# its warnings, in the baseline, cannot come back here).  Returns make's
# status.
# shellcheck disable=SC2086 # MODULE_CONFIG: one setting per word
build_btrfs_modules() {
	mkdir -p "$GATE_MODULES"
	{
		if [ ! -f "$GATE_MODULES/.config.defconfig" ]; then
			modules_make -s KCONFIG_CONFIG=.config.defconfig x86_64_defconfig
		fi
		cp "$GATE_MODULES/.config.defconfig" "$GATE_MODULES/.config" &&
			printf '%s\n' $MODULE_CONFIG >>"$GATE_MODULES/.config" &&
			modules_make -s olddefconfig
	} >"$1" 2>&1 && modules_make fs/btrfs/ >>"$1" 2>&1
}

# --- warnings ----------------------------------------------------------------

# warnings LOG: the fs/btrfs/ warning/error lines, paths made relative to the
# tree ("fs/btrfs/x.c:12:3: warning: ...").
warnings() {
	sed -e "s|$TREE/||g" -e 's|^\.\./||' "$1" |
		grep -E '^fs/btrfs/[^: ]+:[0-9]+(:[0-9]+)?: (warning|error): ' || true
}

# The comparison key of a warning line: without line and column, which move.
keys() { sed -E 's/^([^:]+):[0-9]+(:[0-9]+)?: /\1: /'; }

# new_warnings BASELINE_KEYS LOG: warning lines of LOG whose key occurs more
# often than in the baseline (a header warning appears once per compiled file
# that includes it; an incremental build shows only recompiled files).
new_warnings() {
	local cur
	cur=$(warnings "$2")
	[ -n "$cur" ] || return 0
	awk -F'\t' 'NR == FNR { base[$0]++; next }
		{ n[$1]++; if (n[$1] > base[$1]) print $2 }' \
		"$1" <(paste <(keys <<<"$cur") <(printf '%s\n' "$cur")) | LC_ALL=C sort -u
}

build_errors() { # LOG: what to show when make failed
	grep -E 'error|Error|\*\*\*' "$1" | sed -e "s|$TREE/||g" | head -n 40
}

# The warnings of fs/btrfs/ at the base, one baseline per build (the gate
# kernel's, the modules'), computed once per base, config and toolchain:
# a full W=1 C=1 build of fs/btrfs/ at the base (its objects removed first).
# The repository keeps the baselines of the toolchain it was made with
# (Debian 12's gcc and sparse): the key says when one is the same.
# baseline_file NAME CONFIG_TEXT: the file's name for these inputs.
baseline_file() {
	local key
	key=$( {
		echo "format $BASELINE_FORMAT"
		# The base's content, the same in every tree made from it.
		git_tree rev-parse "$BASE_TAG^{tree}"
		echo "$2"
		gcc --version | head -n1
		sparse --version
	} | sha256sum | cut -c1-16)
	echo "gate-baseline-$1-$key.txt"
}

# ensure_baseline VAR NAME CONFIG_TEXT BUILD_DIR BUILD_FN: sets VAR to the
# baseline's path, building the base with BUILD_FN LOG when there is none.
# Leaves HEAD at the base when it builds.
ensure_baseline() {
	local var=$1 name=$2 file log t0=$SECONDS
	file=$CACHE/$(baseline_file "$name" "$3")
	printf -v "$var" '%s' "$file"
	[ -f "$file" ] && return 0
	if [ -f "$RESTRIPER_ROOT/ci/$(basename "$file")" ]; then
		cp "$RESTRIPER_ROOT/ci/$(basename "$file")" "$file"
		log "warning baseline from ci/$(basename "$file") (same base, config and toolchain)"
		return 0
	fi
	git_tree checkout -q --detach "$BASE_TAG"
	rm -rf "$4/fs/btrfs"
	log=$LOG_DIR/00-baseline-$name.log
	"$5" "$log" || die "fs/btrfs/ does not build at '$BASE_TAG':" "$(build_errors "$log")" "(log: $log)"
	warnings "$log" | keys | LC_ALL=C sort >"$file.tmp"
	mv "$file.tmp" "$file"
	log "warning baseline ($name) at '$BASE_TAG': $(wc -l <"$file") warning lines, in $((SECONDS - t0)) s (keep it: cp $file ci/)"
}

KERNEL_BASELINE='' MODULES_BASELINE=''
kernel_baseline() {
	ensure_baseline KERNEL_BASELINE kernel "$(cat "${KERNEL_FRAGMENTS[@]}")" \
		"$GATE_KERNEL" build_patch_kernel
}
modules_baseline() {
	ensure_baseline MODULES_BASELINE modules "$MODULE_CONFIG" \
		"$GATE_MODULES" build_btrfs_modules
}

# check_build BUILD_FN BASELINE LOG: sets B_STATUS B_NEW.
check_build() {
	local new
	B_NEW=-
	if ! "$1" "$3"; then
		B_STATUS=FAIL
		echo "---- the build failed (log: $3)"
		build_errors "$3"
		return 0
	fi
	B_STATUS=ok
	B_NEW=0
	new=$(new_warnings "$2" "$3")
	if [ -n "$new" ]; then
		B_NEW=$(wc -l <<<"$new")
		echo "---- $B_NEW new W=1/sparse warning(s) in fs/btrfs/ (log: $3)"
		printf '%s\n' "$new"
	fi
}

# Patch b: checkpatch, into LOG.  It reads the patch file only, so it runs
# beside the patch's build (on the core the build leaves idle while it links).
run_checkpatch() { # LOG PATCH
	(cd "$TREE" && ./scripts/checkpatch.pl --strict --color=never \
		--ignore "$CHECKPATCH_IGNORE" "$2" 2>&1 || true) |
		python3 "$RESTRIPER_ROOT/ci/checkpatch-filter.py" "$2" >"$1"
}

# Its verdict.  Sets C_STATUS.
check_patch_style() { # LOG
	local total
	total=$(tail -n1 "$1")
	if [[ "$total" =~ ^total:\ 0\ errors,\ 0\ warnings,\ 0\ checks ]]; then
		C_STATUS=ok
	else
		C_STATUS=$(sed -E 's/^total: ([0-9]+) errors, ([0-9]+) warnings, ([0-9]+) checks.*/\1e \2w \3c/' <<<"$total")
		echo "---- checkpatch (log: $1):"
		head -n 40 "$1"
	fi
}

# kunit_exec LOG: tools/testing/kunit/kunit.py exec on the gate kernel as
# built (QEMU, x86_64): every suite built in runs.
kunit_exec() {
	(cd "$TREE" && python3 tools/testing/kunit/kunit.py exec --arch=x86_64 \
		--build_dir="$GATE_KERNEL" --timeout=600) >"$1" 2>&1
}

# Patch c: KUnit at the checked out commit, once its kernel is built.  Sets
# K_STATUS, KUNIT_LINE.  A patch that runs fewer cases than the patch before
# it fails: a case that stops running is not a pass (KUNIT_CASES_BEFORE); so
# does a suite of the tree's fs/btrfs/ that the log does not show passed.
KUNIT_CASES_BEFORE=0
check_patch_kunit() { # LOG
	local cases missing
	if ! has_kunit_option; then
		K_STATUS="- (no KUnit option yet)"
		return 0
	fi
	if kunit_exec "$1"; then
		K_STATUS=$(kunit_summary "$1" | head -n1)
		cases=$(kunit_cases "$1")
		missing=$(kunit_missing_suites "$TREE" "$1" | tr '\n' ' ')
		if [ "$cases" -lt "$KUNIT_CASES_BEFORE" ]; then
			K_STATUS="FAIL: $cases cases, $KUNIT_CASES_BEFORE before"
		elif [ -n "$missing" ]; then
			K_STATUS="FAIL: suites not passed: $missing"
		fi
		KUNIT_CASES_BEFORE=$cases
	else
		K_STATUS="FAIL: $(kunit_summary "$1" | head -n1)"
		echo "---- KUnit failed (log: $1):"
		grep -E '\[FAILED\]|FAILED at|Expected|ERROR|error:' "$1" | head -n 30
	fi
	KUNIT_LINE=$(kunit_summary "$1" | head -n1)
}

# Step 3.  Leaves HEAD where it found it.
check_patches() {
	local commits i prev orig patch name f base t0 cp_pid
	load_series
	mapfile -t commits < <(git_tree rev-list --reverse "$BASE_TAG..HEAD")
	[ ${#commits[@]} -eq ${#PATCHES[@]} ] ||
		die "the tree has ${#commits[@]} commits on '$BASE_TAG' but the series ${#PATCHES[@]} patches"
	orig=$(git_tree symbolic-ref -q --short HEAD || git_tree rev-parse HEAD)
	# shellcheck disable=SC2064 # expand now
	trap "git -C '$TREE' checkout -q '$orig'" EXIT

	step "warning baseline of fs/btrfs at the base" "$LOG_DIR/00-baseline.step.log" kernel_baseline ||
		{ fail; return 0; }
	prev=$(git_tree rev-parse "$BASE_TAG^{commit}")
	[ "$FROM" -le ${#PATCHES[@]} ] || die "--from $FROM: the series has ${#PATCHES[@]} patches"
	for i in "${!PATCHES[@]}"; do
		if [ $((i + 1)) -lt "$FROM" ]; then
			prev=${commits[$i]}
			continue
		fi
		patch=${PATCHES[$i]}
		name=$(basename "$patch")
		base=$LOG_DIR/$(printf '%02d' $((i + 1)))-${name%.patch}
		t0=$SECONDS
		git_tree checkout -q --detach "${commits[$i]}"
		# Files the patch changes are recompiled (and sparse-checked) even
		# when a build folder last saw them at this content.
		while IFS= read -r f; do
			if [ -e "$TREE/$f" ]; then touch "$TREE/$f"; fi
		done < <(git_tree diff --name-only "$prev" "${commits[$i]}")
		run_checkpatch "$base.checkpatch.log" "$patch" &
		cp_pid=$!
		check_build build_patch_kernel "$KERNEL_BASELINE" "$base.build.log"
		wait "$cp_pid" || true
		check_patch_style "$base.checkpatch.log"
		K_STATUS=-
		[ "$DO_KUNIT" = 0 ] || check_patch_kunit "$base.kunit.log"
		log "patch $((i + 1))/${#PATCHES[@]} $name: build $B_STATUS, new warnings $B_NEW, checkpatch $C_STATUS, KUnit $K_STATUS ($((SECONDS - t0)) s)"
		row "$name" "$B_STATUS" "$B_NEW" "$C_STATUS" "$K_STATUS"
		{ [ "$B_STATUS" = ok ] && [ "$B_NEW" = 0 ] && [ "$C_STATUS" = ok ] &&
			[[ "$K_STATUS" != FAIL* ]]; } || fail
		prev=${commits[$i]}
	done

	git_tree checkout -q "$orig"
	trap - EXIT
}

check_kunit_copy() {
	local problems
	problems=$(kunit_copy_problems HEAD)
	if [ -z "$problems" ]; then
		row "kunit/ is the tip's fs/btrfs/tests/*-test.c" "-" "-" "-" "ok"
		return 0
	fi
	echo "---- kunit/ is not a copy of the series' KUnit sources (run ci/export-series.sh):"
	printf '%s\n' "$problems"
	row "kunit/ is the tip's fs/btrfs/tests/*-test.c" "-" "-" "-" "FAIL"
	fail
}

# Step 2.  Fails the gate when the tip does not build.
build_tip() {
	local log=$LOG_DIR/tip-kernel.log
	rm -f "$GATE_KERNEL/.config.tip" "$GATE_KERNEL/.config.gate-state"
	if step "the gate kernel at the series tip (lib/kernel.config + kunit.config, W=1)" \
		"$LOG_DIR/tip-kernel.step.log" build_tip_kernel "$log"; then
		return 0
	fi
	row "the gate kernel at the series tip" "FAIL" "-" "-" "-"
	fail
	return 1
}

only_kunit() {
	local log=$LOG_DIR/kunit-tip.log
	if step "KUnit at the series tip" "$log" kunit_exec "$log.out"; then
		row "KUnit at the series tip" "-" "-" "-" "$(kunit_summary "$log.out" | head -n1)"
	else
		row "KUnit at the series tip" "-" "-" "-" "FAIL"
		fail
	fi
	KUNIT_LINE=$(kunit_summary "$log.out" | head -n1)
}

# Step 4, after the patches (HEAD at the tip again).
check_modules_at_tip() {
	local log=$LOG_DIR/modules-tip.log t0=$SECONDS
	if ! step "warning baseline of fs/btrfs as modules" "$LOG_DIR/00-baseline-modules.step.log" modules_baseline; then
		row "fs/btrfs as modules at the tip" "FAIL" "-" "-" "-"
		fail
		return 0
	fi
	git_tree checkout -q "$TREE_BRANCH"
	check_build build_btrfs_modules "$MODULES_BASELINE" "$log"
	log "fs/btrfs as modules at the tip: build $B_STATUS, new warnings $B_NEW ($((SECONDS - t0)) s)"
	row "fs/btrfs as modules at the tip" "$B_STATUS" "$B_NEW" "-" "-"
	{ [ "$B_STATUS" = ok ] && [ "$B_NEW" = 0 ]; } || fail
}

# Step 5 runs beside the per-patch checks: the kselftests and the initramfs
# are built first, for the gate kernel at the tip (the tree then moves from
# patch to patch), and its VMs, which build nothing, run in the background,
# on the core a patch's build leaves idle while it links, runs checkpatch or
# boots KUnit.  One kernel build at a time all the same.
VM_PID='' VM_OUT='' VM_DIR=$CACHE/gate-vm
start_vm_stage() {
	local log=$LOG_DIR/vm-build.log
	rm -rf "$VM_DIR"
	if ! step "VM stage: kselftests and initramfs at the series tip" "$log" \
		bash "$RESTRIPER_ROOT/run_selftests.sh" --build-only "$VM_DIR" \
		--kernel "$GATE_KERNEL/arch/x86/boot/bzImage"; then
		row "VM selftests at the series tip" "-" "-" "-" "FAIL: no kselftests"
		SELFTESTS_LINE="selftests: 0 passed, 1 failed, 0 skipped (nothing built)"
		fail
		return 0
	fi
	VM_OUT=$LOG_DIR/vm-stage.log
	log "VM stage: running in the background (./run_selftests.sh, ./run_powercut.sh; log: $VM_OUT)"
	# Slower beside the builds: the timeouts only catch hangs.  Both
	# runners always run; the judging below reads both summaries.
	(
		rc=0
		RESTRIPER_VERBOSE=0 bash "$RESTRIPER_ROOT/run_selftests.sh" --timeout 2400 --crash-timeout 600 \
			--kernel "$VM_DIR/bzImage" --payload "$VM_DIR/payload" || rc=1
		RESTRIPER_VERBOSE=0 bash "$RESTRIPER_ROOT/run_powercut.sh" --runs 4 --timeout 600 \
			--kernel "$VM_DIR/bzImage" --initrd "$VM_DIR/initramfs.cpio.gz" || rc=1
		exit "$rc"
	) >"$VM_OUT" 2>&1 &
	VM_PID=$!
}

finish_vm_stage() {
	local rc=0 t0=$SECONDS reasons
	[ -n "$VM_PID" ] || return 0
	log "VM stage: waiting for it to end"
	wait "$VM_PID" || rc=$?
	log "VM stage: ended $((SECONDS - t0)) s after the patches (exit status $rc)"
	sed -n '/^==================== selftests summary/,$p' "$VM_OUT"
	SELFTESTS_LINE=$(grep -E '^selftests: [0-9]+ passed' "$VM_OUT" | tail -n1 || true)
	POWERCUT_LINE=$(grep -E '^powercut: [0-9]+ runs' "$VM_OUT" | tail -n1 || true)
	FUZZ_LINE=$(grep -E '^fuzz: [0-9]+ calls' "$VM_OUT" | tail -n1 || true)
	row "VM selftests at the series tip" "-" "-" "-" "${SELFTESTS_LINE:-no result}"
	[ -n "$SELFTESTS_LINE" ] || SELFTESTS_LINE="selftests: 0 passed, 1 failed, 0 skipped (no result)"
	[ -n "$POWERCUT_LINE" ] || POWERCUT_LINE="powercut: 0 runs, 1 failed (no result)"
	[ -n "$FUZZ_LINE" ] || FUZZ_LINE="fuzz: 0 calls, 1 failed (no result)"
	if [ "$rc" != 0 ]; then
		tail -n 30 "$VM_OUT" | sed 's/^/    | /'
		fail
	fi
	# Also with exit status 0: a stage left out or a skip is no pass.
	if ! reasons=$(judge_vm_stage "$VM_OUT"); then
		echo "---- the VM stage did not test everything:"
		printf '%s\n' "$reasons" | sed 's/^/    /'
		row "VM stage: every test ran, none failed or skipped" "-" "-" "-" "FAIL"
		fail
	else
		row "VM stage: every test ran, none failed or skipped" "-" "-" "-" "ok"
	fi
}

gate() {
	mkdir -p "$LOG_DIR"
	if step "the gate's own judging, on doctored logs (ci/test-judging.sh)" \
		"$LOG_DIR/test-judging.log" bash "$RESTRIPER_ROOT/ci/test-judging.sh" -v; then
		row "the gate's judging fails doctored logs" "-" "-" "-" "ok"
	else
		row "the gate's judging fails doctored logs" "-" "-" "-" "FAIL"
		fail
	fi
	if ! step "the series applies to $LINUX_SOURCE_PACKAGE $LINUX_SOURCE_VERSION" \
		"$LOG_DIR/prepare-tree.log" bash "$RESTRIPER_ROOT/lib/prepare-tree.sh"; then
		row "the series applies to the pinned base" "-" "-" "-" "FAIL"
		fail
		print_summary
		return 1
	fi
	row "the series applies to the pinned base" "-" "-" "-" "ok"
	check_kunit_copy
	if build_tip; then
		[ "$DO_VM" = 0 ] || start_vm_stage
		if [ "$DO_PATCHES" = 1 ]; then
			check_patches
			check_modules_at_tip
		elif [ "$DO_KUNIT" = 1 ]; then
			only_kunit
		fi
	fi
	[ "$DO_VM" = 0 ] || finish_vm_stage
	print_summary
	[ "$FAILED" = 0 ]
}

ensure_packages "${PACKAGES[@]}"
# One lock for the whole gate: HEAD moves from patch to patch, no other build
# may see the tree meanwhile.
with_build_lock gate
