"""--theme dark: the painted figures (token chips, merge rows, attention lines) follow the palette too."""
from __future__ import annotations

import pytest
from PySide6.QtGui import QImage

from core.runners import NumpyRunner
from core.session import analyse
from gui import export
from gui.headless import ExportRequest, FigureHost
from tests.gui.test_export_vector import pixels

FIGURES = ("tokens_chips", "tokens_merges", "attention_lines", "next_token_bars")


@pytest.mark.parametrize("theme", ("light", "dark"))
def test_painted_figures_take_the_theme_background(bundle, qapp, theme):
    host = FigureHost(theme=theme)
    try:
        trace = analyse(NumpyRunner(bundle), "The cat sat on the mat.")
        figures = host.figures(trace, ExportRequest(formats=("png",), figures=FIGURES))
        assert {figure.name for figure in figures} == set(FIGURES)
        for figure in figures:
            png = pixels(QImage.fromData(export.figure_files(figure, ("png",))[f"{figure.name}.png"], "PNG"))
            corner = png[2, 2]   # the margin around the chips and lines: the widget's own background
            if theme == "dark":
                assert corner.mean() < 80, f"{figure.name}: background {corner} under --theme dark"
            else:
                assert corner.mean() > 200, f"{figure.name}: background {corner} under --theme light"
    finally:
        host.close()


@pytest.mark.parametrize("theme", ("light", "dark"))
def test_grid_names_take_the_theme_and_clear_the_selection_outline(bundle, qapp, theme):
    from gui.figure_pages import on_page

    host = FigureHost(theme=theme)
    try:
        trace = analyse(NumpyRunner(bundle), "The cat sat on the mat.")
        (figure,) = host.figures(trace, ExportRequest(formats=("png",), figures=("attention_grid",)))
        with on_page(figure) as grid:
            grid.select(0, 0)
            paper = grid.backgroundBrush().color().lightness()
            outline = grid.outline.mapRectToScene(grid.outline.rect())   # scene pixels, the pen's middle
            for name in (*grid.layer_names, *grid.head_names):
                assert abs(name.textItem.defaultTextColor().lightness() - paper) > 120, f"{name.toPlainText()} unreadable"
            name = grid.layer_names[0].textItem
            margin = name.document().documentMargin()   # the text's own padding around its glyphs
            glyphs = name.mapRectToScene(name.boundingRect()).adjusted(margin, margin, -margin, -margin)
            assert glyphs.right() + 2 < outline.left() - grid.outline.pen().widthF() / 2, "L0 touches the outline"
    finally:
        host.close()
