"""Every figure laid out for its page renders the same outside Qt: its SVG through cairosvg and librsvg
(rsvg-convert), its PDF through poppler (pdftoppm), each compared with the PNG of the same page.

Compared at the page's own size (1 logical pixel = 1 pixel: a cosmetic line is as wide in both), averaged over
16 × 16 pixel blocks: plots of many thin lines are anti-aliased differently by every renderer, pixel by pixel,
but a missing or misplaced part (bars at the wrong scale, a plot spilling over its title) moves whole blocks.
The heatmaps' cells are checked one by one at twice the page size."""
from __future__ import annotations

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
from gui.svg_export import widget_svg_bytes
from tests.gui.figure_samples import PATCHING, pixels, run_sweeps_now, same_length_variant

import cairosvg  # noqa: E402  the test extra: a renderer that is not Qt

TEXT = "订单成交了，The cat sat on the mat because the cat was tired."
FIGURES = ("attention_head", "attention_grid", "attention_lines", "logit_lens_heatmap", "attribution_bars",
           "next_token_bars", "positions_sinusoidal", "positions_embed_plus_pe", "positions_rope_pairs",
           "positions_rope_angles", "positions_relative")
HEATMAPS = ("logit_lens_heatmap", "positions_embed_plus_pe", "patching_resid", "patching_heads_pos")
RENDERERS = ("cairosvg", "rsvg-convert", "pdftoppm")
BLOCK = 16
MEAN_DIFFERENCE = 6.0   # of 255, mean over blocks (bars at 3/4 of their size gave 7.2)
CELL_DIFFERENCE = 8     # per channel at a heatmap cell's centre
CELL_POINT = {"logit_lens_heatmap": (0.1, 0.2)}   # clear of the token written in the cell


@pytest.fixture(scope="module")
def rendered(bundle, qapp):
    """{figure name: (png at the page's size, png at 2x, svg, pdf, cell centres at 2x)} as QImages and bytes."""
    host = FigureHost()
    runner = NumpyRunner(bundle)
    trace = analyse(runner, TEXT)
    figures = host.figures(trace, ExportRequest(figures=FIGURES, query=8, key=3))
    out = {figure.name: render(figure) for figure in figures}
    patching = run_sweeps_now(host, runner, trace, same_length_variant(runner.bundle.tokenizer, TEXT))
    out.update({figure.name: render(figure) for figure in patching.figures()})
    yield out
    host.close()


def render(figure):
    """Every file drawn from one layout of the page (a plain axis learns its labels' width when first painted:
    a second layout could move the cells)."""
    with on_page(figure) as page:
        double = export.render_image(page)
        at_1x = export.render_image(page, width=page.width())
        svg = widget_svg_bytes(page, title=figure.name)
        pdf = export.pdf_bytes(page, figure.name, svg)
        centres = cell_centres(page, double.width() / page.width(), CELL_POINT.get(figure.name, (0.5, 0.5))) \
            if figure.name in HEATMAPS else []
    return at_1x, double, svg, pdf, centres


def cell_centres(page, scale: float, point: tuple[float, float]) -> list[tuple[int, int]]:
    """(x, y) at `point` (a share of the cell's width and height) in every cell of the page's largest
    heatmap, in pixels of a PNG at `scale`."""
    views = [page] if isinstance(page, pg.GraphicsView) else page.findChildren(pg.GraphicsView)
    found = [(view, item) for view in views for item in view.scene().items()
             if isinstance(item, pg.ImageItem) and item.image is not None and item.isVisible()]
    view, item = max(found, key=lambda pair: pair[1].image.shape[0] * pair[1].image.shape[1])
    height, width = item.image.shape[:2]   # ImageItem: axis 0 is x unless the image is row-major
    cols, rows = (width, height) if item.axisOrder == "row-major" else (height, width)
    centres = []
    for r in range(rows):
        for c in range(cols):
            on_view = view.mapFromScene(item.mapToScene(QPointF(c + point[0], r + point[1])))
            on_page = view.viewport().mapTo(page, on_view)
            centres.append((int(on_page.x() * scale), int(on_page.y() * scale)))
    return centres


def raster(renderer: str, svg: bytes, pdf: bytes, like: QImage, tmp_path) -> np.ndarray:
    w, h = like.width(), like.height()
    if renderer == "cairosvg":
        return pixels(QImage.fromData(cairosvg.svg2png(bytestring=svg, output_width=w, output_height=h,
                                                       background_color="white"), "PNG"))
    if shutil.which(renderer) is None:
        pytest.fail(f"{renderer} is needed to check vector exports: apt-get install librsvg2-bin poppler-utils")
    if renderer == "rsvg-convert":
        (tmp_path / "figure.svg").write_bytes(svg)
        command = ["rsvg-convert", "-w", str(w), "-h", str(h), "-b", "white", str(tmp_path / "figure.svg")]
    else:
        (tmp_path / "figure.pdf").write_bytes(pdf)
        command = ["pdftoppm", "-png", "-singlefile", "-scale-to-x", str(w), "-scale-to-y", str(h),
                   str(tmp_path / "figure.pdf")]
    return pixels(QImage.fromData(subprocess.run(command, capture_output=True, check=True).stdout, "PNG"))


def block_difference(a: np.ndarray, b: np.ndarray) -> float:
    h, w = (a.shape[0] // BLOCK) * BLOCK, (a.shape[1] // BLOCK) * BLOCK

    def blocks(x):
        return x[:h, :w].reshape(h // BLOCK, BLOCK, w // BLOCK, BLOCK, 3).mean(axis=(1, 3))

    return float(np.abs(blocks(a) - blocks(b)).mean())


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("name", FIGURES + PATCHING)
def test_vector_file_renders_like_the_png(rendered, name, renderer, tmp_path):
    at_1x, _, svg, pdf, _ = rendered[name]
    difference = block_difference(raster(renderer, svg, pdf, at_1x, tmp_path), pixels(at_1x))
    assert difference < MEAN_DIFFERENCE, f"{name} in {renderer}: mean colour difference {difference:.2f}"


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("name", HEATMAPS)
def test_every_heatmap_cell_keeps_its_colour(rendered, name, renderer, tmp_path):
    _, double, svg, pdf, centres = rendered[name]
    assert len(centres) >= 8
    reference, drawn = pixels(double), raster(renderer, svg, pdf, double, tmp_path)
    worst = max(int(np.abs(drawn[y, x] - reference[y, x]).max()) for x, y in centres)
    assert worst <= CELL_DIFFERENCE, f"{name} in {renderer}: a cell centre is off by {worst}"
