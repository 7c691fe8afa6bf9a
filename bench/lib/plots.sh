#!/usr/bin/env bash
# Draws bench/plots/{cold,recovery,footprint}-TAG.png from the CSVs bench/lib/bench.py wrote
# (gnuplot, Debian package gnuplot-nox). A plot whose CSV has no data is skipped.
# Usage: bench/lib/plots.sh quick|full
set -euo pipefail
cd "$(dirname "$0")/../plots"
tag=${1:-quick}
command -v gnuplot >/dev/null || { echo "plots: gnuplot not installed (gnuplot-nox)" >&2; exit 1; }

label() {
  case $1 in
    ea-file) echo "elastic-agent, file" ;;
    ea-etcd) echo "elastic-agent, etcd gRPC" ;;
    ea-gateway) echo "elastic-agent, etcd-gateway" ;;
    tr-c10d) echo "torchrun, c10d" ;;
    tr-etcd-v2) echo "torchrun, etcd-v2" ;;
    *) echo "$1" | sed 's/^tr-/torchrun, /; s/@\(.*\)s$/, monitor \1 s/; s/^ea-/elastic-agent, /' ;;
  esac
}
style() { # line colour and point type per tool: elastic-agent blue/green shades, torchrun red/orange
  case $1 in
    ea-file*) echo 'lc rgb "#1f77b4" pt 7' ;;
    ea-etcd*) echo 'lc rgb "#2ca02c" pt 5' ;;
    ea-gateway*) echo 'lc rgb "#17becf" pt 9' ;;
    tr-c10d@0.1s) echo 'lc rgb "#f4a582" pt 11' ;;
    tr-c10d*) echo 'lc rgb "#b2182b" pt 13' ;;
    tr-etcd-v2@0.1s) echo 'lc rgb "#dfc27d" pt 4' ;;
    tr-etcd-v2*) echo 'lc rgb "#8c510a" pt 6' ;;
    *) echo 'lc rgb "black" pt 1' ;;
  esac
}
has_data() { # CSV has at least one non-empty value after the first column in a data row
  [[ -f $1 ]] && awk -F, 'NR > 1 { for (i = 2; i <= NF; i++) if ($i != "") { found = 1 } } END { exit !found }' "$1"
}
term='set terminal pngcairo size 1000,620 noenhanced font "DejaVu Sans,12"'

# --- cold rendezvous vs N: median with min..max bars, log-log ---------------------------------
csv=cold-$tag.csv
if has_data "$csv"; then
  IFS=, read -r -a hdr <"$csv"
  k=$(( (${#hdr[@]} - 1) / 3 ))
  plot=()
  for ((i = 0; i < k; i++)); do
    name=${hdr[$((1 + i))]%_median_s}
    m=$((2 + i)) lo=$((2 + k + i)) hi=$((2 + 2 * k + i))
    plot+=("'$csv' using 1:$m:$lo:$hi with yerrorlines lw 2 ps 1.2 $(style "$name") title '$(label "$name")'")
  done
  joined=$(printf '%s, ' "${plot[@]}")
  xmax=$(awk -F, 'NR > 1 && $1 > m { m = $1 } END { print m * 1.3 }' "$csv")
  gnuplot <<EOF
$term
set output 'cold-$tag.png'
set datafile separator ','
set datafile missing ''
set title 'Cold rendezvous: launch of N agents -> last worker started ($tag run; lower is better)'
set xlabel 'N (agents, one worker each)'
set ylabel 'seconds (log scale)'
set logscale xy
set xtics (2, 4, 8, 16, 32, 64)
set xrange [1.7:$xmax]
set yrange [0.01:100]
set format y '%g'
set grid
set key bottom right box opaque
plot ${joined%, }
EOF
fi

# --- worker-failure recovery: clustered bars per N, log y ---------------------------------------
csv=recovery-$tag.csv
if has_data "$csv"; then
  IFS=, read -r -a hdr <"$csv"
  plot=()
  for ((i = 1; i < ${#hdr[@]}; i++)); do
    name=${hdr[$i]}
    col=$((i + 1))
    c=$(style "$name" | sed 's/ pt .*//')
    if ((i == 1)); then
      plot+=("'$csv' using $col:xtic(1) $c title '$(label "$name")'")
    else
      plot+=("'' using $col $c title '$(label "$name")'")
    fi
  done
  joined=$(printf '%s, ' "${plot[@]}")
  gnuplot <<EOF
$term
set output 'recovery-$tag.png'
set datafile separator ','
set datafile missing ''
set title 'One worker fails -> replacement workers started on every node ($tag run)'
set xlabel 'N (agents)'
set ylabel 'seconds (log scale)'
set logscale y
set yrange [0.01:1000]
set format y '%g'
set grid ytics
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left horizontal maxrows 4 box opaque
plot ${joined%, }
EOF
fi

# --- footprint: agent max RSS and CPU per minute, one bar per configuration ---------------------
csv=footprint-$tag.csv
tmp_foot=$(mktemp)
trap 'rm -f "$tmp_foot"' EXIT
if [[ -f $csv ]] && (($(wc -l <"$csv") > 1)); then
  awk -F, 'NR > 1 { lab = $1; sub(/^ea-/, "ea ", lab); sub(/^tr-/, "torchrun ", lab);
                    if ($2 != "") lab = lab " (mon " $2 " s)";
                    printf "%s,%.2f,%.4f,%.2f\n", lab, $5 / 1024, $9, $8 / 1024 }' "$csv" >"$tmp_foot"
  gnuplot <<EOF
set terminal pngcairo size 1000,760 noenhanced font "DejaVu Sans,11"
set output 'footprint-$tag.png'
set datafile separator ','
set multiplot layout 2,1 title 'Footprint per agent over the steady window ($tag run; lower is better)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.8
set grid ytics
set logscale y
set format y '%g'
set xtics rotate by -20 scale 0
set key top left
set ylabel 'MiB (log scale)'
set yrange [1:*]
plot '$tmp_foot' using 2:xtic(1) lc rgb '#1f77b4' title 'max RSS (VmHWM)', '' using 4 lc rgb '#9edae5' title 'USS (private memory)'
set ylabel 'CPU s per minute'
unset logscale y
set yrange [0:$(awk -F, '$3 > m { m = $3 } END { print (m > 0 ? m : 0.01) * 1.2 }' "$tmp_foot")]
plot '$tmp_foot' using 3:xtic(1) lc rgb '#d62728' title 'agent CPU seconds per minute (user + system)'
unset multiplot
EOF
fi
for f in ./*-"$tag".png; do [[ -e $f ]] && echo "plots: bench/plots/${f#./}" >&2; done; true
