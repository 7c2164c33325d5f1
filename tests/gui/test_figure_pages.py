"""Figures are laid out for the page: their size comes from their content, never from the dock."""
from __future__ import annotations

import pytest
from PySide6.QtGui import QImage

from core.runners import NumpyRunner
from core.session import analyse
from core.tokens_view import MergeReplay
from gui import export
from gui.chip_flow import ChipFlow
from gui.figure_pages import on_page, visible_scroll_bars
from gui.headless import ExportRequest, FigureHost

SHORT = "The cat sat."
LONG = "The cat sat on the mat because the cat was tired, and then the dog came in and sat on the cat."


def png_size(figure) -> tuple[int, int]:
    image = QImage.fromData(export.figure_files(figure, ["png"])[f"{figure.name}.png"], "PNG")
    return image.width(), image.height()


def sizes(host, trace, names: tuple[str, ...] | None = None) -> dict[str, tuple[int, int]]:
    """The PNG size of each figure named (None: every figure)."""
    request = ExportRequest(formats=("png",), figures=names)
    return {figure.name: png_size(figure) for figure in host.figures(trace, request)}


def test_a_figure_keeps_its_size_when_the_dock_is_resized(host, bundle):
    trace = analyse(NumpyRunner(bundle), LONG)
    before = sizes(host, trace)
    for panel in host.panels:
        panel.resize(520, 380)   # a small dock: the old exports came out at this size
    host.app.processEvents()
    after = sizes(host, trace)
    assert after == before


def test_token_sized_figures_grow_with_the_token_count(host, bundle):
    runner = NumpyRunner(bundle)
    names = ("attention_head", "attention_lines", "moe_router_probs", "head_roles_evidence")
    short, long = sizes(host, analyse(runner, SHORT), names), sizes(host, analyse(runner, LONG), names)
    for name in names:
        assert long[name][0] * long[name][1] > short[name][0] * short[name][1], name


def test_no_figure_shows_a_scroll_bar(host, bundle):
    trace = analyse(NumpyRunner(bundle), LONG)
    for figure in host.figures(trace, ExportRequest(formats=("png",))):
        with on_page(figure) as page:
            assert not visible_scroll_bars(page), figure.name


def test_export_gives_the_widget_back_at_its_dock_size(host, bundle):
    trace = analyse(NumpyRunner(bundle), SHORT)
    figure = next(f for f in host.figures(trace, ExportRequest(figures=("attention_head",))))
    docked = figure.widget.size()
    with on_page(figure) as page:
        assert page.size() != docked
    assert figure.widget.size() == docked


def test_step_by_step_is_one_figure_per_step_plus_an_overview(host, bundle):
    trace = analyse(NumpyRunner(bundle), SHORT)
    names = [f.name for f in host.figures(trace, ExportRequest()) if f.name.startswith("step_")]
    steps = [name for name in names if name[5:7].isdigit()]
    assert names[0] == "step_by_step" and "step_dot_product" in names
    assert steps[0] == "step_01_x" and len(steps) >= 10
    assert [int(name[5:7]) for name in steps] == list(range(1, len(steps) + 1))


def test_merge_replay_figure_has_a_row_per_step(host, bundle):
    trace = analyse(NumpyRunner(bundle), SHORT)
    figure = next(f for f in host.figures(trace, ExportRequest(figures=("tokens_merges",))))
    replay = MergeReplay(trace.tokenization)
    flows = [flow for flow in figure.widget.findChildren(ChipFlow) if not flow.isHidden()]
    assert len(flows) == replay.n_steps + 1   # a short sentence: every step, bytes to tokens
    assert flows[0].chip_count() == len(replay.pieces_at(0))
    assert flows[-1].chip_count() == trace.n_tokens


def test_a_figure_on_a_hidden_tab_is_painted_at_its_page_size(qapp, bundle):
    """The positions panel shows one page at a time: the others' plots must still be laid out for the
    page before the PNG is painted (their resize events wait until shown), as the SVG then is."""
    import cairosvg
    import numpy as np

    trace = analyse(NumpyRunner(bundle), LONG)
    fresh = FigureHost()   # its hidden pages have never been laid out at any other size
    try:
        figure = next(f for f in fresh.figures(trace, ExportRequest(figures=("positions_rope_angles",))))
        assert not figure.widget.isVisible()
        files = export.figure_files(figure, ["png", "svg"])
    finally:
        fresh.close()
    png = QImage.fromData(files["positions_rope_angles.png"], "PNG")
    raster = QImage.fromData(cairosvg.svg2png(bytestring=files["positions_rope_angles.svg"], output_width=png.width(),
                                              output_height=png.height(), background_color="white"), "PNG")

    def blocks(image: QImage) -> np.ndarray:
        image = image.convertToFormat(QImage.Format.Format_RGB888)
        rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
        h, w = image.height() // 8 * 8, image.width() // 8 * 8
        pixels = rows[:h, : image.width() * 3].reshape(h, image.width(), 3)[:, :w]
        return pixels.reshape(h // 8, 8, w // 8, 8, 3).mean(axis=(1, 3))

    assert np.abs(blocks(png) - blocks(raster)).mean() < 8


def test_no_figure_shows_a_control(host, bundle):
    """Buttons, switches and text boxes are for the screen: a figure is the picture alone."""
    from PySide6.QtWidgets import QAbstractButton, QComboBox, QLineEdit, QTextEdit

    trace = analyse(NumpyRunner(bundle), LONG)
    for figure in host.figures(trace, ExportRequest(formats=("png",))):
        with on_page(figure) as page:
            controls = [w for kind in (QAbstractButton, QComboBox, QLineEdit, QTextEdit)
                        for w in page.findChildren(kind)
                        if w.isVisibleTo(page) and not w.objectName().startswith("qt_")]   # a table's own corner
            assert not controls, (figure.name, [type(w).__name__ for w in controls])


def test_export_writes_no_empty_sweep_figures_and_says_why_when_asked(host, bundle):
    """Patching and occlusion draw only after a sweep, which a host without a runner cannot run: Export all
    leaves them out, and asking for one by name says what to run instead of writing empty axes."""
    trace = analyse(NumpyRunner(bundle), SHORT)
    names = {figure.name for figure in host.figures(trace, ExportRequest(formats=("png",)))}
    assert names and not {name for name in names if name.startswith(("patching_", "occlusion_"))}
    for name, said, command in (("patching_resid", "patching_resid is drawn only in the app", "main.py patch"),
                                ("occlusion_strip", "occlusion_strip: not drawn.", "main.py occlude")):
        with pytest.raises(ValueError) as error:
            host.figures(trace, ExportRequest(formats=("png",), figures=(name,)))
        assert said in str(error.value) and command in str(error.value)


def test_the_dot_product_page_is_as_wide_as_its_content(host, bundle):
    """No blank band: the heatmap follows the formula closely, and the page ends a margin after the wider
    of that top line and the table."""
    trace = analyse(NumpyRunner(bundle), LONG)
    figure = next(f for f in host.figures(trace, ExportRequest(figures=("step_dot_product",))))
    with on_page(figure) as card:
        texts_end = max(card.formula.geometry().left() + card.formula.sizeHint().width(),
                        card.title.geometry().left() + card.title.sizeHint().width())
        heatmap = card.heatmap.geometry()
        assert heatmap.left() - texts_end <= 40 or card.table.geometry().right() >= heatmap.right()
        assert card.width() - max(heatmap.right(), card.table.geometry().right()) <= 40
        assert card.table.geometry().bottom() <= card.height()


def test_the_dot_products_heatmap_draws_no_bare_ticks(host, bundle):
    """Its rows and dims are named by its caption and the table: no unlabelled tick marks on its edges."""
    trace = analyse(NumpyRunner(bundle), SHORT)
    figure = next(f for f in host.figures(trace, ExportRequest(figures=("step_dot_product",))))
    heatmap = figure.widget.heatmap
    image = heatmap.grab().toImage()
    scale = image.width() / heatmap.width()
    margin, side = heatmap.MARGIN, heatmap.IMAGE
    background = image.pixelColor(1, 1)
    left_edge = [image.pixelColor(int((margin - 3) * scale), int((margin + y) * scale)) for y in range(side.height())]
    top_edge = [image.pixelColor(int((margin + x) * scale), int((margin - 3) * scale)) for x in range(side.width())]
    assert all(colour == background for colour in left_edge + top_edge)
