"""The Attention panel: orientation, masking, scaling, selection, hover, head view, figures."""
from __future__ import annotations

import csv
import io
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtCore import Qt

from core.runners import NumpyRunner
from core.session import analyse
from gui.fonts import register_fonts
from gui import head_lines
from gui.head_grid import GAP
from gui.head_lines import rasterise_lines
from gui.panels.attention_panel import AttentionPanel
from gui.text_fit import elide
from gui.token_axis import TokenAxis
from gui.plotting import MASKED_RGBA, colormap
from gui.selection import Selection
from tests.gui.qt_helpers import hover

SENTENCE = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def trace(bundle):
    return analyse(NumpyRunner(bundle), SENTENCE)


def previous_token_trace(trace, layer: int = 0, head: int = 1):
    """The real trace with one head replaced by a known asymmetric pattern: query i looks at key i-1."""
    n_tokens = trace.n_tokens
    pattern = np.zeros((n_tokens, n_tokens), np.float32)
    pattern[np.arange(n_tokens), np.maximum(np.arange(n_tokens) - 1, 0)] = 1.0
    attn = np.array(trace.layers[layer].attn)
    attn[head] = pattern
    layers = list(trace.layers)
    layers[layer] = replace(trace.layers[layer], attn=attn)
    return replace(trace, layers=tuple(layers))


@pytest.fixture
def panel(show):
    return show(AttentionPanel(), 1300, 850)


def choose_scale(panel: AttentionPanel, mode: str) -> None:
    panel.scale_combo.setCurrentIndex(panel.scale_combo.findData(mode))


def settle(qtbot) -> None:
    qtbot.wait(30)  # layouts and pyqtgraph's deferred range updates


def cell_point(panel: AttentionPanel, query: int, key: int):
    """The centre of cell (query, key) of the large view, in matrix_view's viewport pixels."""
    return panel.matrix_view.mapFromScene(panel.matrix.cell_centre(query, key))


def shown_levels(panel: AttentionPanel) -> tuple[float, float]:
    return panel.scale.levels(*panel.shown)


def rendered_cell_colour(panel: AttentionPanel, query: int, key: int) -> tuple[int, int, int]:
    """The colour on screen at the centre of a cell of the large view (not the array behind it)."""
    image = panel.matrix_view.grab().toImage()
    colour = image.pixelColor(cell_point(panel, query, key))
    return colour.red(), colour.green(), colour.blue()


def lut_colour(fraction: float) -> tuple[int, int, int]:
    lut = colormap().getLookupTable(0.0, 1.0, 256, alpha=True)
    return tuple(int(v) for v in lut[int(round(fraction * 255))][:3])


def assert_close(actual, expected, tolerance: int = 4) -> None:
    assert max(abs(a - b) for a, b in zip(actual, expected)) <= tolerance, (actual, expected)


def head_max(attn: np.ndarray) -> float:  # [T, T] -> the largest weight below row 0
    return float(attn[1:].max())


# ----------------------------------------------------------------------------- the large view


def test_large_view_puts_query_rows_down_and_key_columns_across(panel, trace, qtbot):
    crafted = previous_token_trace(trace, layer=0, head=1)
    choose_scale(panel, "fixed")
    panel.set_selection(Selection(layer=0, head=1))
    panel.set_trace(crafted)
    settle(qtbot)
    last = crafted.n_tokens - 1
    top_left, bottom_left = cell_point(panel, 0, 0), cell_point(panel, last, 0)
    bottom_right = cell_point(panel, last, last)
    assert top_left.y() < bottom_left.y() and bottom_left.x() < bottom_right.x()  # query 0 on top, key 0 left
    hot, cold = lut_colour(1.0), lut_colour(0.0)
    assert_close(rendered_cell_colour(panel, 0, 0), hot)    # query 0 can only see key 0
    assert_close(rendered_cell_colour(panel, 3, 2), hot)    # query 3 looks at key 2 (row 3 from the top)
    assert_close(rendered_cell_colour(panel, 5, 4), hot)
    assert_close(rendered_cell_colour(panel, 3, 0), cold)   # below the diagonal, weight 0
    assert_close(rendered_cell_colour(panel, 2, 3), MASKED_RGBA[:3])  # key after query: masked
    assert_close(rendered_cell_colour(panel, 0, 5), MASKED_RGBA[:3])


def test_masked_cells_look_different_from_zero_weight(panel, trace, qtbot):
    panel.set_selection(Selection(layer=0, head=1))
    panel.set_trace(previous_token_trace(trace, layer=0, head=1))
    settle(qtbot)
    zero, masked = rendered_cell_colour(panel, 4, 0), rendered_cell_colour(panel, 0, 4)
    assert max(abs(a - b) for a, b in zip(zero, masked)) > 60
    assert_close(masked, MASKED_RGBA[:3])


def test_large_view_and_outline_follow_the_selection(panel, trace, qtbot):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=1, head=3))
    assert panel.shown == (1, 3)
    step = 1 + GAP
    centre = panel.grid.outline.rect().center()  # in the grid's view coordinates
    assert (centre.x(), centre.y()) == pytest.approx((3 * step + 0.5, 1 * step + 0.5))


def test_changing_head_or_token_does_not_rebuild_the_thumbnails(panel, trace):
    calls = []
    draw = panel.grid.show_heads
    panel.grid.show_heads = lambda *args: (calls.append(1), draw(*args))
    panel.set_trace(trace)
    assert len(calls) == 1
    panel.set_selection(Selection(layer=1, head=2))
    panel.set_selection(Selection(layer=1, head=2, query=3, key=1))
    assert len(calls) == 1
    choose_scale(panel, "head")
    assert len(calls) == 2


def test_shared_and_per_head_scaling_set_the_levels(panel, trace, qtbot):
    maxima = np.array([[head_max(layer.attn[h]) for h in range(trace.num_heads)] for layer in trace.layers])
    layer, head = np.unravel_index(np.argmin(maxima), maxima.shape)  # the flattest head: scales differ most
    panel.set_selection(Selection(layer=int(layer), head=int(head)))
    panel.set_trace(trace)

    choose_scale(panel, "shared")
    assert shown_levels(panel) == pytest.approx((0.0, maxima.max()))
    np.testing.assert_allclose(panel.grid.scale.tops, np.full_like(maxima, maxima.max()))

    choose_scale(panel, "head")
    assert shown_levels(panel) == pytest.approx((0.0, maxima[layer, head]))
    np.testing.assert_allclose(panel.grid.scale.tops, maxima)
    assert maxima.min() < maxima.max()

    choose_scale(panel, "fixed")
    assert shown_levels(panel) == (0.0, 1.0)


def test_per_head_scale_draws_the_heads_largest_weight_in_the_top_colour(panel, trace, qtbot):
    maxima = np.array([[head_max(layer.attn[h]) for h in range(trace.num_heads)] for layer in trace.layers])
    layer, head = (int(i) for i in np.unravel_index(np.argmin(maxima), maxima.shape))
    attn = trace.layers[layer].attn[head]
    query, key = np.unravel_index(np.argmax(attn[1:]), attn[1:].shape)
    query += 1
    panel.set_selection(Selection(layer=layer, head=head, query=0))
    panel.set_trace(trace)
    choose_scale(panel, "head")
    settle(qtbot)
    assert_close(rendered_cell_colour(panel, query, key), lut_colour(1.0))
    choose_scale(panel, "shared")
    settle(qtbot)
    assert_close(rendered_cell_colour(panel, query, key), lut_colour(maxima[layer, head] / maxima.max()), 6)


def test_hovering_a_cell_shows_weight_and_pre_softmax_score(panel, trace, qtbot):
    panel.set_selection(Selection(layer=1, head=2))
    panel.set_trace(trace)
    settle(qtbot)
    hover(panel.matrix_view.viewport(), cell_point(panel, 4, 1))
    qtbot.waitUntil(lambda: "→" in panel.hover_label.text())
    weight = float(trace.layers[1].attn[2, 4, 1])
    score = float(trace.layers[1].scores[2, 4, 1])
    text = panel.hover_label.text()
    assert f"{weight:.4f}" in text and f"{score:.3f}" in text
    assert trace.label(4) in text and trace.label(1) in text

    hover(panel.matrix_view.viewport(), cell_point(panel, 1, 4))
    qtbot.waitUntil(lambda: "masked" in panel.hover_label.text())


def test_the_cell_read_out_follows_the_head_the_user_picks_next(panel, trace, qtbot):
    panel.set_selection(Selection(layer=0, head=0))
    panel.set_trace(trace)
    settle(qtbot)
    hover(panel.matrix_view.viewport(), cell_point(panel, 4, 1))
    qtbot.waitUntil(lambda: "→" in panel.hover_label.text())
    assert panel.hover_label.text().startswith("L0 H0 · ")
    panel.set_selection(Selection(layer=1, head=2))   # e.g. a thumbnail clicked: the mouse left the heatmap
    settle(qtbot)
    text = panel.hover_label.text()
    assert text.startswith("L1 H2 · ")
    assert f"{float(trace.layers[1].attn[2, 4, 1]):.4f}" in text
    assert f"{float(trace.layers[1].scores[2, 4, 1]):.3f}" in text


def test_clicking_a_thumbnail_selects_its_layer_and_head(panel, trace, qtbot):
    panel.set_trace(trace)
    settle(qtbot)
    with qtbot.waitSignal(panel.sigSelect) as signal:
        qtbot.mouseClick(panel.grid.viewport(), Qt.MouseButton.LeftButton, pos=panel.grid.head_point(1, 2))
    assert signal.args == [{"layer": 1, "head": 2}]


def test_clicking_a_cell_selects_its_query_and_key(panel, trace, qtbot):
    panel.set_trace(trace)
    settle(qtbot)
    with qtbot.waitSignal(panel.sigSelect) as signal:
        qtbot.mouseClick(panel.matrix_view.viewport(), Qt.MouseButton.LeftButton, pos=cell_point(panel, 5, 2))
    assert signal.args == [{"query": 5, "key": 2}]


def test_selected_query_row_and_key_cell_are_marked(panel, trace):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=0, head=0, query=6, key=2))
    assert panel.query_mark.path().boundingRect().getRect() == (0, 6, trace.n_tokens, 1)
    assert panel.key_mark.path().boundingRect().getRect() == (2, 6, 1, 1)


# ----------------------------------------------------------------------------- the head view


def test_head_view_line_opacities_are_the_weights(panel, trace):
    panel.set_selection(Selection(layer=1, head=3))
    panel.set_trace(trace)
    expected = np.tril(trace.layers[1].attn[3])
    np.testing.assert_allclose(panel.lines_view.line_opacities()[0], expected, atol=1e-6)

    panel.all_heads_box.setChecked(True)
    np.testing.assert_allclose(panel.lines_view.line_opacities(), np.tril(trace.layers[1].attn), atol=1e-6)


def test_rasterised_line_has_exactly_its_opacity(qapp):
    alpha, first = rasterise_lines(40, 3.0, 60.0, np.array([20.5]), np.array([20.5]), np.array([0.37]), 1.0)
    assert first == 3
    np.testing.assert_allclose(alpha[2:-2, 20], 0.37, rtol=1e-5)     # the line's own row
    assert np.all(alpha[:, :19] == 0) and np.all(alpha[:, 22:] == 0)  # nothing far from it


def test_hovering_a_token_shows_only_its_lines(panel, trace, qtbot):
    panel.set_selection(Selection(layer=0, head=0))
    panel.set_trace(trace)
    settle(qtbot)
    view = panel.lines_view
    hover(view, view.token_point("query", 3))
    qtbot.waitUntil(lambda: {q for _, q, _ in view.lines_shown()} == {3})
    assert len(view.lines_shown()) == 4  # keys 0..3
    hover(view, view.token_point("key", 1))
    qtbot.waitUntil(lambda: {k for _, _, k in view.lines_shown()} == {1})
    assert {q for _, q, _ in view.lines_shown()} == set(range(1, trace.n_tokens))


def test_clicking_a_token_in_the_head_view_selects_it(panel, trace, qtbot):
    panel.set_trace(trace)
    settle(qtbot)
    with qtbot.waitSignal(panel.sigSelect) as signal:
        qtbot.mouseClick(panel.lines_view, Qt.MouseButton.LeftButton, pos=panel.lines_view.token_point("query", 4))
    assert signal.args == [{"query": 4, "key": None}]


def test_long_sentences_leave_out_only_the_faintest_lines(panel, trace, monkeypatch):
    monkeypatch.setattr(head_lines, "LINE_BUDGET", 12)
    panel.set_selection(Selection(layer=0, head=2))
    panel.set_trace(trace)
    weights = np.tril(trace.layers[0].attn[2])
    drawn = panel.lines_view.line_opacities()[0]
    left_out, below = panel.lines_view.faint_lines_left_out()
    assert np.count_nonzero(drawn) == 12
    assert left_out == np.count_nonzero(weights) - 12
    np.testing.assert_allclose(drawn[drawn > 0], weights[drawn > 0])       # drawn lines keep their weight
    assert weights[(drawn == 0) & (weights > 0)].max() <= below              # only fainter ones are missing


# ----------------------------------------------------------------------------- axes, empty state, figures


def test_token_axis_thins_labels_to_the_room_it_has(qapp):
    axis = TokenAxis("left")
    axis.set_labels([f"t{i}" for i in range(120)])
    (step, values), = axis.tickValues(0, 120, 240)  # 2 pixels per token
    assert step > 1 and len(values) * axis.legible_pitch() <= 240 * 1.1
    assert values[0] == 0.5 and all(v - 0.5 == int(v) for v in values)
    (step, values), = axis.tickValues(0, 12, 600)   # zoomed in: every token labelled
    assert step == 1 and len(values) == 12


def test_no_trace_shows_an_empty_state(panel, trace):
    panel.set_trace(trace)
    panel.set_trace(None)
    assert panel.showing_empty_state()
    assert panel.figures() == []
    assert panel.shown is None


def test_figures_and_their_numbers(panel, trace):
    panel.set_selection(Selection(layer=1, head=0))
    panel.set_trace(trace)
    figures = {figure.name: figure for figure in panel.figures()}
    assert list(figures) == ["attention_grid", "attention_head", "attention_lines"]

    head_rows = list(csv.reader(io.StringIO(figures["attention_head"].table())))
    assert head_rows[0][1:] == [f"{i}:{label}" for i, label in enumerate(trace.labels())]
    np.testing.assert_allclose(np.array(head_rows[1:])[:, 1:].astype(float), trace.layers[1].attn[0])
    scores = list(csv.reader(io.StringIO(figures["attention_head"].extra_tables["attention_head_scores"]())))
    assert scores[1][2] == "-inf"  # query 0 cannot see key 1

    grid = list(csv.DictReader(io.StringIO(figures["attention_grid"].table())))
    n_tokens = trace.n_tokens
    assert len(grid) == trace.num_layers * trace.num_heads * n_tokens * (n_tokens + 1) // 2
    row = next(r for r in grid if (r["layer"], r["head"], r["query"], r["key"]) == ("1", "2", "5", "3"))
    assert float(row["weight"]) == pytest.approx(float(trace.layers[1].attn[2, 5, 3]))
    assert float(row["score"]) == pytest.approx(float(trace.layers[1].scores[2, 5, 3]))

    lines = list(csv.DictReader(io.StringIO(figures["attention_lines"].table())))
    assert {(r["layer"], r["head"]) for r in lines} == {("1", "0")}


def test_token_labels_use_the_font_with_chinese_glyphs(qtbot, bundle):
    family = register_fonts()
    panel = AttentionPanel()
    qtbot.addWidget(panel)
    chinese = analyse(NumpyRunner(bundle), "我们今天只为了讲明白原理。")
    panel.set_trace(chinese)
    query_axis, key_axis = panel.matrix.getAxis("left"), panel.matrix.getAxis("bottom")
    assert family in query_axis.style["tickFont"].families()
    assert family in key_axis.style["tickFont"].families()
    assert query_axis.tickStrings([i + 0.5 for i in range(chinese.n_tokens)], 1, 1) == \
        [elide(label) for label in chinese.labels()]


def test_head_view_draws_its_lines_in_png_and_svg_exports(panel, trace, qtbot):
    from PySide6.QtCore import QBuffer, QIODevice, QPoint
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgGenerator

    panel.set_selection(Selection(layer=0, head=0))
    panel.set_trace(trace)
    settle(qtbot)
    view = panel.lines_view
    g = view.geometry_now()
    middle_of_first_line = (int((g.x0 + g.x1) / 2), int(g.row_y(0)))  # query 0 -> key 0, weight 1
    for scale in (1, 2):
        image = QImage(view.width() * scale, view.height() * scale, QImage.Format.Format_ARGB32)
        image.fill(0xFFFFFFFF)
        painter = QPainter(image)
        painter.scale(scale, scale)
        view.render(painter, QPoint())
        painter.end()
        pixel = image.pixelColor(middle_of_first_line[0] * scale, middle_of_first_line[1] * scale)
        assert (pixel.red(), pixel.green(), pixel.blue()) != (255, 255, 255)

    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    painter = QPainter(generator)
    view.render(painter, QPoint())
    painter.end()
    svg = bytes(buffer.data())
    assert svg.count(b"<polyline") + svg.count(b"<path") >= len(view.lines_shown())


def test_a_switched_off_head_is_marked(panel, trace):
    mask = np.ones_like(trace.head_mask)
    mask[0, 1] = 0
    panel.set_selection(Selection(layer=0, head=1))
    panel.set_trace(replace(trace, head_mask=mask))
    assert "switched off" in panel.matrix.titleLabel.text
    assert panel.grid.switched_off[0][1].isVisible() and not panel.grid.switched_off[0][0].isVisible()


def test_a_one_token_sentence_draws_without_errors(panel, bundle, qtbot):
    one = analyse(NumpyRunner(bundle), "a")
    assert one.n_tokens == 1
    panel.set_trace(one)
    settle(qtbot)
    assert shown_levels(panel)[1] == 1.0
    np.testing.assert_allclose(panel.lines_view.line_opacities(), [[[1.0]]])
    assert panel.lines_view.grab().width() > 0
