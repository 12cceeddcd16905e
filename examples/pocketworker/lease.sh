#!/usr/bin/env bash
# The recipe on a lent GPU host that reaches no package index and takes files in transfers of
# at most 64 MiB, in one call of at most 600 s (RECIPE.md, "For the next lease"):
#
#   bash examples/pocketworker/lease.sh prepare     # here: CPU stages, bundle, two parts
#   # call 1 on the host, carrying runs/lease/c1:   true
#   # call 2 right after it (the host keeps c1 only while it is warm), carrying runs/lease/c2:
#   bash examples/pocketworker/lease.sh go          # there: install, run, results to $OUT
#
# `go` joins the parts, installs them beside the host's own torch, runs gpu_h200.sh under
# BUDGET_S seconds with RESULTS= a folder it packs into $OUT/results.tgz (whatever finished:
# every stage copies its results there as it ends), and says where the run stopped. Every
# setting below is an environment variable; what `prepare` and `go` use must agree (SYNTH,
# SYNTH_SHORT, TRIALS: the prepared WORK is reused only when they do).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/examples/pocketworker
LEASE=${LEASE:-$ROOT/runs/lease}               # where prepare puts c1/ and c2/ (runs/ is ignored by git:
                                               # only what a call carries travels, not the 350 MB WORK)
WORK=${WORK:-runs/lease/work}
export SYNTH=${SYNTH:-1000} SYNTH_SHORT=${SYNTH_SHORT:-1000} TRIALS=${TRIALS:-2} HELD_OUT=${HELD_OUT-}
export EVAL_TASKS=${EVAL_TASKS:-examples/benchmark}

prepare() {
  local py=${PYTHON:-$ROOT/.venv/bin/python}
  echo "== the CPU stages (synthesis, teacher, export) into $WORK"
  PATH=$(dirname "$py"):$PATH COWORKENV="$py -m coworkenv.cli" PREPARE_ONLY=1 WORK=$WORK \
    bash "$HERE/gpu_h200.sh"
  echo "== the bundle (Python ${PY_VERSION:-3.12}, the host's own packages left out)"
  WORK=$WORK PY_VERSION=${PY_VERSION:-3.12} PART_MB=${PART_MB:-56} LAYOUT=site \
    HOST_HAS=${HOST_HAS:-"torch triton numpy pandas pyarrow tokenizers safetensors sympy mpmath \
networkx jinja2 markupsafe filelock fsspec typing-extensions setuptools matplotlib contourpy \
fonttools kiwisolver pillow cycler pyparsing python-dateutil six packaging pyyaml lxml hf-xet \
pygments requests urllib3 charset-normalizer certifi idna psutil tzdata markdown-it-py mdurl"} \
    OUT=$LEASE/bundle PYTHON=$py bash "$HERE/offline_bundle.sh"
  local parts=("$LEASE"/bundle/payload.tar.part-*)
  if [ "${#parts[@]}" -gt 2 ]; then
    echo "lease.sh: the bundle made ${#parts[@]} parts of PART_MB=${PART_MB:-56} MiB; two calls" \
         "carry two (at most 64 MiB each): bring less (a smaller WORK or model)" >&2
    exit 1
  fi
  rm -rf "$LEASE/c1" "$LEASE/c2" && mkdir -p "$LEASE/c1" "$LEASE/c2"
  mv "${parts[0]}" "$LEASE/c1/" && mv "${parts[@]:1}" "$LEASE/bundle/install.sh" "$LEASE/c2/"
  du -sh "$LEASE/c1" "$LEASE/c2"
  echo "next, on the host: call 1 carrying ${LEASE#"$ROOT"/}/c1 (command: true), then at once" \
       "call 2 carrying ${LEASE#"$ROOT"/}/c2: bash examples/pocketworker/lease.sh go"
}

go() {
  local res=${RESULTS:-/tmp/lease-results} dest=${DEST:-/tmp/lease-bundle}
  [ -f "$LEASE/c1/payload.tar.part-00" ] || {
    echo "lease.sh: $LEASE/c1/payload.tar.part-00 is not here: call 1 (carrying c1) must come" \
         "first, and this call right after it, while the host is warm" >&2; exit 1; }
  mkdir -p "$res"
  cp "$LEASE"/c1/payload.tar.part-* "$LEASE/c2/"
  DEST=$dest WORK=$WORK bash "$LEASE/c2/install.sh" | tee "$res/install.log"
  export PYTHONPATH=$ROOT:$dest/site COWORKENV="python3 -m coworkenv.cli" USE_HUB_KERNELS=0 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  local rc=0
  timeout "${BUDGET_S:-560}" env RESULTS="$res" WORK="$WORK" \
    STUDENT=${STUDENT:-$dest/model/SmolLM2-135M-Instruct.Q4_1.gguf} \
    EVAL_TRIALS=${EVAL_TRIALS:-3} EVAL_MAX_TURNS=${EVAL_MAX_TURNS:-12} \
    EVAL_MAX_TOKENS=${EVAL_MAX_TOKENS:-160} SFT_STEPS=${SFT_STEPS:-160} \
    SFT_BATCH=${SFT_BATCH:-8} SFT_MAX_LENGTH=${SFT_MAX_LENGTH:-4096} SFT_LR=${SFT_LR:-1e-4} \
    SFT_CURRICULUM=${SFT_CURRICULUM:-1} GRPO_STEPS=${GRPO_STEPS:-3} GRPO_BATCH=${GRPO_BATCH:-16} \
    GRPO_GENERATIONS=${GRPO_GENERATIONS:-8} GRPO_COMPLETION=${GRPO_COMPLETION:-768} \
    GRPO_TOOL_CALLS=${GRPO_TOOL_CALLS:-8} GRPO_LR=${GRPO_LR:-1e-5} USE_VLLM=${USE_VLLM:-0} \
    SERVER=${SERVER:-coworkenv} PARALLEL=${PARALLEL:-1} \
    bash "$HERE/gpu_h200.sh" > "$res/log" 2>&1 || rc=$?
  if [ "$rc" = 124 ]; then
    echo "lease.sh: the recipe ran past BUDGET_S=${BUDGET_S:-560} s; stages done:" >&2
  elif [ "$rc" != 0 ]; then
    echo "lease.sh: the recipe failed (exit $rc); the end of its log:" >&2
    tail -20 "$res/log" >&2
  fi
  cat "$WORK/timings.tsv" 2>/dev/null || true
  if [ -n "${OUT:-}" ]; then
    tar czf "$OUT/results.tgz" -C "$res" .
    echo "results: $OUT/results.tgz ($(du -h "$OUT/results.tgz" | cut -f1))"
  fi
  return "$rc"
}

case "${1:-}" in
  prepare) prepare ;;
  go) go ;;
  *) echo "usage: lease.sh prepare | go (see the top of this file)" >&2; exit 2 ;;
esac
