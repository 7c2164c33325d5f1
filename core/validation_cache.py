"""Bundles that passed load_bundle's two slow checks, remembered by content, so a second open skips them.

The ONNX checker and the dry run (core.runners.dry_run: a session, both runners, a parity check) took
~0.1 s of the app's 1.5 s start-up on the shipped model, and seconds on a real one; every other check of
core.bundle runs on every open. A bundle is remembered only after it passed, under a SHA-256 key of
everything the two checks' verdict depends on:
  - the bundle's files: model.onnx, config.json, tokenizer.json and tokenizer_config.json by content;
    external data by content up to core.bundle.MAX_READ_EXTERNAL_BYTES (it is read into memory anyway),
    above that (a real model's GBs) by size, modification time and inode;
  - the source of every core/*.py module (the runners, the reference forward pass, the checks);
  - the Python, NumPy, onnx and onnxruntime versions.
Change any of them and the key is new: both checks run again. A failure is never remembered, so a
broken bundle is refused, with its message, on every open. The keys live in one small JSON file under
$XDG_CACHE_HOME/glassbox (~/.cache/glassbox); a missing, unreadable or corrupt file counts as empty, and a
cache that cannot be written only costs the checks next time.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Iterable

import numpy as np

from core.atomic import atomic_write_bytes

CACHE_NAME = "validated-bundles.json"
MAX_KEYS = 64   # the most recent passes kept: one per bundle version a user opened
CORE_FOLDER = Path(__file__).resolve().parent


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "glassbox" / CACHE_NAME


def bundle_key(contents: Iterable[bytes], large_files: Iterable[Path]) -> str:
    """The key of a bundle: its files' contents, the large ones' size/mtime/inode, this code and its libraries."""
    digest = hashlib.sha256()
    for data in contents:
        _add(digest, data)
    for path in large_files:
        stat = path.stat()
        _add(digest, f"{path.name} {stat.st_size} {stat.st_mtime_ns} {stat.st_ino}".encode())
    _add(digest, _environment())
    return digest.hexdigest()


def _add(digest, data: bytes) -> None:
    digest.update(len(data).to_bytes(8, "little"))   # lengths first: no two file lists hash alike
    digest.update(data)


def _environment() -> bytes:
    """Glassbox's core source and the versions of what runs the checks."""
    import onnx

    parts = [sys.version.encode(), np.__version__.encode(), onnx.__version__.encode()]
    spec = importlib.util.find_spec("onnxruntime")   # its __init__.py holds its __version__; not imported here
    if spec is not None and spec.origin:
        parts.append(Path(spec.origin).read_bytes())
    parts += [path.read_bytes() for path in sorted(CORE_FOLDER.glob("*.py"))]
    return b"\0".join(parts)


def passed(key: str) -> bool:
    return key in _read_keys()


def remember(key: str) -> None:
    keys = [k for k in _read_keys() if k != key] + [key]
    path = cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, json.dumps({"passed": keys[-MAX_KEYS:]}).encode())
    except OSError:
        pass   # a read-only home: the checks simply run again next time


def _read_keys() -> list[str]:
    try:
        keys = json.loads(cache_file().read_text(encoding="utf-8")).get("passed", [])
    except (OSError, ValueError, AttributeError, RecursionError):
        return []
    return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []
