"""Figures and numbers to files: PNG at any width, SVG, CSV tables, the whole Trace as NPZ.

Rendering needs the GUI thread (it paints widgets); it produces bytes in memory. Writing is
separate (`write_files`) so it can run off the UI thread, and every file is written atomically
(temporary file, then rename): a failure leaves no partial file behind.

File names, for one panel Figure named NAME:
    NAME.png   the figure at `width` pixels (default: twice its on-screen width), aspect kept
    NAME.svg   the figure as vectors (text as glyph outlines)
    NAME.csv   Figure.table(), and one KEY.csv per Figure.extra_tables entry
and for the whole trace: trace.npz (every array, as `main.py trace`) and tokens.csv.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping

from PySide6.QtCore import QBuffer, QIODevice, QPoint, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QWidget

from core.raw_export import ensure_writable_folder, tokens_csv_text, trace_npz_bytes, write_atomic
from core.trace import Trace
from gui.panels.base import Figure
from gui.svg_export import widget_svg_bytes

FORMATS = ("png", "svg", "csv", "npz")
DEFAULT_PNG_SCALE = 2.0   # exports are for slides and articles: twice the on-screen pixels


def parse_formats(text: str) -> tuple[str, ...]:
    """"png,svg" -> ("png", "svg"); raises ValueError naming an unknown format."""
    chosen = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise ValueError(f"unknown format {', '.join(unknown) or '(none)'}: choose from {','.join(FORMATS)}")
    return chosen


def png_bytes(widget: QWidget, width: int | None = None) -> bytes:
    """The widget painted at `width` pixels wide (default 2x on screen), height in proportion."""
    source_w, source_h = max(1, widget.width()), max(1, widget.height())
    width = int(width) if width else round(source_w * DEFAULT_PNG_SCALE)
    if width <= 0:
        raise ValueError(f"a PNG width must be positive, got {width}")
    scale = width / source_w
    image = QImage(width, max(1, round(source_h * scale)), QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.white)
    painter = QPainter(image)
    try:
        # Painting scaled (not resampling a screenshot) keeps text and lines sharp at any width.
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        painter.scale(scale, scale)
        # QWidget's render, not a subclass's: QGraphicsView.render draws the scene with another signature.
        QWidget.render(widget, painter, QPoint())
    finally:
        painter.end()
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(buffer.data())


def figure_files(figure: Figure, formats: Iterable[str], width: int | None = None) -> dict[str, bytes]:
    """{file name: bytes} for one figure in the chosen formats (npz is per trace, not per figure)."""
    formats = set(formats)
    files: dict[str, bytes] = {}
    if "png" in formats:
        files[f"{figure.name}.png"] = png_bytes(figure.widget, width)
    if "svg" in formats:
        files[f"{figure.name}.svg"] = widget_svg_bytes(figure.widget, title=figure.name)
    if "csv" in formats:
        if figure.table is not None:
            files[f"{figure.name}.csv"] = figure.table().encode("utf-8")
        for name, table in figure.extra_tables.items():
            files[f"{name}.csv"] = table().encode("utf-8")
    return files


def trace_files(trace: Trace | None, formats: Iterable[str]) -> dict[str, bytes]:
    """trace.npz and tokens.csv, byte for byte what `main.py trace` writes."""
    formats = set(formats)
    if trace is None:
        return {}
    files: dict[str, bytes] = {}
    if "npz" in formats:
        files["trace.npz"] = trace_npz_bytes(trace)
    if "csv" in formats:
        files["tokens.csv"] = tokens_csv_text(trace).encode("utf-8")
    return files


def all_files(figures: Iterable[Figure], trace: Trace | None, formats: Iterable[str],
              width: int | None = None) -> dict[str, bytes]:
    formats = tuple(formats)
    files: dict[str, bytes] = {}
    for figure in figures:
        files.update(figure_files(figure, formats, width))
    files.update(trace_files(trace, formats))
    return files


def write_files(folder: str | os.PathLike, files: Mapping[str, bytes]) -> list[Path]:
    """Write each file atomically into folder; raises core.raw_export.ExportError with a clear message."""
    folder = ensure_writable_folder(folder)
    return [write_atomic(folder / name, data) for name, data in files.items()]
