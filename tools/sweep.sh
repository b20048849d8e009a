#!/usr/bin/env bash
# Ablation sweeps: every combination of the --grid values, for every seed, as its own run of ./train
# under OUT/runs/, then one table of all finished runs in OUT/results.csv and OUT/results.md.
# Runs that finished are skipped and interrupted ones resume from their last checkpoint, so running
# the same command again completes an interrupted sweep. Several sweeps may share one OUT: the table
# covers every run in it, with a column per grid key any of them used.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: tools/sweep.sh --config BASE.json --out DIR [--grid KEY=V1,V2,...]... [--seeds 1,2,3]
                      [--set KEY=VALUE]... [-j N] [--threads N] [--train PATH] [--table-only]
  --config FILE   base config (repeatable, as for ./train)
  --out DIR       sweep directory: DIR/runs/<run>/ per run, DIR/results.csv, DIR/results.md
  --grid K=LIST   a config key and its values, comma-separated (JSON values; commas inside [...] or
                  {...} stay with their value: model.agent_num=[4,9],[9,16]); several --grid multiply
  --seeds LIST    train.seed values, each combination once per seed (default 1)
  --set K=V       fixed override for every run (repeatable)
  -j N            runs at a time (default 1); the threads are split between them
  --threads N     threads in all (default: nproc)
  --train PATH    the train binary (default ./train)
  --table-only    only rebuild the results table from the runs in DIR
EOF
}

die() { echo "error: $*" >&2; exit 2; }

configs=() grids=() sets=() seeds=1 out= jobs=1 threads= train_bin=./train table_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --config) [ $# -ge 2 ] || die "--config needs a file"; configs+=("$2"); shift 2 ;;
        --grid) [ $# -ge 2 ] || die "--grid needs KEY=V1,V2"; grids+=("$2"); shift 2 ;;
        --set) [ $# -ge 2 ] || die "--set needs KEY=VALUE"; sets+=("$2"); shift 2 ;;
        --seeds) [ $# -ge 2 ] || die "--seeds needs a list"; seeds=$2; shift 2 ;;
        --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
        -j) [ $# -ge 2 ] || die "-j needs a number"; jobs=$2; shift 2 ;;
        --threads) [ $# -ge 2 ] || die "--threads needs a number"; threads=$2; shift 2 ;;
        --train) [ $# -ge 2 ] || die "--train needs a path"; train_bin=$2; shift 2 ;;
        --table-only) table_only=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument '$1'" ;;
    esac
done
[ -n "$out" ] || { usage >&2; die "--out is required"; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "-j $jobs: expected a positive integer"
threads=${threads:-$(nproc)}
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads $threads: expected a positive integer"
[[ "$seeds" =~ ^-?[0-9]+(,-?[0-9]+)*$ ]] || die "--seeds $seeds: expected integers separated by commas"

# Splits a value list on the commas outside brackets and quotes, one value per line.
split_values() {
    awk -v s="$1" 'BEGIN {
        depth = 0; quoted = 0; cur = ""
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (c == "\"") quoted = !quoted
            else if (!quoted && (c == "[" || c == "{")) depth++
            else if (!quoted && (c == "]" || c == "}")) depth--
            if (c == "," && depth == 0 && !quoted) { print cur; cur = "" } else cur = cur c
        }
        print cur
    }'
}

# A value as a JSON literal: numbers, booleans, arrays and quoted strings pass; a bare word is quoted.
json_value() {
    case "$1" in
        true|false|null|\[*|\{*|\"*) printf '%s' "$1" ;;
        *) if [[ "$1" =~ ^-?[0-9.]+([eE][-+]?[0-9]+)?$ ]]; then printf '%s' "$1"; else printf '"%s"' "$1"; fi ;;
    esac
}

# A key=value pair as a piece of a directory name.
name_part() {
    local key=${1##*.} value=$2
    value=${value//\"/}
    value=$(printf '%s' "$value" | tr -c 'A-Za-z0-9._' '-' | tr -s '-')
    value=${value#-}
    printf '%s=%s' "$key" "${value%-}"
}

# Each combination as a tab-separated list of key=value (the cartesian product of the grids).
combos=("")
for g in "${grids[@]+"${grids[@]}"}"; do
    [[ "$g" == *=* ]] || die "--grid $g: expected KEY=V1,V2,..."
    key=${g%%=*} list=${g#*=}
    [ -n "$key" ] && [ -n "$list" ] || die "--grid $g: expected KEY=V1,V2,..."
    next=()
    while IFS= read -r v; do
        [ -n "$v" ] || die "--grid $g: empty value"
        for c in "${combos[@]}"; do next+=("${c:+$c	}$key=$v"); done
    done < <(split_values "$list")
    combos=("${next[@]}")
done

mkdir -p "$out/runs"
per_job=$(( threads / jobs )); [ "$per_job" -ge 1 ] || per_job=1

run_one() { # run directory, then the --set arguments
    local dir=$1; shift
    local name; name=$(basename "$dir")
    if [ -f "$dir/last.safetensors" ]; then # the checkpoint's config, with today's --set on top
        "$train_bin" --resume "$dir/last.safetensors" "$@" --threads "$per_job" --quiet
    else
        "$train_bin" "${config_args[@]}" "$@" --set "run.name=\"$name\"" --out "$out/runs" \
            --threads "$per_job" --quiet
    fi
}

config_args=()
for c in "${configs[@]+"${configs[@]}"}"; do config_args+=(--config "$c"); done
fixed=()
for s in "${sets[@]+"${sets[@]}"}"; do
    [[ "$s" == *=* ]] || die "--set $s: expected KEY=VALUE"
    fixed+=(--set "${s%%=*}=$(json_value "${s#*=}")")
done

failed=0
if [ "$table_only" = 0 ]; then
    [ ${#configs[@]} -gt 0 ] || die "--config is required"
    [ -x "$train_bin" ] || die "$train_bin is not an executable (run make, or pass --train)"
    running=0 total=0 skipped=0
    for combo in "${combos[@]}"; do
        for seed in ${seeds//,/ }; do
            args=("${fixed[@]+"${fixed[@]}"}") parts=()
            if [ -n "$combo" ]; then
                while IFS= read -r kv; do
                    args+=(--set "${kv%%=*}=$(json_value "${kv#*=}")")
                    parts+=("$(name_part "${kv%%=*}" "${kv#*=}")")
                done < <(printf '%s\n' "$combo" | tr '\t' '\n')
            fi
            args+=(--set "train.seed=$seed")
            parts+=("seed=$seed")
            name=$(IFS=_; printf '%s' "${parts[*]}")
            dir="$out/runs/$name"
            total=$((total + 1))
            if [ -f "$dir/metrics.jsonl" ] && grep -q '"type": "end"' "$dir/metrics.jsonl"; then
                skipped=$((skipped + 1))
                continue
            fi
            mkdir -p "$dir"
            { printf '%s\n' "$combo" | tr '\t' '\n' | grep -v '^$' || true; echo "train.seed=$seed"; } > "$dir/grid.txt"
            echo "[sweep] $name"
            ( run_one "$dir" "${args[@]}" > "$dir/train.log" 2>&1 ||
                { echo "[sweep] $name failed (exit $?): see $dir/train.log" >&2; exit 1; } ) &
            running=$((running + 1))
            if [ "$running" -ge "$jobs" ]; then
                wait -n || failed=$((failed + 1))
                running=$((running - 1))
            fi
        done
    done
    while [ "$running" -gt 0 ]; do
        wait -n || failed=$((failed + 1))
        running=$((running - 1))
    done
    echo "[sweep] $total runs: $((total - skipped)) run now, $skipped already finished, $failed failed"
fi

"$(dirname "$0")/sweep_table.sh" "$out"
[ "$failed" = 0 ] || exit 1
