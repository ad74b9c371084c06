#!/usr/bin/env bash
# The nightly recipe, one step per command, so that CI can spread it over machines
# (.github/workflows/nightly.yml, described in docs/nightly.md) and anyone can run the same steps
# from the repository root of an installed checkout:
#
#   scripts/nightly.sh conform IMPL [DEVICE]  conformance of one implementation (default cpu)
#                                             -> $RESULTS/conformance-IMPL-DEVICE.json
#   scripts/nightly.sh bench [DEVICE]         the quick preset over every implementation
#                                             -> $RESULTS/bench-DEVICE.json; then tonight's
#                                             commit into the asv history (site in
#                                             $ASV_SITE) and the regression gate
#   scripts/nightly.sh merge RESULTS SITE     one report from the JSON of every machine under
#                                             RESULTS -> SITE/report/, SITE/index.html
#   scripts/nightly.sh all                    every step on this machine: each built-in, the
#                                             benchmarks on cpu (and cuda with a GPU), the merge
#
# Environment: RNNBENCH_RESULTS (default out-nightly/results), RNNBENCH_ASV_SITE (default
# out-nightly/asv-site), RNNBENCH_THRESHOLD (default 5%), RNNBENCH_MACHINE (asv machine name,
# default the host name), RNNBENCH_ACCEPT=1 (accept tonight's numbers as the new baseline even
# if slower). State kept between nights (CI caches it per machine): .asv/results, .asv/nightly/.
# Exit: 0 all good; 1 a conformance failure, a failed benchmark or a regression; 2 a setup or
# usage error. An inconclusive gate (compare's exit 3: a busy machine) fails nothing and keeps
# the baseline.
set -uo pipefail
cd "$(dirname "$0")/.."

RESULTS=${RNNBENCH_RESULTS:-out-nightly/results}
ASV_SITE=${RNNBENCH_ASV_SITE:-out-nightly/asv-site}
THRESHOLD=${RNNBENCH_THRESHOLD:-5%}
MACHINE=${RNNBENCH_MACHINE:-$(hostname)}
STATE=.asv/nightly
status=0
fail() { echo "nightly: $*" >&2; status=1; }
usage() { echo "nightly: $*; usage: scripts/nightly.sh conform IMPL [DEVICE] |" \
               "bench [DEVICE] | merge RESULTS SITE | all" >&2; exit 2; }

command -v rnnbench >/dev/null || { echo "nightly: rnnbench must be on PATH (pip install -e .)" >&2
                                    exit 2; }
# The machine name becomes a folder name (the asv site's): one path component, nothing else.
case $MACHINE in
    ''|.|..|*/*|*[!A-Za-z0-9._-]*)
        echo "nightly: RNNBENCH_MACHINE must be a name of letters, digits, '.', '_' and '-'" \
             "(not '.' or '..'), got '$MACHINE'" >&2
        exit 2 ;;
esac

# A name as a file name's part: characters other than letters, digits, '.', '_', '-' become '_'.
file_part() { printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_'; }

conform() {   # IMPL DEVICE
    mkdir -p "$RESULTS" || exit 2
    rnnbench conform "$1" --device "$2" --budget 0 \
        --json "$RESULTS/conformance-$(file_part "$1")-$2.json" < /dev/null
    case $? in
        0) ;;
        1) fail "$1 on $2 does not conform" ;;
        *) echo "nightly: rnnbench conform $1 --device $2 could not run" >&2; exit 2 ;;
    esac
}

bench() {   # DEVICE
    local device=$1 json="$RESULTS/bench-$1.json" head previous baseline
    command -v asv >/dev/null || { echo "nightly: asv must be on PATH" >&2; exit 2; }
    mkdir -p "$RESULTS" "$STATE" || exit 2
    rnnbench bench --preset quick --device "$device" --json "$json" \
        || fail "benchmarks on $device reported failures"
    head=$(git rev-parse HEAD) || exit 2
    # asv: `existing` environments save results only with a commit hash.
    asv machine --yes --machine "$MACHINE" >/dev/null || exit 2
    asv run --python=same --machine "$MACHINE" --set-commit-hash "$head" --show-stderr \
        || fail "asv run failed"
    asv publish && rm -rf "$ASV_SITE" && mkdir -p "$(dirname "$ASV_SITE")" \
        && cp -r .asv/html "$ASV_SITE" || fail "asv publish failed"
    # The regression gate. asv compare exits 0 even on regressions: its output is grepped.
    previous=$(cat "$STATE/last-commit" 2>/dev/null || true)
    if [ -n "$previous" ] && [ "$previous" != "$head" ]; then
        factor=$(awk -v pct="${THRESHOLD%\%}" 'BEGIN { print 1 + pct / 100 }')
        asv compare --split --factor "$factor" --machine "$MACHINE" "$previous" "$head" \
            | tee "$RESULTS/asv-compare-$device.txt"
        # A regression is a row asv marks + (slower, bigger) or ! (failing now) of a time_,
        # peakmem_ or track_first_call_s benchmark: asv marks a higher track_gflops + as well.
        grep -qE '^\| [+!] +\|.*\.(time_|peakmem_|track_first_call_s)' \
            "$RESULTS/asv-compare-$device.txt" \
            && fail "asv: benchmarks got worse since ${previous:0:8}"
    fi
    echo "$head" > "$STATE/last-commit"
    baseline="$STATE/baseline-bench-$device.json"
    local passed=1
    if [ -f "$baseline" ] && [ -f "$json" ]; then
        rnnbench compare "$baseline" "$json" --threshold "$THRESHOLD" \
            | tee "$RESULTS/compare-$device.txt"
        case ${PIPESTATUS[0]} in
            0) ;;
            3) passed=0
               echo "nightly: the gate on $device is inconclusive (busy machine);" \
                    "the baseline stays" >&2 ;;
            *) passed=0; fail "regression on $device" ;;
        esac
    fi
    # The baseline moves only on a night that passed the gate (or when told to accept it), so
    # a slowdown keeps failing until it is fixed or accepted, and a busy night sets no baseline.
    if [ -f "$json" ] && { [ "$passed" -eq 1 ] || [ "${RNNBENCH_ACCEPT:-0}" = 1 ]; }; then
        cp "$json" "$baseline"
    fi
}

merge() {   # RESULTS SITE
    local results=$1 site=$2
    [ -d "$results" ] || usage "no results folder $results"
    mkdir -p "$site" || exit 2
    rnnbench report "$results" --out "$site/report" || exit $?
    {
        echo '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        echo '<meta name="viewport" content="width=device-width, initial-scale=1">'
        echo '<title>rnnbench nightly</title></head><body><h1>rnnbench nightly</h1>'
        echo "<p>commit $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)," \
             "$(date -u '+%Y-%m-%d %H:%M UTC')</p>"
        echo '<ul><li><a href="report/index.html">conformance and benchmark report, every' \
             'machine</a></li>'
        for asv in "$site"/asv/*/index.html; do
            [ -f "$asv" ] || continue
            name=$(basename "$(dirname "$asv")" | sed 's/[^A-Za-z0-9._-]//g')
            echo "<li><a href=\"asv/$name/index.html\">asv history: $name</a></li>"
        done
        echo '</ul></body></html>'
    } > "$site/index.html"
    echo "nightly: site in $site"
}

device_only() {   # DEVICE: it goes into file names
    case $1 in
        cpu|cuda|cuda:[0-9]|cuda:[0-9][0-9]) ;;
        *) usage "DEVICE must be cpu or cuda[:N], got '$1'" ;;
    esac
}

step=${1:-}
case $step in
    conform) [ $# -ge 2 ] && [ $# -le 3 ] || usage "conform takes IMPL [DEVICE]"
             device_only "${3:-cpu}"
             conform "$2" "${3:-cpu}" ;;
    bench)   [ $# -le 2 ] || usage "bench takes [DEVICE]"
             device_only "${2:-cpu}"
             bench "${2:-cpu}" ;;
    merge)   [ $# -eq 3 ] || usage "merge takes RESULTS SITE"
             merge "$2" "$3" ;;
    all)     [ $# -eq 1 ] || usage "all takes no arguments"
             python="$(dirname "$(command -v rnnbench)")/python"  # the environment rnnbench is in
             available='import json, sys
print("\n".join(i["name"] for i in json.load(sys.stdin) if i["available"]))'
             # One name a line, read whole: a name is never split at spaces or expanded as a glob.
             impls=$(rnnbench list --json | "$python" -c "$available") || exit 2
             while IFS= read -r impl; do
                 [ -n "$impl" ] && conform "$impl" cpu
             done <<< "$impls"
             bench cpu
             if "$python" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
                 bench cuda
             fi
             mkdir -p out-nightly/site/asv && rm -rf "out-nightly/site/asv/$MACHINE" \
                 && cp -r "$ASV_SITE" "out-nightly/site/asv/$MACHINE"
             merge "$RESULTS" out-nightly/site ;;
    *)       usage "unknown step '${step}'" ;;
esac
echo "nightly: $step done (exit $status)"
exit "$status"
