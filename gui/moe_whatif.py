"""The MoE what-if: force the selected token to an expert, and compare the next-token prediction before and after.

The view only holds the controls and draws the comparison (core.routing_view.whatif_comparison); the
panel sends the forced run's request through the controller (sigRequestVariant) and hands back the result.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QGroupBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from core import routing
from core.routing_view import WhatIfComparison, whatif_comparison
from core.trace import LAST_LOGITS, Trace
from core.trace_fields import logits_from
from gui.qt_signals import qt_signals_blocked
from gui.text_fit import elide

BEFORE_BRUSH = (150, 150, 150)
AFTER_BRUSH = (255, 127, 14)
BAR_ROW_PX = 26   # a candidate's two bars and its label, apart from the next candidate's
PLOT_CHROME_PX = 110   # the three title lines and the probability axis
WHATIF_LEGEND = ("<span style='color:#969696'>■</span> before &nbsp; "
                 "<span style='color:#ff7f0e'>■</span> after (forced)")


def expert_list(ids) -> str:
    """'expert 2, expert 0'; an expert in several slots (forced) once, with its count: 'expert 3 ×2'."""
    counts: dict[int, int] = {}
    for e in ids:
        counts[int(e)] = counts.get(int(e), 0) + 1
    return ", ".join(f"expert {e}" + (f" ×{n}" if n > 1 else "") for e, n in counts.items())


def whatif_fields(layer: int, position: int | None) -> tuple[str, ...]:
    """What the what-if reads of its two runs (the panel's own, before, and the forced one, after): every
    layer's expert choices (which later routing changed), the layer's weights, the logits at the token
    (None: the last)."""
    return ("expert_ids", f"layers.{layer}.expert_weights", LAST_LOGITS if position is None else logits_from(position))


def quoted(trace: Trace, position: int) -> str:
    return f"“{trace.label(position)}” (position {position})"


@dataclass(frozen=True)
class WhatIfRequest:
    layer: int
    position: int
    expert: int
    only_this_expert: bool
    override: np.ndarray      # [L, T, k] what was sent
    before: Trace             # the trace the request was made from


@dataclass(frozen=True)
class WhatIfResult:
    request: WhatIfRequest
    after: Trace

    def comparison(self) -> WhatIfComparison:
        r = self.request
        return whatif_comparison(r.before, self.after, r.layer, r.position, r.expert, r.only_this_expert)


class WhatIfView(QGroupBox):
    """Controls to force the selected token to an expert, and the before/after next-token comparison."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("What if: force a token to an expert", parent)
        self.token_label = QLabel(wordWrap=True)
        self.expert_box = QComboBox()
        self.mode_box = QComboBox()
        self.mode_box.addItems(["in place of its first choice", "as its only expert"])
        self.run_button = QPushButton("Run what-if")
        for box in (self.expert_box, self.mode_box):  # shrink with a narrow dock instead of widening the column
            box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            box.setMinimumContentsLength(8)
        self.status = QLabel(wordWrap=True)
        self.status.setTextFormat(Qt.TextFormat.RichText)
        self.status.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.plots = pg.GraphicsLayoutWidget()
        self.title = self.plots.addLabel("", row=0, col=0, size="9pt")
        self.plot = self.plots.addPlot(row=1, col=0)
        self.plot.invertY(True)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.setLabel("bottom", "next-token probability")
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)
        self.before_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.38, brush=BEFORE_BRUSH)
        self.after_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.38, brush=AFTER_BRUSH)
        self.plot.addItem(self.before_bars)
        self.plot.addItem(self.after_bars)
        self.result_widget = QWidget()  # the exported figure: what was forced, and the bars
        result_layout = QVBoxLayout(self.result_widget)
        result_layout.setContentsMargins(0, 0, 0, 0)
        result_layout.addWidget(self.status)
        result_layout.addWidget(self.plots, 1)
        choice = QHBoxLayout()   # short rows, each box as wide as the column: readable in a narrow dock
        choice.addWidget(QLabel("to"))
        choice.addWidget(self.expert_box, 1)
        action = QHBoxLayout()
        action.addWidget(self.run_button)
        action.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.token_label)
        layout.addLayout(choice)
        layout.addWidget(self.mode_box)
        layout.addLayout(action)
        layout.addWidget(self.result_widget, 1)
        self.changes: list[routing.CandidateChange] = []   # the bars drawn

    def update_controls(self, trace: Trace, layer: int, position: int, off: np.ndarray,
                        reset_expert: bool) -> None:  # off [E] bool: switched off in this layer
        lt = trace.layers[layer]
        chosen = set(int(e) for e in lt.expert_ids[position])
        unavailable = chosen | {int(e) for e in np.flatnonzero(off)}
        self.token_label.setText(f"Force token {html.escape(quoted(trace, position))} in layer {layer} "
                                 f"(now routed to {expert_list(lt.expert_ids[position])}). "
                                 "Click a row of the heatmap to pick another token.")
        current = self.expert_box.currentIndex()
        with qt_signals_blocked(self.expert_box):
            self.expert_box.clear()
            for e, p in enumerate(lt.router_probs[position]):
                state = ", switched off" if off[e] else ", chosen" if e in chosen else ""
                self.expert_box.addItem(f"expert {e}  (p = {p:.2f}{state})")
            if reset_expert or not 0 <= current < len(off) or current in unavailable:   # e.g. just switched off
                current = self._best_unchosen(lt.router_probs[position], unavailable)
            self.expert_box.setCurrentIndex(current)

    @staticmethod
    def _best_unchosen(probs: np.ndarray, unavailable: set[int]) -> int:
        """The default to force: the likeliest expert the router did not pick and that is on (so something changes)."""
        order = [int(e) for e in np.argsort(-probs, kind="stable")]
        return next((e for e in order if e not in unavailable), order[0])

    def show_message(self, message: str) -> None:
        self.status.setText(message)
        self.changes = []
        self.before_bars.setOpts(x0=[], y=[], width=[], height=0.38)
        self.after_bars.setOpts(x0=[], y=[], width=[], height=0.38)
        self.plot.getAxis("left").setTicks([[], []])
        self.plots.hide()

    def show_result(self, result: WhatIfResult) -> None:
        request, before = result.request, result.request.before
        position = request.position
        self.changes = list(result.comparison().changes)
        y = np.arange(len(self.changes), dtype=float)
        self.before_bars.setOpts(x0=np.zeros_like(y), y=y - 0.2, width=[c.before for c in self.changes], height=0.38)
        self.after_bars.setOpts(x0=np.zeros_like(y), y=y + 0.2, width=[c.after for c in self.changes], height=0.38)
        ticks = [(i, f"{elide(before.vocab_label(c.token_id), 16)}  {c.before:.3f} → {c.after:.3f}")
                 for i, c in enumerate(self.changes)]
        self.plot.getAxis("left").setTicks([ticks, []])
        top = max([c.before for c in self.changes] + [c.after for c in self.changes] + [1e-6])
        self.plot.setRange(xRange=(0, top * 1.05), yRange=(-0.6, len(self.changes) - 0.4), padding=0)
        # The title on short lines and the bars their height: the column is narrow in a small dock.
        self.title.setText(f"Next token after<br>{html.escape(quoted(before, position))}<br>{WHATIF_LEGEND}", size="9pt")
        self.plots.setMinimumHeight(PLOT_CHROME_PX + BAR_ROW_PX * len(self.changes))
        self.status.setText(self._summary(result))
        self.plots.show()

    def _summary(self, result: WhatIfResult) -> str:
        request, before, after = result.request, result.request.before, result.after
        l, t = request.layer, request.position
        old_ids, new_ids = before.layers[l].expert_ids[t], after.layers[l].expert_ids[t]
        per_expert = routing.weight_matrix(new_ids[None], after.layers[l].expert_weights[t][None],
                                           after.config.num_local_experts)[0]  # [E]
        how = "as its only expert" if request.only_this_expert else "in place of its first choice"
        used = ", ".join(f"expert {e} ({per_expert[e]:.2f})" for e in dict.fromkeys(int(e) for e in new_ids))
        text = (f"<b>Forced</b>: token {html.escape(quoted(before, t))}, layer {l} → <b>expert {request.expert}</b> "
                f"{how}. Router's choice: {expert_list(old_ids)}; used now: {used}.")
        if not routing.changes_routing(old_ids, new_ids):
            text += " <i>That is the same set of experts the router chose: nothing changes.</i>"
        text += " " + self._downstream(before, after, l, t)
        return text

    @staticmethod
    def _downstream(before: Trace, after: Trace, layer: int, position: int) -> str:
        moved = [(l, t) for l, t in routing.rerouted_positions([lt.expert_ids for lt in before.layers],
                                                                 [lt.expert_ids for lt in after.layers])
                 if (l, t) != (layer, position)]
        if not moved:
            return "No other token's routing changed."
        shown = ", ".join(f"layer {l} {html.escape(quoted(before, t))}" for l, t in moved[:6])
        more = f" and {len(moved) - 6} more" if len(moved) > 6 else ""
        return f"Later routing that changed as a result: {shown}{more}."

