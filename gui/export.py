"""Figures and numbers to files: PNG at any width or DPI, SVG, PDF, CSV tables, the whole Trace as NPZ.

Every figure is painted laid out for the page (gui/figure_pages.py), whatever its dock's size.
Rendering needs the GUI thread (it paints widgets); it produces bytes in memory. Writing is
separate (`write_files`) so it can run off the UI thread, and a set of files is written
all-or-nothing (core.raw_export.write_file_set): a failure leaves nothing behind.

File names, for one panel Figure named NAME:
    NAME.png   the figure at `width` pixels or `dpi` (default: twice its page size, up to
               DEFAULT_PNG_PIXELS), aspect kept
    NAME.svg   the figure as vectors (text as glyph outlines), see gui/svg_export.py
    NAME.pdf   the figure as a vector PDF page of its own size (text as glyph outlines)
    NAME.csv   Figure.table(), and one KEY.csv per Figure.extra_tables entry
and for the whole trace: trace.npz (every array, as `main.py trace`) and tokens.csv.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Mapping

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMarginsF, QMimeData, QPoint, QRectF, QSizeF
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPageLayout, QPageSize, QPainter, QPdfWriter
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QWidget

from core.raw_export import tokens_csv_text, trace_npz_bytes, write_file_set
from core.trace import Trace
from gui.figure_pages import on_page
from gui.heatmap import cell_text_outlined
from gui.page_pens import cosmetic_pens_widened
from gui.panels.base import Figure
from gui.png_encode import image_png_bytes
from gui.svg_export import widget_svg_bytes
from gui.theme import page_background

FORMATS = ("png", "svg", "pdf", "csv", "npz")
DEFAULT_FORMATS = ("png", "svg", "csv", "npz")
DEFAULT_PNG_SCALE = 2.0      # exports are for slides and articles: twice the on-screen pixels
# ... unless that passes this many pixels: at 4 million, the BPE replay of 64 tokens (a 1400 × 2024 page,
# 11 million pixels at 2x) is 1666 × 2408, still taller than a 4K slide; pixels past that are painted and
# compressed for no one
DEFAULT_PNG_PIXELS = 4_000_000
SCREEN_DPI = 96.0            # a figure's on-screen pixel is 1/96 inch (what --dpi scales from)
PNG_WIDTH_RANGE = (16, 20000)
PNG_DPI_RANGE = (24, 1200)
MAX_PNG_PIXELS = 100_000_000  # 400 MB of pixels: past this a PNG is refused, not attempted
PNG_ENCODERS = 2             # threads compressing PNGs while the GUI thread paints the next figure


class PngTooLarge(ValueError):
    """A PNG of more than MAX_PNG_PIXELS (or one that cannot be allocated); the message words it for the CLI."""

    def __init__(self, width: int, height: int, reason: str) -> None:
        super().__init__(f"{reason}: choose a smaller --width or --dpi")
        self.width, self.height, self.reason = width, height, reason


def parse_formats(text: str) -> tuple[str, ...]:
    """"png,svg" -> ("png", "svg"); raises ValueError naming an unknown format."""
    chosen = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        raise ValueError(f"unknown format {', '.join(unknown) or '(none)'}: choose from {','.join(FORMATS)}")
    return chosen


def check_png_size(width: int | None = None, dpi: float | None = None) -> None:
    """Refuse a width or DPI outside the supported range with one line naming the range."""
    if width is not None and not PNG_WIDTH_RANGE[0] <= width <= PNG_WIDTH_RANGE[1]:
        raise ValueError(f"--width must be between {PNG_WIDTH_RANGE[0]} and {PNG_WIDTH_RANGE[1]} pixels, got {width}")
    if dpi is not None and not PNG_DPI_RANGE[0] <= dpi <= PNG_DPI_RANGE[1]:
        raise ValueError(f"--dpi must be between {PNG_DPI_RANGE[0]} and {PNG_DPI_RANGE[1]}, got {dpi:g}")
    if width is not None and dpi is not None:
        raise ValueError("choose --width or --dpi, not both")


def default_png_scale(width: int, height: int) -> float:
    """PNG pixels per page pixel when the user chose neither width nor DPI: DEFAULT_PNG_SCALE, less for a
    page so large that it would pass DEFAULT_PNG_PIXELS, never below 1."""
    return max(1.0, min(DEFAULT_PNG_SCALE, math.sqrt(DEFAULT_PNG_PIXELS / max(1, width * height))))


def png_size(widget: QWidget, width: int | None = None, dpi: float | None = None) -> tuple[int, int, float]:
    """(width, height, scale) of the PNG for this widget: `width` pixels, or `dpi`, or default_png_scale."""
    check_png_size(width, dpi)
    source_w, source_h = max(1, widget.width()), max(1, widget.height())
    if width:
        scale = width / source_w
    else:
        scale = (dpi / SCREEN_DPI) if dpi else default_png_scale(source_w, source_h)
    out_w, out_h = max(1, round(source_w * scale)), max(1, round(source_h * scale))
    if out_w * out_h > MAX_PNG_PIXELS:
        raise PngTooLarge(out_w, out_h, f"a {out_w} × {out_h} PNG is more than {MAX_PNG_PIXELS // 1_000_000} "
                                        "million pixels")
    return out_w, out_h, scale


def background_of(widget: QWidget) -> QColor:
    return widget.palette().color(widget.backgroundRole())


def render_image(widget: QWidget, width: int | None = None, dpi: float | None = None) -> QImage:
    """The widget painted (not resampled) at the chosen size, so text and lines stay sharp."""
    out_w, out_h, scale = png_size(widget, width, dpi)
    image = QImage(out_w, out_h, QImage.Format.Format_RGB32)
    if image.isNull():
        raise PngTooLarge(out_w, out_h, f"cannot allocate a {out_w} × {out_h} image")
    image.fill(background_of(widget))
    dots_per_metre = round(scale * SCREEN_DPI / 0.0254)
    image.setDotsPerMeterX(dots_per_metre)
    image.setDotsPerMeterY(dots_per_metre)
    painter = QPainter(image)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        painter.scale(scale, scale)
        # QWidget's render, not a subclass's: QGraphicsView.render draws the scene with another signature.
        with cosmetic_pens_widened(widget, scale), cell_text_outlined():   # lines keep their on-screen weight at 2x
            QWidget.render(widget, painter, QPoint())
    finally:
        painter.end()
    return image


def png_bytes(widget: QWidget, width: int | None = None, dpi: float | None = None) -> bytes:
    """The widget as a PNG `width` pixels wide (or at `dpi`; default: default_png_scale), aspect kept."""
    return image_png_bytes(render_image(widget, width, dpi))


def pdf_bytes(widget: QWidget, title: str = "", svg: bytes | None = None) -> bytes:
    """The widget as one vector PDF page of its own size (1 on-screen pixel = 1/96 inch).

    Drawn from the portable SVG (gui/svg_export.py) rather than from the widget: the PDF then has
    the same crisp heatmaps and outlined text (Chinese needs no font), and Qt's PDF engine never
    meets the widget gradients it cannot write ("gradient between colors of different spec").
    """
    svg = svg if svg is not None else widget_svg_bytes(widget, title=title)
    width, height = max(1, widget.width()), max(1, widget.height())
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QPdfWriter(buffer)
    writer.setResolution(round(SCREEN_DPI))
    writer.setTitle(title or "Glassbox figure")
    writer.setCreator("Glassbox")
    points = QSizeF(width * 72.0 / SCREEN_DPI, height * 72.0 / SCREEN_DPI)
    page = QPageSize(points, QPageSize.Unit.Point, "figure", QPageSize.SizeMatchPolicy.ExactMatch)
    writer.setPageLayout(QPageLayout(page, QPageLayout.Orientation.Portrait, QMarginsF(0, 0, 0, 0)))
    painter = QPainter(writer)
    try:   # the page is whole points, up to half a point past the figure: that sliver on the figure's paper too
        painter.fillRect(QRectF(0, 0, width + 1, height + 1), page_background())
        QSvgRenderer(QByteArray(svg)).render(painter, QRectF(0, 0, width, height))
    finally:
        painter.end()
    buffer.close()
    return bytes(buffer.data())


def figure_files(figure: Figure, formats: Iterable[str], width: int | None = None,
                 dpi: float | None = None, encoder: Executor | None = None) -> dict[str, bytes]:
    """{file name: bytes} for one figure in the chosen formats (npz is per trace, not per figure).

    With an `encoder` (a thread pool), the PNG is painted here but compressed there while the caller
    goes on painting: zlib and NumPy release the GIL. The dict then holds a Future for the PNG.
    """
    formats = set(formats)
    files: dict[str, bytes] = {}
    if formats & {"png", "svg", "pdf"}:
        with on_page(figure) as page:
            if "png" in formats:
                image = render_image(page, width, dpi)
                files[f"{figure.name}.png"] = encoder.submit(image_png_bytes, image) if encoder else image_png_bytes(image)
            svg = widget_svg_bytes(page, title=figure.name) if formats & {"svg", "pdf"} else None
            if "svg" in formats:
                files[f"{figure.name}.svg"] = svg
            if "pdf" in formats:   # the SVG is drawn once and reused
                files[f"{figure.name}.pdf"] = pdf_bytes(page, figure.name, svg)
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
              width: int | None = None, dpi: float | None = None) -> dict[str, bytes]:
    """Every figure's files plus the trace's; PNGs are compressed on worker threads meanwhile (two: while
    this thread paints, one spare core compresses; at the end both finish the last PNGs)."""
    formats = tuple(formats)
    files: dict = {}
    with ThreadPoolExecutor(max_workers=PNG_ENCODERS, thread_name_prefix="png-encoder") as encoder:
        for figure in figures:
            files.update(figure_files(figure, formats, width, dpi, encoder))
        files.update(trace_files(trace, formats))
        return {name: data.result() if isinstance(data, Future) else data for name, data in files.items()}


def write_files(folder: str | os.PathLike, files: Mapping[str, bytes]) -> list[Path]:
    """Write every file into folder, or none (raises core.raw_export.ExportError with a clear message)."""
    return write_file_set(folder, files)


def figure_mime_data(figure: Figure) -> QMimeData:
    """The figure as the clipboard carries it: PNG (the default size, for slides and chat) and SVG (for vector editors)."""
    with on_page(figure) as page:
        image = render_image(page)
        svg = widget_svg_bytes(page, title=figure.name)
    mime = QMimeData()
    mime.setImageData(image)
    mime.setData("image/png", QByteArray(image_png_bytes(image)))
    mime.setData("image/svg+xml", QByteArray(svg))
    return mime


def copy_figure_to_clipboard(figure: Figure) -> None:
    QGuiApplication.clipboard().setMimeData(figure_mime_data(figure))
