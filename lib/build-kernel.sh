#!/usr/bin/env bash
# Build the kernel of the test VM: bzImage in $CACHE/build/vm, from the
# prepared tree (series + local work, like run_kunit.sh: prepare-tree.sh
# --allow-work), config = "make tinyconfig" + lib/kernel.config.
#
#   lib/build-kernel.sh [-v] [--log FILE]
#                               prints the bzImage path on stdout, and one
#                               line per step on stderr (preparing the kernel
#                               tree, building the VM kernel: N s); the
#                               steps' output (tree, config, make) is appended
#                               to FILE (default, printed: a new
#                               $CACHE/logs/vm-kernel-<time>.log),
#                               with -v or RESTRIPER_VERBOSE=1 also shown on
#                               stderr.  On a failure: the end of the log.
#
#   VM_BASE_CONFIG=x86_64_defconfig lib/build-kernel.sh
#                               merge the fragment onto another base config
#                               (any make target that writes a .config)
#
# Options for other kernels of the same config (bench/run.sh uses them; none
# of them given: the VM kernel as above):
#   --fragment FILE             merge FILE after lib/kernel.config (repeatable,
#                               in order; the last setting of a symbol wins)
#   --name NAME                 build folder $CACHE/build/NAME (default: vm)
#   --tree DIR                  build the kernel source in DIR (e.g. a git
#                               worktree of tag "base") instead of the
#                               prepared tree: the tree is then neither
#                               prepared nor touched
#
# Incremental: .config is only replaced when the merged result differs, so
# an unchanged config rebuilds nothing but what the tree changed.  Fails when
# a setting of lib/kernel.config (or of a --fragment) did not survive "make
# olddefconfig" (a dependency is missing), naming those settings.  Holds the
# build lock.
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }
BUILD_LOG=''
NAME=vm
SRC_TREE=''
FRAGMENTS=("$RESTRIPER_ROOT/lib/kernel.config")
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--log) BUILD_LOG=$2; shift 2 ;;
	--fragment) [ -f "$2" ] || die "--fragment $2: no such file"
		FRAGMENTS+=("$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
	--name) [[ "$2" =~ ^[A-Za-z0-9._-]+$ ]] || die "--name: a folder name, not '$2'"
		NAME=$2; shift 2 ;;
	--tree) { [ -f "$2/Makefile" ] && [ -d "$2/fs/btrfs" ]; } || die "--tree $2: not a kernel source tree"
		SRC_TREE=$(cd "$2" && pwd); shift 2 ;;
	-h | --help) usage ;;
	*) usage 2 >&2 ;;
	esac
done

VM_BUILD=$BUILD_ROOT/$NAME
# The source tree: the prepared one, unless --tree.
SRC=${SRC_TREE:-$TREE}
# "lib/kernel.config + bench/x.config" for the messages.
FRAGMENT_NAMES=$(for f in "${FRAGMENTS[@]}"; do printf '%s\n' "${f#"$RESTRIPER_ROOT"/}"; done | paste -sd+ | sed 's/+/ + /g')
LABEL="the VM kernel"
if [ "$NAME" != vm ] || [ -n "$SRC_TREE" ]; then LABEL="the kernel $NAME"; fi
BASE_CONFIG=${VM_BASE_CONFIG:-tinyconfig}
JOBS=$(nproc)
NEW=.config.vm-new # in $VM_BUILD

vm_make() { make -C "$SRC" O="$VM_BUILD" -j"$JOBS" "$@"; }

# missing_settings CONFIG FRAGMENT...: the fragments' settings (the last one
# of each symbol, as merge_config.sh does) that CONFIG does not have:
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
	' "$@"
}

# configure: the merged config, written to .config only when it differs.
# Runs in a subshell (die ends the step, not the script) and checks every
# command itself: a step's command runs without errexit.
configure() (
	local missing
	mkdir -p "$VM_BUILD" || exit
	rm -f "$VM_BUILD/$NEW" "$VM_BUILD/$NEW.old"
	log "config: $BASE_CONFIG + $FRAGMENT_NAMES (source: $SRC)"
	vm_make -s KCONFIG_CONFIG="$NEW" "$BASE_CONFIG" || die "make $BASE_CONFIG failed"
	# merge_config.sh writes its temporary files into the current folder.
	(cd "$VM_BUILD" && KCONFIG_CONFIG=$NEW "$SRC/scripts/kconfig/merge_config.sh" -m "$NEW" "${FRAGMENTS[@]}") >/dev/null ||
		die "merge_config.sh failed"
	vm_make -s KCONFIG_CONFIG="$NEW" olddefconfig || die "make olddefconfig failed"
	missing=$(missing_settings "$VM_BUILD/$NEW" "${FRAGMENTS[@]}") || exit
	if [ -n "$missing" ]; then
		die "settings of $FRAGMENT_NAMES that did not survive 'make olddefconfig' on $BASE_CONFIG (missing dependencies?):" \
			"$missing" "(the merged config: $VM_BUILD/$NEW)"
	fi
	if cmp -s "$VM_BUILD/$NEW" "$VM_BUILD/.config"; then
		log "config unchanged"
		rm -f "$VM_BUILD/$NEW"
	else
		[ ! -f "$VM_BUILD/.config" ] || log "config changed"
		mv "$VM_BUILD/$NEW" "$VM_BUILD/.config" || exit
	fi
	rm -f "$VM_BUILD/$NEW.old"
)

configure_and_make() {
	configure || return
	log "make bzImage in $VM_BUILD (-j$JOBS)"
	vm_make bzImage
}

# build: the steps; their output to $BUILD_LOG (and, with -v, to stderr:
# stdout is only for the bzImage path).
build() {
	local lines=0 errors line
	if [ -z "$SRC_TREE" ]; then
		prepare_tree_step "$BUILD_LOG" >&2 || exit 1
	fi
	[ ! -f "$BUILD_LOG" ] || lines=$(wc -l <"$BUILD_LOG")
	if ! step "building $LABEL" "$BUILD_LOG" configure_and_make >&2; then
		# With -j, the compiler's error may be far above the end.
		errors=$(tail -n +"$((lines + 1))" "$BUILD_LOG" |
			grep -E ': (fatal )?error:|undefined reference' | head -n 20 || true)
		if [ -n "$errors" ] && [ "$VERBOSE" != 1 ]; then
			log "the errors in $BUILD_LOG:"
			while IFS= read -r line; do printf '    | %s\n' "$line"; done <<<"$errors" >&2
		fi
		exit 1
	fi
	log "bzImage: $VM_BUILD/arch/x86/boot/bzImage (log: $BUILD_LOG)" 2>>"$BUILD_LOG"
	echo "$VM_BUILD/arch/x86/boot/bzImage"
}

if [ -z "$BUILD_LOG" ]; then
	BUILD_LOG=$LOGS/vm-kernel-$(date +%Y%m%d-%H%M%S).log
	log "log: $BUILD_LOG"
fi
mkdir -p "$(dirname "$BUILD_LOG")"
BUILD_LOG=$(cd "$(dirname "$BUILD_LOG")" && pwd)/$(basename "$BUILD_LOG")
ensure_packages "${PACKAGES[@]}"
with_build_lock build
