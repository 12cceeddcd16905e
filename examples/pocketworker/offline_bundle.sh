#!/usr/bin/env bash
# What a PocketWorker run needs on a GPU host that reaches no package index, made on a machine
# that does, in parts of at most PART_MB (for hosts that take files in size-limited transfers):
#   - wheels of coworkenv's EXTRAS for the host's Python and platform, minus what the host has
#     (HOST_HAS: its CUDA torch and friends), and a wheel of coworkenv itself (its commands are
#     entry points, so a source tree on PYTHONPATH is not enough); or, with LAYOUT=site, the same
#     packages installed here for the host (`pip install --no-deps --target`) and packed with xz,
#     about a third of the wheels' size (40 MB of wheels made 12 MB), put on PYTHONPATH there;
#   - the student model (a file, e.g. the offline .gguf, or a folder);
#   - a prepared WORK folder (the CPU stages: `PREPARE_ONLY=1 gpu_h200.sh`), without its
#     stores, synthesis attempts and the dataset copy the GPU stages do not read, packed with
#     xz (its demonstrations repeat the same tool schemas: 80 MB made 1.2 MB).
# Writes OUT/payload.tar.part-* and OUT/install.sh. On the host, with the parts beside it:
#   bash install.sh            # joins the parts, pip installs offline, unpacks model and WORK
# then runs gpu_h200.sh with the same WORK and STUDENT=<the model's path it printed>.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-bundle}
PY_VERSION=${PY_VERSION:-3.12}                 # the host's Python (major.minor)
PLATFORMS=${PLATFORMS:-manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64}
EXTRAS=${EXTRAS:-train}
LAYOUT=${LAYOUT:-wheels}                       # wheels (pip install there) or site (unpack there)
HOST_HAS=${HOST_HAS:-torch triton sympy mpmath networkx jinja2 markupsafe filelock fsspec \
  typing-extensions setuptools}                # torch and what it needs, + every nvidia-* package
MODEL=${MODEL-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}  # (MODEL= : none)
WORK=${WORK:-}                                 # a prepared WORK folder to bring (empty: none)
PART_MB=${PART_MB:-60}
PYTHON=${PYTHON:-python3}

rm -rf "$OUT" && mkdir -p "$OUT/stage/wheels"
stage=$OUT/stage
plat=(); for p in $PLATFORMS; do plat+=(--platform "$p"); done
target=(--python-version "$PY_VERSION" --implementation cp "${plat[@]}" --only-binary=:all:)

echo "== a wheel of coworkenv"
"$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation -w "$stage/wheels" "$ROOT"
wheel=$(ls "$stage"/wheels/coworkenv-*.whl)

echo "== resolving coworkenv[$EXTRAS] for Python $PY_VERSION ($PLATFORMS)"
"$PYTHON" -m pip install --quiet --dry-run --ignore-installed --report "$OUT/resolved.json" \
  "${target[@]}" --target "$OUT/unused" "$wheel[$EXTRAS]"
"$PYTHON" - "$OUT/resolved.json" "$HOST_HAS" > "$OUT/wanted.txt" <<'PY'
import json, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
has = {norm(n) for n in sys.argv[2].split()}
for item in json.load(open(sys.argv[1]))["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    n = norm(name)
    if n == "coworkenv" or n in has or n.startswith("nvidia-"):
        continue
    print(f"{name}=={version}")
PY
echo "   $(wc -l < "$OUT/wanted.txt") packages to bring (the host's own left out: $HOST_HAS nvidia-*)"
"$PYTHON" -m pip download --quiet --no-deps "${target[@]}" -d "$stage/wheels" -r "$OUT/wanted.txt"
if [ "$LAYOUT" = site ]; then
  echo "== installing them for the host into site/ (xz)"
  "$PYTHON" -m pip install --quiet --no-deps --no-compile "${target[@]}" --target "$OUT/site" "$stage"/wheels/*.whl
  rm -rf "$OUT/site/bin" "$stage/wheels"  # (console scripts name this machine's Python)
  tar cf - -C "$OUT/site" . | xz -9 -T0 > "$stage/site.tar.xz"
  rm -rf "$OUT/site"
elif [ "$LAYOUT" != wheels ]; then
  echo "LAYOUT: expected wheels or site, got '$LAYOUT'" >&2; exit 2
fi

echo "== the model and WORK"
if [ -n "$MODEL" ]; then
  mkdir -p "$stage/model" && cp -r "$MODEL" "$stage/model/"
fi
if [ -n "$WORK" ]; then
  tar cf - -C "$WORK" --exclude='*.db' --exclude='*.db-*' --exclude=ckpt --exclude='*.attempts.jsonl' \
    --exclude=./data/sft/hf . | xz -9 -T0 > "$stage/work.tar.xz"  # (what the GPU stages read)
fi

tar cf "$OUT/payload.tar" -C "$stage" .
split -b "${PART_MB}M" -d "$OUT/payload.tar" "$OUT/payload.tar.part-"
rm -rf "$stage" "$OUT/payload.tar" "$OUT/unused"
cat > "$OUT/install.sh" <<EOF
#!/usr/bin/env bash
# Installs the bundle made by offline_bundle.sh (coworkenv[$EXTRAS], Python $PY_VERSION, layout
# $LAYOUT) with no package index; WORK (default runs/pocketworker-gpu) gets the prepared stages.
set -euo pipefail
here=\$(cd "\$(dirname "\$0")" && pwd)
dest=\${DEST:-\$here/unpacked}
py=\${PYTHON:-python3}
unxz() { "\$py" -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "\$@"; }
mkdir -p "\$dest" && cat "\$here"/payload.tar.part-* | tar xf - -C "\$dest"
if [ -f "\$dest/site.tar.xz" ]; then
  mkdir -p "\$dest/site" && unxz "\$dest/site.tar.xz" "\$dest/site"
  echo "before gpu_h200.sh: export PYTHONPATH=\$dest/site COWORKENV='\$py -m coworkenv.cli'"
else
  "\$py" -m pip install --no-index --find-links "\$dest/wheels" "\$(ls "\$dest"/wheels/coworkenv-*.whl)[$EXTRAS]"
fi
if [ -f "\$dest/work.tar.xz" ]; then
  mkdir -p "\${WORK:-runs/pocketworker-gpu}" && unxz "\$dest/work.tar.xz" "\${WORK:-runs/pocketworker-gpu}"
fi
ls "\$dest"/model/* 2>/dev/null | sed 's/^/model: /' || true
EOF
echo "== $OUT: $(ls "$OUT"/payload.tar.part-* | wc -l) part(s) of at most ${PART_MB} MiB, and install.sh"
ls -l "$OUT"
