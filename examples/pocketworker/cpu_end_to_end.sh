#!/usr/bin/env bash
# PocketWorker on CPU, end to end, with the offline SmolLM2-135M-Instruct:
#   teacher run (oracle) -> export sft -> train sft -> train grpo (live episodes as rollouts)
#   -> serve each checkpoint over HTTP and evaluate it on held-out families (or on other tasks:
#   EVAL_TASKS=examples/benchmark) -> eval --compare.
# Every knob is an environment variable (defaults in brackets); the defaults are the run whose
# numbers are in the README. CI runs a smaller setting of the same script (tests/training).
set -euo pipefail

CW=${COWORKENV:-coworkenv}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-runs/pocketworker}                     # everything this script writes
TASKS=${TASKS:-$ROOT/examples/tasks}                  # task files or folders
SYNTH=${SYNTH:-0}                                     # >0: synthesize this many tasks and use them
SYNTH_SHORT=${SYNTH_SHORT:-0}                         # >0: also this many short tasks (plans of SHORT_STAGES)
SHORT_STAGES=${SHORT_STAGES:-2-4}                     # primitives per short plan, the report counted
MODEL=${MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}  # base model: GGUF, folder or hub id
HELD_OUT=${HELD_OUT:-doc_sharing,safety}             # families never trained on, evaluated
TRAIN_FAMILIES=${TRAIN_FAMILIES:-}                    # GRPO rollouts from these (default: all but HELD_OUT)
TEACHER_TRIALS=${TEACHER_TRIALS:-4}                  # oracle trials per task (faults vary them)
SLIPS=${SLIPS:-0.3}                                  # oracle: share of person-naming steps where it slips
                                                     # (wrong name, not_found, directory_search, retry)
TOOLS=${TOOLS:-reference,directory_search}           # tools offered: teacher, GRPO and evaluation
SFT_STEPS=${SFT_STEPS:-40}
SFT_BATCH=${SFT_BATCH:-2}
SFT_MAX_LENGTH=${SFT_MAX_LENGTH:-1024}
SFT_LR=${SFT_LR:-1e-4}
SFT_TRUNCATION=${SFT_TRUNCATION:-keep_start}         # or keep_end: the last turns of a longer demonstration
SFT_CURRICULUM=${SFT_CURRICULUM:-0}                  # 1: short demonstrations first (train sft --curriculum)
SFT_MEASURE_ROWS=${SFT_MEASURE_ROWS:-16}             # train and held-out rows whose loss is measured before and after
GRPO_STEPS=${GRPO_STEPS:-2}                          # 0 skips GRPO
GRPO_COMPLETION=${GRPO_COMPLETION:-192}              # tokens of a whole rollout (turns + tool results)
GRPO_BATCH=${GRPO_BATCH:-2}                          # rollouts per step
GRPO_GENERATIONS=${GRPO_GENERATIONS:-2}              # rollouts per prompt (the group)
GRPO_TOOL_CALLS=${GRPO_TOOL_CALLS:-4}
GRPO_LR=${GRPO_LR:-1e-6}
GRPO_WEIGHTS=${GRPO_WEIGHTS:-1,0,0,0,0}           # score,completion,safety,robustness,no_repeat
EVAL_TASKS=${EVAL_TASKS:-}                            # evaluate on these task files/folders instead
                                                      # of the held-out families (e.g. the benchmark)
EVAL_TRIALS=${EVAL_TRIALS:-1}                         # trials per evaluated task (pass@k, pass^k)
EVAL_ONLY=${EVAL_ONLY:-}                              # comma-separated task ids (default: all held out)
EVAL_PER_FAMILY=${EVAL_PER_FAMILY:-}                  # evaluate the first K tasks of each held-out family
EVAL_MAX_TURNS=${EVAL_MAX_TURNS:-6}
EVAL_MAX_TOKENS=${EVAL_MAX_TOKENS:-128}
PORT=${PORT:-8765}
DB=$WORK/pocketworker.db
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TOKENIZERS_PARALLELISM=false

mkdir -p "$WORK"
step() { printf '\n== %s\n' "$*"; }

if [ "$SYNTH" -gt 0 ]; then
  step "0. synthesize $SYNTH tasks from the workflow requirements (procedural generator, validated)"
  $CW synth "$ROOT"/examples/workflows/*.yaml --generator "${SYNTH_GENERATOR:-procedural}" --n "$SYNTH" \
    --out "$WORK/synth.jsonl"
  TASKS=$WORK/synth.jsonl
fi
tasks=(--tasks "$TASKS")
if [ "$SYNTH_SHORT" -gt 0 ]; then
  step "0b. synthesize $SYNTH_SHORT short tasks (plans of $SHORT_STAGES primitives)"
  $CW synth "$ROOT"/examples/workflows/*.yaml --stages "$SHORT_STAGES" --n "$SYNTH_SHORT" \
    --out "$WORK/synth-short.jsonl"
  tasks+=(--tasks "$WORK/synth-short.jsonl")
fi
curriculum=(); if [ "$SFT_CURRICULUM" = 1 ]; then curriculum=(--curriculum); fi

step "1. teacher run: the oracle on every task, ${TEACHER_TRIALS} trials, transient faults for variety"
$CW run "${tasks[@]}" --agent oracle --trials "$TEACHER_TRIALS" --faults 0.15 --slips "$SLIPS" --tools "$TOOLS" \
  --db "$DB" --run-id teacher --quiet

if [ -n "$HELD_OUT" ]; then
  step "2. export sft, held out by family: $HELD_OUT"
  $CW export sft --db "$DB" --run teacher --out "$WORK/data/sft" --split-by family --held-out "$HELD_OUT"
else
  step "2. export sft, every family (evaluation is on other tasks: $EVAL_TASKS)"
  $CW export sft --db "$DB" --run teacher --out "$WORK/data/sft" --split-by family --eval-fraction 0
fi

step "3. train sft: $SFT_STEPS steps"
$CW train sft --model "$MODEL" --data "$WORK/data/sft" --out "$WORK/ckpt/sft" --steps "$SFT_STEPS" \
  --batch-size "$SFT_BATCH" --max-length "$SFT_MAX_LENGTH" --truncation "$SFT_TRUNCATION" "${curriculum[@]}" --learning-rate "$SFT_LR" \
  --measure-rows "$SFT_MEASURE_ROWS"

models=("base=$MODEL" "sft=$WORK/ckpt/sft")
if [ "$GRPO_STEPS" -gt 0 ]; then
  step "4. train grpo: $GRPO_STEPS steps, rollouts are live episodes of ${TRAIN_FAMILIES:-every family but $HELD_OUT}"
  fams=()
  if [ -n "$TRAIN_FAMILIES" ]; then fams=(--families "$TRAIN_FAMILIES"); fi
  $CW train grpo --model "$WORK/ckpt/sft" "${tasks[@]}" "${fams[@]}" --held-out "$HELD_OUT" \
    --out "$WORK/ckpt/grpo" --db "$DB" --run-id grpo-rollouts --steps "$GRPO_STEPS" \
    --batch-size "$GRPO_BATCH" --num-generations "$GRPO_GENERATIONS" --learning-rate "$GRPO_LR" --reward-weights "$GRPO_WEIGHTS" \
    --max-completion-length "$GRPO_COMPLETION" --tools "$TOOLS" --max-tool-calls "$GRPO_TOOL_CALLS"
  models+=("grpo=$WORK/ckpt/grpo")
fi

only=()
if [ -n "$EVAL_PER_FAMILY" ]; then only+=(--per-family "$EVAL_PER_FAMILY"); fi
if [ -n "$EVAL_ONLY" ]; then
  IFS=, read -ra ids <<< "$EVAL_ONLY"
  for id in "${ids[@]}"; do only+=(--only "$id"); done
fi
evaluated=("${tasks[@]}" --families "$HELD_OUT")
sets=()
if [ -n "$EVAL_TASKS" ]; then
  evaluated=(--tasks "$EVAL_TASKS")
  sets=(--set "evaluated=$EVAL_TASKS")
fi
for entry in "${models[@]}"; do
  name=${entry%%=*}; path=${entry#*=}
  step "5. evaluate $name ($path) on the held-out families, served over HTTP"
  $CW serve --model "$path" --port "$PORT" --name "pocketworker-$name" > "$WORK/serve-$name.log" 2>&1 &
  server=$!
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$PORT/v1/models" > "$WORK/served-$name.json" && break
    kill -0 "$server" 2>/dev/null || { cat "$WORK/serve-$name.log"; exit 1; }
    sleep 1
  done
  cat "$WORK/served-$name.json"; echo
  $CW run "${evaluated[@]}" "${only[@]}" --trials "$EVAL_TRIALS" --agent "openai:pocketworker-$name" \
    --base-url "http://127.0.0.1:$PORT/v1" --tools "$TOOLS" --max-turns "$EVAL_MAX_TURNS" \
    --max-tokens "$EVAL_MAX_TOKENS" --model-timeout 900 --model-concurrency 1 --concurrency 1 \
    --db "$DB" --run-id "eval-$name" --quiet || { kill "$server"; exit 1; }
  kill "$server"; wait "$server" 2>/dev/null || true
done

step "6. compare"
$CW eval --db "$DB" --compare eval-base eval-sft "${sets[@]}" --out "$WORK"
if [ "$GRPO_STEPS" -gt 0 ]; then
  $CW eval --db "$DB" --compare eval-base eval-grpo "${sets[@]}" --out "$WORK"
fi
