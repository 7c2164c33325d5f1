"""Vector exports clip as Qt does and draw scatter dots as dots, in renderers that are not Qt.

At 64 tokens the router heatmap shows its last 40 rows: the rows above must not spill over the title
in the SVG. The RoPE speeds plot draws its points as scatter symbols: they must stay round."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QImage

from core.runners import NumpyRunner
from core.session import analyse
from gui import export
from gui.figure_pages import on_page
from gui.headless import ExportRequest, FigureHost, bench_text
from tests.gui.test_export_vector import MEAN_DIFFERENCE, block_difference, pixels, svg_raster

FIGURES = ("moe_router_probs", "positions_rope_angles")


@pytest.fixture(scope="module")
def rendered(bundle, qapp):
    """{figure name: (png at 1x, svg bytes, {plot box: its rectangle on the page})} at 64 tokens."""
    host = FigureHost()
    runner = NumpyRunner(bundle)
    trace = analyse(runner, bench_text(runner.bundle.tokenizer, 64))
    out = {}
    for figure in host.figures(trace, ExportRequest(formats=("png", "svg"), figures=FIGURES)):
        with on_page(figure) as page:
            png = QImage.fromData(export.png_bytes(page, width=page.width()), "PNG")
            svg = export.figure_files(figure, ("svg",))[f"{figure.name}.svg"]
            out[figure.name] = (png, svg, plot_boxes(page))
    yield out
    host.close()


def plot_boxes(page) -> list[tuple[pg.ViewBox, QRect]]:
    """Every visible plot box of the page with its rectangle in page pixels."""
    boxes = []
    for view in page.findChildren(pg.GraphicsView):
        for item in view.scene().items():
            if isinstance(item, pg.ViewBox) and item.isVisible():
                on_view = view.mapFromScene(item.sceneBoundingRect()).boundingRect()
                boxes.append((item, on_view.translated(view.viewport().mapTo(page, on_view.topLeft()) - on_view.topLeft())))
    return boxes


def rsvg_raster(svg: bytes, like: QImage, tmp_path) -> np.ndarray:
    if shutil.which("rsvg-convert") is None:
        pytest.fail("rsvg-convert is needed to check SVG exports: apt-get install librsvg2-bin")
    source = tmp_path / "figure.svg"
    source.write_bytes(svg)
    done = subprocess.run(["rsvg-convert", "-w", str(like.width()), "-h", str(like.height()), "-b", "white",
                           str(source)], capture_output=True, check=True)
    return pixels(QImage.fromData(done.stdout, "PNG"))


def rasters(svg: bytes, png: QImage, tmp_path) -> dict[str, np.ndarray]:
    return {"cairosvg": svg_raster(svg, png), "rsvg-convert": rsvg_raster(svg, png, tmp_path)}


def test_scrolled_heatmap_rows_stay_inside_their_plot(rendered, tmp_path):
    png, svg, boxes = rendered["moe_router_probs"]
    top = min(rect.top() for _, rect in boxes)   # everything above the plots: the title, the headers
    assert top > 8
    reference = pixels(png)[:top]
    for renderer, raster in rasters(svg, png, tmp_path).items():
        difference = block_difference(raster[:top], reference)
        assert difference < MEAN_DIFFERENCE, f"{renderer}: above the heatmap differs by {difference:.2f}"


def coloured_share(rgb: np.ndarray) -> float:
    """The share of clearly coloured pixels (not white, grey or black): here, the scatter dots."""
    return float((rgb.max(axis=-1) - rgb.min(axis=-1) > 40).mean())


def test_scatter_dots_stay_round(rendered, tmp_path):
    """Drawn from pyqtgraph's pixmap atlas, other renderers show each dot as a grid of small squares that
    covers about a quarter less; as paths, a dot covers what it covers in the PNG."""
    png, svg, boxes = rendered["positions_rope_angles"]
    scatter_boxes = [rect for box, rect in boxes
                     if any(isinstance(item, pg.ScatterPlotItem) and item.isVisible() and len(item.data)
                            for item in box.childGroup.childItems() + [c for i in box.childGroup.childItems()
                                                                       for c in i.childItems()])]
    assert scatter_boxes
    reference = pixels(png)
    for renderer, raster in rasters(svg, png, tmp_path).items():
        for rect in scatter_boxes:
            window = np.s_[rect.top(): rect.bottom(), rect.left(): rect.right()]
            in_png, in_svg = coloured_share(reference[window]), coloured_share(raster[window])
            assert in_png > 0.003
            assert 0.9 < in_svg / in_png < 1.1, f"{renderer}: dots cover {in_svg:.4f}, in the PNG {in_png:.4f}"
