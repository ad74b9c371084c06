#!/usr/bin/env bash
# The nightly recipe, runnable by anyone from the repository root of an installed checkout
# (the CI workflow .github/workflows/nightly.yml runs exactly this):
#
#   1. rnnbench run: conformance of every built-in + the quick benchmarks + the report;
#      on a machine with a GPU, the quick benchmarks on cuda too, in the same report;
#   2. asv: tonight's commit recorded into the history (.asv/results), the asv site published;
#   3. the regression gate: `rnnbench compare` of tonight's bench JSON against the baseline
#      (the last night that passed the gate), and `asv compare` against the previous commit.
#
# Output: out-nightly/site/ (index.html, report/, asv/) — what CI publishes.
# State kept between nights (CI caches it): .asv/results and .asv/nightly/.
# Environment: RNNBENCH_THRESHOLD (default 5%), RNNBENCH_MACHINE (asv machine name, default the
# host name), RNNBENCH_ACCEPT=1 (accept tonight's numbers as the new baseline even if slower).
# Exit: 0 all good; 1 a conformance failure, a failed benchmark or a regression; 2 a setup error.
set -uo pipefail
cd "$(dirname "$0")/.."

THRESHOLD=${RNNBENCH_THRESHOLD:-5%}
MACHINE=${RNNBENCH_MACHINE:-$(hostname)}
STATE=.asv/nightly
OUT=out-nightly
SITE=$OUT/site
status=0
fail() { echo "nightly: $*" >&2; status=1; }

command -v rnnbench >/dev/null && command -v asv >/dev/null \
    || { echo "nightly: rnnbench and asv must be on PATH (pip install -e .)" >&2; exit 2; }
python="$(dirname "$(command -v rnnbench)")/python"     # the environment rnnbench is in
head=$(git rev-parse HEAD) || exit 2
rm -rf "$OUT" && mkdir -p "$STATE" "$SITE" || exit 2

# 1. Conformance (the full case list), quick benchmarks, report.
rnnbench run --full --out "$SITE/report" || fail "rnnbench run reported failures"
benches=("$SITE/report/bench.json")
if "$python" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    rnnbench bench --preset quick --device cuda --json "$SITE/report/bench-cuda.json" \
        || fail "cuda benchmarks reported failures"
    benches+=("$SITE/report/bench-cuda.json")
    rnnbench report "$SITE"/report/*.json --out "$SITE/report" || fail "report failed"
fi

# 2. asv history and site. `existing` environments save results only with a commit hash.
asv machine --yes --machine "$MACHINE" >/dev/null || exit 2
asv run --python=same --machine "$MACHINE" --set-commit-hash "$head" --show-stderr \
    || fail "asv run failed"
asv publish && cp -r .asv/html "$SITE/asv" || fail "asv publish failed"

# 3. Regression gate. asv compare exits 0 even on regressions: its output is grepped.
previous=$(cat "$STATE/last-commit" 2>/dev/null || true)
if [ -n "$previous" ] && [ "$previous" != "$head" ]; then
    factor=$(awk -v pct="${THRESHOLD%\%}" 'BEGIN { print 1 + pct / 100 }')
    asv compare --split --factor "$factor" --machine "$MACHINE" "$previous" "$head" \
        | tee "$SITE/asv-compare.txt"
    grep -q "Benchmarks that have got worse" "$SITE/asv-compare.txt" \
        && fail "asv: benchmarks got worse since ${previous:0:8}"
fi
echo "$head" > "$STATE/last-commit"
regressed=0
for bench in "${benches[@]}"; do
    [ -f "$bench" ] || { fail "no $bench: nothing to compare"; continue; }
    baseline="$STATE/baseline-$(basename "$bench")"
    if [ -f "$baseline" ]; then
        rnnbench compare "$baseline" "$bench" --threshold "$THRESHOLD" \
            | tee "$SITE/compare-$(basename "$bench" .json).txt"
        [ "${PIPESTATUS[0]}" -eq 0 ] || { regressed=1; fail "regression in $(basename "$bench")"; }
    fi
done
# The baseline moves only on a night without regressions (or when told to accept one), so a
# slowdown keeps failing until it is fixed or accepted.
if [ "$regressed" -eq 0 ] || [ "${RNNBENCH_ACCEPT:-0}" = 1 ]; then
    for bench in "${benches[@]}"; do
        [ -f "$bench" ] && cp "$bench" "$STATE/baseline-$(basename "$bench")"
    done
fi

cat > "$SITE/index.html" <<EOF
<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>rnnbench nightly</title></head>
<body><h1>rnnbench nightly</h1>
<p>commit ${head:0:12}, machine $(hostname | sed 's/[^A-Za-z0-9._-]//g'),
$(date -u '+%Y-%m-%d %H:%M UTC')</p>
<ul><li><a href="report/index.html">conformance and benchmark report</a></li>
<li><a href="asv/index.html">asv history</a></li></ul></body></html>
EOF
echo "nightly: site in $SITE (exit $status)"
exit "$status"
