# shellcheck shell=bash disable=SC2034  # variables used by the sourcing scripts
# What every script shares: logging, packages, the build lock, the kernel
# tree and the series, KUnit results.  Source it, don't run it.
#
# Everything big lives outside the repo, under $CACHE:
#   $CACHE/linux           the kernel git tree (branch "restriper", tag "base")
#   $CACHE/build/<name>    out-of-tree build folders (O=...)
#   $CACHE/build.lock      flock: never two kernel builds at once

RESTRIPER_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=ci/base.env
. "$RESTRIPER_ROOT/ci/base.env"

SCRIPT=$(basename "$0")
CACHE=${RESTRIPER_CACHE:-/var/tmp/restriper}
TREE=$CACHE/linux
BUILD_ROOT=$CACHE/build
TREE_BRANCH=restriper
BASE_TAG=base
PATCH_DIR=$RESTRIPER_ROOT/kernel-patches
SERIES=$PATCH_DIR/series
# Files under the tree's .git/ that belong to these scripts.
BASE_RECORD=$TREE/.git/restriper-base        # which Debian package/version "base" is
APPLIED_RECORD=$TREE/.git/restriper-applied  # which series inputs gave which HEAD

# Fixed identity, so that the same series on the same base gives the same
# commit ids (git am also uses --committer-date-is-author-date).
RESTRIPER_GIT_NAME="Restriper Dev"
RESTRIPER_GIT_EMAIL="restriper@example.org"

# What the scripts need on a fresh Debian machine.  perl, python3-ply,
# python3-git: checkpatch (and its scripts/spdxcheck.py);
# libc6-dev/libssl-dev: host tools of the kernel build (gcc only recommends
# libc6-dev, and we install without recommends).
PACKAGES=(qemu-system-x86 btrfs-progs busybox-static sparse flex bison
	libelf-dev libssl-dev libc6-dev bc xz-utils python3 cpio kmod rsync git
	make gcc perl python3-ply python3-git)

# Errors inside $(...) stop the script too.
shopt -s inherit_errexit

# Use Debian's tools first: the python3 modules we install (python3-ply,
# python3-git for checkpatch's SPDX check) are only in Debian's python3, and a
# python3 from e.g. pyenv may come first in PATH.
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

# kunit.py imports its modules from the tree: keep __pycache__ out of it.
export PYTHONDONTWRITEBYTECODE=1

log() { printf '[%s] %s\n' "$SCRIPT" "$*" >&2; }

# die "first line" ["more lines"...]: print an error and exit 1.
die() {
	local arg line
	printf '[%s] ERROR: %s\n' "$SCRIPT" "$1" >&2
	shift
	for arg in "$@"; do
		while IFS= read -r line; do
			printf '[%s]        %s\n' "$SCRIPT" "$line" >&2
		done <<<"$arg"
	done
	exit 1
}

is_installed() { # PACKAGE [EXACT_VERSION]
	local st
	st=$(dpkg-query -W -f='${Status}|${Version}' "$1" 2>/dev/null || true)
	[ "${st%%|*}" = "install ok installed" ] || return 1
	[ -z "${2:-}" ] || [ "${st#*|}" = "$2" ]
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Logs of the steps shared by the scripts (apt, tree preparation).
LOGS=$CACHE/logs
APT_LOG=$LOGS/apt.log

apt_updated=
apt_update() {
	[ -n "$apt_updated" ] && return 0
	step "apt-get update" "$APT_LOG" \
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
		die "apt step failed: apt-get update (log: $APT_LOG)"
	apt_updated=1
}

# apt_install PKG[=VERSION]...: no recommends, no questions.
apt_install() {
	step "installing packages: $*" "$APT_LOG" \
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends --allow-downgrades "$@" ||
		die "apt step failed: apt-get install $* (log: $APT_LOG)"
}

# ensure_packages PKG...: install what is missing (fast no-op when all present).
ensure_packages() {
	local missing=() p
	for p in "$@"; do is_installed "$p" || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "missing packages: ${missing[*]}"
	apt_update
	apt_install "${missing[@]}"
}

# with_build_lock CMD...: run CMD holding $CACHE/build.lock, so that two kernel
# builds (or a build and a tree reset) never overlap.  Re-entrant: nested
# calls (e.g. gate.sh -> run_kunit.sh) just run CMD.
with_build_lock() {
	if [ "${RESTRIPER_BUILD_LOCK_HELD:-}" = "$CACHE" ]; then
		"$@"
		return
	fi
	mkdir -p "$CACHE"
	(
		exec 9>>"$CACHE/build.lock"
		if ! flock -n 9; then
			log "waiting for the build lock $CACHE/build.lock, held by: $(cat "$CACHE/build.lock.owner" 2>/dev/null || echo '?')"
			flock 9
		fi
		echo "pid $BASHPID ($SCRIPT $*) since $(date '+%F %T')" >"$CACHE/build.lock.owner"
		export RESTRIPER_BUILD_LOCK_HELD=$CACHE
		"$@"
	)
}

git_tree() { git -C "$TREE" "$@"; }

# load_series: set PATCHES to the patch files named in kernel-patches/series,
# in order, as absolute paths (blank lines and '#' comments skipped).  Runs in
# the calling shell, so that a bad series stops the script.
load_series() {
	[ -f "$SERIES" ] || die "missing $SERIES (create an empty file for an empty series)"
	local name
	PATCHES=()
	while IFS= read -r name || [ -n "$name" ]; do
		name=${name%%#*}
		name=${name//[[:space:]]/}
		[ -n "$name" ] || continue
		[ -f "$PATCH_DIR/$name" ] || die "kernel-patches/series names $name, but kernel-patches/$name does not exist"
		PATCHES+=("$PATCH_DIR/$name")
	done <"$SERIES"
}

# Hash of everything that decides the patched tree: base commit, series file,
# patch names and contents.  Call load_series first.
series_hash() {
	local p
	{
		git_tree rev-parse "$BASE_TAG^{commit}"
		cat "$SERIES"
		for p in "${PATCHES[@]}"; do
			printf '\n=== %s\n' "$(basename "$p")"
			cat "$p"
		done
	} | sha256sum | cut -d' ' -f1
}

# record_get KEY: value from the applied-series record ("" if none).
record_get() {
	[ -f "$APPLIED_RECORD" ] || return 0
	sed -n "s/^$1=//p" "$APPLIED_RECORD" | head -n1
}

record_set() { # INPUTS_HASH HEAD
	printf 'inputs=%s\nhead=%s\ndate=%s\n' "$1" "$2" "$(date '+%F %T')" >"$APPLIED_RECORD"
}

# Tracked files with changes (staged or not), one per line, "XY path".
# --no-optional-locks: never take index.lock, the developer may be using git.
tree_changes() {
	git_tree --no-optional-locks status --porcelain --untracked-files=no
}

# Untracked files in the tree.  Debian's .gitignore ignores everything that is
# not tracked, so "git status" hides new files: list them without the
# ignore rules, minus Python caches.
tree_untracked() {
	git_tree ls-files --others --directory --no-empty-directory \
		--exclude='__pycache__/' --exclude='*.pyc'
}

am_in_progress() { [ -d "$TREE/.git/rebase-apply" ]; }

# Options chosen so that re-exporting unchanged commits gives identical files:
# no "-- 2.x.y" signature, zeroed "From <sha>" line.
FORMAT_OPTS=(--no-signature --zero-commit)

# The KUnit sources the series adds: tests/*-test.c of fs/btrfs at a commit
# of the tree (default HEAD), one path per line.
series_kunit_sources() { # [COMMIT]
	git_tree ls-tree --name-only "${1:-HEAD}" fs/btrfs/tests/ |
		grep -E '^fs/btrfs/tests/[^/]+-test\.c$' || true
}

# kunit/ holds a copy of the KUnit sources at the tip of the series, where a
# reader looks for them.  Print what differs (nothing when it is a faithful
# copy of COMMIT's files).
kunit_copy_problems() { # COMMIT
	local f name
	for f in $(series_kunit_sources "$1"); do
		name=$(basename "$f")
		if [ ! -f "$RESTRIPER_ROOT/kunit/$name" ]; then
			echo "kunit/$name is missing ($f is in the series)"
		elif ! git_tree show "$1:$f" | cmp -s - "$RESTRIPER_ROOT/kunit/$name"; then
			echo "kunit/$name differs from $f at the tip of the series"
		fi
	done
	for f in "$RESTRIPER_ROOT"/kunit/*.c; do
		[ -e "$f" ] || continue
		name=$(basename "$f")
		series_kunit_sources "$1" | grep -qx "fs/btrfs/tests/$name" ||
			echo "kunit/$name is not in the series (fs/btrfs/tests/$name)"
	done
	return 0
}

# --- quiet steps ------------------------------------------------------------

# Commands print one line per step; the step's output goes to a log file
# and to the screen only with RESTRIPER_VERBOSE=1 (the scripts' -v).
VERBOSE=${RESTRIPER_VERBOSE:-0}

# step LABEL LOG CMD...: run CMD, its output appended to LOG; print
# "LABEL: done in N s" or, on failure, "LABEL: FAILED after N s (exit S)",
# the log's last lines and its path.  Returns CMD's status.
step() {
	local label=$1 log=$2 t0=$SECONDS rc=0
	shift 2
	mkdir -p "$(dirname "$log")"
	if [ "$VERBOSE" = 1 ]; then
		log "$label ..."
		"$@" 2>&1 | tee -a "$log" || rc=${PIPESTATUS[0]}
	else
		"$@" >>"$log" 2>&1 </dev/null || rc=$?
	fi
	if [ "$rc" -eq 0 ]; then
		log "$label: done in $((SECONDS - t0)) s"
	else
		log "$label: FAILED after $((SECONDS - t0)) s (exit $rc); the end of $log:"
		tail -n "${RESTRIPER_TAIL:-25}" "$log" | sed 's/^/    | /' >&2
	fi
	return "$rc"
}

# --- KUnit ------------------------------------------------------------------

# kunit_py run|build KUNITCONFIG [ARGS...]: the tree's kunit.py, x86_64 in
# QEMU, build folder $BUILD_ROOT/kunit.  The caller holds the build lock.
kunit_py() {
	local cmd=$1 cfg=$2
	shift 2
	mkdir -p "$BUILD_ROOT/kunit"
	(
		cd "$TREE"
		python3 tools/testing/kunit/kunit.py "$cmd" --arch=x86_64 \
			--kunitconfig="$cfg" --build_dir="$BUILD_ROOT/kunit" \
			--jobs="$(nproc)" "$@"
	)
}

# kunit_summary LOG: "kunit: X passed, Y failed" from kunit.py's line
# "Testing complete. Ran N tests: passed: X, failed: Y, crashed: Z, ..."
# (it leaves out zero counts), and a second line with crashed/skipped/
# errors when there are any.  Returns 1 on a failure or when no test ran.
kunit_summary() {
	local line total passed failed crashed skipped errors
	line=$(sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -o 'Testing complete\. Ran [0-9]* tests:.*' | tail -n1 || true)
	if [ -z "$line" ]; then
		echo "kunit: 0 passed, 0 failed (no test results)"
		return 1
	fi
	count() { grep -o "$1: [0-9]*" <<<"$line" | grep -o '[0-9]*$' || echo 0; }
	total=$(grep -o 'Ran [0-9]*' <<<"$line" | grep -o '[0-9]*$')
	passed=$(count passed)
	failed=$(count failed)
	crashed=$(count crashed)
	skipped=$(count skipped)
	errors=$(count errors)
	echo "kunit: $passed passed, $((failed + crashed)) failed"
	if [ $((crashed + skipped + errors)) -gt 0 ]; then
		echo "kunit: ($crashed crashed, $skipped skipped, $errors errors)"
	fi
	[ "$total" -gt 0 ] && [ $((failed + crashed + skipped + errors)) -eq 0 ]
}

# kunit_cases LOG: how many cases kunit.py ran ("Ran N tests"), 0 if none.
kunit_cases() {
	local n
	n=$(sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -o 'Testing complete\. Ran [0-9]*' |
		tail -n1 | grep -o '[0-9]*$' || true)
	echo "${n:-0}"
}

# kunit_missing_suites TREE LOG: the KUnit suites of fs/btrfs/ in TREE
# (their .name) that LOG does not show as passed, one per line.
kunit_missing_suites() {
	local name log
	log=$(sed 's/\x1b\[[0-9;]*m//g' "$2")
	grep -h -A4 '^static struct kunit_suite ' "$1"/fs/btrfs/tests/*.c 2>/dev/null |
		sed -n 's/^[[:space:]]*\.name = "\(.*\)",$/\1/p' |
		while IFS= read -r name; do
			grep -q "\[PASSED\] $name\( =*\)\?$" <<<"$log" || echo "$name"
		done
}

# --- the unpatched kernel -----------------------------------------------------

BASE_TREE=$CACHE/base-tree

# base_worktree: the worktree $BASE_TREE of tag base (the unpatched kernel,
# for the runs that compare with it), made once, checked every time; its
# output goes to $STEPS_LOG.  Under the build lock: nothing else changes the
# tree's .git meanwhile.
base_worktree() {
	local want have
	want=$(git_tree rev-parse "$BASE_TAG^{commit}")
	if [ ! -e "$BASE_TREE" ]; then
		log "making the worktree $BASE_TREE (tag $BASE_TAG)"
		git_tree worktree add --detach "$BASE_TREE" "$BASE_TAG" >>"$STEPS_LOG" 2>&1 ||
			die "git worktree add $BASE_TREE $BASE_TAG failed (log: $STEPS_LOG)"
	fi
	have=$(git -C "$BASE_TREE" rev-parse HEAD 2>/dev/null || true)
	[ "$have" = "$want" ] ||
		die "$BASE_TREE is not at tag $BASE_TAG ($want) but at '${have:-?}'; remove it (git -C $TREE worktree remove --force $BASE_TREE) and re-run"
	[ -z "$(git -C "$BASE_TREE" --no-optional-locks status --porcelain --untracked-files=no)" ] ||
		die "$BASE_TREE has changes to tracked files: it must be the pristine base"
}
