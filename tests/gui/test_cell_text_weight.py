"""Numbers written into heatmap cells weigh the same in the PNG as in the SVG rasterised by another renderer
(cairo): the PNG draws them as the SVG's glyph outlines, not with Qt's raster text and its font gamma."""
from __future__ import annotations

import cairosvg
import numpy as np
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage

from gui import export
from gui.figure_pages import on_page
from gui.panels.moe_panel import MoePanel
from gui.svg_export import widget_svg_bytes
from tests.gui.figure_samples import pixels

SCALE = 2   # PNG pixels per page pixel, the default


def cell_boxes(router, page) -> list[tuple[QRectF, float]]:
    """Each router-probability cell's rectangle on the page, with the value written in it."""
    plot, values = router.probs_plot, router.probs_text.values
    boxes = []
    for (r, c) in router.probs_text.texts():
        scene = plot.vb.mapViewToScene(QRectF(c, r, 1, 1)).boundingRect()
        corner = router.plots.mapTo(page, router.plots.mapFromScene(scene.topLeft()))
        boxes.append((QRectF(corner.x(), corner.y(), scene.width(), scene.height()), float(values[r, c])))
    return boxes


def ink(image: np.ndarray, box: QRectF) -> float:
    """How much text a cell holds: its pixels' distance from the cell's colour, inside its outlines."""
    inset = 6 * SCALE
    x0, y0 = round(box.left() * SCALE) + inset, round(box.top() * SCALE) + inset // 2
    x1, y1 = round(box.right() * SCALE) - inset, round(box.bottom() * SCALE) - inset // 2
    cell = image[y0:y1, x0:x1].astype(np.float64)
    background = np.median(cell.reshape(-1, 3), axis=0)
    return float(np.abs(cell - background).sum())


def test_cell_numbers_are_as_heavy_in_the_png_as_in_the_svg(show, analysed):
    panel = show(MoePanel(), 676, 346)
    panel.set_trace(analysed("The cat sat on the mat."))
    panel.flush()
    figure = next(f for f in panel.figures() if f.name == "moe_router_probs")
    with on_page(figure) as page:
        boxes = cell_boxes(panel.router, page)
        png = export.render_image(page, width=page.width() * SCALE)
        svg = widget_svg_bytes(page)
    raster = QImage.fromData(cairosvg.svg2png(bytestring=svg, output_width=png.width(), output_height=png.height(),
                                              background_color="white"), "PNG")
    drawn, rendered = pixels(png), pixels(raster)
    assert boxes
    for light in (True, False):   # white numbers on dark cells, black ones on bright cells
        chosen = [box for box, value in boxes if (value <= 0.55) == light]
        ratio = sum(ink(drawn, box) for box in chosen) / sum(ink(rendered, box) for box in chosen)
        assert 0.9 < ratio < 1.1, f"{'light' if light else 'dark'} numbers {ratio:.2f} times as heavy in the PNG"
