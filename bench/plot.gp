# The figure of docs/benchmarks.md, drawn by bench/run.sh from a run's
# results (gnuplot, pngcairo):
#   gnuplot -e "dir='RUN'; out='RUN/benchmarks.png'; sub='...'" bench/plot.gp
# Reads RUN/plot-tput.dat (label, series MiB/s, base MiB/s), RUN/plot-ratio.dat
# (label, series/base) and RUN/plot-harness.dat (label, seconds).
if (!exists("dir")) dir = "."
if (!exists("out")) out = dir . "/benchmarks.png"
if (!exists("sub")) sub = ""

set terminal pngcairo size 1650,560 font "sans,10" noenhanced
set output out
set multiplot layout 1,3 title "restriper bench: the series against the unpatched 6.12 base, same VM (QEMU TCG), same data\n" . sub font "sans,12"

set style data histograms
set style fill solid 0.85 border -1
set grid ytics lc rgb "#dddddd"
set key top right
set xtics rotate by -25 nomirror
set ytics nomirror
set border 3

# 1. throughput, medians
set title "Throughput, MiB/s (median of the trials; log scale)\nraw copy: the same bytes with O_DIRECT, the limit"
set style histogram clustered gap 1
set boxwidth 0.9
set logscale y
set yrange [1:*]
set ylabel "MiB/s (log scale)"
plot dir . "/plot-tput.dat" using 2:xtic(1) title "series" lc rgb "#2b6cb0", \
     "" using 3 title "base" lc rgb "#c05621", \
     "" using ($0 - 0.15):2:(sprintf("%.0f", $2)) with labels offset 0,0.7 notitle, \
     "" using ($0 + 0.15):3:(sprintf("%.0f", $3)) with labels offset 0,0.7 notitle

# 2. ratios series / base: bars from 1
set title "series / base (log scale; 1 = the same)\nthroughput: higher is better; relocations, latency: lower is better"
set logscale y
set autoscale
stats dir . "/plot-ratio.dat" using 2 nooutput
lo = STATS_min < 1 ? STATS_min : 1
hi = STATS_max > 1 ? STATS_max : 1
set yrange [lo / 3 : hi * 3]
set ytics ("0.001" 0.001, "0.003" 0.003, "0.01" 0.01, "0.03" 0.03, "0.1" 0.1, "0.3" 0.3, "0.5" 0.5, "1" 1, "2" 2, "3" 3, "10" 10, "30" 30, "100" 100) nomirror
set xrange [-0.6:STATS_records - 0.4]
set ylabel "series / base"
set key off
set grid ytics mytics lc rgb "#dddddd"
plot dir . "/plot-ratio.dat" using 0:2:($0 - 0.3):($0 + 0.3):(1):2:xtic(1) with boxxyerror lc rgb "#4a5568", \
     "" using 0:($2 >= 1 ? $2 : 1/0):(sprintf("%.3g", $2)) with labels offset 0,0.8 notitle, \
     "" using 0:($2 < 1 ? $2 : 1/0):(sprintf("%.3g", $2)) with labels offset 0,-0.8 notitle, \
     1 with lines lc rgb "#e53e3e" dt 2 notitle

# 3. the harness
set title "The harness, seconds (log scale)\nfrom the last CI run's logs; the KUnit loop measured"
set ylabel "seconds"
set autoscale
stats dir . "/plot-harness.dat" using 2 nooutput
set yrange [1 : STATS_max * 3]
set ytics auto nomirror
set xrange [-0.6:STATS_records - 0.4]
plot dir . "/plot-harness.dat" using 0:2:($0 - 0.3):($0 + 0.3):(1):2:xtic(1) with boxxyerror lc rgb "#38a169", \
     "" using 0:2:(sprintf("%.0f", $2)) with labels offset 0,0.8 notitle

unset multiplot
