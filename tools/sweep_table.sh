#!/usr/bin/env bash
# The table of a sweep directory (tools/sweep.sh): one row per grid combination over its finished
# runs — the grid values, parameters, MACs, final validation top-1 as mean ± sample std over seeds,
# training img/s and wall time (means) — as DIR/results.csv and DIR/results.md, also printed.
set -euo pipefail
dir=${1:?usage: tools/sweep_table.sh SWEEP_DIR}
[ -d "$dir/runs" ] || { echo "error: $dir/runs: no such directory (not a sweep directory)" >&2; exit 2; }

# one line per finished run, in natural order of the run names (agent_num=4 before 16): grid (k=v joined
# by tabs, seed excluded) | seed | params | macs | top1 | img/s | seconds
rows=$(printf '%s\n' "$dir"/runs/*/ | sort -V | while IFS= read -r run; do
    m="$run/metrics.jsonl"
    [ -f "$m" ] && [ -f "$run/grid.txt" ] && grep -q '"type": "end"' "$m" || continue
    awk -v grid="$run/grid.txt" '
        function num(key,   r) {
            if (match($0, "\"" key "\": *-?[0-9.eE+]+")) { r = substr($0, RSTART, RLENGTH); sub(/.*: */, "", r); return r + 0 }
            return 0
        }
        BEGIN { g = ""; seed = 0
            while ((getline line < grid) > 0) {
                if (line ~ /^train\.seed=/) { seed = substr(line, 12); continue }
                g = g (g == "" ? "" : "\t") line
            }
        }
        /"type": "start"/ { params = num("params"); macs = num("macs") }
        /"type": "epoch"/ { ips += num("train_img_s"); n++; secs += num("time_s") }
        /"type": "epoch"/ && /"val_top1"/ { top1 = sprintf("%.4f", num("val_top1")) } # (none without data.val)
        END { printf "%s|%s|%d|%.0f|%s|%.2f|%.1f\n", g, seed, params, macs, top1, n ? ips / n : 0, secs }' "$m"
done)
[ -n "$rows" ] || { echo "no finished runs in $dir/runs yet"; exit 0; }

printf '%s\n' "$rows" | awk -F'|' -v csv="$dir/results.csv" -v md="$dir/results.md" '
    {
        if (!($1 in seen)) { seen[$1] = 1; order[++ncombo] = $1 }
        nk = split($1, kvs, "\t")
        for (i = 1; i <= nk; i++) {
            k = kvs[i]; sub(/=.*/, "", k)
            if (k != "" && !(k in keyseen)) { keyseen[k] = 1; keys[++nkeys] = k }
        }
        c = $1; cnt[c]++; params[c] = $3; macs[c] = $4
        if ($5 != "") { sum[c] += $5; sq[c] += $5 * $5; nv[c]++ }
        ips[c] += $6; secs[c] += $7
        seeds[c] = seeds[c] (seeds[c] == "" ? "" : " ") $2
    }
    function value(combo, key,   n, kvs, i) {
        n = split(combo, kvs, "\t")
        for (i = 1; i <= n; i++) if (index(kvs[i], key "=") == 1) return substr(kvs[i], length(key) + 2)
        return "-"
    }
    END {
        head = ""; mdhead = "|"; rule = "|"
        for (i = 1; i <= nkeys; i++) { head = head keys[i] ","; mdhead = mdhead " " keys[i] " |"; rule = rule "---|" }
        print head "params,macs_m,top1_mean,top1_std,seeds,img_s,wall_s" > csv
        print mdhead " params | MMACs | top-1 (%) | seeds | train img/s | wall (s) |" > md
        print rule "---:|---:|---:|---:|---:|---:|" > md
        for (j = 1; j <= ncombo; j++) {
            c = order[j]; n = cnt[c]; nt = nv[c]; mean = nt ? sum[c] / nt : 0
            var = nt > 1 ? (sq[c] - nt * mean * mean) / (nt - 1) : 0
            sd = var > 0 ? sqrt(var) : 0
            top1 = nt ? sprintf("%.2f,%.2f", mean, sd) : "-,-" # runs without data.val have none
            mdtop1 = nt ? sprintf("%.2f ± %.2f", mean, sd) : "-"
            line = ""; mdline = "|"
            for (i = 1; i <= nkeys; i++) {
                v = value(c, keys[i]); q = v
                if (q ~ /[,"]/) { gsub(/"/, "\"\"", q); q = "\"" q "\"" }
                line = line q ","; mdline = mdline " " v " |"
            }
            printf "%s%d,%.2f,%s,%d,%.1f,%.1f\n", line, params[c], macs[c] / 1e6, top1, n, ips[c] / n, secs[c] / n > csv
            printf "%s %d | %.2f | %s | %d | %.0f | %.0f |\n", mdline, params[c], macs[c] / 1e6, mdtop1, n, ips[c] / n, secs[c] / n > md
        }
    }'
cat "$dir/results.md"
