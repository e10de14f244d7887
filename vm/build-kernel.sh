#!/usr/bin/env bash
# Build the kernel of the test VM: bzImage in $CACHE/build/vm, from the
# prepared tree (series + local work, like run_kunit.sh: prepare-tree.sh
# --allow-work), config = "make tinyconfig" + vm/kernel.config.
#
#   vm/build-kernel.sh          prints the bzImage path on stdout (the build
#                               output goes to stderr)
#
#   VM_BASE_CONFIG=x86_64_defconfig vm/build-kernel.sh
#                               merge the fragment onto another base config
#                               (any make target that writes a .config)
#
# Incremental: .config is only replaced when the merged result differs, so
# an unchanged config rebuilds nothing but what the tree changed.  Fails when
# a setting of vm/kernel.config did not survive "make olddefconfig" (a
# dependency is missing), naming those settings.  Holds the build lock.
set -euo pipefail
# shellcheck source=ci/lib.sh
. "$(dirname "$0")/../ci/lib.sh"

case "${1:-}" in
"") ;;
-h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
*) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac

VM_BUILD=$BUILD_ROOT/vm
FRAGMENT=$RESTRIPER_ROOT/vm/kernel.config
BASE_CONFIG=${VM_BASE_CONFIG:-tinyconfig}
JOBS=$(nproc)
NEW=.config.vm-new # in $VM_BUILD

vm_make() { make -C "$TREE" O="$VM_BUILD" -j"$JOBS" "$@"; }

# missing_settings FRAGMENT CONFIG: the fragment's settings (the last one of
# each symbol, as merge_config.sh does) that CONFIG does not have:
# "CONFIG_X=v" must be there as it is, "# CONFIG_X is not set" must not be
# set to anything.
missing_settings() {
	awk '
		FNR == NR {
			if (match($0, /^CONFIG_[A-Za-z0-9_]+=/))
				have[substr($0, 1, RLENGTH - 1)] = $0
			next
		}
		/^CONFIG_[A-Za-z0-9_]+=/ {
			name = substr($0, 1, index($0, "=") - 1)
			if (!(name in want)) order[++n] = name
			want[name] = $0
		}
		/^# CONFIG_[A-Za-z0-9_]+ is not set/ {
			if (!($2 in want)) order[++n] = $2
			want[$2] = $0
		}
		END {
			for (i = 1; i <= n; i++) {
				name = order[i]
				line = want[name]
				got = (name in have) ? have[name] : "not set"
				if (line ~ /^#/ ? (name in have) : (got != line))
					printf "%-40s (have: %s)\n", line, got
			}
		}
	' "$2" "$1"
}

configure() {
	local missing
	mkdir -p "$VM_BUILD"
	rm -f "$VM_BUILD/$NEW" "$VM_BUILD/$NEW.old"
	log "config: $BASE_CONFIG + vm/kernel.config"
	vm_make -s KCONFIG_CONFIG="$NEW" "$BASE_CONFIG" >&2
	# merge_config.sh writes its temporary files into the current folder.
	(cd "$VM_BUILD" && KCONFIG_CONFIG=$NEW "$TREE/scripts/kconfig/merge_config.sh" -m "$NEW" "$FRAGMENT") >/dev/null
	vm_make -s KCONFIG_CONFIG="$NEW" olddefconfig >&2
	missing=$(missing_settings "$FRAGMENT" "$VM_BUILD/$NEW")
	if [ -n "$missing" ]; then
		die "settings of vm/kernel.config that did not survive 'make olddefconfig' on $BASE_CONFIG (missing dependencies?):" \
			"$missing" "(the merged config: $VM_BUILD/$NEW)"
	fi
	if cmp -s "$VM_BUILD/$NEW" "$VM_BUILD/.config"; then
		log "config unchanged"
		rm -f "$VM_BUILD/$NEW"
	else
		[ ! -f "$VM_BUILD/.config" ] || log "config changed"
		mv "$VM_BUILD/$NEW" "$VM_BUILD/.config"
	fi
	rm -f "$VM_BUILD/$NEW.old"
}

build() {
	local start
	start=$(date +%s)
	bash "$RESTRIPER_ROOT/ci/prepare-tree.sh" --allow-work >/dev/null
	log "tree: $(git_tree log -1 --format='%h %s' HEAD)$([ -z "$(tree_changes)" ] || echo ' + uncommitted changes')"
	configure
	log "make bzImage in $VM_BUILD (-j$JOBS)"
	vm_make bzImage >&2 || die "the kernel build failed (output above)"
	log "built in $(($(date +%s) - start)) s"
	echo "$VM_BUILD/arch/x86/boot/bzImage"
}

ensure_packages "${PACKAGES[@]}"
with_build_lock build
