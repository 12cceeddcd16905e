"""The suite's scheduling works with what is installed: scripts/test.sh runs two workers with
``--dist loadgroup``, and tests in one ``xdist_group`` ("ray": one Ray per machine; "llama":
one model server) must share a worker. Some pytest releases make xdist ignore the groups
without a word (pytest-xdist#1386), and tests then collide only on a busy CI machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_an_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.xdist_group('one')\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_here(i):\n"
        "    with open('workers.txt', 'a') as f:\n"
        "        f.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup",
                        "-p", "no:cacheprovider", "-q", "test_grouped.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6
    assert len(set(workers)) == 1, f"one xdist group ran on workers {sorted(set(workers))}: " \
        "the installed pytest and pytest-xdist do not honour --dist loadgroup"
