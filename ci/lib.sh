# shellcheck shell=bash disable=SC2034  # variables used by the sourcing scripts
# Shared helpers for ci/*.sh and run_kunit.sh.  Source it, don't run it.
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

apt_updated=
apt_update() {
	[ -n "$apt_updated" ] && return 0
	log "apt-get update"
	DEBIAN_FRONTEND=noninteractive as_root apt-get update -q >&2 ||
		die "apt step failed: apt-get update"
	apt_updated=1
}

# apt_install PKG[=VERSION]...: no recommends, no questions.
apt_install() {
	log "apt-get install $*"
	DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q \
		--no-install-recommends --allow-downgrades "$@" >&2 ||
		die "apt step failed: apt-get install $*"
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

# Is PATH (relative to the tree) one of the KUnit symlinks we make?
is_kunit_link() {
	[ -L "$TREE/$1" ] || return 1
	case "$(readlink "$TREE/$1")" in
	/*/kunit/*.c) return 0 ;;
	*) return 1 ;;
	esac
}

# Tracked files with changes (staged or not), one per line, "XY path".
# --no-optional-locks: never take index.lock, the developer may be using git.
tree_changes() {
	git_tree --no-optional-locks status --porcelain --untracked-files=no
}

# Untracked files in the tree.  Debian's .gitignore ignores everything that is
# not tracked, so "git status" hides new files: list them without the
# ignore rules, minus our KUnit symlinks and Python caches.
tree_untracked() {
	local f
	git_tree ls-files --others --directory --no-empty-directory \
		--exclude='__pycache__/' --exclude='*.pyc' |
		while IFS= read -r f; do
			is_kunit_link "$f" || printf '%s\n' "$f"
		done
}

am_in_progress() { [ -d "$TREE/.git/rebase-apply" ]; }

# Options chosen so that re-exporting unchanged commits gives identical files:
# no "-- 2.x.y" signature, zeroed "From <sha>" line.
FORMAT_OPTS=(--no-signature --zero-commit)

# tests_commit: print the id of a commit on top of HEAD that adds kunit/*.c as
# fs/btrfs/tests/<name> (the extra patch of the mail-ready series).  Made with
# a temporary index and commit-tree: the work tree (where those paths are our
# symlinks), HEAD and the branches are not touched; the commit is garbage
# afterwards.  Message: kunit/COMMIT_MSG if it exists, else a default one.
tests_commit() {
	local tests t name blob tree msg index an ae ad
	local -a names=()
	mapfile -t tests < <(find "$RESTRIPER_ROOT/kunit" -maxdepth 1 -name '*.c' | LC_ALL=C sort)
	[ ${#tests[@]} -gt 0 ] || die "no kunit/*.c to add"
	index=$(mktemp)
	rm -f "$index" # git wants to create it itself
	GIT_INDEX_FILE=$index git_tree read-tree HEAD
	for t in "${tests[@]}"; do
		name=$(basename "$t")
		names+=("fs/btrfs/tests/$name")
		blob=$(git_tree hash-object -w -- "$t")
		GIT_INDEX_FILE=$index git_tree update-index --add --cacheinfo "100644,$blob,fs/btrfs/tests/$name"
	done
	tree=$(GIT_INDEX_FILE=$index git_tree write-tree)
	rm -f "$index"

	# Same author and date as the series tip, fixed committer: stable ids.
	an=$(git_tree log -1 --format=%an HEAD)
	ae=$(git_tree log -1 --format=%ae HEAD)
	ad=$(git_tree log -1 --format=%aI HEAD)
	if [ -f "$RESTRIPER_ROOT/kunit/COMMIT_MSG" ]; then
		msg=$(cat "$RESTRIPER_ROOT/kunit/COMMIT_MSG")
	else
		msg="btrfs: tests: add KUnit tests

Add the KUnit test sources:

$(printf '  %s\n' "${names[@]}")

Signed-off-by: $an <$ae>"
	fi
	GIT_AUTHOR_NAME=$an GIT_AUTHOR_EMAIL=$ae GIT_AUTHOR_DATE=$ad \
		GIT_COMMITTER_NAME=$RESTRIPER_GIT_NAME GIT_COMMITTER_EMAIL=$RESTRIPER_GIT_EMAIL \
		GIT_COMMITTER_DATE=$ad \
		git_tree commit-tree "$tree" -p HEAD -m "$msg"
}
