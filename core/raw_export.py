"""Raw numbers out: trace.npz, tokens.csv and CSV tables, each written atomically."""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from core.atomic import atomic_write_bytes
from core.trace import Trace


class ExportError(OSError):
    """A write that could not happen; str(error) says where and why, and nothing partial is left."""


def ensure_writable_folder(folder: str | os.PathLike) -> Path:
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create the folder {folder}: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ExportError(f"the folder {folder} is not writable")
    return folder


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
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
    folder = ensure_writable_folder(folder)
    return [write_atomic(folder / "trace.npz", trace_npz_bytes(trace)),
            write_atomic(folder / "tokens.csv", tokens_csv_text(trace).encode("utf-8"))]
