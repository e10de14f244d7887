#!/usr/bin/env bash
# Export the tree's commits base..HEAD to kernel-patches/ (+ series file),
# and copy the KUnit sources of the tip (fs/btrfs/tests/*-test.c) to kunit/.
#
#   ci/export-series.sh
#
# The patches are the source of truth; the tree in $CACHE is only a work
# area, and kunit/ a copy for readers (the gate checks that it matches).
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

case "${1:-}" in
"") ;;
*) sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 2 ;;
esac

if ! git_tree rev-parse -q --verify "$BASE_TAG^{commit}" >/dev/null 2>&1; then
	die "no prepared tree at $TREE: run lib/prepare-tree.sh first"
fi
git_tree merge-base --is-ancestor "$BASE_TAG" HEAD ||
	die "HEAD of $TREE does not descend from tag '$BASE_TAG'"

# Work that would silently be left out of the export.
am_in_progress && die "a 'git am' is in progress in $TREE: finish it (git am --continue) or abort it first"
changes=$(tree_changes)
[ -z "$changes" ] || die "uncommitted changes in $TREE would not be exported; commit them first:" "$changes"
untracked=$(tree_untracked)
if [ -n "$untracked" ]; then
	[ "${RESTRIPER_FORCE:-0}" = 1 ] ||
		die "untracked files in $TREE would not be exported (Debian's .gitignore hides them" \
			"from 'git status'; add them with 'git add -f'), or set RESTRIPER_FORCE=1:" "$untracked"
	log "RESTRIPER_FORCE=1: exporting without the untracked files:"
	printf '    %s\n' "${untracked//$'\n'/$'\n    '}" >&2
fi

# --- the series -------------------------------------------------------------
mkdir -p "$PATCH_DIR"
rm -f "$PATCH_DIR"/*.patch
git_tree format-patch -q "${FORMAT_OPTS[@]}" -o "$PATCH_DIR" "$BASE_TAG..HEAD"
# The comments of the old series file (the phases of the series) stay
# before the patch number they were before.
old_series=$(cat "$SERIES" 2>/dev/null || true)
(cd "$PATCH_DIR" && find . -maxdepth 1 -name '*.patch' -printf '%f\n' | LC_ALL=C sort) |
	awk -v old="$old_series" '
		BEGIN {
			n = split(old, lines, "\n")
			for (i = 1; i <= n; i++) {
				if (lines[i] ~ /^#/)
					text = text lines[i] "\n"
				else if (lines[i] != "") {
					before[substr(lines[i], 1, 4)] = text
					text = ""
				}
			}
		}
		{
			phase = before[substr($0, 1, 4)]
			if (phase != "")
				printf "%s%s", (NR > 1 ? "\n" : ""), phase
			print
		}' >"$SERIES"
load_series
# The tree is exactly what the exported series gives: prepare-tree.sh must
# not re-apply it.
record_set "$(series_hash)" "$(git_tree rev-parse HEAD)"
log "exported ${#PATCHES[@]} patch(es) to kernel-patches/"

# --- the KUnit sources, for readers -----------------------------------------
mkdir -p "$RESTRIPER_ROOT/kunit"
rm -f "$RESTRIPER_ROOT"/kunit/*.c
for f in $(series_kunit_sources HEAD); do
	git_tree show "HEAD:$f" >"$RESTRIPER_ROOT/kunit/$(basename "$f")"
done
log "copied the KUnit sources of the tip to kunit/: $(cd "$RESTRIPER_ROOT/kunit" && ls ./*.c 2>/dev/null | tr '\n' ' ')"
