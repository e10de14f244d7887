#!/bin/sh
# Runs in the benchmark VM as /selftests/bench-in-guest.sh, started by /init
# (lib/guest-init.sh) with restriper.run=/selftests/bench-in-guest.sh on the
# kernel command line.  Runs resume_pause_bench with what the command line
# says (bench/run.sh sets it):
#   bench.kernel=LABEL         the kernel's name in the RESULT lines
#   bench.opts=OPT,OPT...      options of resume_pause_bench, commas for
#                              spaces (e.g. bench.opts=--only=pause,--trials=5)
# Its exit status is the program's.
label=unknown
opts=
set -f
# shellcheck disable=SC2013 # words, not lines
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	bench.kernel=*) label=${arg#bench.kernel=} ;;
	bench.opts=*) opts=$(echo "${arg#bench.opts=}" | tr ',' ' ') ;;
	esac
done
echo "bench-in-guest: resume_pause_bench --kernel $label $opts"
# shellcheck disable=SC2086 # the options are words
exec "$(dirname "$0")/resume_pause_bench" --kernel "$label" $opts
