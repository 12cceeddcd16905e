"""A GGUF student is converted once into a folder transformers can train and serve; processes
that start from the same file at once (an evaluation server beside a training run, as
`gpu_h200.sh PARALLEL=1` starts them) each get a whole conversion, and a broken folder where
the conversion goes is said, not used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GGUF = Path(os.environ.get("COWORKENV_TEST_GGUF",
                           ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))

pytestmark = [pytest.mark.slow, pytest.mark.model]

CONVERT = ("import sys; from coworkenv.training.sft import prepare_model; "
           "print(prepare_model(sys.argv[1]))")


def test_two_processes_converting_at_once_both_get_the_whole_conversion(tmp_path: Path) -> None:
    (tmp_path / GGUF.name).symlink_to(GGUF)
    procs = [subprocess.Popen([sys.executable, "-c", CONVERT, str(tmp_path / GGUF.name)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    dest = tmp_path / f"{GGUF.stem}-hf"
    assert [o.strip() for o, _ in outs] == [str(dest)] * 2
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted([GGUF.name, dest.name])
    config = json.loads((dest / "config.json").read_text())
    assert config["model_type"] == "llama" and (dest / "model.safetensors").stat().st_size > 0
    # a second call finds it and converts nothing
    again = subprocess.run([sys.executable, "-c", CONVERT, str(tmp_path / GGUF.name)],
                           capture_output=True, text=True, timeout=120)
    assert again.stdout.strip() == str(dest)


def test_a_folder_without_config_where_the_conversion_goes_is_named(tmp_path: Path) -> None:
    from coworkenv.training.sft import prepare_model

    (tmp_path / GGUF.name).symlink_to(GGUF)
    broken = tmp_path / f"{GGUF.stem}-hf"
    broken.mkdir()
    (broken / "model.safetensors").write_bytes(b"half")
    with pytest.raises(OSError, match=r"-hf: a folder without config.json .* remove it"):
        prepare_model(str(tmp_path / GGUF.name))
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted([GGUF.name, broken.name])
