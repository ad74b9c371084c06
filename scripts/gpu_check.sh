#!/usr/bin/env bash
# The GPU check: conformance of native (cuDNN), eager, compile and triton on CUDA with the
# half-precision rows, and the speed goals timed with TF32 off and on, in one call of a machine
# with a GPU that ends within 8 minutes. docs/gpu.md gives the call and what comes back.
#
#   bash scripts/gpu_check.sh [--rehearse | --dry-run] [PHASE...]
#
# PHASE: checks, bench, others, report (default all four; the install and the environment
# always run).
#   checks  at once: `rnnbench conform` of native, eager, compile, triton (--quick), the half-
#           precision rows of native, eager, triton, scripts/half_tolerance.py and the kernels
#           cuDNN launches (scripts/cudnn_kernels.py);
#   bench   `rnnbench bench --preset goals --impl native,triton`, TF32 off, then on; then the
#           kernel's recurrence over batch sizes and rows per program (scripts/triton_plans.py);
#   others  `rnnbench bench --preset goals --kind rnn --impl native,compile,eager`, TF32 off:
#           compile's first calls trace the unrolled loop again in every process (7-25 s a
#           workload on an H200), so it gets the rnn workloads, after the goals' timings;
#   report  `rnnbench report` of the checks and the TF32-off timings, another of the TF32-on
#           ones, and the two timings side by side (scripts/goals_table.py).
# --rehearse: the same steps on this machine's CPU (TRITON_INTERPRET=1, device cpu, the rnn
# kind's checks, two small workloads instead of the goals, tiny budgets, longer limits).
# --dry-run: print every step's phase, limit and command; run nothing.
#
# Every step is bounded by `timeout` (SIGINT first, on which rnnbench writes what it finished,
# SIGKILL 10 s later) and logs to logs/STEP.log. After every phase the files are packed into
# $OUT, since at most 8 files come back from the device machine:
#   gpu-check.tar.gz   results/ (the JSON documents and text results) and logs/
#   report.tar.gz      report/ (the checks and TF32-off timings) and report-tf32/
#   report.md          report/report.md, readable without unpacking
#   steps.txt          the environment, then one line per step: exit code, seconds, limit
# Environment: OUT (default out-gpu-check), PYTHON (default python3), RNNBENCH_INSTALL=target
# (install a copy on PYTHONPATH even where the interpreter's environment can be written),
# IMPLS (the implementations the checks conform, default "native eager compile triton": a
# second call after a fix can check only the one fixed).
# Exit 0 when every step exited 0, 1 otherwise, 2 for a wrong argument or no GPU.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { echo "gpu_check: $*; usage: bash scripts/gpu_check.sh [--rehearse | --dry-run]" \
               "[checks] [bench] [others] [report]" >&2; exit 2; }
REHEARSE=0 DRY_RUN=0 PHASES=()
for arg in "$@"; do
    case $arg in
        --rehearse) REHEARSE=1 ;;
        --dry-run) DRY_RUN=1 ;;
        checks|bench|others|report) PHASES+=("$arg") ;;
        *) usage "unknown argument '$arg'" ;;
    esac
done
want() { [ ${#PHASES[@]} -eq 0 ] || [[ " ${PHASES[*]} " == *" $1 "* ]]; }

PY=${PYTHON:-python3}
RNNBENCH=("$PY" -m rnnbench.cli)
OUT=${OUT:-out-gpu-check}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 2
[ "$DRY_RUN" = 1 ] && trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results
mkdir -p "$RESULTS" "$WORK/logs"
export PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$WORK/inductor}
read -ra CHECKED <<< "${IMPLS:-native eager compile triton}"
HALF_ROWS='*float16/*'      # forward-float16, gradients-bfloat16, ...: none is on the quick list

# Limits in seconds. On the device: install 20 + environment 30 + checks 180 (at once) + two
# timed runs of 65 + the plans 30 + the others' run 60 + reports 30 (at once) = 480 s, 8 minutes.
# On an H200 the steps took 3-4, 7-12, 165 (compile's conformance; the rest 11-25), 17-21, 7,
# 38 and 4-8 s.
if [ "$REHEARSE" = 1 ]; then
    DEVICE=cpu BENCH_NAME=rehearsal BENCH_BUDGET=0.02 SEEDS=1
    PLANS=(--steps 3 --hidden 32 --batches 4,16 --repeats 2)
    export TRITON_INTERPRET=1
    KINDS=(--kind rnn)
    BENCH=(--workload "$WORK/rehearsal-workloads.json")
    cat > "$WORK/rehearsal-workloads.json" <<'EOF'
{"description": "The GPU check's rehearsal on the CPU: two small workloads for the goals.",
 "defaults": {"metrics": ["forward", "forward_backward"], "budget_s": 0.05, "min_repeats": 3},
 "workloads": [
  {"name": "rehearsal-rnn-tanh-t8-b4-h32", "batch": 4, "steps": 8,
   "config": {"kind": "rnn", "input_size": 32, "hidden_size": 32}},
  {"name": "rehearsal-lstm-t8-b1-h16", "batch": 1, "steps": 8, "metrics": ["forward"],
   "config": {"kind": "lstm", "input_size": 16, "hidden_size": 16}}
 ]
}
EOF
    LIMIT_INSTALL=180 LIMIT_ENV=90 LIMIT_CHECKS=900 LIMIT_BENCH=400 LIMIT_PLANS=300
    LIMIT_OTHERS=400 LIMIT_REPORT=240
else
    DEVICE=cuda BENCH_NAME=goals BENCH_BUDGET=0.5 SEEDS=3
    PLANS=()
    unset TRITON_INTERPRET      # the kernels are compiled for the GPU
    KINDS=()
    BENCH=(--preset goals)
    LIMIT_INSTALL=20 LIMIT_ENV=30 LIMIT_CHECKS=180 LIMIT_BENCH=65 LIMIT_PLANS=30
    LIMIT_OTHERS=60 LIMIT_REPORT=30
fi
# conform stops itself 30 s before its step's limit, so that its document says what it skipped;
# one check may take CHECK_LIMIT, as a first compile does while the other steps share the
# machine (conform's default, 60 s, ended one in the rehearsal).
CONFORM_BUDGET=$((LIMIT_CHECKS - 30)) CHECK_LIMIT=120

pack() {
    [ "$DRY_RUN" = 1 ] && return
    mkdir -p "$OUT" || return
    tar -czf "$WORK/gpu-check.tar.gz" -C "$WORK" results logs && mv "$WORK/gpu-check.tar.gz" "$OUT/"
    local reports=() folder
    for folder in report report-tf32; do [ -d "$WORK/$folder" ] && reports+=("$folder"); done
    if [ ${#reports[@]} -gt 0 ]; then
        tar -czf "$WORK/report.tar.gz" -C "$WORK" "${reports[@]}" \
            && mv "$WORK/report.tar.gz" "$OUT/"
    fi
    [ -f "$WORK/report/report.md" ] && cp "$WORK/report/report.md" "$OUT/"
    cp "$WORK/steps.txt" "$OUT/" 2>/dev/null
}
trap 'pack; exit 130' INT TERM

# step PHASE NAME LIMIT COMMAND...: COMMAND bounded by LIMIT seconds, its output in
# logs/NAME.log; one line in steps.txt and on stdout, with the log's last TAIL lines (default 2;
# 12 when COMMAND failed unexpectedly) under it.
step() {
    local phase=$1 name=$2 limit=$3 started=$SECONDS rc said line tail lines=${TAIL:-2}
    shift 3
    if [ "$DRY_RUN" = 1 ]; then
        printf '%s\n' "$phase $name $limit:$(printf ' %q' "$@")"
        return
    fi
    timeout -s INT -k 10 "$limit" "$@" > "$WORK/logs/$name.log" 2>&1
    rc=$?
    [ "$rc" -le 1 ] || lines=12
    case $rc in
        0) said=ok ;; 1) said="checks failed" ;; 2) said="usage or input error" ;;
        124|137) said="stopped at its limit" ;; *) said="failed" ;;
    esac
    line=$(printf '%-30s exit %3d  %4d s of %4d s  %s' "$name" "$rc" $((SECONDS - started)) \
           "$limit" "$said")
    echo "$line" >> "$WORK/steps.txt"
    tail=$(grep -v '^\s*$' "$WORK/logs/$name.log" | tail -n "$lines" | cut -c1-98 | sed 's/^/  /')
    printf '%s\n' "$line${tail:+$'\n'$tail}"     # one write: steps running at once do not mix
}

# Availability of the implementations named (not of all: fused's builds its C++ kernels first).
ENVIRONMENT='
import platform
import sys
import torch
print(f"python {platform.python_version()}, torch {torch.__version__}, "
      f"CUDA build {torch.version.cuda}")
if torch.cuda.is_available():
    print(f"GPU {torch.cuda.get_device_name(0)}, compute capability "
          f"{torch.cuda.get_device_capability(0)}, cuDNN {torch.backends.cudnn.version()}")
else:
    print("no CUDA device")
print(f"TF32 by default: cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
      f"cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}")
try:
    import triton
    print(f"triton {triton.__version__}")
except ImportError:
    print("triton: not installed")
from rnnbench.impls import load
for impl in map(load, sys.argv[1:]):
    reason = impl.unavailable_reason() or "available"
    missing = ", ".join(sorted(impl.unsupported)) or "-"
    print(f"{impl.name}: {reason}; does not support {missing}")
'

echo "gpu_check: $([ "$REHEARSE" = 1 ] && echo "rehearsal on the CPU" || echo "device $DEVICE")," \
     "work folder $WORK, results to $OUT" | tee "$WORK/steps.txt"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader | tee -a "$WORK/steps.txt"

# The install fetches nothing: no dependencies, and the build backend (setuptools >= 69) taken
# from the interpreter's environment. An editable install maps the top-level folders into the
# rnnbench namespace with a finder that a .pth file starts, which happens only in a site folder;
# where the environment cannot be written, a built copy goes on PYTHONPATH instead.
SETUPTOOLS='import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 69)'
"$PY" -c "$SETUPTOOLS" 2>/dev/null || echo "gpu_check: $PY has no setuptools >= 69, which" \
    "the install needs (carry its wheel: docs/gpu.md)" | tee -a "$WORK/steps.txt"
WRITABLE='import os, sys, sysconfig
sys.exit(not os.access(sysconfig.get_paths()["purelib"], os.W_OK))'
INSTALL=("$PY" -m pip install -q --no-deps --no-build-isolation --no-input)
if [ "${RNNBENCH_INSTALL:-}" = target ] || ! "$PY" -c "$WRITABLE" 2>/dev/null; then
    step install install "$LIMIT_INSTALL" "${INSTALL[@]}" --target "$WORK/site" .
    # Python puts the working folder first on sys.path for `-m`: the checkout's rnnbench/, whose
    # subpackages are top-level folders here, would hide the built copy.
    export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONSAFEPATH=1
else
    step install install "$LIMIT_INSTALL" "${INSTALL[@]}" -e .
fi
TAIL=20 step install environment "$LIMIT_ENV" "$PY" -c "$ENVIRONMENT" "${CHECKED[@]}"
if [ "$DRY_RUN" != 1 ]; then
    sed 's/^/  /' "$WORK/logs/environment.log" >> "$WORK/steps.txt"
    pack
    GPU='import sys, torch; sys.exit(not torch.cuda.is_available())'
    if [ "$REHEARSE" != 1 ] && ! "$PY" -c "$GPU"; then
        echo "gpu_check: torch sees no CUDA device; --rehearse runs the steps on the CPU" >&2
        exit 2
    fi
fi

if want checks; then
    for impl in "${CHECKED[@]}"; do
        step checks "conform-$impl-$DEVICE" "$LIMIT_CHECKS" "${RNNBENCH[@]}" conform "$impl" \
            --device "$DEVICE" --quick "${KINDS[@]}" --budget "$CONFORM_BUDGET" \
            --timeout "$CHECK_LIMIT" --json "$RESULTS/conformance-$impl-$DEVICE.json" &
    done
    for impl in "${CHECKED[@]}"; do
        [ "$impl" = compile ] && continue   # it would build a graph per case and dtype
        step checks "conform-$impl-$DEVICE-half" "$LIMIT_CHECKS" "${RNNBENCH[@]}" conform "$impl" \
            --device "$DEVICE" --check "$HALF_ROWS" "${KINDS[@]}" --budget "$CONFORM_BUDGET" \
            --timeout "$CHECK_LIMIT" --json "$RESULTS/conformance-$impl-$DEVICE-half.json" &
    done
    step checks "half-tolerance-$DEVICE" "$LIMIT_CHECKS" "$PY" scripts/half_tolerance.py \
        --device "$DEVICE" --seeds "$SEEDS" "${KINDS[@]}" &
    step checks "cudnn-kernels-$DEVICE" "$LIMIT_CHECKS" "$PY" scripts/cudnn_kernels.py \
        "${BENCH[@]}" --device "$DEVICE" &
    wait
    if [ "$DRY_RUN" != 1 ]; then
        cp "$WORK/logs/half-tolerance-$DEVICE.log" "$WORK/logs/cudnn-kernels-$DEVICE.log" \
            "$RESULTS/"
    fi
    pack
fi

BENCH_IEEE=$RESULTS/bench-$BENCH_NAME-$DEVICE.json
BENCH_TF32=$RESULTS/bench-$BENCH_NAME-$DEVICE-tf32.json
BENCH_OTHERS=$RESULTS/bench-$BENCH_NAME-$DEVICE-compile-eager.json
TIMED=(bench "${BENCH[@]}" --device "$DEVICE" --budget "$BENCH_BUDGET")
if want bench; then
    step bench "bench-$BENCH_NAME-$DEVICE" "$LIMIT_BENCH" "${RNNBENCH[@]}" "${TIMED[@]}" \
        --impl native,triton --json "$BENCH_IEEE"
    pack
    step bench "bench-$BENCH_NAME-$DEVICE-tf32" "$LIMIT_BENCH" \
        env TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 "${RNNBENCH[@]}" "${TIMED[@]}" \
        --impl native,triton --json "$BENCH_TF32"
    step bench "triton-plans-$DEVICE" "$LIMIT_PLANS" "$PY" scripts/triton_plans.py \
        --device "$DEVICE" "${PLANS[@]}"
    [ "$DRY_RUN" = 1 ] || cp "$WORK/logs/triton-plans-$DEVICE.log" "$RESULTS/"
    pack
fi
if want others; then
    step others "bench-$BENCH_NAME-$DEVICE-compile-eager" "$LIMIT_OTHERS" "${RNNBENCH[@]}" \
        "${TIMED[@]}" --kind rnn --impl native,compile,eager --json "$BENCH_OTHERS"
    pack
fi

if want report; then
    # The TF32-on timings get a report of their own: beside the TF32-off ones in one report,
    # rows of the same implementation, workload and metric would not say which is which.
    reported=()     # the checks' files where there are any: a rerun of bench and report has none
    for file in "$RESULTS"/conformance-*.json "$BENCH_IEEE"; do
        [ -e "$file" ] && reported+=("$file")
    done
    step report "report-$DEVICE" "$LIMIT_REPORT" "${RNNBENCH[@]}" report "${reported[@]}" \
        --out "$WORK/report" &
    step report "report-$DEVICE-tf32" "$LIMIT_REPORT" "${RNNBENCH[@]}" report "$BENCH_TF32" \
        --out "$WORK/report-tf32" &
    tabled=()       # the timings a partial rerun made
    for named in "ieee=$BENCH_IEEE" "tf32=$BENCH_TF32" "ieee-compile-eager=$BENCH_OTHERS"; do
        [ "$DRY_RUN" = 1 ] || [ -e "${named#*=}" ] && tabled+=("$named")
    done
    step report "goals-table-$DEVICE" "$LIMIT_REPORT" "$PY" scripts/goals_table.py \
        "${tabled[@]}" &
    wait
    [ "$DRY_RUN" = 1 ] || cp "$WORK/logs/goals-table-$DEVICE.log" "$RESULTS/goals-table-$DEVICE.md"
    pack
fi

[ "$DRY_RUN" = 1 ] && exit 0
failed=$(awk '$2 == "exit" && $3 != 0' "$WORK/steps.txt" | wc -l)
echo "gpu_check: $failed step(s) did not exit 0; $SECONDS s in all; in $OUT:" $(ls "$OUT")
[ "$failed" -eq 0 ]
