#!/usr/bin/env bash
# tools/ab.sh BASE [NEW] [-- BENCH ARGUMENTS]: the bench of two revisions in turn, the way the
# before/after figures of docs/performance.md are taken on a shared, drifting machine. BASE and NEW
# are commits, each built in a worktree of its own; NEW left out is the working tree as it stands,
# uncommitted changes included. Their `bench` runs alternate ROUNDS times (default 5) with the same
# arguments (default: deit_t's training step at batch 16), so that the machine's drift falls on both
# sides; prints each side's median img/s (and each round's, to read the spread) and NEW/BASE. With
# OPS=name,name,... each run also passes --profile, and those ops' median forward and backward ms a
# step are printed beside.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: tools/ab.sh BASE [NEW] [-- bench arguments]   (env: ROUNDS, OPS)"; }
[ $# -ge 1 ] && [ "$1" != -- ] || { usage >&2; exit 2; }
[ "$1" = -h ] || [ "$1" = --help ] && { usage; exit 0; }
base=$1 new=
shift
if [ $# -gt 0 ] && [ "$1" != -- ]; then new=$1; shift; fi
[ $# -gt 0 ] && shift # the --
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--model deit_t --mode train --batch 16 --iters 3 --threads 2)
ROUNDS=${ROUNDS:-5} OPS=${OPS:-}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS=$ROUNDS: expected a whole number >= 1" >&2; exit 2; }
[ -n "$OPS" ] && args+=(--profile)
for rev in "$base" $new; do
  git rev-parse --verify --quiet "$rev^{commit}" >/dev/null ||
    { echo "error: tools/ab.sh: $rev: not a commit of this repository" >&2; exit 2; }
done

tmp=$(mktemp -d)
cleanup() {
  for t in "$tmp"/base "$tmp"/new; do [ -d "$t" ] && git worktree remove --force "$t" >/dev/null 2>&1; done
  git worktree prune
  rm -rf "$tmp"
}
trap cleanup EXIT

# side $1's bench of revision $2 (empty: the working tree), built; prints its path
build() {
  local dir=.
  if [ -n "$2" ]; then
    dir=$tmp/$1
    git worktree add --detach "$dir" "$2" >/dev/null 2>&1
  fi
  # the release build whatever make this runs under: `make test SAN=1` puts SAN=1 in the
  # environment and its flags in MAKEFLAGS
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$dir" -j2 SAN= NO_OMP= CUDA= BUILD=build/release \
    build/release/bench >"$tmp/make.log" 2>&1 ||
    { echo "error: tools/ab.sh: building ${2:-the working tree} failed:" >&2; tail -20 "$tmp/make.log" >&2; return 1; }
  echo "$dir/build/release/bench"
}
bench_new=$(build new "$new")
"$bench_new" "${args[@]}" >/dev/null 2>"$tmp/err" ||
  { echo "error: tools/ab.sh: bench ${args[*]}:" >&2; cat "$tmp/err" >&2; exit 2; }
profiled=$(awk '$1 == "op" { on = 1; next } on && NF == 6 { print $1 }' "$tmp/err" | tr '\n' ' ')
for op in ${OPS//,/ }; do
  [[ " $profiled" == *" $op "* ]] ||
    { echo "error: tools/ab.sh: OPS: $op: not an op of this step's profile (${profiled% })" >&2; exit 2; }
done
bench_base=$(build base "$base")

# one run: img/s, then "op forward backward" for each of OPS, one line each
run() {
  "$1" "${args[@]}" 2>"$tmp/profile" | sed -E 's/.*"img_s": ([0-9.e+-]+).*/img_s \1 0/'
  for op in ${OPS//,/ }; do
    awk -v op="$op" '$1 == op { print op, $2, $3 }' "$tmp/profile"
  done
}
for ((r = 0; r < ROUNDS; r++)); do
  run "$bench_base" | sed 's/^/base /' >>"$tmp/runs"
  run "$bench_new" | sed 's/^/new /' >>"$tmp/runs"
done
# the median of side $1's figure $2 in column $3 of the runs
median() {
  awk -v s="$1" -v k="$2" -v c="$3" '$1 == s && $2 == k { print $c }' "$tmp/runs" | sort -g |
    awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
row() {
  local b n
  b=$(median base "$2" "$3") n=$(median new "$2" "$3")
  printf "%-24s %12s %12s %8s\n" "$1" "$b" "$n" "$(awk -v b="$b" -v n="$n" 'BEGIN { if (b > 0) printf "%.3f", n / b; else printf "-" }')"
}
echo "tools/ab.sh: ${base} against ${new:-the working tree}, ${ROUNDS} rounds in turn: bench ${args[*]}"
printf "%-24s %12s %12s %8s\n" "median of $ROUNDS" base new new/base
row img_s img_s 3
for side in base new; do
  echo "  $side img/s by round: $(awk -v s=$side '$1 == s && $2 == "img_s" { printf "%s ", $3 }' "$tmp/runs")"
done
for op in ${OPS//,/ }; do
  row "$op forward_ms" "$op" 3
  row "$op backward_ms" "$op" 4
done
