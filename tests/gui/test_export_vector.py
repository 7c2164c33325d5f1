"""Vector exports render the same outside Qt: the SVG through cairosvg, the PDF through poppler's pdftoppm,
each compared with the PNG export of the same figure (mean colour difference, every heatmap cell's colour)."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPointF
from PySide6.QtGui import QImage

from core.runners import NumpyRunner
from core.session import analyse
from gui import export
from gui.figure_pages import on_page
from gui.headless import ExportRequest, FigureHost

import cairosvg  # noqa: E402  the test extra: a renderer that is not Qt

TEXT = "订单成交，订单取消。The cat sat on the mat because the cat was tired."
FIGURES = ("attention_head", "attention_grid", "moe_router_probs", "moe_expert_load", "next_token_bars",
           "tokens_chips")
# Compared at the on-screen size (PNG and vectors then draw a cosmetic line equally wide), averaged over
# 4 x 4 pixel blocks: Qt's hinted text and another renderer's anti-aliasing differ pixel by pixel, but a
# missing figure part changes whole blocks. (Outlines and text still differ a little: Qt snaps lines to
# pixels, other renderers anti-alias them; the tests below pin the outline, the bars and the cells.)
HEATMAPS = ("attention_head", "moe_router_probs")
MEAN_DIFFERENCE = 8.0   # of 255, mean over blocks
CELL_DIFFERENCE = 6     # per channel at a heatmap cell's centre (PNG at 2x: cells are many pixels wide)


@pytest.fixture(scope="module")
def rendered(bundle, qapp):
    """{figure name: (heatmap cell centres at 1x, png QImage, svg bytes, pdf bytes, 1x png)} for FIGURES."""
    host = FigureHost()
    trace = analyse(NumpyRunner(bundle), TEXT)
    figures = host.figures(trace, ExportRequest(formats=("png", "svg", "pdf"), figures=FIGURES, query=8, key=3))
    out = {}
    for figure in figures:
        files = export.figure_files(figure, ("png", "svg", "pdf"))
        with on_page(figure) as page:   # the PNG at 1x of the page, and where its cells are
            on_screen = export.png_bytes(page, width=page.width())
            centres = heatmap_cell_centres(page, 1.0) if name_has_heatmap(figure.name) else []
        out[figure.name] = (centres, QImage.fromData(files[f"{figure.name}.png"], "PNG"),
                            files[f"{figure.name}.svg"], files[f"{figure.name}.pdf"], QImage.fromData(on_screen, "PNG"))
    yield out
    host.close()


def name_has_heatmap(name: str) -> bool:
    return name in HEATMAPS


def pixels(image: QImage) -> np.ndarray:  # -> [H, W, 3] int
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, : image.width() * 3].reshape(image.height(), image.width(), 3).astype(np.int32)


def block_difference(a: np.ndarray, b: np.ndarray, block: int = 4) -> float:
    h, w = (a.shape[0] // block) * block, (a.shape[1] // block) * block

    def blocks(x):
        return x[:h, :w].reshape(h // block, block, w // block, block, 3).mean(axis=(1, 3))

    return float(np.abs(blocks(a) - blocks(b)).mean())


def svg_raster(svg: bytes, like: QImage) -> np.ndarray:
    png = cairosvg.svg2png(bytestring=svg, output_width=like.width(), output_height=like.height(),
                           background_color="white")
    return pixels(QImage.fromData(png, "PNG"))


def pdf_raster(pdf: bytes, like: QImage, tmp_path) -> np.ndarray:
    if shutil.which("pdftoppm") is None:
        pytest.fail("pdftoppm is needed to check PDF exports: apt-get install poppler-utils")
    source = tmp_path / "figure.pdf"
    source.write_bytes(pdf)
    done = subprocess.run(["pdftoppm", "-png", "-singlefile", "-scale-to-x", str(like.width()),
                           "-scale-to-y", str(like.height()), str(source)], capture_output=True, check=True)
    return pixels(QImage.fromData(done.stdout, "PNG"))


def heatmap_cell_centres(widget, scale: float) -> list[tuple[int, int]]:
    """Image pixel (x, y) inside every cell of the largest heatmap (pg.ImageItem) the figure draws: halfway
    down, a fifth in from the left (clear of the outline at the border and of a number written in the cell)."""
    views = [widget] if isinstance(widget, pg.GraphicsView) else widget.findChildren(pg.GraphicsView)
    found = [(view, item) for view in views for item in view.scene().items()
             if isinstance(item, pg.ImageItem) and item.image is not None and item.isVisible()]
    view, item = max(found, key=lambda pair: pair[1].image.shape[0] * pair[1].image.shape[1])
    rows, cols = item.image.shape[:2]
    centres = []
    for r in range(rows):
        for c in range(cols):
            on_view = view.mapFromScene(item.mapToScene(QPointF(c + 0.2, r + 0.5)))
            on_widget = view.viewport().mapTo(widget, on_view) if view is not widget else on_view
            centres.append((int(on_widget.x() * scale), int(on_widget.y() * scale)))
    return centres


@pytest.mark.parametrize("name", FIGURES)
def test_svg_rendered_by_cairo_looks_like_the_png(rendered, name):
    _, _, svg, _, png = rendered[name]
    difference = block_difference(svg_raster(svg, png), pixels(png))
    assert difference < MEAN_DIFFERENCE, f"{name}: mean colour difference {difference:.2f}"


@pytest.mark.parametrize("name", FIGURES)
def test_pdf_rendered_by_poppler_looks_like_the_png(rendered, name, tmp_path):
    _, _, _, pdf, png = rendered[name]
    assert pdf.startswith(b"%PDF")
    difference = block_difference(pdf_raster(pdf, png, tmp_path), pixels(png))
    assert difference < MEAN_DIFFERENCE, f"{name}: mean colour difference {difference:.2f}"


def without_image_smoothing_hints(svg: bytes) -> bytes:
    """What a renderer that ignores image-rendering sees (librsvg 2.54, most PDF viewers): it smooths."""
    return re.sub(rb'image-rendering="[^"]*"|style="image-rendering:[^"]*"', b"", svg)


@pytest.mark.parametrize("name", HEATMAPS)
def test_every_heatmap_cell_keeps_its_colour_in_svg_and_pdf(rendered, name, tmp_path):
    centres_1x, png, svg, pdf, on_screen = rendered[name]
    reference = pixels(png)
    scale = png.width() / on_screen.width()
    centres = [(int(x * scale), int(y * scale)) for x, y in centres_1x]
    assert len(centres) >= 4
    for label, raster in (("svg", svg_raster(without_image_smoothing_hints(svg), png)),
                          ("pdf", pdf_raster(pdf, png, tmp_path))):
        worst = max(int(np.abs(raster[y, x] - reference[y, x]).max()) for x, y in centres)
        assert worst <= CELL_DIFFERENCE, f"{name} {label}: a cell centre is off by {worst}"


def test_selection_outline_stays_a_thin_line_outside_qt(rendered):
    """The red outline (a cosmetic pen under the heatmap's scaling) must not become a band cells wide."""
    _, _, svg, _, png = rendered["attention_head"]

    def red_share(rgb: np.ndarray) -> float:
        r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
        return float(((r > 180) & (g < 90) & (b < 110)).mean())

    in_png, in_svg = red_share(pixels(png)), red_share(svg_raster(svg, png))
    assert in_png > 0
    assert in_svg < 3 * in_png + 0.001, f"red covers {in_svg:.4f} of the SVG, {in_png:.4f} of the PNG"


def test_expert_load_bars_survive_outside_qt(rendered):
    _, _, svg, _, png = rendered["moe_expert_load"]
    purple = np.array([0x44, 0x01, 0x54])   # viridis' first colour: the "share of top-k slots" bars

    def bar_share(rgb: np.ndarray) -> float:
        return float((np.abs(rgb - purple).max(axis=-1) <= 12).mean())

    in_png, in_svg = bar_share(pixels(png)), bar_share(svg_raster(svg, png))
    assert in_png > 0.005
    assert 0.7 < in_svg / in_png < 1.4


def test_svg_text_is_outlined_and_pdf_needs_no_font(rendered):
    _, _, svg, pdf, _ = rendered["tokens_chips"]
    assert b"<text" not in svg
    assert b"/FontFile" not in pdf and b"/BaseFont" not in pdf   # glyphs are paths: nothing to embed or miss
