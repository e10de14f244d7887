#!/usr/bin/env bash
# Wall times of the test harness, measured or read from real runs:
#
#   bench/harness-times.sh [-v] [--out FILE] [--kunit-runs N] [--run-selftests]
#
#   --out FILE        write the figures there (default: stdout), one per line:
#                       key|seconds|what|where the figure comes from
#   --kunit-runs N    how many times to time the incremental KUnit loop
#                     (default 3; 0: not at all)
#   --run-selftests   also run ./run_selftests.sh once and time it (about 5
#                     minutes; by default its time is read from the newest
#                     run's logs)
#
# From the logs of the last gate run in $CACHE (file birth and modification
# times; nothing is re-run):
#   - the fresh set-up, when that run made the cache from nothing (CI on a
#     fresh machine: its tree preparation unpacked the Debian source): from
#     the birth of $CACHE to the end of its selftests stage; with its parts
#     (apt, tree, baseline, per patch: build W=1 C=1 + checkpatch + KUnit,
#     from gate-logs/NN-*.{build,checkpatch,kunit}.log);
#   - the VM stage of the newest complete run_selftests.sh run
#     ($CACHE/vm-logs/selftests-*/: steps.log, summary.txt), with the VM
#     times its steps.log names.
# Measured here:
#   - the incremental KUnit loop: touch fs/btrfs/balance.c in the tree (only
#     its mtime changes), ./run_kunit.sh, timed; N times, holding the build
#     lock for all of it (the time does not include waiting for the lock).
#     Skipped, and said so, when the tree is not prepared for the current
#     kernel-patches/ (run_kunit.sh would re-apply the series: a tree change
#     this script must not make).
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }
OUT=''
KUNIT_RUNS=3
RUN_SELFTESTS=0
while [ $# -gt 0 ]; do
	case "$1" in
	-v) export RESTRIPER_VERBOSE=1; shift ;;
	--out) OUT=$2; shift 2 ;;
	--kunit-runs) KUNIT_RUNS=$2; shift 2 ;;
	--run-selftests) RUN_SELFTESTS=1; shift ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
[[ "$KUNIT_RUNS" =~ ^[0-9]+$ ]] || die "--kunit-runs: a number, not $KUNIT_RUNS"

GATE_VM_DIR=''
FIGS=$(mktemp)
trap 'rm -f "$FIGS"' EXIT
# fig KEY SECONDS WHAT SOURCE
fig() { printf '%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" >>"$FIGS"; }
birth() { stat -c %W "$1" 2>/dev/null || echo 0; }
mtime() { stat -c %Y "$1" 2>/dev/null || echo 0; }
when() { date -d "@$1" '+%F %T'; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# --- the last gate run -------------------------------------------------------

# apt_end_between FROM TO: the end (epoch) of the last apt run that
# /var/log/apt/history.log says started between FROM and TO (apt's own
# log: $CACHE/logs/apt.log gets appended to by later installs).
apt_end_between() {
	local f=/var/log/apt/history.log
	[ -r "$f" ] || return 0
	awk -v from="$1" -v to="$2" '
		function epoch(d, t) { gsub(/-/, " ", d); gsub(/:/, " ", t); return mktime(d " " t) }
		/^Start-Date:/ { s = epoch($2, $3) }
		/^End-Date:/ { if (s >= from - 5 && s <= to) e = epoch($2, $3) }
		END { if (e) print e }
	' "$f"
}

GL=$CACHE/gate-logs

# first_birth PATCH: the earliest birth of gate-logs/PATCH-*.log; last_mtime
# PATCH: the latest modification.
first_birth() {
	local f b min=''
	for f in "$GL/$1"-*.log; do
		b=$(birth "$f")
		if [ -z "$min" ] || [ "$b" -lt "$min" ]; then min=$b; fi
	done
	echo "$min"
}
last_mtime() {
	local f m max=0
	for f in "$GL/$1"-*.log; do
		m=$(mtime "$f")
		[ "$m" -le "$max" ] || max=$m
	done
	echo "$max"
}

# The last gate run that made the tree from nothing (CI on a fresh machine:
# its prepare-tree.log starts with the unpacking).  Its patches are the
# chain of gate-logs/NN-* files from 01 on, each born within a minute of the
# end of the one before: a later gate run (--from N, another developer's)
# writes files born hours later, and the chain stops there.  Its VM stage
# is the first selftests run born within a minute of the chain's end.
gate_run() {
	local t0 prev p b end n=0 first='' rest=() total_start f
	local vm_dir='' vm_end cache_birth fresh=0 apt_end broken=''
	[ -d "$GL" ] || { log "no gate logs in $GL"; return 0; }
	[ "$(birth "$GL")" != 0 ] || { log "no file birth times on this filesystem: the gate's times cannot be read"; return 0; }
	head -n 3 "$GL/prepare-tree.log" 2>/dev/null | grep -q 'unpacking linux-source' && fresh=1
	t0=$(birth "$GL/prepare-tree.log")
	# The tree is ready when the baseline step or the first patch starts.
	prev=$(first_birth 01)
	if [ -f "$GL/00-baseline.step.log" ] && [ "$(birth "$GL/00-baseline.step.log")" -le "$prev" ]; then
		b=$(birth "$GL/00-baseline.step.log")
		fig gate_prepare_tree $((b - t0)) "gate: tree preparation$([ "$fresh" = 0 ] || echo ' (unpack, commit the base, apply the series)')" "gate-logs/prepare-tree.log, $(when "$t0")"
		fig gate_baseline $((prev - b)) "gate: the W=1/sparse warning baseline$(grep -q 'baseline from ci/' "$GL/00-baseline.step.log" && echo ' (copied from ci/)')" "gate-logs/00-baseline.step.log"
	else
		fig gate_prepare_tree $((prev - t0)) "gate: tree preparation" "gate-logs/prepare-tree.log, $(when "$t0")"
	fi
	total_start=$prev
	for p in $(cd "$GL" && find . -maxdepth 1 -name '[0-9][0-9]-*.log' ! -name '00-*' -printf '%f\n' | sed 's/^\([0-9][0-9]\)-.*/\1/' | sort -u); do
		[ "$p" = "$(printf '%02d' $((n + 1)))" ] || { broken="no logs of patch $((n + 1))"; break; }
		b=$(first_birth "$p")
		if [ "$b" -lt "$prev" ] || [ "$b" -gt $((prev + 60)) ]; then
			broken="patch $p's logs are of another run (born $(when "$b"))"
			break
		fi
		end=$(last_mtime "$p")
		n=$((n + 1))
		if [ -z "$first" ]; then
			first=$((end - prev))
		else
			rest+=($((end - prev)))
		fi
		prev=$end
	done
	[ "$n" -gt 0 ] || return 0
	[ -z "$broken" ] || log "the gate run's chain of logs ends at patch $n: $broken"
	fig gate_first_patch "$first" "gate: the first patch (build W=1 C=1, checkpatch, KUnit; both build folders $([ "$fresh" = 1 ] && echo 'from scratch' || echo 'as the run found them'))" "gate-logs/01-*.log"
	if [ ${#rest[@]} -gt 0 ]; then
		fig gate_patch_median "$(printf '%s\n' "${rest[@]}" | median)" "gate: each further patch, median of ${#rest[@]} (min $(printf '%s\n' "${rest[@]}" | sort -n | head -n1), max $(printf '%s\n' "${rest[@]}" | sort -n | tail -n1))" "gate-logs/02..$(printf '%02d' "$n")-*.log"
	fi
	fig gate_patches_total $((prev - total_start)) "gate: all $n patches" "gate-logs, $(when "$total_start") to $(when "$prev")"
	for f in $(find "$CACHE/vm-logs" -maxdepth 1 -type d -name 'selftests-*' 2>/dev/null | sort); do
		b=$(birth "$f")
		if [ "$b" -ge "$prev" ] && [ "$b" -le $((prev + 60)) ] && [ -f "$f/summary.txt" ]; then
			vm_dir=$f
			break
		fi
	done
	if [ -z "$vm_dir" ]; then
		log "no selftests run started right after the gate's patches ($(when "$prev")): that run had no VM stage, or it did not finish"
		return 0
	fi
	GATE_VM_DIR=$vm_dir
	vm_end=$(mtime "$vm_dir/summary.txt")
	fig gate_whole $((vm_end - t0)) "gate: whole ($n patches + VM stage)" "gate-logs/prepare-tree.log ($(when "$t0")) to ${vm_dir#"$CACHE"/}/summary.txt ($(when "$vm_end"))"
	if [ "$fresh" = 1 ]; then
		cache_birth=$(birth "$CACHE")
		apt_end=$(apt_end_between "$cache_birth" "$t0")
		[ -z "$apt_end" ] ||
			fig ci_apt $((apt_end - cache_birth)) "fresh CI: apt-get update + install" "birth of $CACHE to the End-Date of the install in /var/log/apt/history.log"
		fig ci_fresh_total $((vm_end - cache_birth)) "fresh CI run, whole (apt, tree, $n patches, VM stage)" "birth of $CACHE ($(when "$cache_birth")) to ${vm_dir#"$CACHE"/}/summary.txt ($(when "$vm_end"))"
	fi
}

# --- the newest complete selftests run ------------------------------------------

# The gate's VM stage, else the newest run that passed with its crash stage.
selftests_run() {
	local d start end steps build_s vm_s crash_s which="the last CI run's"
	d=$GATE_VM_DIR
	if [ -z "$d" ]; then
		which="the newest passing run's"
		d=$(find "$CACHE/vm-logs" -maxdepth 1 -type d -name 'selftests-*' 2>/dev/null | while read -r x; do
			if grep -q 'crash stage' "$x/summary.txt" 2>/dev/null &&
				grep -q '^selftests: [0-9]* passed, 0 failed' "$x/summary.txt"; then echo "$x"; fi
		done | sort | tail -n1)
	fi
	[ -n "$d" ] || { log "no complete, passing selftests run in $CACHE/vm-logs"; return 0; }
	start=$(birth "$d")
	[ "$start" != 0 ] || start=$(birth "$d/steps.log")
	end=$(mtime "$d/summary.txt")
	steps=$d/steps.log
	fig selftests_stage $((end - start)) "VM stage, $which ./run_selftests.sh, whole ($(grep -o 'selftests: .*' "$d/summary.txt" | tail -n1))" "${d#"$CACHE"/}"
	if [ -f "$d/qemu-cmdline.txt" ]; then
		build_s=$(($(birth "$d/qemu-cmdline.txt") - start))
		fig selftests_builds "$build_s" "VM stage: before the first boot (VM kernel build, kselftests, initramfs)" "${d#"$CACHE"/}/qemu-cmdline.txt"
	fi
	vm_s=$(grep -o 'guest status [0-9a-z]*, [0-9]*s' "$steps" | head -n1 | grep -o '[0-9]*s$' | tr -d s || true)
	[ -z "$vm_s" ] || fig selftests_vm "$vm_s" "VM stage: the normal VM run (TAP tests)" "${d#"$CACHE"/}/steps.log"
	crash_s=$(grep -o 'guest status [0-9a-z]*, [0-9]*s' "$steps" | tail -n +2 | grep -o '[0-9]*s$' | tr -d s | paste -sd+ | bc 2>/dev/null || true)
	[ -z "$crash_s" ] || fig selftests_crash "$crash_s" "VM stage: the crash stage's two boots" "${d#"$CACHE"/}/steps.log"
}

# --- measured: the incremental KUnit loop -------------------------------------------

kunit_loop() { # RUNS (under the build lock)
	local i t0 t rc times=() summary=''
	for i in $(seq 1 "$1"); do
		touch "$TREE/fs/btrfs/balance.c"
		t0=$(date +%s.%N)
		rc=0
		bash "$RESTRIPER_ROOT/run_kunit.sh" >>"$KLOG" 2>&1 </dev/null || rc=$?
		t=$(echo "$(date +%s.%N) - $t0" | bc)
		summary=$(grep -o 'kunit: [0-9]* passed, [0-9]* failed' "$KLOG" | tail -n1 || true)
		log "KUnit loop $i: $(printf '%.0f' "$t") s, $summary (exit $rc)"
		[ "$rc" = 0 ] || { log "run_kunit.sh failed (log: $KLOG)"; return 1; }
		times+=("$(printf '%.1f' "$t")")
	done
	fig kunit_loop "$(printf '%s\n' "${times[@]}" | median)" "touch balance.c + ./run_kunit.sh, median of $1 (each: ${times[*]} s; $summary)" "measured $(date '+%F %T')"
}

kunit_measure() {
	local inputs recorded
	[ "$KUNIT_RUNS" -gt 0 ] || return 0
	[ -f "$TREE/fs/btrfs/balance.c" ] || { log "no prepared tree at $TREE: KUnit loop not measured"; return 0; }
	load_series
	inputs=$(series_hash)
	recorded=$(record_get inputs)
	if [ "$inputs" != "$recorded" ]; then
		log "the tree is not prepared for the current kernel-patches/ (run_kunit.sh would re-apply the series): KUnit loop not measured"
		fig kunit_loop "-" "touch balance.c + ./run_kunit.sh: not measured (tree not prepared for this series)" "-"
		return 0
	fi
	KLOG=$LOGS/harness-kunit-$(date +%Y%m%d-%H%M%S).log
	mkdir -p "$LOGS"
	log "timing the KUnit loop $KUNIT_RUNS time(s) (log: $KLOG)"
	with_build_lock kunit_loop "$KUNIT_RUNS"
}

selftests_measure() {
	local t0 rc=0
	[ "$RUN_SELFTESTS" = 1 ] || return 0
	t0=$SECONDS
	bash "$RESTRIPER_ROOT/run_selftests.sh" >&2 </dev/null || rc=$?
	fig selftests_measured $((SECONDS - t0)) "./run_selftests.sh, run now (exit $rc)" "measured $(date '+%F %T')"
}

ensure_packages bc
gate_run
selftests_measure
selftests_run
kunit_measure
if [ -n "$OUT" ]; then cp "$FIGS" "$OUT"; else cat "$FIGS"; fi
