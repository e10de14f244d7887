#!/usr/bin/env bash
# The CI gate for kernel-patches/series.
#
#   ci/gate.sh               all steps
#   ci/gate.sh --no-kunit    series applies + per-patch build/warnings + checkpatch
#   ci/gate.sh --only-kunit  series applies + KUnit at the series tip
#   ci/gate.sh --no-vm       all steps but the VM selftests
#
# Steps:
#  1. the series applies to the pinned base (ci/prepare-tree.sh, strict: a tree
#     with work that is not exported makes the gate fail, see RESTRIPER_FORCE);
#  2. each patch in turn (HEAD detached at it): "make W=1 C=1 fs/btrfs/" in
#     $CACHE/build/gate (x86_64_defconfig + kunit.config) must build, with no
#     W=1 or sparse warning in fs/btrfs/ that the base does not have;
#  3. scripts/checkpatch.pl --strict on every patch, and on the extra patch
#     that adds kunit/*.c (see ci/export-series.sh --with-tests);
#  4. ./run_kunit.sh at the series tip;
#  5. ./run_selftests.sh at the series tip: the full kernel in QEMU on real
#     multi-device btrfs (kselftests/, btrfs-progs suite).
# Prints a summary table; exits non-zero on any failure.
set -euo pipefail
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/lib.sh"

GATE_BUILD=$BUILD_ROOT/gate
LOG_DIR=$CACHE/gate-logs
JOBS=$(nproc)
# Bump when the way warnings are collected changes: old baselines are unusable.
BASELINE_FORMAT=1
# checkpatch message types that cannot be right here:
#  FILE_PATH_CHANGES  "does MAINTAINERS need updating?" on any new file; the
#                     btrfs entry covers fs/btrfs/ already.
#  UNKNOWN_COMMIT_ID  the tree has no upstream history, so any "Fixes:" or
#                     "commit <sha> (...)" reference would be "unknown".
CHECKPATCH_IGNORE=FILE_PATH_CHANGES,UNKNOWN_COMMIT_ID

# Same compiler messages (ASCII quotes) in the baseline and in every run.
export LC_ALL=C

usage() { sed -n '2,7s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }
DO_PATCHES=1
DO_KUNIT=1
DO_VM=1
case "${1:-}" in
"") ;;
--no-kunit) DO_KUNIT=0 DO_VM=0 ;;
--only-kunit) DO_PATCHES=0 DO_VM=0 ;;
--no-vm) DO_VM=0 ;;
-h | --help) usage ;;
*) usage 2 ;;
esac

# Summary table rows, filled as the steps run.
ROWS=()
FAILED=0
row() { ROWS+=("$(printf '%-52s %-7s %-14s %s' "$@")"); }
fail() { FAILED=1; }

print_summary() {
	echo
	echo "==================== gate summary ===================="
	printf '%-52s %-7s %-14s %s\n' "step / patch" "build" "new warnings" "checkpatch / result"
	printf '%s\n' "${ROWS[@]}"
	if [ "$FAILED" = 0 ]; then echo "GATE: PASS"; else echo "GATE: FAIL"; fi
}

gate_make() { make -C "$TREE" O="$GATE_BUILD" -j"$JOBS" "$@"; }

# x86_64_defconfig once, then kunit.config merged in at every commit: a patch
# may add a Kconfig symbol (e.g. the KUnit test's).  .config is only replaced
# when the result differs, so that the build stays incremental.
#
# The KUnit sources in kunit/ follow the tip of the series, not each patch,
# so the *_KUNIT_TEST options are turned off except at the tip (WITH_TESTS=1).
configure_gate_build() { # WITH_TESTS
	mkdir -p "$GATE_BUILD"
	if [ ! -f "$GATE_BUILD/.config" ]; then
		gate_make -s x86_64_defconfig
	fi
	cp "$GATE_BUILD/.config" "$GATE_BUILD/.config.gate"
	if [ "$1" = 1 ]; then
		cat "$RESTRIPER_ROOT/kunit.config"
	else
		sed -E 's/^(CONFIG_[A-Z0-9_]*_KUNIT_TEST)=.*/# \1 is not set/' \
			"$RESTRIPER_ROOT/kunit.config"
	fi >>"$GATE_BUILD/.config.gate"
	gate_make -s KCONFIG_CONFIG=.config.gate olddefconfig >/dev/null
	if ! cmp -s "$GATE_BUILD/.config.gate" "$GATE_BUILD/.config"; then
		mv "$GATE_BUILD/.config.gate" "$GATE_BUILD/.config"
	fi
	rm -f "$GATE_BUILD/.config.gate" "$GATE_BUILD/.config.gate.old"
}

# build_btrfs LOG WITH_TESTS: incremental "make W=1 C=1 fs/btrfs/" (sparse
# runs on each recompiled file).  Returns make's status.
build_btrfs() {
	configure_gate_build "$2" >"$1" 2>&1 &&
		gate_make W=1 C=1 fs/btrfs/ >>"$1" 2>&1
}

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

# The warnings at base, computed once per base/config/toolchain: a full W=1 C=1
# build of fs/btrfs/ (its objects are removed first).
BASELINE=
ensure_baseline() {
	local key log
	key=$( {
		echo "format $BASELINE_FORMAT"
		git_tree rev-parse "$BASE_TAG^{commit}"
		cat "$RESTRIPER_ROOT/kunit.config"
		gcc --version | head -n1
		sparse --version
	} | sha256sum | cut -c1-16)
	BASELINE=$CACHE/gate-baseline-$key.txt
	[ -f "$BASELINE" ] && return 0
	log "computing the warning baseline at '$BASE_TAG' (full fs/btrfs/ build, once)"
	git_tree checkout -q --detach "$BASE_TAG"
	rm -rf "$GATE_BUILD/fs/btrfs"
	log=$LOG_DIR/baseline.log
	build_btrfs "$log" 0 || die "fs/btrfs/ does not build at '$BASE_TAG':" "$(build_errors "$log")" "(log: $log)"
	warnings "$log" | keys | LC_ALL=C sort >"$BASELINE.tmp"
	mv "$BASELINE.tmp" "$BASELINE"
	log "baseline: $(wc -l <"$BASELINE") warning lines at '$BASE_TAG' ($BASELINE)"
}

# One patch: HEAD detached at its commit, files it changes touched so that they
# and their users are recompiled (and sparse-checked) even when the build
# folder last saw them at this content.
check_patch_build() { # INDEX COMMIT PREV_COMMIT PATCH_NAME WITH_TESTS -> sets B_STATUS B_NEW
	local i=$1 commit=$2 prev=$3 name=$4 with_tests=$5 log new f
	log=$LOG_DIR/$(printf '%02d' "$i")-${name%.patch}.log
	git_tree checkout -q --detach "$commit"
	while IFS= read -r f; do
		if [ -e "$TREE/$f" ]; then touch "$TREE/$f"; fi
	done < <(git_tree diff --name-only "$prev" "$commit")
	B_NEW=-
	if ! build_btrfs "$log" "$with_tests"; then
		B_STATUS=FAIL
		echo "---- patch $i $name: fs/btrfs/ does not build (log: $log)"
		build_errors "$log"
		return 0
	fi
	B_STATUS=ok
	B_NEW=0
	new=$(new_warnings "$BASELINE" "$log")
	if [ -n "$new" ]; then
		B_NEW=$(wc -l <<<"$new")
		echo "---- patch $i $name: $B_NEW new W=1/sparse warning(s) (log: $log)"
		printf '%s\n' "$new"
	fi
}

# checkpatch_one LABEL FILE|- : sets C_STATUS.
checkpatch_one() {
	local out total
	out=$(cd "$TREE" && ./scripts/checkpatch.pl --strict --color=never \
		--ignore "$CHECKPATCH_IGNORE" "$2" 2>&1) || true
	total=$(grep -E '^total: [0-9]+ errors, [0-9]+ warnings, [0-9]+ checks' <<<"$out" | tail -n1 || true)
	if [[ "$total" =~ ^total:\ 0\ errors,\ 0\ warnings,\ 0\ checks ]]; then
		C_STATUS=ok
	else
		C_STATUS=$(sed -E 's/^total: ([0-9]+) errors, ([0-9]+) warnings, ([0-9]+) checks.*/\1 err, \2 warn, \3 chk/' <<<"${total:-total: ? errors, ? warnings, ? checks}")
		echo "---- checkpatch $1:"
		printf '%s\n' "$out"
	fi
}

# Steps 2 and 3.  Leaves HEAD where it found it.
check_patches() {
	local commits i prev orig patch name
	load_series
	mapfile -t commits < <(git_tree rev-list --reverse "$BASE_TAG..HEAD")
	[ ${#commits[@]} -eq ${#PATCHES[@]} ] ||
		die "the tree has ${#commits[@]} commits on '$BASE_TAG' but the series ${#PATCHES[@]} patches"
	mkdir -p "$LOG_DIR"
	orig=$(git_tree symbolic-ref -q --short HEAD || git_tree rev-parse HEAD)
	# shellcheck disable=SC2064 # expand now
	trap "git -C '$TREE' checkout -q '$orig'" EXIT

	ensure_baseline
	# The KUnit sources are in no commit: have them compiled (and checked)
	# again at the tip, the only patch built with them.
	rm -f "$GATE_BUILD"/fs/btrfs/tests/*.o
	prev=$(git_tree rev-parse "$BASE_TAG^{commit}")
	for i in "${!PATCHES[@]}"; do
		patch=${PATCHES[$i]}
		name=$(basename "$patch")
		log "patch $((i + 1))/${#PATCHES[@]}: $name"
		check_patch_build $((i + 1)) "${commits[$i]}" "$prev" "$name" \
			$((i + 1 == ${#PATCHES[@]}))
		checkpatch_one "$name" "$patch"
		row "$name" "$B_STATUS" "$B_NEW" "$C_STATUS"
		{ [ "$B_STATUS" = ok ] && [ "$B_NEW" = 0 ] && [ "$C_STATUS" = ok ]; } || fail
		prev=${commits[$i]}
	done

	git_tree checkout -q "$orig"
	trap - EXIT

	# The extra patch of the mail-ready series (the KUnit sources).
	if compgen -G "$RESTRIPER_ROOT/kunit/*.c" >/dev/null; then
		local tmp tc
		tc=$(tests_commit)
		tmp=$(mktemp)
		git_tree format-patch -1 --stdout "${FORMAT_OPTS[@]}" "$tc" >"$tmp"
		checkpatch_one "kunit/*.c (tests patch)" "$tmp"
		rm -f "$tmp"
		row "+ kunit/*.c as fs/btrfs/tests/ (tests patch)" "-" "-" "$C_STATUS"
		[ "$C_STATUS" = ok ] || fail
	fi
}

# run_stage LABEL SCRIPT: run a test script of the repo at the series tip; its
# closing "<word>: N passed, M failed..." line goes into the summary.
run_stage() {
	local out rc=0
	out=$(mktemp)
	bash "$RESTRIPER_ROOT/$2" 2>&1 | tee "$out" || rc=$?
	row "$1" "-" "-" "$(grep -E '^[a-z]+: [0-9]+ passed' "$out" | tail -n1 || echo 'no result')"
	rm -f "$out"
	[ "$rc" = 0 ] || fail
}

gate() {
	log "1. series applies to $LINUX_SOURCE_PACKAGE $LINUX_SOURCE_VERSION"
	if ! bash "$RESTRIPER_ROOT/ci/prepare-tree.sh" >/dev/null; then
		row "prepare tree: series applies to the pinned base" "FAIL" "-" "see above"
		fail
		print_summary
		return 1
	fi
	row "prepare tree: series applies to the pinned base" "-" "-" "ok"
	if [ "$DO_PATCHES" = 1 ]; then
		log "2+3. per-patch build, W=1/sparse warnings, checkpatch"
		check_patches
	fi
	if [ "$DO_KUNIT" = 1 ]; then
		log "4. KUnit at the series tip"
		run_stage "KUnit at the series tip" run_kunit.sh
	fi
	if [ "$DO_VM" = 1 ]; then
		log "5. VM selftests at the series tip"
		run_stage "VM selftests at the series tip" run_selftests.sh
	fi
	print_summary
	[ "$FAILED" = 0 ]
}

ensure_packages "${PACKAGES[@]}"
# One lock for the whole gate: HEAD moves from patch to patch, no other build
# may see the tree meanwhile.
with_build_lock gate
