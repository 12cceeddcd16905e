#!/usr/bin/env bash
# PocketWorker recipe v1.7 on one H200 (see RECIPE.md): teacher runs -> SFT -> GRPO on live
# episodes -> each checkpoint served and evaluated (pass@k / pass^k) as soon as it exists.
# Needs: a CUDA torch and `pip install -e '.[train]'` (add `[vllm]` for SERVER=vllm and
# USE_VLLM=1), the models on local disk or in a hub cache.
# A stage whose output is already in WORK is skipped and a run cut midway resumes (rerun after
# an interruption, or prepare the CPU stages elsewhere and bring WORK along); each stage's wall
# time goes to timings.tsv.
set -euo pipefail

CW=${COWORKENV:-coworkenv}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-runs/pocketworker-gpu}
TASKS=${TASKS:-$ROOT/examples/tasks}          # task files or folders
SYNTH=${SYNTH:-0}                             # >0: synthesize this many tasks and use them
SYNTH_SHORT=${SYNTH_SHORT:-0}                 # >0: also this many short tasks (plans of SHORT_STAGES)
SHORT_STAGES=${SHORT_STAGES:-2-4}             # primitives per short plan, the report counted
FRESH_PEOPLE=${FRESH_PEOPLE:-1}               # 1: each synthesized task has people of its own names
                                              # (`synth --fresh-people`), not the company's ten
STUDENT=${STUDENT:-Qwen/Qwen3-1.7B}           # or Qwen/Qwen3-0.6B, Qwen/Qwen3-4B, a .gguf file
TEACHER=${TEACHER:-}                          # optional model teacher served by vLLM, e.g. Qwen/Qwen3-32B
HELD_OUT=${HELD_OUT:-doc_sharing,safety}
TRAIN_FAMILIES=${TRAIN_FAMILIES:-}            # GRPO rollouts from these (default: all but HELD_OUT)
TRIALS=${TRIALS:-8}                           # oracle trials per task (faults vary them)
SLIPS=${SLIPS:-0.3}                           # oracle: share of person-naming steps where it slips
                                              # (wrong name, not_found, directory_search, retry)
TOOLS=${TOOLS:-reference,directory_search}    # tools offered: teacher, GRPO and evaluation
EVAL_TASKS=${EVAL_TASKS:-}                    # evaluate on these tasks (e.g. examples/benchmark) instead of HELD_OUT
EVAL_TRIALS=${EVAL_TRIALS:-4}
EVAL_ONLY=${EVAL_ONLY:-}                      # comma-separated task ids (default: every evaluated task)
EVAL_MAX_TURNS=${EVAL_MAX_TURNS:-30}
EVAL_MAX_TOKENS=${EVAL_MAX_TOKENS:-512}
SFT_STEPS=${SFT_STEPS:-300}
SFT_BATCH=${SFT_BATCH:-8}
SFT_MAX_LENGTH=${SFT_MAX_LENGTH:-4096}
SFT_LR=${SFT_LR:-1e-5}
SFT_TRUNCATION=${SFT_TRUNCATION:-keep_start}  # or keep_end: the last turns of a longer demonstration
SFT_CURRICULUM=${SFT_CURRICULUM:-0}           # 1: short demonstrations first (train sft --curriculum)
GRPO_STEPS=${GRPO_STEPS:-200}                 # 0 skips GRPO
GRPO_BATCH=${GRPO_BATCH:-16}
GRPO_GENERATIONS=${GRPO_GENERATIONS:-8}
GRPO_COMPLETION=${GRPO_COMPLETION:-2048}
GRPO_TOOL_CALLS=${GRPO_TOOL_CALLS:-12}
GRPO_LR=${GRPO_LR:-1e-6}
GRPO_WEIGHTS=${GRPO_WEIGHTS:-1,0.3,0,0.3,0.3}     # score,completion,safety,robustness,no_repeat
USE_VLLM=${USE_VLLM:-1}                       # GRPO generates with vLLM colocated (0: transformers)
SERVER=${SERVER:-vllm}                        # evaluation server: vllm, or coworkenv (`coworkenv
                                              # serve`: transformers, batched; no vLLM needed)
PREPARE_ONLY=${PREPARE_ONLY:-0}               # 1: stop after the CPU stages (synthesis, teacher, export),
                                              # e.g. to bring WORK to an offline host (offline_bundle.sh)
PARALLEL=${PARALLEL:-0}                       # 1: each checkpoint's evaluation runs beside the next
                                              # training stage on the same GPU (SERVER=coworkenv: a
                                              # server takes a few GB; vLLM's takes most of the GPU)
DEVICE=${DEVICE:-gpu}                         # cpu: the same script on CPU, to check it before a lease
PORT=${PORT:-8000}                            # evaluation servers: PORT (base), PORT+1 (SFT), PORT+2 (GRPO)
RESULTS=${RESULTS:-}                          # a folder each result is copied into once it exists (stage
                                              # times, training summaries, evaluation JSON and stores):
                                              # e.g. a volume that outlives the machine
SERVE_BATCH_TOKENS=${SERVE_BATCH_TOKENS:-}     # SERVER=coworkenv: most padded tokens a batch (empty: no cap;
                                              # a batch out of memory is served again in halves)
DB=$WORK/pocketworker.db
mkdir -p "$WORK"

accel=(--gpu); serve_device=cuda
if [ "$DEVICE" = cpu ]; then accel=(); serve_device=cpu; USE_VLLM=0; SERVER=coworkenv; fi
seconds() { local ms=$(( ($(date +%s%N) - $1) / 1000000 )); printf '%d.%03d' $((ms / 1000)) $((ms % 1000)); }
started=$(date +%s%N)
publish() {  # publish FILE...: copy those that exist into RESULTS (a store with SQLite's backup)
  [ -n "$RESULTS" ] || return 0
  local f; mkdir -p "$RESULTS"
  for f in "$@"; do
    if [ ! -e "$f" ]; then continue; fi
    case $f in
      *.db) python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))" \
              "$f" "$RESULTS/$(basename "$f")" ;;
      *) cp "$f" "$RESULTS/" ;;
    esac
  done
}
stage() {  # stage NAME COMMAND...: run it, record its wall time (a failed one's: none)
  local name=$1 t0; shift; t0=$(date +%s%N)
  printf '\n== %s\n' "$name"
  "$@" || return $?
  printf '%s\t%s\n' "$name" "$(seconds "$t0")" | tee -a "$WORK/timings.tsv"
  publish "$WORK/timings.tsv" "$WORK/ckpt/$name/coworkenv-$name.json"
}
models() {  # models PORT OUT: what the server on PORT says it serves (/v1/models), into OUT if it answers
  python3 -c "import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1], timeout=30).read().decode())" \
    "http://127.0.0.1:$1/v1/models" > "$2.new" 2>/dev/null && mv "$2.new" "$2" || { rm -f "$2.new"; return 1; }
}
wait_for() {  # wait_for PID PORT OUT: the server's /v1/models answers (written to OUT)
  for _ in $(seq 1 900); do
    models "$2" "$3" && return 0
    kill -0 "$1" 2>/dev/null || return 1
    sleep 1
  done
  return 1
}

fresh=(); if [ "$FRESH_PEOPLE" = 1 ]; then fresh=(--fresh-people); fi
if [ "$SYNTH" -gt 0 ]; then
  if [ ! -s "$WORK/synth.jsonl" ]; then
    stage synth $CW synth "$ROOT"/examples/workflows/*.yaml --generator procedural "${fresh[@]}" --n "$SYNTH" --out "$WORK/synth.jsonl"
  fi
  TASKS=$WORK/synth.jsonl
fi
tasks=(--tasks "$TASKS")
if [ "$SYNTH_SHORT" -gt 0 ]; then
  if [ ! -s "$WORK/synth-short.jsonl" ]; then
    stage synth-short $CW synth "$ROOT"/examples/workflows/*.yaml --generator procedural "${fresh[@]}" --stages "$SHORT_STAGES" \
      --n "$SYNTH_SHORT" --out "$WORK/synth-short.jsonl"
  fi
  tasks+=(--tasks "$WORK/synth-short.jsonl")
fi
curriculum=(); if [ "$SFT_CURRICULUM" = 1 ]; then curriculum=(--curriculum); fi

# 1. teacher demonstrations: the oracle (always), and a model teacher when TEACHER is set;
# 2. SFT data, held out by family (or every family when evaluating on other tasks)
if [ ! -s "$WORK/data/sft/train.jsonl" ]; then
  stage teacher-oracle $CW run "${tasks[@]}" --agent oracle --trials "$TRIALS" --faults 0.15 --slips "$SLIPS" --tools "$TOOLS" --db "$DB" --run-id teacher-oracle --resume --quiet
  if [ -n "$TEACHER" ]; then
    vllm serve "$TEACHER" --port "$PORT" --enable-auto-tool-choice --tool-call-parser hermes \
      --gpu-memory-utilization 0.85 > "$WORK/teacher.log" 2>&1 & srv=$!; wait_for $srv "$PORT" "$WORK/served-teacher.json"
    stage teacher-model $CW run "${tasks[@]}" --agent "teacher:openai:$TEACHER" --base-url "http://127.0.0.1:$PORT/v1" \
      --tools "$TOOLS" --trials "$TRIALS" --model-concurrency 64 --concurrency 256 --db "$DB" --run-id teacher-model --resume --quiet
    kill $srv; wait $srv || true
  fi
  if [ -n "$HELD_OUT" ] && [ -z "$EVAL_TASKS" ]; then
    stage export $CW export sft --db "$DB" --all-runs --out "$WORK/data/sft" --split-by family --held-out "$HELD_OUT"
  else
    stage export $CW export sft --db "$DB" --all-runs --out "$WORK/data/sft" --split-by family --eval-fraction 0
  fi
fi

if [ "$PREPARE_ONLY" = 1 ]; then
  printf 'prepared %s: the SFT data and the tasks; run again on the GPU host with the same WORK\n' "$WORK"
  exit 0
fi

# evaluation of one checkpoint: served (vLLM, or coworkenv serve), EVAL_TRIALS trials per task
evaluated=("${tasks[@]}" --families "$HELD_OUT"); sets=()
if [ -n "$EVAL_TASKS" ]; then evaluated=(--tasks "$EVAL_TASKS"); sets=(--set "evaluated=$EVAL_TASKS"); fi
if [ -n "$EVAL_ONLY" ]; then IFS=, read -ra ids <<< "$EVAL_ONLY"; for id in "${ids[@]}"; do evaluated+=(--only "$id"); done; fi
# Each evaluation has its own port and store (WORK/eval-NAME.db), so evaluations can run beside
# training and each other; `coworkenv eval` reads several stores at once.
evaluate() {  # evaluate NAME PATH PORT (done before: only its results into RESULTS, again)
  local name=$1 path=$2 port=$3 srv db=$WORK/eval-$1.db
  if [ ! -s "$WORK/eval-$name.done" ]; then
    if [ "$SERVER" = vllm ]; then
      vllm serve "$path" --served-model-name "pocketworker-$name" --port "$port" --enable-auto-tool-choice \
        --tool-call-parser hermes --gpu-memory-utilization 0.85 > "$WORK/serve-$name.log" 2>&1 & srv=$!
    else
      local cap=(); if [ -n "$SERVE_BATCH_TOKENS" ]; then cap=(--max-batch-tokens "$SERVE_BATCH_TOKENS"); fi
      $CW serve --model "$path" --name "pocketworker-$name" --port "$port" --device "$serve_device" \
        --max-batch 256 "${cap[@]}" > "$WORK/serve-$name.log" 2>&1 & srv=$!
    fi
    wait_for $srv "$port" "$WORK/served-$name.json" || { cat "$WORK/serve-$name.log"; return 1; }
    stage "eval-$name" $CW run "${evaluated[@]}" --agent "openai:pocketworker-$name" \
      --base-url "http://127.0.0.1:$port/v1" --tools "$TOOLS" --trials "$EVAL_TRIALS" \
      --max-turns "$EVAL_MAX_TURNS" --max-tokens "$EVAL_MAX_TOKENS" --model-timeout 1800 \
      --model-concurrency 256 --concurrency 256 --db "$db" --run-id "eval-$name" --resume --quiet \
      || { kill $srv; return 1; }
    models "$port" "$WORK/served-$name.json" || true  # (again, after the run: e.g. coworkenv serve's memory_splits)
    kill $srv; wait $srv 2>/dev/null || true
    $CW eval --db "$db" --run "eval-$name" --k "$EVAL_TRIALS" "${sets[@]}" --out "$WORK"
    date > "$WORK/eval-$name.done"
  fi
  publish "$WORK/served-$name.json" "$WORK/serve-$name.log" "$WORK/eval-eval-$name.json" "$db"
}
compare() {  # compare A B: B - A paired by task
  $CW eval --db "$WORK/eval-$1.db" --db "$WORK/eval-$2.db" --compare "eval-$1" "eval-$2" "${sets[@]}" --out "$WORK"
  publish "$WORK/compare-eval-$1-eval-$2.json"
}
beside=()  # PARALLEL=1: evaluations running beside training (their pids)
evaluate_beside() {  # evaluate NAME PATH PORT, in the background when PARALLEL=1
  if [ "$PARALLEL" = 1 ]; then evaluate "$@" & beside+=($!); else evaluate "$@"; fi
}
evaluations_done() {  # wait for the background evaluations; fail if one failed
  local pid failed=0
  for pid in "${beside[@]}"; do wait "$pid" || failed=1; done
  beside=(); return $failed
}
trap 'if [ ${#beside[@]} -gt 0 ]; then wait "${beside[@]}" || true; fi' EXIT  # (a failed stage leaves them be)

evaluate_beside base "$STUDENT" "$PORT"

# 3. SFT (full fine-tune, bf16 on the GPU)
if [ ! -s "$WORK/ckpt/sft/config.json" ]; then
  stage sft $CW train sft --model "$STUDENT" --data "$WORK/data/sft" --out "$WORK/ckpt/sft" "${accel[@]}" \
    --steps "$SFT_STEPS" --batch-size "$SFT_BATCH" --max-length "$SFT_MAX_LENGTH" --truncation "$SFT_TRUNCATION" "${curriculum[@]}" \
    --learning-rate "$SFT_LR"
fi
evaluate_beside sft "$WORK/ckpt/sft" $((PORT + 1))
if [ "$PARALLEL" != 1 ]; then compare base sft; fi

# 4. GRPO: rollouts are live episodes of the training families (vLLM colocated when USE_VLLM=1)
if [ "$GRPO_STEPS" -gt 0 ]; then
  if [ ! -s "$WORK/ckpt/grpo/config.json" ]; then
    fams=(); vllm=()
    if [ -n "$TRAIN_FAMILIES" ]; then fams=(--families "$TRAIN_FAMILIES"); fi
    if [ "$USE_VLLM" = 1 ]; then vllm=(--use-vllm --vllm-mode colocate); fi
    stage grpo $CW train grpo --model "$WORK/ckpt/sft" "${tasks[@]}" "${fams[@]}" --held-out "$HELD_OUT" \
      "${accel[@]}" "${vllm[@]}" --out "$WORK/ckpt/grpo" --db "$DB" --run-id grpo-rollouts \
      --steps "$GRPO_STEPS" --batch-size "$GRPO_BATCH" --num-generations "$GRPO_GENERATIONS" \
      --max-completion-length "$GRPO_COMPLETION" --tools "$TOOLS" --max-tool-calls "$GRPO_TOOL_CALLS" --learning-rate "$GRPO_LR" --reward-weights "$GRPO_WEIGHTS"
  fi
fi
evaluations_done
if [ "$PARALLEL" = 1 ]; then compare base sft; fi
if [ "$GRPO_STEPS" -gt 0 ]; then
  evaluate grpo "$WORK/ckpt/grpo" $((PORT + 2))
  compare base grpo
  compare sft grpo
fi
printf 'total\t%s\n' "$(seconds "$started")" | tee -a "$WORK/timings.tsv"
publish "$WORK/timings.tsv"
