#!/usr/bin/env bash
# Plots (gnuplot, PNG) of training runs and sweeps.
#   tools/plot.sh --run DIR [--run DIR]... --out PREFIX
#       PREFIX_loss.png: training loss per step; PREFIX_acc.png: validation top-1 per epoch
#   tools/plot.sh --sweep DIR [--sweep DIR]... --out PREFIX
#       the same curves for each combination of the sweep(s) (its first seed's loss, the seed mean
#       of top-1), and PREFIX_macs.png / PREFIX_speed.png: top-1 (mean ± std over seeds) against
#       MACs and against training img/s, one labelled point per combination (tools/sweep.sh tables);
#       with several sweeps, each label starts with its sweep directory's name
#   tools/plot.sh --jsd CSV [--jsd CSV]... --out PREFIX
#       PREFIX_jsd.png: the JSD redundancy (vitc definition) of ./sample --jsd against the time,
#       one curve per layer (the mean over heads); with several files, labelled by file name
set -euo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "error: $*" >&2; exit 2; }

runs=() sweeps=() jsds=() out=
while [ $# -gt 0 ]; do
    case "$1" in
        --jsd) [ $# -ge 2 ] || die "--jsd needs a file"; jsds+=("$2"); shift 2 ;;
        --run) [ $# -ge 2 ] || die "--run needs a directory"; runs+=("$2"); shift 2 ;;
        --sweep) [ $# -ge 2 ] || die "--sweep needs a directory"; sweeps+=("$2"); shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a prefix"; out=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument '$1'" ;;
    esac
done
[ -n "$out" ] || { usage >&2; die "--out is required"; }
[ ${#runs[@]} -gt 0 ] || [ ${#sweeps[@]} -gt 0 ] || [ ${#jsds[@]} -gt 0 ] || { usage >&2; die "give --run, --sweep or --jsd"; }
command -v gnuplot >/dev/null || die "gnuplot is not installed (apt-get install gnuplot-nox)"
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ${#jsds[@]} -gt 0 ]; then # per file and layer: t, the mean over heads, in evaluation order
    printf 'set terminal pngcairo noenhanced size 900,560 font ",10"; set output "%s"\n' "${out}_jsd.png" > "$tmp/jsd.gp"
    echo "set title 'JSD redundancy (vitc definition), mean over heads'; set xlabel 'time t (0: noise, 1: data)'" >> "$tmp/jsd.gp"
    echo "set ylabel 'redundancy'; set key outside right; set grid" >> "$tmp/jsd.gp"
    plots=()
    for f in "${jsds[@]}"; do
        head -2 "$f" 2>/dev/null | grep -q '^eval,t,layer,head,redundancy' || die "$f: not a ./sample --jsd file"
        name=$(basename "$f" .csv)
        while read -r layer; do
            data="$tmp/jsd_$(( ${#plots[@]} )).dat"
            awk -F, -v L="$layer" 'NR > 2 && $3 == L { s[$1] += $5; c[$1]++; t[$1] = $2; if ($1 > m) m = $1 }
                END { for (e = 0; e <= m; e++) if (c[e]) print t[e], s[e] / c[e] }' "$f" > "$data"
            label="layer $layer"
            [ ${#jsds[@]} -gt 1 ] && label="$name: $label"
            plots+=("'$data' using 1:2 with lines title '$label'")
        done < <(awk -F, 'NR > 2 { print $3 }' "$f" | sort -n | uniq)
    done
    [ ${#plots[@]} -gt 0 ] || die "no rows in ${jsds[*]}"
    (IFS=,; echo "plot ${plots[*]}") >> "$tmp/jsd.gp"
    gnuplot "$tmp/jsd.gp"
    echo "wrote ${out}_jsd.png"
    [ ${#runs[@]} -gt 0 ] || [ ${#sweeps[@]} -gt 0 ] || exit 0
fi

# curve data of one or more runs (averaged per epoch / per step): DIR... -> $tmp/N.loss, $tmp/N.acc
curves() {
    local n=$1; shift
    awk -v loss="$tmp/$n.loss" -v acc="$tmp/$n.acc" '
        function num(key,   r) {
            if (match($0, "\"" key "\": *-?[0-9.eE+]+")) { r = substr($0, RSTART, RLENGTH); sub(/.*: */, "", r); return r + 0 }
            return ""
        }
        FNR == 1 { file++ }
        /"type": "step"/ { s = num("step"); if (file == 1) ls[s] = num("loss"); if (s > maxs) maxs = s }
        /"type": "epoch"/ && /"val_top1"/ { e = num("epoch"); a[e] += num("val_top1"); na[e]++; if (e > maxe) maxe = e }
        END {
            for (s = 1; s <= maxs; s++) if (s in ls) print s, ls[s] > loss
            for (e = 1; e <= maxe; e++) if (na[e]) print e, a[e] / na[e] > acc
            close(loss); close(acc)
        }' "$@"
    touch "$tmp/$n.loss" "$tmp/$n.acc"
}

labels=() n=0
for r in "${runs[@]+"${runs[@]}"}"; do
    [ -f "$r/metrics.jsonl" ] || die "$r/metrics.jsonl: no such file (not a run directory)"
    n=$((n + 1)); curves "$n" "$r/metrics.jsonl"; labels+=("$(basename "$r")")
done
for s in "${sweeps[@]+"${sweeps[@]}"}"; do
    [ -d "$s/runs" ] || die "$s/runs: no such directory (not a sweep directory)"
    # the runs of each combination, grouped by their grid.txt without the seed line
    while IFS= read -r combo; do
        files=()
        for g in "$s"/runs/*/grid.txt; do
            [ "$(grep -v '^train\.seed=' "$g" | paste -sd' ')" = "$combo" ] && files+=("$(dirname "$g")/metrics.jsonl")
        done
        n=$((n + 1)); curves "$n" "${files[@]}"
        label=$(printf '%s' "$combo" | sed 's/model\.//g; s/train\.//g')
        label=${label:-base}
        [ ${#sweeps[@]} -gt 1 ] && label="$(basename "$s"): $label" # which sweep, when several share a plot
        labels+=("$label")
    done < <(for g in "$s"/runs/*/grid.txt; do grep -v '^train\.seed=' "$g" | paste -sd' '; done | awk '!seen[$0]++')
done
[ "$n" -gt 0 ] || die "no runs found"

plot_lines() { # file suffix, y label, output, title
    {
        echo "set terminal pngcairo noenhanced size 900,560 font ',10'; set output '$3'"
        echo "set title '$4'; set xlabel '$( [ "$1" = loss ] && echo step || echo epoch )'; set ylabel '$2'"
        echo "set key outside right; set grid"
        printf 'plot '
        for i in $(seq 1 "$n"); do
            [ -s "$tmp/$i.$1" ] || continue
            printf "%s'%s' using 1:2 with %s title '%s'" "${sep:-}" "$tmp/$i.$1" \
                "$( [ "$1" = loss ] && echo lines || echo linespoints )" "${labels[$((i - 1))]//\'/}"
            sep=', '
        done
        echo
    } > "$tmp/plot.gp"
    gnuplot "$tmp/plot.gp"
    echo "wrote $3"
}
plot_lines loss "training loss" "${out}_loss.png" "training loss"
sep=
if cat "$tmp"/*.acc | grep -q .; then
    plot_lines acc "validation top-1 (%)" "${out}_acc.png" "validation top-1"
else # runs without data.val log no top-1
    echo "no validation top-1 in these runs: no ${out}_acc.png"
fi

[ ${#sweeps[@]} -gt 0 ] || exit 0
# scatter of each sweep's results.csv: label, x, top-1 mean, std
for s in "${sweeps[@]}"; do
    tools_dir=$(dirname "$0")
    [ -f "$s/results.csv" ] || "$tools_dir/sweep_table.sh" "$s" >/dev/null
done
awk -F, -v macs="$tmp/macs.dat" -v speed="$tmp/speed.dat" -v multi=$((${#sweeps[@]} > 1)) '
    function field(line, i,   n, parts, c, q, f, k) { # CSV with quoted fields
        n = 0; f = ""; q = 0
        for (k = 1; k <= length(line); k++) {
            c = substr(line, k, 1)
            if (c == "\"") { q = !q; continue }
            if (c == "," && !q) { parts[++n] = f; f = ""; continue }
            f = f c
        }
        parts[++n] = f
        return parts[i]
    }
    FNR == 1 { nh = split($0, head, ","); next }
    {
        label = ""
        for (i = 1; i <= nh - 7; i++) {
            v = field($0, i); k = head[i]; sub(/^(model|train)\./, "", k)
            if (v != "-") label = label (label == "" ? "" : " ") k "=" v
        }
        if (multi) { sweep = FILENAME; sub(/\/results\.csv$/, "", sweep); sub(/.*\//, "", sweep); label = sweep ": " label }
        gsub(/"/, "", label); label = "\"" label "\""
        base = nh - 7
        print field($0, base + 2), field($0, base + 3), field($0, base + 4), label > macs
        print field($0, base + 6), field($0, base + 3), field($0, base + 4), label > speed
    }' $(for s in "${sweeps[@]}"; do echo "$s/results.csv"; done)
scatter() { # data, x label, output
    cat > "$tmp/scatter.gp" <<EOF
set terminal pngcairo noenhanced size 900,560 font ',10'; set output '$3'
set xlabel '$2'; set ylabel 'validation top-1 (%), mean ± std over seeds'; set grid; unset key
set offsets graph 0.1, graph 0.25, graph 0.1, graph 0.1
plot '$1' using 1:2:3 with yerrorbars pt 7, '' using 1:2:4 with labels offset 1,0.6 left font ',8'
EOF
    gnuplot "$tmp/scatter.gp"
    echo "wrote $3"
}
scatter "$tmp/macs.dat" "MMACs per image" "${out}_macs.png"
scatter "$tmp/speed.dat" "training img/s" "${out}_speed.png"
