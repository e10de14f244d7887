# shellcheck shell=bash
# The benchmark kernels, shared by bench/run.sh, bench/upstream-dry-run.sh and
# bench/usage-full-fs.sh.
# Source it after lib/common.sh and lib/vm.sh, don't run it.
#
# The two kernels: tinyconfig + lib/kernel.config + bench/kernel-nodebug.config,
# built by lib/build-kernel.sh under the build lock, incrementally:
#   series: the kernel tree as it is ($CACHE/linux, HEAD and any uncommitted
#           change; the tree is not prepared, reset or touched)
#           -> $CACHE/build/bench-series;
#           or, when the caller sets SERIES_REV, that revision of the tree
#           in a git worktree $CACHE/series-tree (moved to it when needed)
#           -> $CACHE/build/bench-series-rev: a result that names a commit,
#           and a build that work going on in the tree cannot break.
#           SERIES_REV=exported: the commit lib/prepare-tree.sh made from
#           kernel-patches/ as committed in this repo (refused while
#           kernel-patches/ has uncommitted changes or the tree was prepared
#           from other patches since)
#   base:   tag "base" (pristine Debian source), in a git worktree
#           $CACHE/base-tree made once -> $CACHE/build/bench-base
#
# The caller sets RUN (the run folder: bzImage-<kernel> and config-<kernel>
# go there, the wall times to timings.txt), STEPS_LOG (the steps' output) and
# KERNELS ("series base" or a part of it), then calls build_kernels and
# compare_configs; they set SERIES_STATE, BASE_STATE ("sha subject" of each
# tree) and CONFIG_NOTE.  prepare_run does that and the rest a run needs
# before its VMs: the caller's build_payload (the guest program into
# $RUN/payload) and the initramfs $RUN/initramfs.cpio.gz.

BENCH=$RESTRIPER_ROOT/bench
FRAGMENT=$BENCH/kernel-nodebug.config
SERIES_TREE=$CACHE/series-tree
SERIES_REV=${SERIES_REV:-}

# wait_for_builds WHAT: wait while a kernel build runs anywhere on the machine.
wait_for_builds() {
	local pids t0=$SECONDS said=0
	while pids=$(pgrep -f 'make.*bzImage|make.*O=' | tr '\n' ' ' || true); [ -n "$pids" ]; do
		if [ "$said" = 0 ]; then
			log "waiting before $1: a kernel build runs (pids $pids)"
			pgrep -af 'make.*bzImage|make.*O=' | head -n 3 >>"$STEPS_LOG" || true
			said=1
		fi
		sleep 15
	done
	[ "$said" = 0 ] || log "waited $((SECONDS - t0)) s for the build to end"
}

# timed LABEL CMD...: run CMD, record its wall time for the results (in a
# file: CMD may run in a subshell).
timed() {
	local label=$1 t0=$SECONDS rc=0
	shift
	"$@" || rc=$?
	echo "$label|$((SECONDS - t0))" >>"$RUN/timings.txt"
	return "$rc"
}

# series_rev_commit: the commit SERIES_REV names in the tree.
series_rev_commit() {
	local inputs
	if [ "$SERIES_REV" = exported ]; then
		# Only the committed series: work on it may be half exported.
		[ -z "$(git -C "$RESTRIPER_ROOT" status --porcelain -- kernel-patches)" ] ||
			die "series revision 'exported': kernel-patches/ has changes that are not committed (an export going on?); name a commit of $TREE instead"
		load_series
		inputs=$(series_hash)
		if [ "$(record_get inputs)" != "$inputs" ] || [ -z "$(record_get head)" ]; then
			die "series revision 'exported': the tree was not prepared from kernel-patches/ as it is now (lib/prepare-tree.sh)"
		fi
		record_get head
	else
		git_tree rev-parse -q --verify "$SERIES_REV^{commit}" ||
			die "series revision '$SERIES_REV': no such commit in $TREE"
	fi
}

# The worktree of SERIES_REV, made once, moved to another revision when
# asked (only the files that differ change: the build stays incremental).
# Under the build lock.
series_worktree() {
	local want have
	want=$(series_rev_commit)
	if [ ! -e "$SERIES_TREE" ]; then
		log "making the worktree $SERIES_TREE ($SERIES_REV: ${want:0:12})"
		git_tree worktree add --detach "$SERIES_TREE" "$want" >>"$STEPS_LOG" 2>&1 ||
			die "git worktree add $SERIES_TREE $want failed (log: $STEPS_LOG)"
	fi
	[ -z "$(git -C "$SERIES_TREE" --no-optional-locks status --porcelain --untracked-files=no)" ] ||
		die "$SERIES_TREE has changes to tracked files: it is a checkout of a revision, for these scripts only"
	have=$(git -C "$SERIES_TREE" rev-parse HEAD 2>/dev/null || true)
	if [ "$have" != "$want" ]; then
		log "moving the worktree $SERIES_TREE to $SERIES_REV (${want:0:12})"
		git -C "$SERIES_TREE" checkout -q --detach "$want" >>"$STEPS_LOG" 2>&1 ||
			die "git checkout $want in $SERIES_TREE failed (log: $STEPS_LOG)"
	fi
}

# build_kernel NAME FOLDER BUILD-KERNEL-ARGS...: build in $BUILD_ROOT/FOLDER;
# bzImage and .config into the run folder.
build_kernel() {
	local name=$1 folder=$2 bz
	shift 2
	bz=$(bash "$RESTRIPER_ROOT/lib/build-kernel.sh" --log "$STEPS_LOG" --name "$folder" \
		--fragment "$FRAGMENT" "$@") || die "the $name kernel was not built (log: $STEPS_LOG)"
	cp "$bz" "$RUN/bzImage-$name"
	cp "$BUILD_ROOT/$folder/.config" "$RUN/config-$name"
}

tree_state() { # DIR: "sha subject" and whether tracked files changed
	printf '%s%s' "$(git -C "$1" log -1 --format='%h %s' HEAD)" \
		"$([ -z "$(git -C "$1" --no-optional-locks status --porcelain --untracked-files=no)" ] || echo ' + uncommitted changes')"
}

# The series kernel from the tree as it is (or SERIES_REV's worktree), its
# state read under the build lock (a gate moves the tree's HEAD while it
# holds the lock).
SERIES_STATE='' BASE_STATE=''
build_series() {
	local before src=$TREE folder=bench-series
	if [ -n "$SERIES_REV" ]; then
		series_worktree
		src=$SERIES_TREE folder=bench-series-rev
	fi
	before=$(tree_state "$src")
	timed "build the series kernel" build_kernel series "$folder" --tree "$src"
	SERIES_STATE=$(tree_state "$src")
	[ "$before" = "$SERIES_STATE" ] ||
		log "WARNING: the tree changed during the build: '$before' -> '$SERIES_STATE'"
	log "series kernel: $SERIES_STATE"
	echo "$SERIES_STATE" >"$RUN/series-state.txt"
}

build_kernels() {
	local k
	for k in $KERNELS; do
		case "$k" in
		series)
			[ -d "$TREE/.git" ] || die "no kernel tree at $TREE (lib/prepare-tree.sh makes it)"
			wait_for_builds "building the series kernel"
			# (with_build_lock runs it in a subshell: the state goes by file)
			with_build_lock build_series
			SERIES_STATE=$(cat "$RUN/series-state.txt")
			;;
		base)
			with_build_lock base_worktree
			wait_for_builds "building the base kernel"
			timed "build the base kernel" build_kernel base bench-base --tree "$BASE_TREE"
			BASE_STATE=$(tree_state "$BASE_TREE")
			log "base kernel: $BASE_STATE"
			;;
		esac
	done
}

CONFIG_NOTE=''
compare_configs() {
	local d
	if [ -f "$RUN/config-series" ] && [ -f "$RUN/config-base" ]; then
		d=$(diff <(grep -v '^#' "$RUN/config-base" | grep -v '^$' | sort) \
			<(grep -v '^#' "$RUN/config-series" | grep -v '^$' | sort) | grep '^[<>]' || true)
		if [ -z "$d" ]; then
			CONFIG_NOTE="the two .config files set the same options"
		else
			CONFIG_NOTE="the .config files differ (< base, > series): $(tr '\n' ' ' <<<"$d")"
		fi
		log "config: $CONFIG_NOTE"
	fi
}

# The kernels, the guest program (the caller's build_payload) and the
# initramfs of a run.
prepare_run() {
	build_kernels
	compare_configs
	step "building the guest program" "$STEPS_LOG" build_payload ||
		die "the guest program does not build (log: $STEPS_LOG)"
	step "making the initramfs" "$STEPS_LOG" \
		bash "$RESTRIPER_ROOT/lib/make-initramfs.sh" "$RUN/initramfs.cpio.gz" "$RUN/payload" ||
		die "no initramfs (log: $STEPS_LOG)"
}

# reproducing_command SCRIPT LEFT_OUT...: SCRIPT with the arguments the run
# was given (ARGS_GIVEN), less those named in LEFT_OUT, quoted where they
# hold spaces: the command line that reproduces the run.
reproducing_command() {
	local out=$1 a skip
	shift
	for a in "${ARGS_GIVEN[@]}"; do
		for skip in "$@"; do [ "$a" != "$skip" ] || continue 2; done
		case "$a" in
		*[[:space:]]*) out="$out \"$a\"" ;;
		*) out="$out $a" ;;
		esac
	done
	echo "$out"
}

# steps_and_failures: the end of a results.md: the wall time of each step
# ($RUN/timings.txt, "step|seconds" lines) and the FAILED list, if any.
steps_and_failures() {
	echo "Wall time of the steps:"
	echo
	while IFS= read -r t; do printf -- '- %s: %s s\n' "${t%|*}" "${t##*|}"; done <"$RUN/timings.txt"
	if [ ${#FAILED[@]} -gt 0 ]; then
		echo
		echo "FAILED:"
		echo
		printf -- '- %s\n' "${FAILED[@]}"
	fi
}
