#!/usr/bin/env bash
# Benchmark of the series against the unpatched base, the same kernel
# config, one VM run each: a balance interrupted at half way, pause latency,
# balance and convert throughput against a raw copy of the same bytes; and
# the harness's own times:
#
#   bench/run.sh [-v] [--timeout SECS] [--kernels "series base"]
#                [--opts OPT,OPT...] [--kunit-runs N] [--no-harness] [--docs]
#   bench/run.sh --report DIR [--docs]
#
#   -v                 show everything (builds, the whole VM console)
#   --timeout SECS     VM timeout per kernel (default 7200, or
#                      $RESTRIPER_VM_TIMEOUT)
#   --kernels LIST     which kernels to build and run (default "series base")
#   --opts OPTS        options of resume_pause_bench in the guest, commas for
#                      spaces (e.g. --opts --only=pause,--trials=5 or
#                      --opts --only=throughput,--tput-trials=3)
#   --kunit-runs N     how many times bench/harness-times.sh times the
#                      incremental KUnit loop (default 3)
#   --no-harness       leave the harness times out
#   --docs             write the results into docs/benchmarks.md (the part
#                      between its "bench:begin" and "bench:end" markers) and
#                      the figure to docs/benchmarks.png
#   --report DIR       build and run nothing: write results.md, the figure
#                      and (with --docs) docs/ again from the finished run in
#                      DIR (its raw-results.txt, harness.txt, state.txt,
#                      notes.txt, timings.txt; for a run made before those
#                      files existed, what its results.md says), e.g. after
#                      a change to the report, or to harness.txt
#
# Steps, one line each with its time (their output: steps.log of the run
# folder):
#   1. the two benchmark kernels, tinyconfig + lib/kernel.config +
#      bench/kernel-nodebug.config (no lockdep, no BTRFS_DEBUG/ASSERT, ...),
#      built by lib/build-kernel.sh under the build lock, incrementally
#      (bench/lib.sh, shared with bench/upstream-dry-run.sh):
#        series: the kernel tree as it is ($CACHE/linux, HEAD and any
#                uncommitted change; the tree is not prepared, reset or
#                touched) -> $CACHE/build/bench-series
#        base:   tag "base" (pristine Debian source), in a git worktree
#                $CACHE/base-tree made once -> $CACHE/build/bench-base
#      then the two .config files are compared;
#   2. bench/resume_pause_bench.c, static, and an initramfs with it
#      (lib/make-initramfs.sh);
#   3. each kernel booted once (lib/run-vm.sh, 3 sparse 20G virtio disks:
#      vda+vdb for the resume part and then the throughput part, vdc for the
#      pause part; the images are btrfs-checked on the host afterwards);
#   4. the harness times (bench/harness-times.sh: the last CI run's logs,
#      the incremental KUnit loop timed under the build lock);
#   5. the figure (gnuplot, bench/plot.gp) and the guest's RESULT lines ->
#      results.md (tables with the ratios series/base and to the raw copy,
#      the harness, the wall time of each step, notes), printed at the end;
#      with --docs, both into docs/.
# Before each build and each VM run it waits while any kernel build runs on
# the machine (pgrep -f 'make.*bzImage|make.*O='): only one build at a time,
# and no measurement during one.
#
# Run folder: $CACHE/bench/<time>/ (steps.log, results.md, benchmarks.png,
# docs-block.md (what --docs puts into docs/benchmarks.md), raw-results.txt,
# harness.txt, guest-<kernel>.txt: the program's output, vm-<kernel>/:
# console.log, dmesg.log, ... of each VM run; the disk images are deleted).
set -euo pipefail
# shellcheck source=lib/common.sh
. "$(dirname "$0")/../lib/common.sh"
# shellcheck source=lib/vm.sh
. "$RESTRIPER_ROOT/lib/vm.sh"
# shellcheck source=bench/lib.sh
. "$RESTRIPER_ROOT/bench/lib.sh"

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit "${1:-0}"; }

TIMEOUT=${RESTRIPER_VM_TIMEOUT:-7200}
KERNELS="series base"
GUEST_OPTS=''
KUNIT_RUNS=3
HARNESS=1
DOCS=0
REPORT=''
ARGS_GIVEN=''
for a in "$@"; do
	case "$a" in *[[:space:]]*) ARGS_GIVEN="$ARGS_GIVEN \"$a\"" ;; *) ARGS_GIVEN="$ARGS_GIVEN $a" ;; esac
done
ARGS_GIVEN=${ARGS_GIVEN# }
while [ $# -gt 0 ]; do
	case "$1" in
	-v) VERBOSE=1; export RESTRIPER_VERBOSE=1; shift ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--kernels) KERNELS=$2; shift 2 ;;
	--opts) GUEST_OPTS=$2; shift 2 ;;
	--kunit-runs) KUNIT_RUNS=$2; shift 2 ;;
	--no-harness) HARNESS=0; shift ;;
	--docs) DOCS=1; shift ;;
	--report) REPORT=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "unknown argument: $1" >&2; usage 2 ;;
	esac
done
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "--timeout: seconds, not $TIMEOUT"
for k in $KERNELS; do
	case "$k" in series | base) ;; *) die "--kernels: series and/or base, not $k" ;; esac
done
case "$GUEST_OPTS" in *[[:space:]]*) die "--opts: commas instead of spaces" ;; esac
[[ "$KUNIT_RUNS" =~ ^[0-9]+$ ]] || die "--kunit-runs: a number, not $KUNIT_RUNS"

RUN=$CACHE/bench/$(date +%Y%m%d-%H%M%S)
if [ -n "$REPORT" ]; then
	[ -f "$REPORT/raw-results.txt" ] || die "--report $REPORT: no raw-results.txt there (not a run folder of bench/run.sh)"
	RUN=$(cd "$REPORT" && pwd)
fi
STEPS_LOG=$RUN/steps.log

# machine_load: the load average and the other QEMUs and builds running, for
# the notes (another VM or a build during a run skews its times).
machine_load() {
	echo "load average $(cut -d' ' -f1-3 /proc/loadavg), other QEMU processes: $(other_qemus), kernel builds: $(pgrep -c -f 'make.*bzImage|make.*O=' || true)"
}

# other_qemus: how many QEMU processes run that are not this run's VM.
other_qemus() {
	pgrep -a -f '^qemu-system' | grep -c -v -F "$RUN/" || true
}

# sample_load FILE: every 20 s, a line "time builds other-qemus load1" (run in the
# background during a VM run; stopped by its pid).
sample_load() {
	while :; do
		printf '%s %s %s %s\n' "$(date +%T)" \
			"$(pgrep -c -f 'make.*bzImage|make.*O=' || true)" \
			"$(other_qemus)" "$(cut -d' ' -f1 /proc/loadavg)" >>"$1"
		sleep 20
	done
}

# load_summary FILE: what sample_load saw.
load_summary() {
	awk '{ n++; if ($2 > 0) b++; if ($3 > 0) o++; if ($3 > q) q = $3; if ($4 > l) l = $4 }
		END { printf "%d samples, %d with a kernel build running, %d with another VM (at most %d), load average up to %s\n", n, b, o, q, l }' "$1"
}

# --- 1. kernels: build_kernels and compare_configs, bench/lib.sh -------------

# --- 2. guest program and initramfs ------------------------------------------

build_payload() {
	mkdir -p "$RUN/payload"
	# kselftests/btrfs_util.h includes the tree's kselftest.h
	gcc -static -O2 -Wall -Wextra -Werror -I "$TREE/tools/testing/selftests" \
		-o "$RUN/payload/resume_pause_bench" \
		"$BENCH/resume_pause_bench.c" -lpthread &&
		install -m 0755 "$BENCH/bench-in-guest.sh" "$RUN/payload/bench-in-guest.sh"
}

# --- 3. VM runs --------------------------------------------------------------

run_one() { # KERNEL
	local k=$1 dir=$RUN/vm-$1 rc=0 append
	mkdir -p "$dir"
	append="restriper.run=/selftests/bench-in-guest.sh bench.kernel=$k"
	[ -z "$GUEST_OPTS" ] || append="$append bench.opts=$GUEST_OPTS"
	timed "VM run, $k kernel" vm_step "running the benchmark VM ($k kernel)" "$dir" "$STEPS_LOG" \
		--kernel "$RUN/bzImage-$k" --initrd "$RUN/initramfs.cpio.gz" \
		--disks 3 --disk-size 20G --timeout "$TIMEOUT" --check-images \
		--append "$append" || rc=$?
	grep -a -E '^(# |RESULT |BENCH |bench-in-guest:)' "$dir/console.log" >"$RUN/guest-$k.txt" || true
	grep -a '^RESULT ' "$dir/console.log" >>"$RUN/raw-results.txt" || true
	drop_run_artifacts "$dir"
	log "$k: $(grep -c '^RESULT ' "$RUN/guest-$k.txt" || true) results, guest output: $RUN/guest-$k.txt"
	return "$rc"
}

# --- 4. results ----------------------------------------------------------------

declare -A VAL=()
load_results() {
	local line k m v
	[ -f "$RUN/raw-results.txt" ] || return 0
	while IFS= read -r line; do
		k=$(sed -n 's/.* kernel=\([^ ]*\).*/\1/p' <<<"$line")
		m=$(sed -n 's/.* metric=\([^ ]*\).*/\1/p' <<<"$line")
		v=$(sed -n 's/.* value=\([^ ]*\).*/\1/p' <<<"$line")
		[ -n "$k" ] && [ -n "$m" ] && VAL[$k.$m]=$v
	done <"$RUN/raw-results.txt"
}

# ratio A B: A/B to 3 significant digits, "-" when it means nothing.
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a == "" || b == "" || a !~ /^-?[0-9.]+$/ || b !~ /^-?[0-9.]+$/ || b + 0 == 0) print "-"
		else if (a + 0 == 0) print "0"
		else printf "%.3g\n", a / b
	}'
}

row() { # METRIC DESCRIPTION
	local s=${VAL[series.$1]:-} b=${VAL[base.$1]:-}
	printf '| %s | %s | %s | %s |\n' "$2" "${s:--}" "${b:--}" "$(ratio "$s" "$b")"
}

SUMMARY_ROWS=(
	"resume_chunks_at_start|resume: chunks at the start (N)"
	"resume_relocated_before_pause|resume: chunks relocated before the pause (K)"
	"resume_relocations_interrupted_by_pause|resume: relocations cut short by the pause"
	"resume_relocations_after_resume|resume: relocations after the resume"
	"resume_copies_relocated_again|resume: relocated copies relocated again"
	"resume_originals_never_relocated|resume: original chunks never relocated"
	"resume_mib_never_relocated|resume: MiB in the original chunks never relocated"
	"resume_relocations_total|resume: relocations in total (started)"
	"resume_mib_moved_after_resume|resume: MiB in the chunks relocated after the resume"
	"resume_pause_ms|resume: the pause at half way took (ms)"
	"resume_files_verified|resume: pattern files verified (1 = all match)"
	"pause_latency_ms_1|pause: latency, trial 1 (ms)"
	"pause_latency_ms_2|pause: latency, trial 2 (ms)"
	"pause_latency_ms_3|pause: latency, trial 3 (ms)"
	"pause_latency_ms_median|pause: latency, median (ms)"
	"pause_files_verified|pause: pattern files verified (1 = all match)"
	"tput_balance_mibps_median|throughput: full balance, MiB/s of data (median)"
	"tput_convert_mibps_median|throughput: convert data single -> raid1, MiB/s of data (median)"
	"tput_convert_back_mibps_median|throughput: convert data raid1 -> single, MiB/s of data (median)"
	"tput_raw1_mibps_median|throughput: raw copy, one copy of the same bytes, MiB/s (median)"
	"tput_raw2_mibps_median|throughput: raw copy, two copies of the same bytes, MiB/s (median)"
	"tput_balance_of_raw1|throughput: full balance / raw copy (one copy)"
	"tput_convert_of_raw2|throughput: convert to raid1 / raw copy (two copies)"
	"tput_balance_relocations|throughput: relocations of a full balance"
	"tput_chunks_left_by_balance|throughput: chunks a full balance left (0 = all relocated)"
	"tput_files_verified|throughput: pattern files verified (1 = all match)"
)

declare -A DESC=(
	[resume_data_chunks_at_start]="resume: data chunks at the start"
	[resume_relocations_started_before_pause]="resume: relocations started before the pause"
	[resume_originals_relocated_after_resume]="resume: relocations after the resume, of original chunks"
	[resume_mib_moved_before_pause]="resume: MiB in the chunks relocated before the pause"
	[resume_mib_moved_after_resume]="resume: MiB in the chunks relocated after the resume"
	[resume_mib_never_relocated]="resume: MiB in the original chunks never relocated"
	[resume_relocations_interrupted_by_pause]="resume: relocations cut short by the pause"
	[resume_pause_ms]="resume: the pause at half way took (ms)"
	[resume_seconds_after_mount]="resume: mount to the end of the resumed balance (s)"
	[resume_end_status]="resume: status of the resumed balance (kernel log)"
	[resume_files_checked]="resume: pattern files read back"
	[resume_wall_seconds]="resume: wall time of the part (s)"
	[pause_invalid_attempts]="pause: attempts not counted"
	[pause_since_reloc_start_ms_1]="pause: from the block group's relocation line to the pause's return, trial 1 (ms)"
	[pause_bg_interrupted_1]="pause: 1 = the block group was still there after the pause, trial 1"
	[pause_bg_used_mib_1]="pause: MiB used in the block group, trial 1"
	[pause_data_mib_written]="pause: MiB of pattern data written"
	[pause_wall_seconds]="pause: wall time of the part (s)"
	[tput_trials]="throughput: trials"
	[tput_data_mib]="throughput: MiB of data in the chunks (what a balance or convert moves)"
	[tput_raw_mib]="throughput: MiB the raw copies copy (the used part of each data chunk, rounded up to 1 MiB)"
	[tput_convert_relocations]="throughput: relocations of a convert to raid1"
	[tput_chunks_wrong_profile]="throughput: data chunks without the profile a convert asked for (0 = right)"
	[tput_wall_seconds]="throughput: wall time of the part (s)"
)

v() { echo "${VAL[$1.$2]:-}"; } # KERNEL METRIC

# machine_info: the host, for the results.
machine_info() {
	printf '%s cores (%s), %s GiB RAM, %s, host kernel %s' "$(nproc)" \
		"$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)" \
		"$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" \
		"$(qemu-system-x86_64 --version | head -n1)" "$(uname -r)"
}

# trials METRIC_PREFIX KERNEL: how many per-trial values the run has.
trials() {
	local n=0
	while [ -n "$(v "$2" "$1_$((n + 1))")" ]; do n=$((n + 1)); done
	echo "$n"
}

# The throughput table: each operation against the raw copy that is its
# limit, per kernel, and series/base.
tput_table() {
	local entry m lim d l s b
	echo "| operation | limit | series MiB/s | base MiB/s | series/base | series/limit | base/limit |"
	echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
	for entry in \
		"tput_balance_mibps_median|tput_raw1_mibps_median|full balance (data single, 2 devices)|raw copy, 1 copy" \
		"tput_convert_mibps_median|tput_raw2_mibps_median|convert data single -> raid1|raw copy, 2 copies" \
		"tput_convert_back_mibps_median|tput_raw1_mibps_median|convert data raid1 -> single|raw copy, 1 copy" \
		"tput_raw1_mibps_median||raw copy, 1 copy (O_DIRECT, the same bytes)|-" \
		"tput_raw2_mibps_median||raw copy, 2 copies (O_DIRECT, the same bytes)|-"; do
		IFS='|' read -r m lim d l <<<"$entry"
		s=$(v series "$m")
		b=$(v base "$m")
		if [ -n "$lim" ]; then
			printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$d" "$l" "${s:--}" "${b:--}" \
				"$(ratio "$s" "$b")" "$(ratio "$s" "$(v series "$lim")")" "$(ratio "$b" "$(v base "$lim")")"
		else
			printf '| %s | %s | %s | %s | %s | - | - |\n' "$d" "$l" "${s:--}" "${b:--}" "$(ratio "$s" "$b")"
		fi
	done
}

# Per-trial throughput figures, one row per trial.
tput_trials_table() {
	local k n i
	echo "| kernel | trial | balance MiB/s | convert MiB/s | back to single MiB/s | raw 1 copy MiB/s | raw 2 copies MiB/s |"
	echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
	for k in $KERNELS; do
		n=$(trials tput_balance_mibps "$k")
		for i in $(seq 1 "$n"); do
			printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$k" "$i" \
				"$(v "$k" "tput_balance_mibps_$i")" "$(v "$k" "tput_convert_mibps_$i")" \
				"$(v "$k" "tput_convert_back_mibps_$i")" "$(v "$k" "tput_raw1_mibps_$i")" \
				"$(v "$k" "tput_raw2_mibps_$i")"
		done
	done
}

INTERRUPT_ROWS=(
	"resume_relocations_total|relocations to finish a full balance of N chunks paused at half way (started, before + after)"
	"resume_relocations_after_resume|... of them after the unmount + mount"
	"resume_copies_relocated_again|chunks the balance made, relocated again"
	"resume_originals_never_relocated|original chunks never relocated"
	"resume_mib_never_relocated|MiB in the original chunks never relocated"
	"resume_pause_ms|the pause at half way took (ms)"
	"pause_latency_ms_median|pause latency inside a 1 GiB block group, median (ms)"
)

interrupt_table() {
	local entry
	echo "| metric | series | base | series/base |"
	echo "| --- | ---: | ---: | ---: |"
	for entry in "${INTERRUPT_ROWS[@]}"; do row "${entry%%|*}" "${entry#*|}"; done
}

# harness.txt (bench/harness-times.sh) as a table.
harness_table() {
	local secs what src
	echo "| what | seconds | min:s | from |"
	echo "| --- | ---: | ---: | --- |"
	while IFS='|' read -r _ secs what src; do
		printf '| %s | %s | %s | %s |\n' "$what" "$secs" \
			"$(awk -v s="$secs" 'BEGIN { if (s ~ /^[0-9.]+$/) printf "%d:%02d", s / 60, s % 60; else print "-" }')" "$src"
	done <"$RUN/harness.txt"
}

harness_get() { # KEY: the seconds of a harness figure
	[ -f "$RUN/harness.txt" ] || return 0
	awk -F'|' -v k="$1" '$1 == k { print $2 }' "$RUN/harness.txt"
}

# The data files of bench/plot.gp.
write_plot_data() {
	local entry m l s b r
	: >"$RUN/plot-tput.dat"
	for entry in "tput_balance_mibps_median|full balance" "tput_convert_mibps_median|convert to raid1" \
		"tput_raw1_mibps_median|raw copy, 1 copy" "tput_raw2_mibps_median|raw copy, 2 copies"; do
		m=${entry%%|*}
		s=$(v series "$m")
		b=$(v base "$m")
		printf '"%s" %s %s\n' "${entry#*|}" "${s:-0}" "${b:-0}" >>"$RUN/plot-tput.dat"
	done
	: >"$RUN/plot-ratio.dat"
	for entry in "tput_balance_mibps_median|balance MiB/s" "tput_convert_mibps_median|convert MiB/s" \
		"tput_raw1_mibps_median|raw 1 copy (control)" "tput_raw2_mibps_median|raw 2 copies (control)" \
		"resume_relocations_total|relocations to finish" "resume_relocations_after_resume|relocations after resume" \
		"resume_pause_ms|pause at half way" "pause_latency_ms_median|pause latency"; do
		r=$(ratio "$(v series "${entry%%|*}")" "$(v base "${entry%%|*}")")
		case "$r" in - | 0) continue ;; esac
		printf '"%s" %s\n' "${entry#*|}" "$r" >>"$RUN/plot-ratio.dat"
	done
	: >"$RUN/plot-harness.dat"
	for entry in "ci_fresh_total|fresh CI run" "gate_first_patch|gate: 1st patch" \
		"gate_patch_median|gate: next patch" "selftests_stage|selftests stage" \
		"selftests_vm|selftests VM run" "kunit_loop|KUnit loop"; do
		s=$(harness_get "${entry%%|*}")
		[[ "$s" =~ ^[0-9.]+$ ]] || continue
		printf '"%s" %s\n' "${entry#*|}" "$s" >>"$RUN/plot-harness.dat"
	done
}

draw_figure() {
	write_plot_data
	gnuplot -e "dir='$RUN'; out='$RUN/benchmarks.png'; sub='$(date '+%F'): series $(cut -d' ' -f1 <<<"${SERIES_STATE:-?}") vs base $(cut -d' ' -f1 <<<"${BASE_STATE:-?}"), nodebug kernels; $(trials tput_balance_mibps series) throughput trials, $(trials pause_latency_ms series) pause trials'" \
		"$BENCH/plot.gp"
}

# The part of docs/benchmarks.md that --docs replaces.
write_docs_block() {
	local cmd="bench/run.sh${RUN_ARGS:+ $RUN_ARGS}"
	case " $RUN_ARGS " in *" --docs "*) ;; *) cmd="$cmd --docs" ;; esac
	{
		echo "<!-- bench:begin (written by bench/run.sh --docs; edit the text around it, not this part) -->"
		echo
		echo "Run of $RUN_DATE ($(basename "$RUN")), reproduced by:"
		echo
		echo "    $cmd"
		echo
		echo "- series: ${SERIES_STATE:-not run}"
		echo "- base: ${BASE_STATE:-not run} (tag \`$BASE_TAG\`)"
		echo "- kernels: tinyconfig + \`lib/kernel.config\` + \`bench/kernel-nodebug.config\` (no lockdep, no BTRFS_DEBUG/ASSERT); ${CONFIG_NOTE:-configs not compared}"
		echo "- machine: $(machine_info)"
		echo "- VM: QEMU $(grep -o 'accel [a-z]*' "$RUN/steps.log" | head -n1 || true), 2 vCPUs, 2 GiB, 3 x 20G sparse virtio disks (cache=unsafe); one VM run per kernel, the same program and layouts"
		echo "- trials: throughput $(trials tput_balance_mibps series) (series) / $(trials tput_balance_mibps base) (base), $(v series tput_data_mib) MiB of data; pause latency $(trials pause_latency_ms series) / $(trials pause_latency_ms base); the resume part once"
		echo "- guest options: ${GUEST_OPTS:-defaults}"
		echo
		echo "![series vs base](benchmarks.png)"
		echo
		echo "### Throughput, against the raw copy of the same bytes"
		echo
		tput_table
		echo
		echo "Every trial:"
		echo
		tput_trials_table
		echo
		echo "### An interrupted balance"
		echo
		interrupt_table
		if [ -f "$RUN/harness.txt" ]; then
			echo
			echo "### The harness"
			echo
			harness_table
		fi
		if [ ${#NOTES[@]} -gt 0 ]; then
			echo
			echo "### Notes of the run"
			echo
			printf -- '- %s\n' "${NOTES[@]}"
		fi
		echo
		echo "<!-- bench:end -->"
	} >"$RUN/docs-block.md"
}

# --docs: docs/benchmarks.md's block between the markers, and the figure.
update_docs() {
	local doc=$RESTRIPER_ROOT/docs/benchmarks.md
	if [ ! -f "$doc" ] || ! grep -q '^<!-- bench:begin' "$doc" || ! grep -q '^<!-- bench:end' "$doc"; then
		log "docs/benchmarks.md has no bench:begin/bench:end markers: the block is appended"
		{ [ ! -f "$doc" ] || { cat "$doc"; echo; }; cat "$RUN/docs-block.md"; } >"$doc.new"
	else
		awk -v block="$RUN/docs-block.md" '
			/^<!-- bench:begin/ { while ((getline l < block) > 0) print l; skip = 1; next }
			/^<!-- bench:end/ { skip = 0; next }
			!skip { print }
		' "$doc" >"$doc.new"
	fi
	mv "$doc.new" "$doc"
	[ ! -f "$RUN/benchmarks.png" ] || cp "$RUN/benchmarks.png" "$RESTRIPER_ROOT/docs/benchmarks.png"
	log "docs: docs/benchmarks.md (its bench block) and docs/benchmarks.png written"
}

write_results() {
	local out=$RUN/results.md m entry metrics t k
	{
		echo "# restriper bench, $RUN_DATE"
		echo
		echo "- series: ${SERIES_STATE:-not run} (tree $TREE)"
		echo "- base: ${BASE_STATE:-not run} (tag $BASE_TAG, worktree $BASE_TREE)"
		echo "- config: tinyconfig + lib/kernel.config + bench/kernel-nodebug.config; ${CONFIG_NOTE:-not compared}"
		echo "- machine: $(machine_info)"
		echo "- VM: QEMU $(grep -o 'accel [a-z]*' "$RUN/steps.log" | head -n1 || true), 2 vCPUs, 2 GiB, 3 x 20G sparse virtio disks; one run per kernel"
		echo "- guest options: ${GUEST_OPTS:-defaults}"
		echo "- resume (default options): 2 x 4 GiB devices, data single, metadata raid1, 12 data chunks of 256 MiB alternately ~95% and ~40% full (from the highest down); full balance paused once completed >= N/2, unmount, mount (the kernel resumes), until the end; \"copies\" are chunks made by the balance (told apart by start, length, type and device extents)"
		echo "- pause (default options): 1 x 20 GiB device, ~2.25 GiB of data; data balance; pause requested ~1.5 s after the relocation of a 1 GiB data block group with >= 960 MiB used started; resumed by ioctl, or a fresh balance when the resumed one relocates no such block group"
		echo "- throughput (default options): the same 2 devices as resume, mkfs -b 6G, data single, metadata raid1, 512 MiB of pattern files; 5 trials, each: raw copies (filesystem unmounted) of the used part of every data chunk with O_DIRECT, 1 MiB blocks, to a scratch region past the filesystem, one copy (to the other device) and two copies (to both); full balance; convert data to raid1; back to single; page cache dropped before each; medians"
		echo
		echo "## Summary"
		echo
		echo "| metric | series | base | series/base |"
		echo "| --- | ---: | ---: | ---: |"
		for entry in "${SUMMARY_ROWS[@]}"; do row "${entry%%|*}" "${entry#*|}"; done
		echo
		echo "## Throughput against the raw copy of the same bytes"
		echo
		tput_table
		echo
		tput_trials_table
		if [ -f "$RUN/harness.txt" ]; then
			echo
			echo "## The harness"
			echo
			harness_table
		fi
		echo
		echo "## All numbers"
		echo
		echo "| metric | series | base | series/base |"
		echo "| --- | ---: | ---: | ---: |"
		metrics=$(for k in "${!VAL[@]}"; do echo "${k#*.}"; done | sort -u -V)
		for m in $metrics; do row "$m" "\`$m\`${DESC[$m]:+ (${DESC[$m]})}"; done
		echo
		echo "## Wall time of the steps"
		echo
		echo "| step | seconds |"
		echo "| --- | ---: |"
		while IFS= read -r t; do printf '| %s | %s |\n' "${t%|*}" "${t##*|}"; done <"$RUN/timings.txt"
		if [ ${#NOTES[@]} -gt 0 ]; then
			echo
			echo "## Notes"
			echo
			printf -- '- %s\n' "${NOTES[@]}"
		fi
	} >"$out"
}

NOTES=()
judge_run() { # KERNEL VM_STATUS
	local k=$1 rc=$2 dir=$RUN/vm-$1 dm st
	st=$(sed -n 's/^guest_status=//p' "$dir/vm-result.txt" 2>/dev/null || true)
	[ "$rc" = 0 ] || NOTES+=("$k: the VM run failed (status $rc; $dir/console.log)")
	[ -z "$st" ] || [ "$st" = 0 ] || NOTES+=("$k: the benchmark program exited with status $st (see guest-$k.txt)")
	grep -q '^images_failed=0' "$dir/vm-result.txt" 2>/dev/null ||
		NOTES+=("$k: btrfs check of the disk images failed or did not run ($dir/check-*.log)")
	dm=$(scan_dmesg "$dir/dmesg.log" 2>/dev/null || true)
	if [ -n "$dm" ]; then
		NOTES+=("$k: the kernel log has $(wc -l <<<"$dm") report line(s), first: $(head -n1 <<<"$dm")")
	fi
	while IFS= read -r line; do
		NOTES+=("$k: ${line#\# }")
	done < <(grep -a -E '^# .*(WARNING|before the pause arrived|was done before the pause|retrying|attempt [0-9]+: the resumed balance ended|MISMATCH|ENOSPC|No space|only [0-9]+ valid|started before the last)' "$RUN/guest-$k.txt" || true)
}

# The run's state, for --report: state.txt (KEY=value) and notes.txt.
save_state() {
	{
		printf 'RUN_DATE=%s\n' "$RUN_DATE"
		printf 'RUN_ARGS=%s\n' "$RUN_ARGS"
		printf 'KERNELS=%s\n' "$KERNELS"
		printf 'GUEST_OPTS=%s\n' "$GUEST_OPTS"
		printf 'SERIES_STATE=%s\n' "$SERIES_STATE"
		printf 'BASE_STATE=%s\n' "$BASE_STATE"
	} >"$RUN/state.txt"
	printf '%s\n' "${NOTES[@]}" >"$RUN/notes.txt"
}

# load_state: state.txt and notes.txt of the run in $RUN; for an older run,
# its results.md.
load_state() {
	local key val md=$RUN/results.md
	if [ -f "$RUN/state.txt" ]; then
		while IFS='=' read -r key val; do
			case "$key" in
			RUN_DATE | RUN_ARGS | KERNELS | GUEST_OPTS | SERIES_STATE | BASE_STATE) printf -v "$key" '%s' "$val" ;;
			esac
		done <"$RUN/state.txt"
	else
		[ -f "$md" ] || die "--report: neither state.txt nor results.md in $RUN"
		RUN_DATE=$(sed -n '1s/^# restriper bench, //p' "$md")
		RUN_ARGS='--docs'
		SERIES_STATE=$(sed -n 's/^- series: \(.*\) (tree .*/\1/p' "$md" | head -n1)
		BASE_STATE=$(sed -n 's/^- base: \(.*\) (tag .*/\1/p' "$md" | head -n1)
		GUEST_OPTS=$(sed -n 's/^- guest options: //p' "$md" | head -n1)
		[ "$GUEST_OPTS" != defaults ] || GUEST_OPTS=''
		KERNELS=$(sed -n 's/^VM run, \([a-z]*\) kernel|.*/\1/p' "$RUN/timings.txt" | tr '\n' ' ')
	fi
	[ "$SERIES_STATE" != "not run" ] || SERIES_STATE=''
	[ "$BASE_STATE" != "not run" ] || BASE_STATE=''
	NOTES=()
	if [ -f "$RUN/notes.txt" ]; then
		mapfile -t NOTES < <(grep -v '^$' "$RUN/notes.txt" || true)
	elif [ -f "$md" ]; then
		mapfile -t NOTES < <(sed -n '/^## Notes/,$s/^- //p' "$md")
	fi
}

# report: the tables, the figure and, with --docs, docs/; results.md is
# shown.
report() {
	load_results
	step "drawing the figure" "$STEPS_LOG" draw_figure ||
		NOTES+=("the figure was not drawn (${STEPS_LOG##*/})")
	write_results
	write_docs_block
	[ "$DOCS" = 0 ] || update_docs
	echo
	cat "$RUN/results.md"
	echo
}

report_main() {
	ensure_packages gnuplot-nox
	STEPS_LOG=$RUN/report.log
	load_state
	log "report of the run $RUN ($RUN_DATE; kernels $KERNELS)"
	compare_configs
	report
	log "results: $RUN/results.md, figure: $RUN/benchmarks.png"
}

RUN_DATE=$(date '+%F %T %Z')
RUN_ARGS=$ARGS_GIVEN

main() {
	local k rc load_before sampler
	if [ -n "$REPORT" ]; then
		report_main
		return
	fi
	ensure_packages "${PACKAGES[@]}" gnuplot-nox
	mkdir -p "$RUN"
	: >"$RUN/raw-results.txt"
	: >"$RUN/timings.txt"
	log "run folder: $RUN (output of the steps: steps.log)"
	prepare_run
	exec 3>&1 # the screen, for the console with -v (see run_vm)
	local VM_SHOW='' # read by vm_step (lib/vm.sh)
	# shellcheck disable=SC2034 # read by vm_step
	[ "$VERBOSE" = 1 ] || VM_SHOW=none
	for k in $KERNELS; do
		rc=0
		wait_for_builds "the $k VM run"
		load_before=$(machine_load)
		sample_load "$RUN/load-$k.txt" &
		sampler=$!
		run_one "$k" || rc=$?
		kill "$sampler" 2>/dev/null || true
		wait "$sampler" 2>/dev/null || true
		NOTES+=("$k: machine load before the run: $load_before; during the run (every 20 s): $(load_summary "$RUN/load-$k.txt")")
		judge_run "$k" "$rc"
	done
	rm -f "$RUN/initramfs.cpio.gz" "$RUN"/bzImage-*
	if [ "$HARNESS" = 1 ]; then
		wait_for_builds "the harness times"
		timed "harness times" step "harness times (the last CI run's logs, the KUnit loop $KUNIT_RUNS time(s))" "$STEPS_LOG" \
			bash "$BENCH/harness-times.sh" --kunit-runs "$KUNIT_RUNS" --out "$RUN/harness.txt" ||
			NOTES+=("harness times: bench/harness-times.sh failed (steps.log)")
	fi
	save_state
	report
	log "results: $RUN/results.md, figure: $RUN/benchmarks.png (raw: raw-results.txt, guest output: guest-<kernel>.txt, logs: steps.log, vm-<kernel>/)"
}

main
