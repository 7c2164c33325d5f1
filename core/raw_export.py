"""Raw numbers out: trace.npz, tokens.csv and CSV tables; a set of files is written all-or-nothing."""
from __future__ import annotations

import contextlib
import csv
import io
import os
import tempfile
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np

from core.atomic import TEMP_PREFIX, StagedFolder, atomic_write_bytes
from core.trace import Trace


class ExportError(OSError):
    """A write that could not happen; str(error) says where and why, and nothing partial is left."""


def check_export_folder(folder: str | os.PathLike) -> Path:
    """Refuse, before any slow work, a folder that cannot be made or written; leave nothing behind."""
    folder = Path(folder)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ExportError(f"cannot create the folder {folder}: {existing} is a file, not a folder")
    try:
        _try_making_a_folder_in(existing)
    except OSError as exc:
        raise ExportError(f"cannot write {folder}: {exc.strerror or exc}; nothing was written") from None
    return folder


def _try_making_a_folder_in(existing: Path) -> None:
    """Make and remove an empty folder where the writing will start. Permission bits cannot tell: root
    passes os.access everywhere, yet /proc refuses it (ENOENT), /sys (EPERM), a read-only mount (EROFS)."""
    os.rmdir(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=existing))


def ensure_writable_folder(folder: str | os.PathLike) -> Path:
    """Create folder (and parents) now and check it is writable. For a set of files prefer
    write_file_set / staged_export, which create nothing until every file is written."""
    folder = check_export_folder(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create the folder {folder}: {exc.strerror or exc}") from None
    return folder


@contextlib.contextmanager
def staged_export(folder: str | os.PathLike) -> Iterator[StagedFolder]:
    """Write a set of files all-or-nothing (core.atomic.StagedFolder); OSError becomes one clear ExportError."""
    folder = check_export_folder(folder)
    staged = StagedFolder(folder)
    try:
        with staged:
            yield staged
    except ExportError:
        raise
    except OSError as exc:
        where = folder / staged.writing if staged.writing else folder
        raise ExportError(f"cannot write {where}: {exc.strerror or exc}; nothing was written") from None


def write_file_set(folder: str | os.PathLike, files: Mapping[str, bytes]) -> list[Path]:
    """Every file or none: {relative name: bytes} into folder, through staged_export."""
    with staged_export(folder) as staged:
        for name, data in files.items():
            staged.write(name, data)
    return staged.paths


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """One file, atomically (temporary file + rename)."""
    path = Path(path)
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def trace_npz_bytes(trace: Trace) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **trace.to_arrays())
    return buffer.getvalue()


def tokens_csv_text(trace: Trace) -> str:
    """position, id, piece (readable text), UTF-8 bytes in hex — one row per token."""
    rows = [("position", "id", "piece", "utf8_hex")]
    tokens = trace.tokenization.tokens if trace.tokenization is not None else None
    for i, token_id in enumerate(trace.input_ids):
        raw = tokens[i].raw if tokens is not None else b""
        rows.append((i, int(token_id), trace.label(i), raw.hex(" ")))
    return csv_text(rows)


def csv_text(rows: Sequence[Sequence]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def matrix_csv_text(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str],
                    corner: str = "") -> str:
    """A labelled 2-D table; full float precision so the numbers round-trip."""
    rows = [[corner, *col_labels]]
    for label, values in zip(row_labels, np.asarray(matrix)):
        rows.append([label, *(repr(float(v)) for v in values)])
    return csv_text(rows)


def write_trace_files(trace: Trace, folder: str | os.PathLike) -> list[Path]:
    """trace.npz (every field under its ONNX output name, plus input_ids) and tokens.csv."""
    return write_file_set(folder, {"trace.npz": trace_npz_bytes(trace),
                                   "tokens.csv": tokens_csv_text(trace).encode("utf-8")})
