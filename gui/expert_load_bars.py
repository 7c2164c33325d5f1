"""How busy each expert of one MoE layer is, the tokens each one got, and a switch per expert.

Bars per expert (share of the top-k slots, mean router probability) drawn from a
core.routing_view.LayerRouting. The switches above them say which experts are on in this layer;
clicking one asks (sigExpertSwitched) to switch that expert off or on — the panel turns that into
the Interventions in force, so the switch always shows what the run drawn had.
Many experts (32, 64): the switches fill as many columns as the width holds and wrap, the numbers
under the bars are thinned to the room a number has, and hovering a bar gives its expert's numbers.
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QPushButton, QTextBrowser, QVBoxLayout, QWidget

from core.routing_view import ABLATION_RULE, LayerRouting, expert_ticks
from gui.fonts import ui_font
from gui.qt_signals import qt_signals_blocked

LOAD_LEGEND = ("<span style='color:#440154'>■</span> share of top-k slots<br>"
               "<span style='color:#35b779'>■</span> mean router probability<br>"
               "<span style='color:#787878'>‒ ‒</span> even split")
MAX_LISTED_TOKENS = 24     # per expert in the list; laying out hundreds costs a repaint
SWITCH_STYLE = ("QPushButton { padding: 2px 8px; border: 1px solid #777; border-radius: 3px; }"
                "QPushButton:checked { background: #35b779; color: black; }"      # on: the load bars' green
                "QPushButton:!checked { background: #e6e6e6; color: #777; }")     # off: grey, and says "off"


class ExpertLoadBars(QWidget):
    sigExpertSwitched = Signal(int, int, bool)    # (layer, expert, on)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.switches: list[QPushButton] = []
        self.switches_per_row = 0          # as many as the width holds (_wrap_switches)
        self.switch_row = QHBoxLayout()
        self.switch_label = QLabel("Experts:")
        self.switch_row.addWidget(self.switch_label, 0, Qt.AlignmentFlag.AlignTop)
        self.switch_grid = QGridLayout()   # wrapped rows: 8, 32 or 64 experts keep readable buttons
        self.switch_grid.setSpacing(2)
        self.switch_row.addLayout(self.switch_grid)
        self.switch_row.addStretch(1)
        self.rule = QLabel(wordWrap=True)
        self.message = QLabel(wordWrap=True)
        self.message.setObjectName("expert_switch_message")
        self.message.setStyleSheet("color: #b00;")
        self.message.hide()
        self.plots = pg.GraphicsLayoutWidget()
        self.title = self.plots.addLabel("", row=0, col=0, size="9pt")  # the title carries the legend: no bar hidden
        self.plot = self.plots.addPlot(row=1, col=0)
        self.plot.setLabel("left", "share")
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.share_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=(68, 1, 84))
        self.prob_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=(53, 183, 121))
        self.even_line = pg.PlotCurveItem(pen=pg.mkPen((120, 120, 120), width=1.5, style=Qt.PenStyle.DashLine))
        for item in (self.share_bars, self.prob_bars, self.even_line):
            self.plot.addItem(item)
        self.plot.setLabel("bottom", "expert")
        self.plot.vb.sigResized.connect(self._number_experts)
        self.plots.scene().sigMouseMoved.connect(self._hover_bars)
        self.routing: LayerRouting | None = None
        self.tokens = QTextBrowser()
        self.tokens.setOpenLinks(False)
        self.plots.setMinimumHeight(280)  # four title lines, and bars over 100 px tall: y ticks apart
        self.tokens.setMinimumHeight(90)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(self.switch_row)
        layout.addWidget(self.rule)
        layout.addWidget(self.message)
        layout.addWidget(self.plots, 3)
        layout.addWidget(self.tokens, 2)
        self.layer = 0

    def draw(self, routing: LayerRouting) -> None:
        self.layer, self.routing = routing.layer, routing
        self._show_switches(routing)
        load, n_experts = routing.load(), routing.n_experts
        x = np.arange(n_experts, dtype=float)
        self.share_bars.setOpts(x=x - 0.2, height=load.share, width=0.38)
        self.prob_bars.setOpts(x=x + 0.2, height=load.mean_prob, width=0.38)
        self.even_line.setData([-0.6, n_experts - 0.4], [1.0 / n_experts] * 2)
        self._number_experts()
        top = max(float(load.share.max()), float(load.mean_prob.max()), 1.0 / n_experts)
        self.plot.setRange(xRange=(-0.6, n_experts - 0.4), yRange=(0, top * 1.1), padding=0)
        self.title.setText(f"Layer {routing.layer} · expert load<br>({len(routing.labels)} tokens × top-{routing.k} "
                           f"= {routing.expert_ids.size} slots)<br>{LOAD_LEGEND}", size="9pt")
        self.tokens.setHtml(_tokens_html(routing))

    def _number_experts(self, *args) -> None:
        """Expert numbers under the bars, as many as fit (✕: switched off in this layer)."""
        if self.routing is None:
            return
        off = self.routing.off
        label_px = QFontMetricsF(ui_font(9)).horizontalAdvance(f"{len(off) - 1}" + ("✕" if off.any() else "")) + 6
        column_px = self.plot.vb.width() / max(1, len(off))
        self.plot.getAxis("bottom").setTicks([expert_ticks(off, label_px / max(1.0, column_px)), []])

    def _hover_bars(self, scene_pos) -> None:
        """Hovering a bar says its expert's numbers: with 64 thin bars, the way to read one."""
        if self.routing is None or not self.plot.vb.sceneBoundingRect().contains(scene_pos):
            self.plots.setToolTip("")
            return
        expert = int(round(self.plot.vb.mapSceneToView(scene_pos).x()))
        self.plots.setToolTip(self.bar_text(expert) if 0 <= expert < self.routing.n_experts else "")

    def bar_text(self, expert: int) -> str:
        load, routing = self.routing.load(), self.routing
        off = " (switched off)" if routing.off[expert] else ""
        return (f"Expert {expert} of layer {routing.layer}{off}: {int(load.counts[expert])} of "
                f"{routing.expert_ids.size} top-{routing.k} slots ({load.share[expert]:.1%}), "
                f"mean router probability {load.mean_prob[expert]:.3f}")

    def show_refusal(self, message: str) -> None:
        """A switch the panel could not apply (too few experts left): say why; the switches stay as they were."""
        self.message.setText(message)
        self.message.setVisible(bool(message))

    def _show_switches(self, routing: LayerRouting) -> None:
        if len(self.switches) != routing.n_experts:
            self._build_switches(routing.n_experts)
        for e, button in enumerate(self.switches):
            with qt_signals_blocked(button):
                button.setChecked(not routing.off[e])
            button.setText(f"{e} off" if routing.off[e] else f"{e} on")
            button.setToolTip(f"Expert {e} of layer {routing.layer} is {'off' if routing.off[e] else 'on'}; "
                              f"click to switch it {'on' if routing.off[e] else 'off'}")
        self.rule.setText(f"<b>Click to switch an expert of layer {routing.layer} off</b> (or back on): "
                          f"{ABLATION_RULE}. At least {routing.k} must stay on.")

    def _build_switches(self, n_experts: int) -> None:
        for button in self.switches:
            self.switch_grid.removeWidget(button)
            button.deleteLater()
        self.switches = []
        for e in range(n_experts):
            button = QPushButton(f"{e} on", checkable=True, checked=True)
            button.setObjectName(f"expert_switch_{e}")
            button.setStyleSheet(SWITCH_STYLE)
            button.toggled.connect(lambda on, e=e: self.sigExpertSwitched.emit(self.layer, e, on))
            self.switches.append(button)
        self.switches_per_row = 0
        self._wrap_switches()

    def _wrap_switches(self) -> None:
        """As many switches per row as the width holds (each as wide as the widest, "63 off")."""
        if not self.switches:
            return
        widest = max(self.switches[-1].sizeHint().width(), self.switches[0].sizeHint().width()) + 12  # "off" is longer
        room = self.width() - self.switch_label.sizeHint().width() - self.switch_row.spacing() - 8
        per_row = max(1, min(len(self.switches), room // (widest + self.switch_grid.spacing())))
        if per_row == self.switches_per_row:
            return
        self.switches_per_row = per_row
        for button in self.switches:
            self.switch_grid.removeWidget(button)
        for e, button in enumerate(self.switches):
            button.setMinimumWidth(widest)
            self.switch_grid.addWidget(button, e // per_row, e % per_row)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._wrap_switches()


def _tokens_html(routing: LayerRouting) -> str:
    lines = ["<p style='margin:0'>Tokens each expert gets (<sub>position</sub> weight used), heaviest first.</p>"]
    for expert, tokens in enumerate(routing.tokens_per_expert()):
        entries = [_entry(routing, r.position, r.weight) for r in tokens[:MAX_LISTED_TOKENS]] or ["<i>no tokens</i>"]
        if len(tokens) > MAX_LISTED_TOKENS:  # a long sentence: the full list is in the CSV
            entries.append(f"<i>… {len(tokens) - MAX_LISTED_TOKENS} more in moe_expert_tokens.csv</i>")
        off = " <i>switched off</i>" if routing.off[expert] else ""
        lines.append(f"<p style='margin:2px 0'><b>expert {expert}</b> ({len(tokens)}){off}: "
                     + " · ".join(entries) + "</p>")
    return "".join(lines)


def _entry(routing: LayerRouting, position: int, weight: float) -> str:
    return f"{html.escape(routing.labels[position])}<sub>{position}</sub>&nbsp;{weight:.2f}"
