"""The Positions panel draws the runner's own q/q_rot/k, exports five named figures, follows the selection."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QImage

from core import positions as pos
from core.runners import NumpyRunner
from core.session import analyse
from gui.panels.positions_panel import PositionsPanel
from gui.plot_shapes import arrow_segments
from gui.rope_pair_plot import RING_RADIUS, pair_cell, ring_centres
from gui.panels.registry import panel_classes
from gui.selection import Selection

FIGURE_NAMES = ["positions_sinusoidal", "positions_embed_plus_pe", "positions_rope_pairs",
                "positions_rope_angles", "positions_relative"]
SENTENCES = {"english": "Rotary position embeddings turn each pair of numbers by an angle.",
             "chinese": "旋转位置编码让相对距离变得可见。"}


from gui.text_fit import LABEL_COLUMNS, elide  # noqa: E402


def drawn_tip(arrow) -> tuple[float, float]:
    """The tip of an arrow as drawn (its second point), to compare with the trace's numbers."""
    x, y = arrow.getData()
    return float(x[1]), float(y[1])


@pytest.fixture(scope="module", params=list(SENTENCES), ids=list(SENTENCES))
def trace(request, bundle):
    return analyse(NumpyRunner(bundle), SENTENCES[request.param])


@pytest.fixture
def panel(show):
    return show(PositionsPanel(), 700, 500)


def show(panel, trace, **selection):
    panel.set_trace(trace)
    panel.set_selection(Selection(**selection))
    panel.draw_all()


def tab(panel, figure_name: str):
    return next(page for page in panel.pages if page.figure_name == figure_name)


def rows(csv_string: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(csv_string)))


# ---------------------------------------------------------------- contract

def test_panel_is_registered_after_next_token_and_before_moe():
    names = [cls.__name__ for cls in panel_classes()]
    here = names.index("PositionsPanel")
    assert all(names.index(n) < here for n in ("TokensPanel", "AttentionPanel", "NextTokenPanel") if n in names)
    assert all(names.index(n) > here for n in ("MoePanel", "StepPanel") if n in names)
    assert PositionsPanel.title == "Positions" and PositionsPanel.object_name == "positions"


def test_empty_state_without_a_trace(panel):
    panel.set_trace(None)
    assert panel.showing_empty_state()
    assert panel.figures() == []
    assert not panel.layer_spin.isVisible()


def test_figures_have_stable_names_and_tables(panel, trace):
    show(panel, trace)
    figures = panel.figures()
    assert [f.name for f in figures] == FIGURE_NAMES
    n, d, half = trace.n_tokens, trace.config.hidden_size, trace.config.head_dim // 2
    tables = {f.name: rows(f.table()) for f in figures}
    assert len(tables["positions_sinusoidal"]) == n + 1 and len(tables["positions_sinusoidal"][0]) == d + 1
    assert len(tables["positions_embed_plus_pe"]) == n + 1
    assert len(tables["positions_rope_pairs"]) == half + 1
    assert len(tables["positions_rope_angles"]) == trace.config.max_position_embeddings + 1
    assert any(row[0] == "runner q_rot.k_rot" for row in tables["positions_relative"])
    embed_rows = rows(figures[1].extra_tables["positions_embed_plus_pe_embedding"]())
    np.testing.assert_allclose(np.array(embed_rows[1:])[:, 1:].astype(float), trace.embed, atol=1e-7)


def test_every_figure_renders_something(panel, trace):
    show(panel, trace)
    for figure in panel.figures():
        widget = figure.widget
        assert widget.width() >= 600, f"{figure.name} was not laid out at the panel's size"
        image = QImage(widget.size(), QImage.Format_ARGB32)
        image.fill(QColor("white"))
        widget.render(image)
        pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.width(), 4)
        coloured = np.any(np.abs(pixels[..., :3].astype(int) - pixels[..., [1, 2, 0]].astype(int)) > 40, axis=-1)
        assert coloured.mean() > 0.005, f"{figure.name} looks empty"


# ---------------------------------------------------------------- sinusoidal pages

def test_sinusoidal_heatmap_is_the_table_for_this_sentence(panel, trace):
    show(panel, trace)
    page = tab(panel, "positions_sinusoidal")
    np.testing.assert_array_equal(page.image.image, pos.sinusoidal_table(trace.n_tokens, trace.config.hidden_size))
    assert "RoPE" in page.frame.caption.text() and "does not use" in page.frame.caption.text()
    for dim, (_, dots) in page.curves.items():
        np.testing.assert_allclose(dots.getData()[1], page.image.image[:, dim])


def test_embed_plus_pe_heatmap_sums_the_traces_embedding_and_labels_tokens(panel, trace):
    show(panel, trace)
    page = tab(panel, "positions_embed_plus_pe")
    np.testing.assert_allclose(page.images[0].image, trace.embed)
    np.testing.assert_allclose(page.images[1].image - trace.embed, pos.sinusoidal_table(*trace.embed.shape), atol=1e-6)
    labels = page.plots[0].getAxis("left").labels()
    assert len(labels) == trace.n_tokens and labels[0].startswith("0 ")
    assert labels[0] == elide(f"0 {trace.label(0)}", LABEL_COLUMNS + 4)
    page.scale_box.setChecked(True)
    np.testing.assert_allclose(page.images[0].image, trace.embed * np.sqrt(trace.config.hidden_size), rtol=1e-6)


# ---------------------------------------------------------------- RoPE arrows = the runner's q and q_rot

@pytest.mark.parametrize("layer,head", [(0, 0), (1, 3)])
def test_arrows_drawn_are_the_traces_q_and_q_rot_for_every_pair(panel, trace, layer, head):
    m = trace.n_tokens - 2
    show(panel, trace, layer=layer, head=head, query=m)
    page = tab(panel, "positions_rope_pairs")
    q, q_rot = trace.layers[layer].q[head, m], trace.layers[layer].q_rot[head, m]
    half = trace.config.head_dim // 2
    for i in range(half):
        page.pair_slider.setValue(i)
        assert page.pair_spin.value() == i
        assert drawn_tip(page.after_arrow) == pytest.approx((q_rot[i], q_rot[i + half]), abs=1e-6)
        assert drawn_tip(page.before_arrow) == pytest.approx((q[i], q[i + half]), abs=1e-6)


def test_small_multiples_point_where_q_rot_points(panel, trace):
    m = trace.n_tokens - 1
    show(panel, trace, layer=1, head=1, query=m)
    page = tab(panel, "positions_rope_pairs")
    x, y = page.small_after.getData()
    centres = ring_centres(trace.config.head_dim // 2)
    drawn = (np.stack([x[1::6], y[1::6]], axis=1) - centres) / RING_RADIUS   # each tip, relative to its ring
    expected = pos.split_pairs(trace.layers[1].q_rot[1, m].astype(np.float64))
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(drawn, expected, atol=1e-6)


def test_angle_annotation_names_m_theta_for_the_selected_pair(panel, trace):
    m = trace.n_tokens - 1
    show(panel, trace, query=m)
    page = tab(panel, "positions_rope_pairs")
    page.set_pair(1)
    theta_1 = float(pos.pair_frequencies(trace.config.head_dim, trace.config.rope_theta)[1])
    title = page.big.titleLabel.text
    assert f"= {m} × {theta_1:.4g} = {m * theta_1:.4g} rad" in title


def test_angle_curves_are_wrapped_m_theta_over_the_sentence_and_a_margin(panel, trace):
    show(panel, trace)
    page = tab(panel, "positions_rope_angles")
    cfg = trace.config
    assert len(page.curves) == cfg.head_dim // 2
    x, y = page.curves[2].getData()
    last = trace.n_tokens - 1
    assert x[0] == 0 and last + 2 <= x[-1] <= min(cfg.max_position_embeddings - 1, last + max(2, last // 4))
    assert page.plot.viewRange()[0][1] < x[-1] + 1   # the sentence fills the plot, not a sliver of the context
    turn = x * pos.pair_frequencies(cfg.head_dim, cfg.rope_theta)[2] - y   # whole turns: wrapped (2π at a break)
    np.testing.assert_allclose(turn / (2 * np.pi), np.round(turn / (2 * np.pi)), atol=1e-9)
    assert y.min() >= 0 and y.max() <= 2 * np.pi
    token_x, token_y = page.token_points.getData()   # each token's own angle, on the coloured pairs
    assert set(token_x) == set(range(trace.n_tokens))


def test_the_angle_legend_names_pairs_in_colours_told_apart(panel, trace):
    from gui.rope_angle_plot import highlighted_pairs

    show(panel, trace)
    page = tab(panel, "positions_rope_angles")
    named = [label.text for _, label in page.legend.items]
    shown = highlighted_pairs(trace.config.head_dim // 2)
    assert [text.split(":")[0] for text in named] == [f"pair {i}" for i in shown]
    colours = [lab(page.curves[i].opts["pen"].color().getRgb()[:3]) for i in shown]
    closest = min(np.linalg.norm(a - b) for k, a in enumerate(colours) for b in colours[k + 1:])
    assert closest > 20   # CIE76 ΔE: no two named lines in near-identical colours (viridis neighbours: 8-17)


def lab(rgb) -> np.ndarray:  # [3] sRGB 0-255 -> [3] CIE L*a*b* (D65 white)
    c = np.asarray(rgb, np.float64) / 255
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    t = xyz / np.array([0.9505, 1.0, 1.089])
    f = np.where(t > 0.008856, np.cbrt(t), 7.787 * t + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


# ---------------------------------------------------------------- relative position with real q and k

def test_relative_demo_dots_are_equal_across_shifts_and_match_the_runner(panel, trace):
    m, n = trace.n_tokens - 1, trace.n_tokens // 2
    show(panel, trace, layer=1, head=2, query=m, key=n)
    page = tab(panel, "positions_relative")
    shifts, dots = page.both.getData()
    assert shifts[0] == -n and 0 in shifts
    assert np.ptp(dots) < 1e-5
    _, moved = page.query_only.getData()
    assert np.ptp(moved) > 1e-3
    runner = float(np.dot(trace.layers[1].q_rot[2, m].astype(np.float64), trace.layers[1].k_rot[2, n]))
    assert dots[list(shifts).index(0)] == pytest.approx(runner, abs=1e-4)
    distances, by_distance = page.by_distance.getData()
    assert page.actual_distance.value() == m - n
    assert by_distance[m - n] == pytest.approx(runner, abs=1e-4)
    assert f"= {runner:.6f}." in page.frame.caption.text()


# ---------------------------------------------------------------- selection in and out

def test_following_the_shared_selection_redraws_the_visible_page(panel, trace):
    panel.set_trace(trace)
    panel.tabs.setCurrentIndex(panel.pages.index(tab(panel, "positions_rope_pairs")))
    page = tab(panel, "positions_rope_pairs")
    half = trace.config.head_dim // 2
    for head in range(trace.num_heads):
        panel.set_selection(Selection(layer=1, head=head, query=0))
        q_rot = trace.layers[1].q_rot[head, 0]
        assert drawn_tip(page.after_arrow) == pytest.approx((q_rot[page.pair], q_rot[page.pair + half]), abs=1e-6)
    assert panel.head_spin.value() == trace.num_heads - 1 and panel.query_combo.currentIndex() == 0


def test_hidden_pages_catch_up_before_export(panel, bundle):
    runner = NumpyRunner(bundle)
    first, second = analyse(runner, "The cat sat."), analyse(runner, "模型会把每个词切成更小的片段。")
    show(panel, first)
    panel.set_trace(second)   # only the visible tab redraws now
    panel.figures()
    demo = tab(panel, "positions_relative").demo
    assert demo.query_pos == second.n_tokens - 1


def test_user_choices_ask_through_sigselect_and_programmatic_updates_do_not(panel, trace, qtbot):
    show(panel, trace)
    with qtbot.assertNotEmitted(panel.sigSelect):
        panel.set_selection(Selection(layer=1, head=2))
    with qtbot.waitSignal(panel.sigSelect) as blocker:
        panel.head_spin.setValue(0)
    assert blocker.args == [{"head": 0}]
    with qtbot.waitSignal(panel.sigSelect) as blocker:
        panel.query_combo.activated.emit(1)
    assert blocker.args == [{"query": 1}]
    with qtbot.waitSignal(panel.sigSelect) as blocker:
        panel.key_combo.activated.emit(0)
    assert blocker.args == [{"key": 0}]
    assert Selection().updated(**blocker.args[0]).clamped(2, 4, trace.n_tokens).key == 0  # survives clamping


@pytest.mark.parametrize("corner", [(0.1, 0.1), (0.9, 0.9)])
def test_clicking_a_small_multiple_selects_that_pair(panel, trace, qtbot, corner):
    panel.tabs.setCurrentIndex(panel.pages.index(tab(panel, "positions_rope_pairs")))
    show(panel, trace)
    qtbot.wait(20)
    page = tab(panel, "positions_rope_pairs")
    n_pairs = trace.config.head_dim // 2
    assert page.pair_slider.maximum() == n_pairs - 1
    row, col = pair_cell(3, n_pairs)
    view_point = QPointF(col + corner[0], row + corner[1])    # anywhere inside the pair's cell
    widget_point = page.frame.graphics.mapFromScene(page.small.vb.mapViewToScene(view_point))
    qtbot.mouseClick(page.frame.graphics.viewport(), Qt.MouseButton.LeftButton, pos=widget_point)
    assert page.pair == 3 and page.pair_spin.value() == 3
    xs, ys = page.small_box.getData()
    centre = ring_centres(n_pairs)[3]
    assert xs.min() < centre[0] < xs.max() and ys.min() < centre[1] < ys.max()


def test_a_model_with_another_head_size_rebuilds_the_pair_views(panel, make_bundle):
    wide = analyse(NumpyRunner(make_bundle(hidden_size=64, num_attention_heads=2, num_key_value_heads=2)),
                   "The cat sat on the mat.")
    narrow = analyse(NumpyRunner(make_bundle(hidden_size=32, num_attention_heads=4, num_key_value_heads=4)),
                     "The cat sat on the mat.")
    show(panel, wide)
    page = tab(panel, "positions_rope_pairs")
    page.set_pair(15)
    show(panel, narrow, layer=1, head=3)
    assert page.pair_slider.maximum() == 3 and page.pair == 3
    assert len(page.small_texts) == 4 and len(tab(panel, "positions_rope_angles").curves) == 4
    q_rot = narrow.layers[1].q_rot[3, narrow.n_tokens - 1]
    assert drawn_tip(page.after_arrow) == pytest.approx((q_rot[3], q_rot[7]), abs=1e-6)


def test_a_single_token_sentence_draws_every_page(panel, bundle):
    one = NumpyRunner(bundle).run([5])
    show(panel, one)
    assert tab(panel, "positions_sinusoidal").image.image.shape == (1, one.config.hidden_size)
    demo = tab(panel, "positions_relative").demo
    assert demo.distance == 0 and np.ptp(demo.dot_shift_both) < 1e-5


def test_arrow_segments_start_at_the_origin_and_end_at_the_tip():
    x, y = arrow_segments(np.array([[3.0, 4.0], [-1.0, 0.5]]), np.array([[1.0, 1.0], [0.0, 0.0]]))
    assert len(x) == 12
    assert (x[0], y[0], x[1], y[1]) == (1.0, 1.0, 3.0, 4.0)
    assert (x[7], y[7]) == (-1.0, 0.5)


def test_in_a_small_dock_every_tab_scrolls_to_its_whole_figure_and_nothing_runs_past_the_right_edge(show, trace, qtbot):
    from PySide6.QtWidgets import QScrollArea

    panel = show(PositionsPanel(), 676, 346)   # the dock a 1280×800 screen's default layout gives it
    panel.set_trace(trace)
    for index, page in enumerate(panel.pages):
        panel.tabs.setCurrentIndex(index)
        qtbot.wait(50)
        graphics = page.frame.graphics
        assert graphics.centralWidget.geometry().right() <= graphics.viewport().width() + 1, \
            f"{page.tab_title}: plots run past the right edge"
        widget = graphics
        while widget is not None:   # scroll to the end: the plots' bottom edge must come into view
            if isinstance(widget, QScrollArea):
                widget.verticalScrollBar().setValue(widget.verticalScrollBar().maximum())
            widget = widget.parentWidget()
        assert graphics.visibleRegion().boundingRect().bottom() >= graphics.height() - 2, \
            f"{page.tab_title}: the bottom of its plots cannot be reached"


def test_pair_numbers_show_only_while_a_cell_has_room_for_them(panel, make_bundle, qtbot):
    """In a short dock (1280 × 800) the numbers lay over the rings of the row below: they are hidden then.
    (A one-line caption: a longer one holds the page taller, and the dock scrolls it instead.)"""
    sixteen_pairs = make_bundle(hidden_size=64, num_attention_heads=2, num_key_value_heads=2)   # as shipped
    show(panel, analyse(NumpyRunner(sixteen_pairs), "The cat sat on the mat."))
    page = tab(panel, "positions_rope_pairs")
    panel.tabs.setCurrentIndex(panel.pages.index(page))

    def cell_px() -> float:   # screen pixels per cell of the small multiples, up and down
        return 1 / page.small.vb.viewPixelSize()[1]

    panel.resize(1400, 1000)
    qtbot.waitUntil(lambda: all(text.isVisible() for text in page.small_texts), timeout=5000)
    assert cell_px() > 45   # roomy cells: every pair numbered
    panel.resize(700, 420)   # a dock of a 1280 × 800 window: cells of ~27 px
    qtbot.waitUntil(lambda: cell_px() < 30, timeout=5000)   # a number (~16 px tall) would reach the next ring
    qtbot.waitUntil(lambda: not any(text.isVisible() for text in page.small_texts), timeout=5000)
