"""Files a command writes appear whole or not at all, with a manifest that readers check.

A file is written under a hidden temporary name beside its destination, flushed to disk and
renamed into place (``os.replace``: atomic on POSIX), so a command killed midway leaves the
previous file, or nothing, never a part. A folder (an export) is built the same way and
swapped in whole, so a rerun never mixes old and new files. Each output carries a manifest
(``NAME.manifest.json`` beside a file, ``manifest.json`` inside a folder) with line counts and
SHA-256 hashes; loaders refuse an output that does not match its manifest (cut short, edited
or concatenated after it was written).

This module imports nothing of coworkenv: every floor may use it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import CoworkenvError

MANIFEST = "manifest.json"


class IncompleteOutputError(CoworkenvError):
    """An output that does not match its manifest: cut short or changed after writing."""


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open ``path`` for writing; it appears only when the block ends without an error."""
    path = Path(path)
    tmp = _tmp(path)
    f = tmp.open(mode, encoding=None if "b" in mode else "utf-8")
    try:
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
        os.replace(tmp, path)
    except BaseException:
        f.close()
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_folder(path: Path) -> Iterator[Path]:
    """Build a folder at a temporary path; it replaces ``path`` whole when the block ends
    without an error (what was there before is removed only then)."""
    path = Path(path)
    tmp = _tmp(path)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    if path.exists():
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


def describe(path: Path) -> dict[str, Any]:
    """Lines, bytes and SHA-256 of a file."""
    h = hashlib.sha256()
    lines = size = 0
    with Path(path).open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            lines += chunk.count(b"\n")
            size += len(chunk)
    return {"lines": lines, "bytes": size, "sha256": h.hexdigest()}


def file_manifest(path: Path) -> Path:
    return Path(path).with_name(Path(path).name + ".manifest.json")


def write_file_manifest(path: Path, **extra: Any) -> None:
    """Record a finished file's counts and hash beside it (written atomically itself)."""
    with atomic_file(file_manifest(path)) as f:
        json.dump({"file": Path(path).name, **describe(path), **extra}, f, indent=2)


def write_folder_manifest(folder: Path, names: list[str], **extra: Any) -> None:
    """Record the listed files of a folder (before it is swapped into place)."""
    files = {n: describe(Path(folder) / n) for n in names if (Path(folder) / n).is_file()}
    (Path(folder) / MANIFEST).write_text(json.dumps({"files": files, **extra}, indent=2))


def check_file(path: Path) -> str | None:
    """Why ``path`` does not match its manifest, or None (also when it has none: files
    written by hand or by other tools carry no manifest)."""
    m = file_manifest(path)
    if not m.is_file():
        return None
    return _compare(Path(path), json.loads(m.read_text()), m.name)


def check_folder_file(folder: Path, name: str) -> str | None:
    """Why ``folder/name`` does not match the folder's manifest, or None (no manifest)."""
    m = Path(folder) / MANIFEST
    if not m.is_file():
        return None
    want = json.loads(m.read_text()).get("files", {}).get(name)
    if want is None:
        return f"{name} is not in {m} (a file added after the export was written)"
    return _compare(Path(folder) / name, want, str(m))


def _compare(path: Path, want: dict[str, Any], manifest: str) -> str | None:
    got = describe(path)
    if got["sha256"] == want.get("sha256"):
        return None
    return (f"does not match {manifest} ({got['lines']} lines, expected {want.get('lines')}): "
            "it was cut short or changed after it was written; write it again")
