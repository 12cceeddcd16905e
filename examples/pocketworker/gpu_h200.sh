#!/usr/bin/env bash
# PocketWorker recipe v1.1 on one H200 (see RECIPE.md): teacher runs -> SFT on Qwen3 -> GRPO on live
# episodes with vLLM colocated -> served with vLLM -> pass@k / pass^k on held-out families.
# Needs: a CUDA torch, `pip install -e '.[train,vllm]'`, the models on local disk or a hub cache.
set -euo pipefail

CW=${COWORKENV:-coworkenv}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-runs/pocketworker-gpu}
TASKS=${TASKS:-$ROOT/examples/tasks}          # task files or folders
SYNTH=${SYNTH:-0}                             # >0: synthesize this many tasks and use them
STUDENT=${STUDENT:-Qwen/Qwen3-1.7B}           # or Qwen/Qwen3-0.6B, Qwen/Qwen3-4B
TEACHER=${TEACHER:-}                          # optional model teacher served by vLLM, e.g. Qwen/Qwen3-32B
HELD_OUT=${HELD_OUT:-doc_sharing,safety}
TRAIN_FAMILIES=${TRAIN_FAMILIES:-}            # GRPO rollouts from these (default: all but HELD_OUT)
TRIALS=${TRIALS:-8}
EVAL_TASKS=${EVAL_TASKS:-}                    # evaluate on these tasks (e.g. examples/benchmark) instead of HELD_OUT
EVAL_TRIALS=${EVAL_TRIALS:-4}
SFT_STEPS=${SFT_STEPS:-300}
GRPO_STEPS=${GRPO_STEPS:-200}
PORT=${PORT:-8000}
DB=$WORK/pocketworker.db
mkdir -p "$WORK"

if [ "$SYNTH" -gt 0 ]; then
  $CW synth "$ROOT"/examples/workflows/*.yaml --generator procedural --n "$SYNTH" --out "$WORK/synth.jsonl"
  TASKS=$WORK/synth.jsonl
fi

wait_for() { for _ in $(seq 1 900); do curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && return 0; sleep 2; done; return 1; }

# 1. teacher demonstrations: the oracle (always), and a model teacher when TEACHER is set
$CW run --tasks "$TASKS" --agent oracle --trials "$TRIALS" --faults 0.15 --tools reference --db "$DB" --run-id teacher-oracle --quiet
if [ -n "$TEACHER" ]; then
  vllm serve "$TEACHER" --port "$PORT" --enable-auto-tool-choice --tool-call-parser hermes \
    --gpu-memory-utilization 0.85 > "$WORK/teacher.log" 2>&1 & srv=$!; wait_for
  $CW run --tasks "$TASKS" --agent "teacher:openai:$TEACHER" --base-url "http://127.0.0.1:$PORT/v1" \
    --tools reference --trials "$TRIALS" --model-concurrency 64 --concurrency 256 --db "$DB" --run-id teacher-model --quiet
  kill $srv; wait $srv || true
fi

# 2. SFT data, held out by family; 3. SFT (full fine-tune, bf16)
if [ -n "$HELD_OUT" ]; then
  $CW export sft --db "$DB" --out "$WORK/data/sft" --split-by family --held-out "$HELD_OUT"
else  # evaluation on other tasks (EVAL_TASKS): train on every family
  $CW export sft --db "$DB" --out "$WORK/data/sft" --split-by family --eval-fraction 0
fi
$CW train sft --model "$STUDENT" --data "$WORK/data/sft" --out "$WORK/ckpt/sft" --gpu \
  --steps "$SFT_STEPS" --batch-size 8 --max-length 4096 --learning-rate 1e-5

# 4. GRPO: rollouts are live episodes of the training families; vLLM generates in-process
fams=()
if [ -n "$TRAIN_FAMILIES" ]; then fams=(--families "$TRAIN_FAMILIES"); fi
$CW train grpo --model "$WORK/ckpt/sft" --tasks "$TASKS" "${fams[@]}" --held-out "$HELD_OUT" --gpu \
  --use-vllm --vllm-mode colocate --out "$WORK/ckpt/grpo" --db "$DB" --run-id grpo-rollouts \
  --steps "$GRPO_STEPS" --batch-size 16 --num-generations 8 --max-completion-length 2048 \
  --max-tool-calls 12 --learning-rate 1e-6

# 5. evaluation: each checkpoint behind vLLM, EVAL_TRIALS trials per held-out task (pass@k, pass^k)
evaluated=(--tasks "$TASKS" --families "$HELD_OUT"); sets=()
if [ -n "$EVAL_TASKS" ]; then evaluated=(--tasks "$EVAL_TASKS"); sets=(--set "evaluated=$EVAL_TASKS"); fi
for name in base sft grpo; do
  case $name in base) path=$STUDENT;; sft) path=$WORK/ckpt/sft;; grpo) path=$WORK/ckpt/grpo;; esac
  vllm serve "$path" --served-model-name "pocketworker-$name" --port "$PORT" --enable-auto-tool-choice \
    --tool-call-parser hermes --gpu-memory-utilization 0.85 > "$WORK/serve-$name.log" 2>&1 & srv=$!; wait_for
  curl -s "http://127.0.0.1:$PORT/v1/models" > "$WORK/served-$name.json"
  $CW run "${evaluated[@]}" --agent "openai:pocketworker-$name" \
    --base-url "http://127.0.0.1:$PORT/v1" --tools reference --trials "$EVAL_TRIALS" --model-concurrency 64 \
    --concurrency 128 --db "$DB" --run-id "eval-$name" --quiet
  kill $srv; wait $srv || true
  $CW eval --db "$DB" --run "eval-$name" --k "$EVAL_TRIALS" "${sets[@]}" --out "$WORK"
done
$CW eval --db "$DB" --compare eval-base eval-sft "${sets[@]}" --out "$WORK"
$CW eval --db "$DB" --compare eval-base eval-grpo "${sets[@]}" --out "$WORK"
