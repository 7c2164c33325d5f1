"""The readout panels: head roles, logit lens, logit attribution and parity show core's numbers,
follow and make the shared selection, ask the controller for what needs a model run, and export."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from core.attribution import HELD_FIXED, direct_logit_attribution
from core.head_roles import ROLE_NAMES, probe_roles, sentence_roles
from core.logit_lens import logit_lens
from core.parity_report import parity_report
from core.runners import NumpyRunner, OnnxRunner
from core.session import analyse
from gui import export
from gui.heatmap import TOKEN_CELL_COLUMNS
from gui.main_window import MainWindow
from gui.panels.attribution_panel import AttributionPanel
from gui.panels.head_roles_panel import HeadRolesPanel
from gui.panels.logit_lens_panel import LogitLensPanel
from gui.panels.parity_panel import NEED_BOTH, ParityPanel
from gui.selection import Selection
from gui.text_fit import elide

REPEATED = "The cat sat on the mat. The cat sat on the mat."
CHINESE = "订单成交，订单取消，查询订单。"
WAIT_MS = 20000


@pytest.fixture(scope="module")
def trace(analysed):
    return analysed(REPEATED)


@pytest.fixture(scope="module")
def onnx_trace(bundle):
    return analyse(OnnxRunner(bundle), REPEATED)


def csv_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def png_colours(widget) -> int:
    from PySide6.QtGui import QImage
    image = QImage.fromData(export.png_bytes(widget), "PNG").convertToFormat(QImage.Format.Format_RGB32)
    assert not image.isNull()
    return len(np.unique(np.frombuffer(image.constBits(), np.uint32, count=image.width() * image.height())))


def click_scene(view, scene_pos: QPointF, qtbot) -> None:
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.mapFromScene(scene_pos))


# ---------------------------------------------------------------- head roles

def table_cell(panel: HeadRolesPanel, layer: int, head: int, role: str | None, source: str | None):
    for row in range(panel.table.rowCount()):
        for column in range(panel.table.columnCount()):
            item = panel.table.item(row, column)
            if tuple(item.data(Qt.ItemDataRole.UserRole)) == (layer, head, role, source):
                return row, column, item
    raise AssertionError(f"no cell for {layer, head, role, source}")


def test_head_roles_table_shows_core_scores_and_asks_for_the_probe_once_per_bundle(qtbot, show, trace, bundle):
    panel = show(HeadRolesPanel())
    with qtbot.waitSignal(panel.sigRequestProbe, timeout=1000):
        panel.set_trace(trace)
    expected = sentence_roles(trace).scores
    assert panel.table.rowCount() == trace.num_layers * trace.num_heads
    for (layer, head, r), score in np.ndenumerate(expected):
        _, _, item = table_cell(panel, layer, head, ROLE_NAMES[r], "sentence")
        assert item.value == pytest.approx(score, nan_ok=True)
        assert table_cell(panel, layer, head, ROLE_NAMES[r], "probe")[2].text() == "…"   # not run yet

    probe = probe_roles(NumpyRunner(bundle))
    panel.set_probe(probe)
    _, _, item = table_cell(panel, 1, 0, "induction", "probe")
    assert item.value == pytest.approx(probe.score(1, 0, "induction"))
    requests = []
    panel.sigRequestProbe.connect(lambda: requests.append(1))
    panel.set_trace(analyse(NumpyRunner(bundle), CHINESE))   # the same bundle: the probe stands
    assert requests == [] and panel.probe is probe
    rows = csv_rows(panel.table_csv())
    assert float(rows[4]["induction_probe"]) == pytest.approx(probe.score(1, 0, "induction"))


def test_sorting_a_role_column_orders_the_heads_by_that_score(show, trace):
    panel = show(HeadRolesPanel())
    panel.set_trace(trace)
    _, column, _ = table_cell(panel, 0, 0, "previous_token", "sentence")
    panel.table.sortItems(column, Qt.SortOrder.DescendingOrder)
    shown = [panel.table.item(row, column).value for row in range(panel.table.rowCount())]
    assert shown == sorted(shown, reverse=True)
    top = panel.table.item(0, 0).data(Qt.ItemDataRole.UserRole)[:2]
    best = sentence_roles(trace).best_heads("previous_token", 1)[0]
    assert tuple(top) == best[:2]


def test_clicking_a_role_cell_selects_the_head_and_outlines_its_cells(qtbot, show, trace):
    panel = show(HeadRolesPanel())
    panel.set_trace(trace)
    row, column, _ = table_cell(panel, 1, 2, "induction", "sentence")
    rect = panel.table.visualRect(panel.table.model().index(row, column))
    with qtbot.waitSignal(panel.sigSelect, timeout=1000) as spy:
        qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert spy.args[0] == {"layer": 1, "head": 2}
    panel.set_selection(Selection(layer=1, head=2))   # as the controller answers
    evidence = sentence_roles(trace).evidence["induction"]
    outlined = panel.evidence_outline.path().toSubpathPolygons()
    assert len(outlined) == len(evidence.queries) > 0
    corners = {(round(p.boundingRect().x()), round(p.boundingRect().y())) for p in outlined}
    assert corners == set(zip(evidence.keys.tolist(), evidence.queries.tolist()))   # (key = x, query = y)
    assert "L1.H2" in panel.evidence_title.text() and "induction" in panel.evidence_title.text()
    cells = csv_rows(panel.evidence_csv())
    assert len(cells) == len(evidence.queries)
    attn = trace.layers[1].attn[2]
    assert float(cells[0]["attention"]) == pytest.approx(attn[evidence.queries[0], evidence.keys[0]])


def test_an_undefined_role_says_why(show, bundle):
    panel = show(HeadRolesPanel())
    panel.set_trace(analyse(NumpyRunner(bundle), "abc"))
    assert not sentence_roles(panel.trace).evidence["induction"].defined, "the sentence must not repeat a token"
    panel.role = "induction"
    panel.refresh()
    assert "undefined" in panel.evidence_title.text()
    assert table_cell(panel, 0, 0, "induction", "sentence")[2].text() == "—"


# ---------------------------------------------------------------- logit lens

def test_logit_lens_heatmap_labels_each_stage_top_token_and_the_table_follows_the_position(show, trace):
    panel = show(LogitLensPanel())
    panel.set_trace(trace)
    lens = logit_lens(trace)
    top = lens.probs.argmax(axis=-1)
    assert panel.cell_labels.labels == [[elide(trace.vocab_label(int(i)), TOKEN_CELL_COLUMNS) for i in row] for row in top]
    np.testing.assert_allclose(panel.cell_labels.values, lens.probs.max(axis=-1))
    last_stage = [r for r in csv_rows(panel.heatmap_csv()) if r["stage"] == lens.stage_names[-1]]
    assert [int(r["top_id"]) for r in last_stage] == trace.logits.argmax(axis=-1).tolist()

    panel.set_selection(Selection(query=4))
    ids, _ = lens.top_k(4)
    assert panel.table.rowCount() == len(lens.stage_names)
    assert panel.table.item(0, 1).text().startswith(trace.vocab_label(int(ids[0, 0])))
    assert panel.target == int(trace.logits[4].argmax())     # default: the model's own top token
    panel.target_box.setValue(7)
    ranks, probs = lens.target_ranks(4, 7)
    assert [int(panel.table.item(s, 6).text()) for s in range(len(ranks))] == ranks.tolist()
    assert [int(r["rank"]) for r in csv_rows(panel.target_csv())] == ranks.tolist()


def test_clicking_a_logit_lens_column_selects_that_position(qtbot, show, trace):
    panel = show(LogitLensPanel())
    panel.set_trace(trace)
    with qtbot.waitSignal(panel.sigSelect, timeout=1000) as spy:
        click_scene(panel.view, panel.heatmap.cell_centre(2, 5), qtbot)
    assert spy.args[0] == {"query": 5}


# ---------------------------------------------------------------- attribution

def test_attribution_bars_are_cores_sorted_and_add_up_to_the_logit(show, trace):
    panel = show(AttributionPanel())
    panel.set_trace(trace)
    panel.set_selection(Selection(query=6))
    target = int(trace.logits[6].argmax())
    expected = direct_logit_attribution(trace, 6, target)
    assert panel.bars == expected.sorted()
    values = [v for _, v in panel.bars]
    assert values == sorted(values, reverse=True)
    assert sum(values) == pytest.approx(float(trace.logits[6, target]), abs=1e-4)
    assert panel.held_fixed.text() == HELD_FIXED
    total = csv_rows(panel.attribution.total_csv())[0]
    assert float(total["sum_of_parts"]) == pytest.approx(float(total["logit"]), abs=1e-4)

    panel.versus_box.setValue(3)
    difference = direct_logit_attribution(trace, 6, target, 3)
    assert panel.bars == difference.sorted()
    assert "minus" in panel.header.text()


def test_clicking_a_head_bar_selects_that_head(qtbot, show, trace):
    panel = show(AttributionPanel())
    panel.set_trace(trace)
    row = next(i for i, (name, _) in enumerate(panel.bars) if name == "L1.H3")
    plot = panel.chart.getPlotItem()
    for inside in (0.1, 0.5, 0.9):   # bar i is the cell [i, i+1), picked like every other cell (gui.cell_picking)
        scene = plot.vb.mapViewToScene(QPointF(0.0, row + inside))
        assert panel.bar_at(scene) == "L1.H3"
        with qtbot.waitSignal(panel.sigSelect, timeout=1000) as spy:
            click_scene(panel.chart, scene, qtbot)
        assert spy.args[0] == {"layer": 1, "head": 3}
    assert panel.bar_at(plot.vb.mapViewToScene(QPointF(0.0, len(panel.bars) + 0.5))) is None


# ---------------------------------------------------------------- parity

def test_parity_without_the_other_backend_tells_the_user_to_pick_both(show, trace, bundle):
    panel = show(ParityPanel())
    panel.set_trace(trace)
    assert panel.need_both.isVisible() and not panel.fields_box.isVisible()
    assert "Both backends" in panel.need_both.text() == NEED_BOTH
    assert panel.figures() == []
    panel.set_reference_trace(analyse(OnnxRunner(bundle), CHINESE))   # another sentence: nothing to compare
    panel.set_trace(trace)
    assert panel.need_both.isVisible()


def test_parity_table_colours_each_field_and_the_heatmap_shows_the_clicked_one(qtbot, show, trace, onnx_trace):
    panel = show(ParityPanel(), height=1200)
    panel.set_reference_trace(onnx_trace)
    panel.set_trace(trace)
    assert not panel.need_both.isVisible()
    expected = parity_report(trace, onnx_trace)
    assert [r.field for r in panel.rows] == [r.field for r in expected]
    worst = max(expected, key=lambda r: r.ratio)
    assert panel.field == worst.field and worst.location() in panel.worst.text()
    items = [panel.table.item(r, c) for r in range(panel.table.rowCount())
             for c in range(1, panel.table.columnCount()) if panel.table.item(r, c) is not None]
    assert sorted(i.data(Qt.ItemDataRole.UserRole) for i in items) == sorted(r.field for r in expected)

    item = next(i for i in items if i.data(Qt.ItemDataRole.UserRole) == "logits")
    rect = panel.table.visualItemRect(item)
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert panel.field == "logits" and "logits" in panel.diff_title.text()
    assert panel.diff_map.image.image.shape[:2] == trace.logits.shape
    cells = csv_rows(panel.diff_csv())
    assert len(cells) == trace.logits.size
    assert max(float(c["abs_diff"]) for c in cells) == pytest.approx(
        float(np.abs(trace.logits.astype(np.float64) - onnx_trace.logits).max()))
    assert png_colours(panel.fields_box) > 1 and png_colours(panel.diff_box) > 1


# ---------------------------------------------------------------- through the main window

@pytest.fixture()
def window(make_window):
    return make_window("both")


def show_dock(window: MainWindow, name: str):
    window.docks[name].raise_()
    window.bring_all_up_to_date()
    return window.panel(name)


def test_main_window_gives_the_readout_panels_both_traces_the_probe_and_their_clicks(qtbot, window, bundle):
    window.sentence_bar.setText(REPEATED)
    qtbot.waitUntil(lambda: window.controller.trace is not None and not window.controller.busy(), timeout=WAIT_MS)

    parity = show_dock(window, "parity")
    qtbot.waitUntil(lambda: bool(parity.rows), timeout=WAIT_MS)
    assert parity.reference.backend == "numpy" and parity.trace.backend == "onnx"
    assert max(r.max_abs for r in parity.rows) == pytest.approx(window.controller.parity)

    roles = show_dock(window, "head_roles")
    qtbot.waitUntil(lambda: roles.probe is not None, timeout=WAIT_MS)
    np.testing.assert_allclose(roles.probe.scores, probe_roles(OnnxRunner(bundle)).scores, atol=1e-5)

    row, column, _ = table_cell(roles, 0, 3, "self", "sentence")
    rect = roles.table.visualRect(roles.table.model().index(row, column))
    qtbot.mouseClick(roles.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert (window.controller.selection.layer, window.controller.selection.head) == (0, 3)
    attention = show_dock(window, "attention")
    assert (attention.selection.layer, attention.selection.head) == (0, 3)

    window.set_backend("onnx")   # one backend: the parity panel says what to pick
    qtbot.waitUntil(lambda: not window.controller.busy() and window.controller.parity is None, timeout=WAIT_MS)
    parity = show_dock(window, "parity")
    assert parity.need_both.isVisible()


def test_hovering_a_logit_lens_cell_names_its_top_token(show, trace):
    panel = show(LogitLensPanel())
    panel.set_trace(trace)
    panel.heatmap.sigCellHovered.emit((len(panel.lens.stage_names) - 1, 3))
    top = int(trace.logits[3].argmax())
    assert f"“{trace.vocab_label(top)}”" in panel.view.toolTip() and "position 3" in panel.view.toolTip()
    panel.heatmap.sigCellHovered.emit(None)
    assert panel.view.toolTip() == ""


def test_clicking_a_top_five_token_makes_it_the_target(qtbot, show, trace):
    panel = show(LogitLensPanel(), height=1000)
    panel.set_trace(trace)
    ids, _ = panel.lens.top_k(panel.position)
    rect = panel.table.visualRect(panel.table.model().index(1, 3))   # stage 1, its third most likely token
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert panel.target == int(ids[1, 2])
    ranks, _ = panel.lens.target_ranks(panel.position, panel.target)
    assert ranks[1] == 3 and int(panel.table.item(1, 6).text()) == 3


def test_headless_export_scores_the_probe_as_the_app_does(bundle, tmp_path):
    from gui.headless import export_sentence

    written = export_sentence(REPEATED, tmp_path, model=str(bundle.path), formats="csv", backend="numpy")
    assert tmp_path / "head_roles_table.csv" in written
    rows = csv_rows((tmp_path / "head_roles_table.csv").read_text(encoding="utf-8"))
    probe = probe_roles(NumpyRunner(bundle))
    assert [float(r["induction_probe"]) for r in rows] == pytest.approx(probe.scores[..., -1].ravel().tolist())


def test_attribution_in_a_short_dock_names_every_bar_and_scrolls_instead(show, trace, qtbot):
    panel = show(AttributionPanel(), 466, 346)   # the dock a 1280×800 screen's default layout gives it
    panel.set_trace(trace)
    qtbot.wait(50)
    plot = panel.chart.getPlotItem()
    low, high = plot.vb.viewRange()[1]
    ((step, rows),) = panel.axis.tickValues(low, high, plot.vb.height())
    assert step == 1 and len(rows) == len(panel.bars), "bars left unnamed"


def test_attribution_on_a_dense_model_with_an_o_proj_bias_draws_its_mlp_and_bias_bars(show, make_bundle):
    """A dense model's parts are 'L0.MLP' and 'L0.attn_bias': drawn, coloured, clickable and in the CSV."""
    from core.runners import NumpyRunner
    from core.session import analyse

    dense = make_bundle(seed=2, architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0,
                        qkv_bias=True, o_bias=True)   # Llama attention_bias: both
    trace = analyse(NumpyRunner(dense), "The cat sat on the mat.")
    panel = show(AttributionPanel())
    panel.set_trace(trace)
    names = {name for name, _ in panel.bars}
    assert {"L0.MLP", "L0.attn_bias"} <= names
    rows = csv_rows(panel.attribution.csv())
    kinds = {row["part"]: (row["kind"], row["layer"], row["index"]) for row in rows}
    assert kinds["L1.MLP"] == ("mlp", "1", "") and kinds["L0.attn_bias"] == ("attn_bias", "0", "")
    assert sum(float(row["contribution"]) for row in rows) == pytest.approx(
        float(trace.logits[-1].max()), abs=1e-4)
