"""A PNG's default size: twice the page, but no more than DEFAULT_PNG_PIXELS; a width or DPI the user
chose is honoured as it is."""
from __future__ import annotations

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QWidget

from gui import export


def page_of(width: int, height: int) -> QWidget:
    widget = QWidget()
    widget.resize(width, height)
    return widget


def test_a_figure_of_ordinary_size_is_twice_its_page(qapp):
    png = QImage.fromData(export.png_bytes(page_of(300, 200)), "PNG")
    assert (png.width(), png.height()) == (600, 400)


def test_a_tall_figure_stops_at_the_pixel_budget_with_its_aspect_kept(qapp):
    png = QImage.fromData(export.png_bytes(page_of(1200, 1800)), "PNG")   # 8.6 million pixels at 2x
    assert png.width() * png.height() <= export.DEFAULT_PNG_PIXELS
    assert png.width() * png.height() > 0.99 * export.DEFAULT_PNG_PIXELS
    assert abs(png.height() / png.width() - 1.5) < 0.01
    assert export.default_png_scale(4000, 4000) == 1.0   # never painted smaller than on screen


def test_a_chosen_width_or_dpi_passes_the_budget(qapp):
    page = page_of(1200, 1800)
    assert export.png_size(page, width=2600)[:2] == (2600, 3900)
    assert export.png_size(page, dpi=192)[:2] == (2400, 3600)
