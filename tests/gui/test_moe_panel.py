"""The MoE routing panel draws the Trace's routing exactly, and runs its what-if only through signals."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from core import routing
from core.runners import NumpyRunner
from core.session import analyse
from gui.panels.moe_panel import WHATIF_TAG, MoePanel
from gui.router_heatmaps import ROW_LABEL_COLUMNS
from gui.text_fit import elide
from gui.selection import Selection
from tests.gui.qt_helpers import hover

ENGLISH = "The cat sat on the mat and looked at the door."
CHINESE = "我想查询一下我的订单状态。"


@pytest.fixture(scope="module")
def runner(bundle):
    return NumpyRunner(bundle)


@pytest.fixture(scope="module", params=[ENGLISH, CHINESE], ids=["english", "chinese"])
def trace(request, runner):
    return analyse(runner, request.param)


@pytest.fixture
def panel(show):
    return show(MoePanel(), 1200, 800)


def path_cells(item) -> set[tuple[int, int]]:
    """(row, col) of every unit square in an outline item's path, as drawn."""
    cells = set()
    for polygon in item.path().toSubpathPolygons():
        rect = polygon.boundingRect()
        cells.add((round(rect.top()), round(rect.left())))
    return cells


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def figure(panel: MoePanel, name: str):
    return next(f for f in panel.figures() if f.name == name)


# ---------------------------------------------------------------- empty state and registration


def test_no_trace_shows_a_message_and_offers_no_figures(panel):
    panel.set_trace(None)
    assert panel.showing_empty_state()
    assert "sentence" in panel.empty.text()
    assert panel.figures() == []


def test_panel_is_registered_with_a_stable_name():
    from gui.panels.registry import panel_classes

    assert MoePanel in panel_classes()
    assert (MoePanel.title, MoePanel.object_name) == ("MoE routing", "moe")


def test_caption_carries_the_seed_and_both_conventions(panel, trace):
    panel.set_trace(trace)
    caption = panel.caption.toolTip()
    assert "trainable classifier" in caption and "路由规则是一层分类网络" in caption
    explanation = panel.router.explanation.text()
    assert "Hugging Face: softmax over all experts → keep top-k → renormalise to sum 1" in explanation
    assert "mistral-inference: top-k logits → softmax over the k" in explanation


# ---------------------------------------------------------------- the heatmaps


@pytest.mark.parametrize("layer", [0, 1])
def test_marks_match_expert_ids_exactly(panel, trace, layer):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=layer))
    expected = {(t, int(e)) for t, row in enumerate(trace.layers[layer].expert_ids) for e in row}
    assert panel.router.marked == expected
    for outer, inner in panel.router.chosen_outlines:
        assert path_cells(outer) == expected
        assert path_cells(inner) == expected


@pytest.mark.parametrize("layer", [0, 1])
def test_shown_weights_are_the_expert_weights_and_nothing_else(panel, trace, layer):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=layer))
    lt = trace.layers[layer]
    texts = panel.router.weights_text.texts()
    expected = {(t, int(lt.expert_ids[t, s])): f"{lt.expert_weights[t, s]:.2f}"
                for t in range(trace.n_tokens) for s in range(lt.expert_ids.shape[1])}
    assert texts == expected
    for (t, e), _ in expected.items():
        slot = list(lt.expert_ids[t]).index(e)
        assert panel.router.weights_text.values[t, e] == pytest.approx(float(lt.expert_weights[t, slot]))
    assert np.count_nonzero(panel.router.weights_text.values) == len(expected)


def test_probability_cells_show_the_full_softmax(panel, trace):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=1))
    probs = trace.layers[1].router_probs
    texts = panel.router.probs_text.texts()
    assert len(texts) == probs.size
    assert all(texts[(t, e)] == f"{probs[t, e]:.2f}" for t in range(probs.shape[0]) for e in range(probs.shape[1]))


def test_token_labels_run_down_and_experts_across(panel, trace):
    panel.set_trace(trace)
    left = panel.router.probs_plot.getAxis("left").labels()
    bottom = [label for _, label in panel.router.probs_plot.getAxis("bottom")._tickLevels[0]]
    assert left == [elide(f"{i} {label}", ROW_LABEL_COLUMNS) for i, label in enumerate(trace.labels())]
    assert bottom == [str(e) for e in range(trace.config.num_local_experts)]
    assert panel.router.probs_plot.getAxis("bottom").labelText == "expert"


def test_selected_token_row_is_outlined(panel, trace):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=0, query=2))
    rect = panel.router.selected_rows[0].path().boundingRect()
    assert (rect.top(), rect.height(), rect.width()) == (2, 1, trace.config.num_local_experts)


# ---------------------------------------------------------------- expert load


def test_load_bars_are_shares_that_sum_to_one(panel, trace):
    panel.set_trace(trace)
    for layer in range(trace.num_layers):
        panel.set_selection(Selection(layer=layer))
        lt = trace.layers[layer]
        share = np.asarray(panel.load.share_bars.opts["height"])
        mean_prob = np.asarray(panel.load.prob_bars.opts["height"])
        assert share.sum() == pytest.approx(1.0)
        counts = np.bincount(lt.expert_ids.reshape(-1), minlength=trace.config.num_local_experts)
        np.testing.assert_allclose(share, counts / lt.expert_ids.size)
        np.testing.assert_allclose(mean_prob, lt.router_probs.mean(axis=0), rtol=1e-5)


def test_token_list_names_every_expert_and_its_tokens(panel, trace):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=0))
    text = panel.load.tokens.toPlainText()
    lt = trace.layers[0]
    for e in range(trace.config.num_local_experts):
        assert f"expert {e} ({np.count_nonzero(lt.expert_ids == e)})" in text
    for t in range(trace.n_tokens):
        assert trace.label(t) in text
    rows = read_csv(figure(panel, "moe_expert_load").extra_tables["moe_expert_tokens"]())
    assert len(rows) == lt.expert_ids.size
    for row in rows:
        t, s = int(row["position"]), int(row["slot"])
        assert int(row["expert"]) == lt.expert_ids[t, s]
        assert float(row["weight"]) == pytest.approx(float(lt.expert_weights[t, s]))


# ---------------------------------------------------------------- layer switch and clicks


def test_layer_button_asks_for_the_layer(panel, trace, qtbot):
    panel.set_trace(trace)
    with qtbot.waitSignal(panel.sigSelect) as blocker:
        qtbot.mouseClick(panel.layer_buttons.button(1), Qt.MouseButton.LeftButton)
    assert blocker.args == [{"layer": 1}]


def test_clicking_a_heatmap_row_selects_that_token(panel, trace, qtbot):
    panel.set_trace(trace)
    qtbot.wait(50)
    row = 2
    scene_point = panel.router.probs_plot.vb.mapViewToScene(QPointF(1.5, row + 0.5))
    widget_point = panel.router.plots.mapFromScene(scene_point)
    with qtbot.waitSignal(panel.sigSelect) as blocker:
        qtbot.mouseClick(panel.router.plots.viewport(), Qt.MouseButton.LeftButton, pos=widget_point)
    assert blocker.args == [{"query": row}]


# ---------------------------------------------------------------- forced routing


def test_forced_routing_in_the_current_trace_is_visible(panel, runner, trace):
    layer, position, expert = 1, 1, 3
    override = routing.force_expert(trace.expert_override, trace.layers[layer].router_logits[position],
                                    layer, position, expert)
    forced_trace = analyse(runner, trace.text, expert_override=override)
    panel.set_trace(forced_trace)
    panel.set_selection(Selection(layer=layer))
    assert panel.banner.isVisibleTo(panel)
    assert f"layer {layer}" in panel.banner.text() and trace.label(position) in panel.banner.text()
    forced_cells = {(position, int(e)) for e in override[layer, position]}
    assert panel.router.forced == forced_cells
    assert all(path_cells(item) == forced_cells for item in panel.router.forced_outlines)
    rows = read_csv(figure(panel, "moe_router_probs").table())
    assert rows[position][f"forced_expert_{expert}"] == "1"
    panel.set_trace(trace)
    assert not panel.banner.isVisibleTo(panel)
    assert panel.router.forced == set()


def test_whatif_emits_the_core_override_and_shows_before_and_after(panel, runner, trace, qtbot):
    layer, position = 1, 2
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=layer, query=position))
    lt = trace.layers[layer]
    expert = next(e for e in range(trace.config.num_local_experts) if e not in lt.expert_ids[position])
    panel.whatif.expert_box.setCurrentIndex(expert)
    assert "moe_whatif" not in [f.name for f in panel.figures()]
    with qtbot.waitSignal(panel.sigRequestVariant) as blocker:
        qtbot.mouseClick(panel.whatif.run_button, Qt.MouseButton.LeftButton)
    tag, request = blocker.args
    assert tag == WHATIF_TAG
    expected = routing.force_expert(trace.expert_override, lt.router_logits[position], layer, position, expert)
    np.testing.assert_array_equal(request["expert_override"], expected)
    assert {(int(l), int(t)) for l, t, _ in np.argwhere(request["expert_override"] >= 0)} == {(layer, position)}

    after = analyse(runner, trace.text, expert_override=request["expert_override"])
    panel.set_variant(WHATIF_TAG, after)
    changes = routing.candidate_changes(trace.next_token_probs(position), after.next_token_probs(position), n=5)
    np.testing.assert_allclose(panel.whatif.before_bars.opts["width"], [c.before for c in changes])
    np.testing.assert_allclose(panel.whatif.after_bars.opts["width"], [c.after for c in changes])
    labels = [label for _, label in panel.whatif.plot.getAxis("left")._tickLevels[0]]
    assert labels == [f"{elide(trace.vocab_label(c.token_id), 16)}  {c.before:.3f} → {c.after:.3f}" for c in changes]
    status = panel.whatif.status.text()
    assert f"layer {layer}" in status and f"expert {expert}" in status and trace.label(position) in status

    from gui import export

    files = export.figure_files(figure(panel, "moe_whatif"), ["png", "svg", "csv"])
    assert sorted(files) == ["moe_whatif.csv", "moe_whatif.png", "moe_whatif.svg"]
    rows = read_csv(figure(panel, "moe_whatif").table())
    assert [int(r["candidate_id"]) for r in rows] == [c.token_id for c in changes]
    assert all(r["forced_layer"] == str(layer) and r["forced_position"] == str(position)
               and r["forced_expert"] == str(expert) for r in rows)
    assert float(rows[0]["prob_after"]) == pytest.approx(changes[0].after)


def test_whatif_result_is_dropped_when_the_sentence_changes(panel, runner, trace, qtbot):
    panel.set_trace(trace)
    with qtbot.waitSignal(panel.sigRequestVariant) as blocker:
        panel.request_whatif()
    panel.set_variant(WHATIF_TAG, analyse(runner, trace.text, expert_override=blocker.args[1]["expert_override"]))
    assert "moe_whatif" in [f.name for f in panel.figures()]
    panel.set_trace(analyse(runner, trace.text + " 1"))
    assert "moe_whatif" not in [f.name for f in panel.figures()]


def test_other_variants_and_failures_do_not_pretend_to_be_a_result(panel, runner, trace, qtbot):
    panel.set_trace(trace)
    panel.set_variant(WHATIF_TAG, trace)  # nothing was asked: ignored
    assert panel.result is None
    with qtbot.waitSignal(panel.sigRequestVariant):
        panel.request_whatif()
    panel.set_variant("attention_ablation", trace)
    assert panel.result is None and panel.pending is not None
    panel.set_variant(WHATIF_TAG, None)
    assert panel.result is None and "failed" in panel.whatif.status.text()


# ---------------------------------------------------------------- exported numbers


def test_router_csv_holds_probs_chosen_flags_and_weights(panel, trace):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=1))
    lt = trace.layers[1]
    rows = read_csv(figure(panel, "moe_router_probs").table())
    assert [r["token"] for r in rows] == trace.labels()
    weights = routing.weight_matrix(lt.expert_ids, lt.expert_weights, trace.config.num_local_experts)
    for t, row in enumerate(rows):
        for e in range(trace.config.num_local_experts):
            assert float(row[f"prob_expert_{e}"]) == pytest.approx(float(lt.router_probs[t, e]))
            assert row[f"chosen_expert_{e}"] == str(int(e in lt.expert_ids[t]))
            assert float(row[f"weight_expert_{e}"]) == pytest.approx(weights[t, e])


def test_load_csv_shares_sum_to_one(panel, trace):
    panel.set_trace(trace)
    rows = read_csv(figure(panel, "moe_expert_load").table())
    assert sum(float(r["share_of_topk_slots"]) for r in rows) == pytest.approx(1.0)
    assert sum(int(r["slots"]) for r in rows) == trace.layers[0].expert_ids.size


def test_only_this_expert_mode_sends_every_slot_to_it(panel, trace, qtbot):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=0, query=1))
    panel.whatif.expert_box.setCurrentIndex(3)
    panel.whatif.mode_box.setCurrentIndex(1)
    with qtbot.waitSignal(panel.sigRequestVariant) as blocker:
        panel.request_whatif()
    override = blocker.args[1]["expert_override"]
    assert override[0, 1].tolist() == [3] * trace.config.num_experts_per_tok
    assert np.count_nonzero(override >= 0) == trace.config.num_experts_per_tok


def test_long_sentence_opens_on_a_window_that_follows_the_selected_token(panel, runner):
    from core.sample_text import sample_sentences
    from gui.router_heatmaps import WINDOW_ROWS

    trace = analyse(runner, " ".join(sample_sentences(40, seed=2)))
    assert trace.n_tokens > WINDOW_ROWS
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=0, query=trace.n_tokens - 2))
    first, last = panel.router.visible_rows()
    assert first <= trace.n_tokens - 2 < last and last - first <= WINDOW_ROWS + 1
    low, high = panel.router.probs_plot.vb.viewRange()[1]
    ((_, rows),) = panel.router.probs_plot.getAxis("left").tickValues(low, high, panel.router.probs_plot.vb.height())
    assert rows and all(first <= int(y) < last for y in rows)
    assert f"of {trace.n_tokens}" in panel.router.probs_plot.getAxis("left").labelText
    assert panel.router.marked == {(t, int(e)) for t, row in enumerate(trace.layers[0].expert_ids) for e in row}


def test_an_answer_to_an_earlier_click_is_not_shown_as_the_latest(panel, runner, trace, qtbot):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=1, query=0))
    requests = []
    panel.sigRequestVariant.connect(lambda tag, payload: requests.append(payload["expert_override"]))
    for expert in (0, 1):
        panel.whatif.expert_box.setCurrentIndex(expert)
        panel.request_whatif()
    panel.set_variant(WHATIF_TAG, analyse(runner, trace.text, expert_override=requests[0]))
    assert panel.result is None and panel.pending is not None
    panel.set_variant(WHATIF_TAG, analyse(runner, trace.text, expert_override=requests[1]))
    assert panel.result is not None and panel.result.request.expert == 1


def test_hovering_a_cell_gives_its_numbers_and_highlights_the_token(panel, trace, qtbot):
    panel.set_trace(trace)
    panel.set_selection(Selection(layer=0))
    qtbot.wait(50)
    row, expert = 1, int(trace.layers[0].expert_ids[1, 0])
    scene_point = panel.router.weights_plot.vb.mapViewToScene(QPointF(expert + 0.5, row + 0.5))
    with qtbot.waitSignal(panel.sigHoverText) as blocker:
        hover(panel.router.plots.viewport(), panel.router.plots.mapFromScene(scene_point))
    token = trace.tokenization.tokens[row]
    assert blocker.args == [token.char_start, token.char_end]
    text = panel.hover.text()
    assert f"expert {expert}" in text and f"{trace.layers[0].router_probs[row, expert]:.4f}" in text
    assert f"{trace.layers[0].expert_weights[row, 0]:.4f}" in text
