"""A figure's page comes from its content: it grows with the token (or stage, head) count, and the content
fills it — no page of a fixed size with the plot shrunk or stretched inside, no wide blank margins."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QRectF, QSizeF
from PySide6.QtWidgets import QGraphicsView, QGraphicsWidget

from core.runners import NumpyRunner
from core.session import analyse
from gui import figure_pages as pages
from gui.headless import ExportRequest
from tests.gui.figure_samples import PATCHING, blank_border, png_image, run_sweeps_now, same_length_variant

SHORT = "The cat sat on the mat."
LONG = "The cat sat on the mat because the cat was tired, 订单成交了，and then the dog came in and sat on it."
# Sized from their content by this page code (the rest have tests of their own or natural heights).
SIZED = ("attention_head", "attention_grid", "attention_lines", "logit_lens_heatmap", "positions_sinusoidal",
         "positions_embed_plus_pe", "positions_rope_pairs", "positions_rope_angles", "positions_relative")
GROWING = ("attention_head", "attention_grid", "logit_lens_heatmap", "positions_embed_plus_pe")
MOST_BLANK = 36   # logical pixels of blank border a side may keep (pyqtgraph's room for a bar's tick labels)


@pytest.fixture(scope="module")
def runner(bundle):
    return NumpyRunner(bundle)


def at_1x(host, trace, names):
    """{name: PNG at the page's own size (1 logical pixel = 1 pixel)} for the named figures."""
    out = {}
    for figure in host.figures(trace, ExportRequest(formats=("png",), figures=tuple(names))):
        out[figure.name] = png_image(figure, width=pages.laid_out_size(figure).width())
    return out


def test_token_sized_pages_grow_with_the_sentence(host, runner):
    short, long = at_1x(host, analyse(runner, SHORT), GROWING), at_1x(host, analyse(runner, LONG), GROWING)
    for name in ("attention_head", "attention_grid", "logit_lens_heatmap"):   # a column per token
        assert long[name].width() > short[name].width(), name
    for name in ("attention_head", "positions_embed_plus_pe"):   # a row per token
        assert long[name].height() > short[name].height(), name


@pytest.mark.parametrize("text", [SHORT, LONG])
def test_content_fills_the_page(host, runner, text):
    for name, image in at_1x(host, analyse(runner, text), SIZED).items():
        border = blank_border(image)
        assert max(border) <= MOST_BLANK, f"{name} at {image.width()} × {image.height()}: blank border {border}"


def test_heatmap_cells_have_the_size_asked_for(host, runner):
    """fit_view measures the axes, titles and colour bar around the cells: the cells come out as asked."""
    trace = analyse(runner, LONG)
    figure = next(iter(host.figures(trace, ExportRequest(figures=("attention_head",)))))
    panel = next(p for p in host.panels if p.object_name == "attention")
    n = trace.n_tokens
    with pages.on_page(figure):
        box = panel.matrix.vb.sceneBoundingRect()
    assert box.width() / n == pytest.approx(pages.cell_size(n), abs=0.5)
    assert box.height() / n == pytest.approx(pages.cell_size(n), abs=0.5)


def test_longest_row_label_is_left_of_the_cells_and_clear_of_the_axis_title(host, runner):
    trace = analyse(runner, LONG)
    figure = next(iter(host.figures(trace, ExportRequest(figures=("attention_head",)))))
    axis = next(p for p in host.panels if p.object_name == "attention").matrix.getAxis("left")
    with pages.on_page(figure):
        room = axis.width() - axis.style["tickTextOffset"][0] - max(0, axis.style["tickLength"])
        title = axis.label.boundingRect().height() * 0.8
        assert room - title >= axis._widest, "the longest label runs under the axis title"


def test_patching_pages_come_from_their_sweeps(host, runner):
    tokenizer = runner.bundle.tokenizer
    short = run_sweeps_now(host, runner, analyse(runner, SHORT), same_length_variant(tokenizer, SHORT))
    short_sizes = {f.name: pages.laid_out_size(f) for f in short.figures()}
    long = run_sweeps_now(host, runner, analyse(runner, LONG), same_length_variant(tokenizer, LONG))
    figures = {f.name: f for f in long.figures()}
    for name in ("patching_resid", "patching_heads_pos"):   # a column per position of B
        assert pages.laid_out_size(figures[name]).width() > short_sizes[name].width(), name
    for name in PATCHING:
        image = png_image(figures[name], width=pages.laid_out_size(figures[name]).width())
        assert max(blank_border(image)) <= MOST_BLANK, f"{name}: blank border {blank_border(image)}"


def test_matrix_cells_shrink_to_a_floor_then_the_page_grows():
    assert pages.matrix_cell(5, 10).width() == 40.0
    assert pages.matrix_cell(5, 1000).width() == pages.MIN_CELL
    assert pages.matrix_cell(5, 60).width() < pages.matrix_cell(5, 20).width()
    assert pages.matrix_cell(5, 60) == QSizeF(pages.MATRIX_SIDE[0] / 60, 32.0)


def overflowing_scenes(page) -> list[str]:
    """The plots of a page whose scene layout is larger than their view: their right or bottom is cut off."""
    views = [page] if isinstance(page, QGraphicsView) else []
    cut = []
    for view in (*views, *page.findChildren(QGraphicsView)):
        central = getattr(view, "centralWidget", None)
        if isinstance(central, QGraphicsWidget) and view.isVisibleTo(page):
            laid_out, room = central.geometry(), QRectF(view.viewport().rect())
            if laid_out.right() > room.right() + 1 or laid_out.bottom() > room.bottom() + 1:
                cut.append(f"{type(view).__name__} {laid_out.width():.0f} × {laid_out.height():.0f} "
                           f"in {room.width():.0f} × {room.height():.0f}")
    return cut


@pytest.mark.parametrize("text", ["The", "The cat sat", "订单"])
def test_short_sentences_keep_every_plot_whole(host, runner, text):
    """A title or axis wider than a few tokens' cells widens the page: nothing is laid out past its edge."""
    trace = analyse(runner, text)
    for figure in host.figures(trace, ExportRequest(formats=("png",))):
        with pages.on_page(figure) as page:
            assert not overflowing_scenes(page), f"{figure.name} at {trace.n_tokens} tokens: {overflowing_scenes(page)}"


def test_a_short_sentence_keeps_its_heatmap_cells_square(host, runner):
    figure = next(iter(host.figures(analyse(runner, "The cat sat"), ExportRequest(figures=("attention_head",)))))
    panel = next(p for p in host.panels if p.object_name == "attention")
    with pages.on_page(figure):
        box = panel.matrix.vb.sceneBoundingRect()
    assert box.width() == pytest.approx(box.height(), abs=1.0)
