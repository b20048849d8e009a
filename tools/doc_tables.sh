#!/usr/bin/env bash
# Refreshes the result tables of a Markdown document in place: every block that starts with a line
# `<!-- results SWEEP_DIR -->` and ends with `<!-- /results -->` gets SWEEP_DIR/results.md (written by
# tools/sweep_table.sh) as its content; the prose around the blocks is left as it is.
#   tools/doc_tables.sh DOC.md
set -euo pipefail
doc=${1:?usage: tools/doc_tables.sh DOC.md}
[ -f "$doc" ] || { echo "error: $doc: no such file" >&2; exit 2; }
tmp=$(mktemp "$doc.XXXXXX")
trap 'rm -f "$tmp"' EXIT
awk -v doc="$doc" '
    function fail(msg) { print "error: " doc ":" NR ": " msg > "/dev/stderr"; failed = 1; exit 2 }
    /^<!-- results .* -->$/ {
        if (inside) fail("results block opened inside another one")
        print; inside = 1
        dir = $0; sub(/^<!-- results /, "", dir); sub(/ -->$/, "", dir)
        table = dir "/results.md"
        if ((getline line < table) <= 0) fail(table ": no such table (run the sweep first)")
        do print line; while ((getline line < table) > 0)
        close(table)
        next
    }
    /^<!-- \/results -->$/ { if (!inside) fail("/results without a results block"); inside = 0; print; next }
    !inside { print }
    END { if (!failed && inside) fail("results block not closed") }' "$doc" > "$tmp"
mv "$tmp" "$doc"
trap - EXIT
