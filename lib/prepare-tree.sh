#!/usr/bin/env bash
# Make $CACHE/linux = pinned Debian kernel source + kernel-patches/series.
# Prints the tree path on stdout.
#
#   lib/prepare-tree.sh            (RESTRIPER_CACHE=... to use another cache)
#   RESTRIPER_FORCE=1 lib/prepare-tree.sh
#                                 reset even if the tree has work that is not
#                                 in kernel-patches/ (it is saved first, see
#                                 save_work)
#   lib/prepare-tree.sh --allow-work
#                                 when the series did not change, keep local
#                                 work (commits on top, uncommitted or new
#                                 files) instead of refusing: for trying out
#                                 work in progress (run_kunit.sh uses it)
#
# Cheap when nothing changed: the tree is only reset and re-patched when the
# series changed, and git only rewrites files that differ, so the kernel
# builds stay incremental.
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/common.sh"

FORCE=${RESTRIPER_FORCE:-0}
ALLOW_WORK=0
case "${1:-}" in
--allow-work) ALLOW_WORK=1 ;;
"") ;;
*) sed -n '2,18s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
PKG=$LINUX_SOURCE_PACKAGE
BASE_SUBJECT_PREFIX="Debian $PKG "

# --- (a) packages -----------------------------------------------------------

warn_loud() {
	local bar='!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!'
	{
		echo "$bar"
		echo "!!! WARNING: $PKG $LINUX_SOURCE_VERSION (pinned in ci/base.env) is NOT"
		echo "!!! offered by apt any more.  Falling back to the newest one offered:"
		echo "!!!     $PKG $1"
		echo "!!! The series is applied to a DIFFERENT kernel than the pinned one."
		echo "!!! Rebase the series and update ci/base.env."
		echo "$bar"
	} >&2
}

# Install the kernel source package; sets SOURCE_VERSION to what is installed.
install_source() {
	if is_installed "$PKG" "$LINUX_SOURCE_VERSION"; then
		SOURCE_VERSION=$LINUX_SOURCE_VERSION
		return
	fi
	apt_update
	local offered
	offered=$(apt-cache madison "$PKG" | awk -F'|' '{gsub(/[[:space:]]/, "", $2); print $2}') ||
		die "apt step failed: apt-cache madison $PKG"
	if grep -qxF -- "$LINUX_SOURCE_VERSION" <<<"$offered"; then
		apt_install "$PKG=$LINUX_SOURCE_VERSION"
		SOURCE_VERSION=$LINUX_SOURCE_VERSION
		return
	fi
	[ -n "$offered" ] || die "apt step failed: apt offers no $PKG at all"
	apt_install "$PKG" # apt's candidate: the newest offered
	SOURCE_VERSION=$(dpkg-query -W -f='${Version}' "$PKG")
	warn_loud "$SOURCE_VERSION"
}

# --- (b) the base tree ------------------------------------------------------

# Version of the tree's "base" commit, or "" when there is no usable tree.
# The record .git/restriper-base says it; a tree made by hand is adopted when
# its base commit is titled "Debian <package> <version>" (as this script
# titles it), and the record is then written.
tree_base_version() {
	local base subject ver
	base=$(git_tree rev-parse -q --verify "$BASE_TAG^{commit}" 2>/dev/null) || return 0
	if [ -f "$BASE_RECORD" ] && [ "$(sed -n 's/^commit=//p' "$BASE_RECORD")" = "$base" ]; then
		sed -n 's/^version=//p' "$BASE_RECORD"
		return
	fi
	subject=$(git_tree log -1 --format=%s "$base")
	case "$subject" in
	"$BASE_SUBJECT_PREFIX"*) ;;
	*) return 0 ;;
	esac
	ver=${subject#"$BASE_SUBJECT_PREFIX"}
	log "adopting existing tree $TREE (tag $BASE_TAG = $subject)"
	write_base_record "$TREE" "$ver" "$base"
	echo "$ver"
}

write_base_record() { # TREE VERSION COMMIT
	printf 'package=%s\nversion=%s\ncommit=%s\n' "$PKG" "$2" "$3" >"$1/.git/restriper-base"
}

commit_base() { # DIR
	git -C "$1" init -q -b "$TREE_BRANCH"
	git -C "$1" config user.name "$RESTRIPER_GIT_NAME"
	git -C "$1" config user.email "$RESTRIPER_GIT_EMAIL"
	# ~90k loose objects would start a long background gc at a random
	# later git command; the tree is a cache, it need not be packed.
	git -C "$1" config gc.auto 0
	# Debian's .gitignore ignores everything ("/*"): -f is needed.
	git -C "$1" add -f -A .
	git -C "$1" commit -q -m "$BASE_SUBJECT_PREFIX$SOURCE_VERSION"
	git -C "$1" tag "$BASE_TAG"
}

ensure_tree() {
	local have tmp tarball keep_old=0
	have=$(tree_base_version)
	[ "$have" = "$LINUX_SOURCE_VERSION" ] && return 0
	install_source
	[ "$have" = "$SOURCE_VERSION" ] && return 0

	# Keep the old tree (as $TREE.old) only when it may hold work.
	if [ -e "$TREE" ]; then
		if [ -z "$have" ]; then
			[ "$FORCE" = 1 ] || die "$TREE exists but is not a restriper tree (no tag '$BASE_TAG' on a commit titled '$BASE_SUBJECT_PREFIX<version>')." \
				"Move it away, or set RESTRIPER_FORCE=1 to move it to $TREE.old."
			keep_old=1
		else
			log "tree base is $PKG $have, want $SOURCE_VERSION: making a new tree"
			if [ -n "$(work_problems)" ]; then
				[ "$FORCE" = 1 ] || die "$TREE holds work that is not in kernel-patches/:" "$(work_problems)" \
					"Export it (ci/export-series.sh), or set RESTRIPER_FORCE=1 to move the tree to $TREE.old."
				keep_old=1
			fi
		fi
		rm -rf "$TREE.old"
		mv "$TREE" "$TREE.old"
	fi

	tarball=$(dpkg -L "$PKG" | grep -m1 '/usr/src/.*\.tar\.xz$') ||
		die "$PKG $SOURCE_VERSION is installed but ships no /usr/src/*.tar.xz"
	tmp=$CACHE/linux.new
	rm -rf "$tmp"
	mkdir -p "$tmp"
	step "unpacking $(basename "$tarball")" "$LOGS/prepare-tree.log" \
		tar -xf "$tarball" -C "$tmp" --strip-components=1 ||
		die "cannot unpack $tarball"
	step "committing the pristine base to git" "$LOGS/prepare-tree.log" \
		commit_base "$tmp" || die "cannot commit the base tree"
	write_base_record "$tmp" "$SOURCE_VERSION" "$(git -C "$tmp" rev-parse HEAD)"
	# Only a complete tree ever sits at $TREE.
	mv "$tmp" "$TREE"
	if [ "$keep_old" = 1 ]; then
		log "old tree kept as $TREE.old: delete it when its work is saved"
	else
		rm -rf "$TREE.old"
	fi
}

# --- (c) the series ---------------------------------------------------------

# Commit the tree must be at when it holds nothing but the recorded series:
# the recorded HEAD, or base when there is no record (new or adopted tree).
expected_head() {
	local h
	h=$(record_get head)
	if [ -n "$h" ] && git_tree cat-file -e "$h^{commit}" 2>/dev/null; then
		echo "$h"
	else
		git_tree rev-parse "$BASE_TAG^{commit}"
	fi
}

# Lines describing work in the tree that a reset would lose ("" if none).
work_problems() {
	local expected n changes untracked
	expected=$(expected_head)
	n=$(git_tree rev-list --count "$expected..HEAD")
	if [ "$n" -gt 0 ]; then
		echo "- $n commit(s) on top of $(git_tree log -1 --format='%h (%s)' "$expected"), not exported to kernel-patches/:"
		git_tree log --format='    %h %s' "$expected..HEAD" | head -n 20
	fi
	if am_in_progress && [[ "$(record_get inputs)" != failed:* ]]; then
		echo "- a 'git am' is in progress in the tree (not started by this script)"
	fi
	changes=$(tree_changes)
	if [ -n "$changes" ]; then
		echo "- uncommitted changes in tracked files:"
		head -n 20 <<<"$changes" | sed 's/^/    /'
	fi
	untracked=$(tree_untracked)
	if [ -n "$untracked" ]; then
		echo "- untracked files (hidden from 'git status' by Debian's .gitignore; 'git add -f' them):"
		head -n 20 <<<"$untracked" | sed 's/^/    /'
	fi
}

# RESTRIPER_FORCE=1: keep the developer's work reachable before the reset.
save_work() {
	local ts stash
	local -a untracked
	ts=$(date +%Y%m%d-%H%M%S)
	if [ "$(git_tree rev-list --count "$(expected_head)..HEAD")" -gt 0 ]; then
		git_tree branch -f "restriper-saved/$ts" HEAD
		log "FORCE: saved HEAD as branch restriper-saved/$ts"
	fi
	stash=$(git_tree stash create "restriper-saved $ts")
	if [ -n "$stash" ]; then
		git_tree branch -f "restriper-saved/$ts-wip" "$stash"
		log "FORCE: saved uncommitted changes as branch restriper-saved/$ts-wip (a stash commit)"
	fi
	mapfile -t untracked < <(tree_untracked)
	if [ ${#untracked[@]} -gt 0 ]; then
		mkdir -p "$CACHE/saved"
		(cd "$TREE" && tar -cf "$CACHE/saved/$ts-untracked.tar" -- "${untracked[@]}" && rm -rf -- "${untracked[@]}")
		log "FORCE: moved untracked files to $CACHE/saved/$ts-untracked.tar"
	fi
}

# Print which patch failed and why, leave the failed am for inspection, exit.
report_failed_patch() { # PATCH INDEX COUNT INPUTS AM_OUTPUT
	local name
	name=$(basename "$1")
	# HEAD now has the patches before it; a re-run resets this state freely.
	record_set "failed:$4" "$(git_tree rev-parse HEAD)"
	{
		echo "=== git am $name:"
		# Its own hints number patches per call ("0001"): ours follow below.
		grep -v -e '^hint:' -e '^Patch failed at' -e '^When you have resolved' \
			-e '^If you prefer to skip' -e '^To restore the original' <<<"$5" || true
		echo "=== git apply --check -v $name (on top of patches 1..$(($2 - 1))):"
		git_tree apply --check -v "$1" 2>&1 || true
		echo "==="
	} >&2
	die "patch $2/$3 does not apply: kernel-patches/$name" \
		"The tree is left at the patch before it, with the 'git am' stopped:" \
		"  cd $TREE && git am --show-current-patch=diff" \
		"To fix it there: git apply --reject <patch>, edit, git add -f <files>, git am --continue," \
		"then ci/export-series.sh.  Re-running this script starts over from '$BASE_TAG'."
}

apply_series() {
	local inputs rec_inputs expected problems p i head out
	load_series
	inputs=$(series_hash)
	rec_inputs=$(record_get inputs)
	if [ ! -f "$APPLIED_RECORD" ] && [ ${#PATCHES[@]} -eq 0 ]; then
		# New or adopted tree and an empty series: base is the applied
		# series (recorded below once the tree is found in that state).
		rec_inputs=$inputs
	fi
	expected=$(expected_head)
	problems=$(work_problems)

	if [ -z "$problems" ] && [ "$inputs" = "$rec_inputs" ] && ! am_in_progress; then
		[ -f "$APPLIED_RECORD" ] || record_set "$inputs" "$expected"
		head=$(git_tree rev-parse HEAD)
		if [ "$head" = "$expected" ]; then
			log "series unchanged, tree already at $(git_tree log -1 --format='%h %s' HEAD)"
			return 0
		fi
		# HEAD is an ancestor (e.g. an interrupted gate): go back to the tip.
		log "series unchanged, moving HEAD back to the applied series ($expected)"
		git_tree checkout -q -B "$TREE_BRANCH" "$expected"
		return 0
	fi

	if [ -n "$problems" ] && [ "$ALLOW_WORK" = 1 ] && [ "$FORCE" != 1 ] &&
		[ "$inputs" = "$rec_inputs" ] && ! am_in_progress; then
		[ -f "$APPLIED_RECORD" ] || record_set "$inputs" "$expected"
		log "NOTE: series unchanged; keeping local work that is NOT in kernel-patches/ (--allow-work):"
		printf '%s\n' "$problems" >&2
		return 0
	fi

	if [ -n "$problems" ]; then
		if [ "$FORCE" != 1 ]; then
			die "$TREE holds work that is not in kernel-patches/ (a reset would lose it, and the gate tests only the exported series):" \
				"$problems" \
				"Export it first (ci/export-series.sh), or revert it, or set" \
				"RESTRIPER_FORCE=1 (saves it to branches restriper-saved/* and $CACHE/saved/, then resets)."
		fi
		log "RESTRIPER_FORCE=1: resetting despite:"
		printf '%s\n' "$problems" >&2
		save_work
	fi

	log "applying kernel-patches/series from scratch on '$BASE_TAG'"
	am_in_progress && git_tree am --quit
	rm -f "$APPLIED_RECORD"
	# Also removes files added by the previous series (tracked there, not in base).
	git_tree checkout -q -f -B "$TREE_BRANCH" "$BASE_TAG"

	i=0
	for p in "${PATCHES[@]}"; do
		i=$((i + 1))
		log "  [$i/${#PATCHES[@]}] $(basename "$p")"
		if ! out=$(GIT_COMMITTER_NAME=$RESTRIPER_GIT_NAME GIT_COMMITTER_EMAIL=$RESTRIPER_GIT_EMAIL \
			git_tree am -q --committer-date-is-author-date "$p" 2>&1); then
			report_failed_patch "$p" "$i" "${#PATCHES[@]}" "$inputs" "$out"
		fi
	done
	record_set "$inputs" "$(git_tree rev-parse HEAD)"
	log "series applies: ${#PATCHES[@]} patch(es), HEAD $(git_tree log -1 --format='%h %s' HEAD)"
}

main() {
	ensure_packages "${PACKAGES[@]}"
	mkdir -p "$CACHE" "$BUILD_ROOT"
	# The tree changes under the lock: no build may be reading it meanwhile.
	with_build_lock prepare_locked
	echo "$TREE"
}

prepare_locked() {
	ensure_tree
	apply_series
}

main "$@"
