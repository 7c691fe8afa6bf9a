#!/usr/bin/env bash
# Draws bench/plots/scale-time.png and scale-bytes.png from bench/plots/scale.csv (written by
# bench/scale_sim.sh): how the rendezvous cost grows with N, this protocol (v2) beside the one
# before it (v1) measured in the same run, and torchrun 2.x's published 4,000 hosts in ~10 s
# (PyTorch PR 124982: rendezvous + start). gnuplot (Debian gnuplot-nox).
set -euo pipefail
cd "$(dirname "$0")/../plots"
command -v gnuplot >/dev/null || { echo "plot_scale: gnuplot not installed (gnuplot-nox)" >&2; exit 1; }
csv=${1:-scale.csv}
awk -F, 'NR > 1 && $1 == "v2" && $4 != "" {print $2, $4, $5}' "$csv" >v2.dat
awk -F, 'NR > 1 && $1 == "v1" && $5 != "" {print $2, $5}' "$csv" >v1.dat
awk -F, 'NR > 1 && $1 == "v2" && $6 != "" {print $2, $6, $7, $8}' "$csv" >v2b.dat
gnuplot <<'GP'
set terminal pngcairo size 900,560 noenhanced
set output 'scale-time.png'
set title 'Rendezvous at scale: one etcd 3.4, 2 cores, lease TTL 10 s (bench/scale_sim.sh)'
set xlabel 'nodes N (log scale)'
set ylabel 'milliseconds (log scale)'
set logscale xy
set key bottom right
set grid
set yrange [10:30000]
plot 'v2.dat' using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'v2: last join -> every node has its assignment', \
     'v2.dat' using 1:3 with linespoints lw 2 pt 5 lc rgb '#17becf' title 'v2: commit -> every node has its assignment', \
     'v1.dat' using 1:2 with linespoints lw 2 pt 9 lc rgb '#b2182b' title 'v1 (previous protocol): commit -> every node has seen it', \
     '-' using 1:2 with points pt 13 ps 2 lc rgb 'black' title 'torchrun 2.x, published: 4,000 hosts ~10 s (rendezvous + start)'
4000 10000
e
set output 'scale-bytes.png'
set title 'Bytes a node receives per round (v2; a node that does not coordinate)'
set ylabel 'bytes'
unset logscale y
set yrange [0:*]
plot 'v2b.dat' using 1:2 with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'mean, a round after the join', \
     'v2b.dat' using 1:3 with linespoints lw 2 pt 5 lc rgb '#17becf' title 'max, a round after the join', \
     'v2b.dat' using 1:4 with linespoints lw 2 pt 9 lc rgb '#2ca02c' title 'mean, the join round (its listings included)', \
     2048 with lines dt 2 lc rgb 'black' title 'target: 2 KiB'
GP
rm -f v2.dat v1.dat v2b.dat
echo "plot_scale: wrote bench/plots/scale-time.png, scale-bytes.png"
