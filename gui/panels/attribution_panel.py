"""Direct logit attribution: which component wrote the target token's logit at the selected position.

core.attribution splits the logit into the embedding's, each head's (through its slice of W_O) and
each chosen expert's (times its routing weight) contribution, with the position's final-RMSNorm
scale held fixed so the parts add up to the logit. The bars are sorted, largest first; clicking a
head's bar selects that head everywhere. The target defaults to the model's top token; a second
token turns the bars into contributions to the difference of the two logits.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from core.attribution import HELD_FIXED, Attribution, direct_logit_attribution, part_kind
from core.logit_lens import stage_label
from core.readouts import default_target
from gui import plotting  # noqa: F401  (pyqtgraph's row-major, white-background configuration)
from gui.cell_picking import row_under
from gui.figure_frame import figure_frame
from gui.fill_scroll_area import FillScrollArea
from gui.fonts import ui_font
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked
from gui.token_axis import TokenAxis

NO_TOKEN = -1                       # the spin boxes' "top token" / "no second token"
KIND_COLOURS = {"embed": QColor("#8c8c8c"), "head": QColor("#2c5f8a"), "attn_bias": QColor("#7fa7c9"),
                "expert": QColor("#e07b20"), "mlp": QColor("#e07b20")}
SELECTED_EDGE = QColor(214, 39, 40)
BAR_HEIGHT = 0.75
NAMED_BARS = 40          # bars the chart keeps room to name; past that (a big model) the names are thinned
CHART_CHROME_PX = 60     # the chart's axis and its title
LEGEND = ("<span style='color:#8c8c8c'>■</span> token embedding &nbsp; "
          "<span style='color:#2c5f8a'>■</span> attention head (through its slice of W_O) &nbsp; "
          "<span style='color:#7fa7c9'>■</span> o_proj bias (models that have one) &nbsp; "
          "<span style='color:#e07b20'>■</span> expert (times its routing weight) or dense MLP &nbsp; "
          "<span style='color:#d62728'>□</span> the selected head")


def bar_label(name: str, value: float) -> str:
    """'L1.H2  +0.50', the embedding as the stage label says it ('emb'); an expert the router did not choose
    here contributes nothing and says so."""
    kind = part_kind(name)[0]
    if kind == "expert" and value == 0.0:
        return f"{name}  not routed"
    return f"{stage_label(name) if kind == 'embed' else name}  {value:+.2f}"


class AttributionPanel(Panel):
    title = "Logit attribution"
    object_name = "attribution"
    figure_names = {"attribution_bars": ""}
    fields = ("embed", "head_out", "moe_in", "expert_ids", "expert_weights", "moe_out", "resid_post", "logits")
    empty_text = "Type a sentence to see which heads and experts wrote the predicted token's logit."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attribution: Attribution | None = None
        self.bars: list[tuple[str, float]] = []   # (part, contribution), top row first
        self.set_content(self._build())
        self.refresh()

    # ---------------------------------------------------------------- building (once)
    def _build(self) -> QWidget:
        self.target_box = _token_box("top token", "The token whose logit is split into parts")
        self.versus_box = _token_box("none", "Optional: a second token; the bars then split the difference "
                                             "target logit − this token's logit")
        controls = QHBoxLayout()
        for text, box in (("Target token id:", self.target_box), ("minus token id:", self.versus_box)):
            controls.addWidget(QLabel(text))
            controls.addWidget(box)
        controls.addStretch(1)

        self.header = QLabel()
        self.header.setFont(ui_font(bold=True))
        self.header.setWordWrap(True)
        self.axis = TokenAxis("left")   # row i is the unit cell [i, i+1) (gui.cell_picking)
        self.chart = pg.PlotWidget(axisItems={"left": self.axis})
        plot = self.chart.getPlotItem()
        plot.invertY(True)   # the largest contribution on top
        plot.setMouseEnabled(x=False, y=False)
        plot.hideButtons()
        plot.setLabel("bottom", "contribution to the logit")
        plot.addItem(pg.InfiniteLine(pos=0, angle=90, pen=pg.mkPen("k", width=1)))
        self.bar_item = pg.BarGraphItem(x0=[], y=[], width=[], height=BAR_HEIGHT)
        plot.addItem(self.bar_item)
        self.chart.scene().sigMouseClicked.connect(self._on_chart_clicked)
        self.legend = QLabel(LEGEND)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        self.held_fixed = QLabel(HELD_FIXED)
        self.held_fixed.setWordWrap(True)
        self.figure_box = figure_frame(self.header, self.chart, self.legend, self.held_fixed, stretch=1)

        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(controls)
        layout.addWidget(self.figure_box, 1)
        self.target_box.valueChanged.connect(self.refresh)
        self.versus_box.valueChanged.connect(self.refresh)
        area = FillScrollArea()   # a short dock scrolls to the bars rather than squeezing out their names
        area.setWidget(page)
        return area

    # ---------------------------------------------------------------- drawing
    def clear(self) -> None:
        self.attribution, self.bars = None, []

    def draw(self) -> None:
        trace = self.trace
        with qt_signals_blocked(self.target_box, self.versus_box):
            for box in (self.target_box, self.versus_box):
                box.setMaximum(trace.config.vocab_size - 1)
        position = self.selection.query_index(trace.n_tokens)
        target = self.target_box.value()
        target = default_target(trace, position) if target == NO_TOKEN else target
        versus = None if self.versus_box.value() == NO_TOKEN else self.versus_box.value()
        self.attribution = direct_logit_attribution(trace, position, target, versus)
        self.bars = self.attribution.sorted()
        self.header.setText(self._header_text())
        self._draw_bars()

    def _header_text(self) -> str:
        a, trace = self.attribution, self.trace
        what = f"the logit of “{trace.vocab_label(a.target)}” (id {a.target})"
        if a.versus is not None:
            what = f"{what} minus that of “{trace.vocab_label(a.versus)}” (id {a.versus})"
        return (f"After “{trace.label(a.position)}” (position {a.position}): {what} = {a.logit:.3f}, "
                f"the sum of the {len(self.bars)} bars ({float(np.sum(a.values)):.3f}).")

    def _draw_bars(self) -> None:
        values = np.array([v for _, v in self.bars])
        rows = np.arange(len(self.bars), dtype=float) + 0.5   # the centre of cell [i, i+1)
        kinds = [part_kind(name) for name, _ in self.bars]
        chosen = ("head", self.selection.layer, self.selection.head)
        self.bar_item.setOpts(x0=np.minimum(values, 0.0), y=rows, width=np.abs(values), height=BAR_HEIGHT,
                              brushes=[KIND_COLOURS[kind[0]] for kind in kinds],
                              pens=[pg.mkPen(SELECTED_EDGE, width=2.5) if kind == chosen else pg.mkPen(None)
                                    for kind in kinds])
        self.axis.set_labels([bar_label(name, value) for name, value in self.bars], columns=None)
        # every bar keeps its name (the axis thins names on rows under a legible line), up to a screenful of bars
        self.chart.setMinimumHeight(CHART_CHROME_PX + round(self.axis.legible_pitch() + 1) * min(len(rows), NAMED_BARS))
        low, high = min(0.0, float(values.min())), max(0.0, float(values.max()))
        pad = 0.04 * max(high - low, 1e-9)
        self.chart.getPlotItem().setRange(xRange=(low - pad, high + pad), yRange=(0, len(rows)),
                                          padding=0)

    # ---------------------------------------------------------------- user input
    def bar_at(self, scene_pos) -> str | None:
        """The part whose row is under a scene point (anywhere across the plot, labels included)."""
        row = row_under(self.chart.getPlotItem(), scene_pos, len(self.bars))
        return None if row is None else self.bars[row][0]

    def _on_chart_clicked(self, event) -> None:
        name = self.bar_at(event.scenePos()) if event.button() == Qt.MouseButton.LeftButton else None
        if name is None:
            return
        kind, layer, index = part_kind(name)
        if kind == "head":
            self.sigSelect.emit({"layer": layer, "head": index})
        elif kind == "expert":
            self.sigSelect.emit({"layer": layer})

    # ---------------------------------------------------------------- export
    def figures(self) -> list[Figure]:
        if self.attribution is None:
            return []
        return [Figure("attribution_bars", self.figure_box, table=self.attribution.csv,
                       extra_tables={"attribution_total": self.attribution.total_csv})]


def _token_box(special: str, tip: str) -> QSpinBox:
    box = QSpinBox()
    box.setRange(NO_TOKEN, 0)
    box.setSpecialValueText(special)
    box.setValue(NO_TOKEN)
    box.setToolTip(tip)
    return box
