"""MoE routing: which experts the router sends each token to, how busy each expert is, and a what-if.

Everything drawn comes from the Trace (router_probs, expert_ids, expert_weights, expert_override,
logits); the numbers are read by core.routing. The what-if asks the controller for a run with a
forced routing (sigRequestVariant) and compares that run's next-token distribution with this one's.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QButtonGroup, QComboBox, QFrame, QGroupBox, QHBoxLayout, QLabel, QPushButton,
                               QScrollArea, QSplitter, QTextBrowser, QVBoxLayout, QWidget)

from core import routing
from core.raw_export import csv_text
from core.trace import Trace
from gui import plotting
from gui.heatmap import CellText, Heatmap, cells_path, cosmetic_pen
from gui import figure_pages as pages
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked
from gui.text_fit import elide

WHATIF_TAG = "moe_whatif"
CONVENTION = ("Hugging Face: softmax over all experts → keep top-k → renormalise to sum 1; "
              "mistral-inference: top-k logits → softmax over the k; the same numbers.")
ROUTER_EXPLANATION = ("The router is a trainable classifier (one linear layer) that gives every token a probability "
                "for each expert; the top few experts are kept, each computes a new vector, and their outputs "
                "are added by their weights. (中文：路由规则是一层分类网络，参与训练，输出一组专家概率，"
                "选择最高的那几个专家；这些专家分别预测新的向量，按专家概率把它们加起来。)")
CHOSEN_OUTER = QColor(0, 0, 0)            # chosen cells: a black-and-white double outline shows on any colour
CHOSEN_INNER = QColor(255, 255, 255)
FORCED_COLOUR = QColor(255, 127, 14)      # forced by an override: orange, unlike the router's own choice
SELECTED_ROW_COLOUR = QColor(214, 39, 40)
BEFORE_BRUSH = (150, 150, 150)
AFTER_BRUSH = (255, 127, 14)
LOAD_LEGEND = ("<span style='color:#440154'>■</span> share of top-k slots<br>"
               "<span style='color:#35b779'>■</span> mean router probability<br>"
               "<span style='color:#787878'>‒ ‒</span> even split")
WHATIF_LEGEND = ("<span style='color:#969696'>■</span> before &nbsp; "
                 "<span style='color:#ff7f0e'>■</span> after (forced)")
ROW_LABEL_COLUMNS = 16                    # "12 token": the position and a short word
WINDOW_ROWS = 40                          # long sentences open on 40 rows around the selected token; drag/wheel to move
MAX_LISTED_TOKENS = 24                    # per expert in the list; laying out hundreds costs a repaint


def token_row_labels(trace: Trace) -> list[str]:
    return [f"{i} {label}" for i, label in enumerate(trace.labels())]


def expert_list(ids) -> str:
    """'expert 2, expert 0'; an expert in several slots (forced) once, with its count: 'expert 3 ×2'."""
    counts: dict[int, int] = {}
    for e in ids:
        counts[int(e)] = counts.get(int(e), 0) + 1
    return ", ".join(f"expert {e}" + (f" ×{n}" if n > 1 else "") for e, n in counts.items())


def quoted(trace: Trace, position: int) -> str:
    return f"“{trace.label(position)}” (position {position})"


# ---------------------------------------------------------------- the router heatmaps


class RouterView(QWidget):
    """Two token × expert heatmaps of one layer: router probabilities, and the weights actually used.

    sigCellHovered / sigCellClicked: (token, expert) under the mouse in either heatmap.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.explanation = QLabel(wordWrap=True)
        self.plots = pg.GraphicsLayoutWidget()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.explanation)
        layout.addWidget(self.plots, 1)
        self.probs_plot = self._matrix_plot(0, "router probability", rows_named=True)
        self.weights_plot = self._matrix_plot(1, "weight used", rows_named=False)
        self.weights_plot.setYLink(self.probs_plot)
        self.weights_plot.getAxis("left").setStyle(showValues=False)
        self.weights_plot.setLabel("left", "")
        self.colour_bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=plotting.colormap(), interactive=False,
                                          width=10)   # its meaning is in both titles: no label to take width
        self.plots.addItem(self.colour_bar, 1, 2)
        self.sigCellHovered, self.sigCellClicked = self.probs_plot.sigCellHovered, self.probs_plot.sigCellClicked
        self.probs_text, self.weights_text = self._cell_text(self.probs_plot), self._cell_text(self.weights_plot)
        both = (self.probs_plot, self.weights_plot)
        self.chosen_outlines = [(plot.add_outline(CHOSEN_OUTER, 3.5), plot.add_outline(CHOSEN_INNER, 1.5))
                                for plot in both]
        self.forced_outlines = [plot.add_outline(FORCED_COLOUR, 3.0) for plot in both]
        self.selected_rows = [plot.add_outline(SELECTED_ROW_COLOUR, 1.5, Qt.PenStyle.DashLine) for plot in both]
        self.marked: set[tuple[int, int]] = set()    # (token, expert) outlined as chosen
        self.forced: set[tuple[int, int]] = set()    # (token, expert) outlined as forced
        self.shown_weights = np.zeros((0, 0))        # [T, E] the weight matrix drawn
        self.row_labels: list[str] = []
        self.probs_plot.vb.sigYRangeChanged.connect(self._on_rows_moved)
        self.probs_plot.vb.sigResized.connect(self._on_rows_moved)

    def _matrix_plot(self, col: int, title: str, rows_named: bool) -> Heatmap:
        self.plots.addLabel(title, row=0, col=col)
        plot = Heatmap("expert", "token", rows_named=rows_named, cols_named=False)
        self.plots.addItem(plot, row=1, col=col)
        plot.setMouseEnabled(x=False, y=True)  # long sentences: scroll/zoom along the tokens only
        if col:   # hovering or clicking either heatmap means the same cell
            plot.sigCellHovered.connect(lambda cell: self.sigCellHovered.emit(cell))
            plot.sigCellClicked.connect(lambda row, column: self.sigCellClicked.emit(row, column))
        return plot

    @staticmethod
    def _cell_text(plot: Heatmap) -> CellText:
        text = CellText()
        text.setZValue(5)
        text.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        plot.addItem(text)
        return text

    def draw(self, trace: Trace, layer: int) -> None:
        lt = trace.layers[layer]
        n_tokens, n_experts = lt.router_probs.shape
        self.shown_weights = routing.weight_matrix(lt.expert_ids, lt.expert_weights, n_experts)
        chosen = routing.chosen_mask(lt.expert_ids, n_experts)
        self.explanation.setText(self._explanation(trace, layer))
        self._draw_matrix(self.probs_plot, self.probs_text, lt.router_probs.astype(np.float64), None)
        self._draw_matrix(self.weights_plot, self.weights_text, self.shown_weights, ~chosen)
        self.marked = {(int(t), int(e)) for t, e in zip(*np.nonzero(chosen))}
        path = cells_path(sorted(self.marked))
        for outer, inner in self.chosen_outlines:
            outer.setPath(path)
            inner.setPath(path)
        self.forced = {(f.position, f.expert) for f in routing.forced_slots(trace.expert_override) if f.layer == layer}
        forced_path = cells_path(sorted(self.forced))
        for item in self.forced_outlines:
            item.setPath(forced_path)
        self.row_labels = token_row_labels(trace)
        self.probs_plot.set_row_labels(self.row_labels, ROW_LABEL_COLUMNS)
        for plot in (self.probs_plot, self.weights_plot):
            # numbers under the axis title "expert": "expert 3" per column does not fit 8 narrow columns
            plot.getAxis("bottom").setTicks([[(e + 0.5, str(e)) for e in range(n_experts)], []])
            plot.setLimits(xMin=0, xMax=n_experts, yMin=0, yMax=n_tokens, minYRange=min(4, n_tokens))
            plot.setXRange(0, n_experts, padding=0)
        self.probs_plot.setYRange(0, min(n_tokens, WINDOW_ROWS), padding=0)
        self._on_rows_moved()

    def select_row(self, row: int, n_tokens: int, n_experts: int) -> None:
        """Outline the selected token's row and bring it into view."""
        path = cells_path([(row, 0)], width=n_experts)
        for item in self.selected_rows:
            item.setPath(path)
        top, bottom = self.probs_plot.vb.viewRange()[1]
        if not top <= row + 0.5 <= bottom:
            rows = min(n_tokens, max(bottom - top, 1))
            start = min(max(0.0, row + 0.5 - rows / 2), n_tokens - rows)
            self.probs_plot.setYRange(start, start + rows, padding=0)

    def visible_rows(self) -> tuple[int, int]:
        top, bottom = self.probs_plot.vb.viewRange()[1]
        return max(0, int(np.floor(top))), min(len(self.row_labels), int(np.ceil(bottom)))

    def _on_rows_moved(self, *args) -> None:
        """Say which rows are on screen, and thin the outlines when rows get small."""
        first, last = self.visible_rows()
        row_px = self.probs_plot.vb.height() / max(last - first, 1)
        total = len(self.row_labels)
        self.probs_plot.setLabel("left", "token" if last - first >= total else
                                 f"token ({first}–{last - 1} of {total}: drag or scroll to move)")
        small = row_px < 9  # a 5 px double outline would hide cells a few pixels tall
        for outer, inner in self.chosen_outlines:
            outer.setPen(cosmetic_pen(CHOSEN_OUTER, 1.0 if small else 3.5))
            inner.setVisible(not small)

    @staticmethod
    def _draw_matrix(plot: Heatmap, text: CellText, values: np.ndarray, mask: np.ndarray | None) -> None:
        plot.image.setImage(plotting.masked_rgba(values, (0.0, 1.0), plotting.colormap(), mask), levels=(0, 255),
                            rect=QRectF(0, 0, values.shape[1], values.shape[0]))
        text.set_matrix(values, np.ones_like(values, dtype=bool) if mask is None else ~mask)

    @staticmethod
    def _explanation(trace: Trace, layer: int) -> str:
        lt = trace.layers[layer]
        k, n_experts = lt.expert_ids.shape[1], lt.router_probs.shape[1]
        text = f"<b>Layer {layer}</b> · outlined: the top-{k} of {n_experts} experts each token is sent to"
        if (trace.expert_override[layer] < 0).all():
            _, mistral = routing.topk_softmax_weights(lt.router_logits, k)
            gap = float(np.abs(mistral - lt.expert_weights).max())
            text += (f" · <span title='{html.escape(CONVENTION)}'>the two conventions agree within {gap:.1e} "
                     f"(hover)</span>")
        else:
            text += " <span style='color:#d9650b'>Orange outline: a forced expert (override), not the router's pick.</span>"
        return text


# ---------------------------------------------------------------- expert load


class LoadView(QWidget):
    """Bars per expert (share of top-k slots, mean router probability) and the tokens each expert got."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
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
        self.tokens = QTextBrowser()
        self.tokens.setOpenLinks(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.plots.setMinimumHeight(190)  # three title lines and still readable bars
        self.tokens.setMinimumHeight(90)
        layout.addWidget(self.plots, 3)
        layout.addWidget(self.tokens, 2)
        self.load: routing.ExpertLoad | None = None

    def draw(self, trace: Trace, layer: int) -> None:
        lt = trace.layers[layer]
        n_experts = lt.router_probs.shape[1]
        self.load = routing.expert_load(lt.expert_ids, lt.router_probs)
        x = np.arange(n_experts, dtype=float)
        self.share_bars.setOpts(x=x - 0.2, height=self.load.share, width=0.38)
        self.prob_bars.setOpts(x=x + 0.2, height=self.load.mean_prob, width=0.38)
        self.even_line.setData([-0.6, n_experts - 0.4], [1.0 / n_experts] * 2)
        self.plot.getAxis("bottom").setTicks([[(e, f"expert {e}") for e in range(n_experts)], []])
        top = max(float(self.load.share.max()), float(self.load.mean_prob.max()), 1.0 / n_experts)
        self.plot.setRange(xRange=(-0.6, n_experts - 0.4), yRange=(0, top * 1.1), padding=0)
        self.title.setText(f"Layer {layer} · expert load<br>({trace.n_tokens} tokens × top-{lt.expert_ids.shape[1]} "
                           f"= {lt.expert_ids.size} slots)<br>{LOAD_LEGEND}", size="9pt")
        self.tokens.setHtml(self._tokens_html(trace, layer))

    def _tokens_html(self, trace: Trace, layer: int) -> str:
        lt = trace.layers[layer]
        routed = routing.tokens_per_expert(lt.expert_ids, lt.expert_weights, lt.router_probs.shape[1])
        lines = ["<p style='margin:0'>Tokens each expert gets (<sub>position</sub> weight used), heaviest first.</p>"]
        for expert, tokens in enumerate(routed):
            entries = [self._entry(trace, r) for r in tokens[:MAX_LISTED_TOKENS]] or ["<i>no tokens</i>"]
            if len(tokens) > MAX_LISTED_TOKENS:  # a long sentence: the full list is in the CSV
                entries.append(f"<i>… {len(tokens) - MAX_LISTED_TOKENS} more in moe_expert_tokens.csv</i>")
            lines.append(f"<p style='margin:2px 0'><b>expert {expert}</b> ({len(tokens)}): " + " · ".join(entries) + "</p>")
        return "".join(lines)

    @staticmethod
    def _entry(trace: Trace, r: routing.RoutedToken) -> str:
        return f"{html.escape(trace.label(r.position))}<sub>{r.position}</sub>&nbsp;{r.weight:.2f}"


# ---------------------------------------------------------------- what-if


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


def next_token_changes(result: WhatIfResult) -> list[routing.CandidateChange]:
    """Top candidates to follow the forced token, before and after (its own position's prediction)."""
    position = result.request.position
    return routing.candidate_changes(result.request.before.next_token_probs(position),
                                     result.after.next_token_probs(position), n=5)


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
        choice = QHBoxLayout()   # two short rows: readable in a narrow dock
        choice.addWidget(QLabel("to"))
        choice.addWidget(self.expert_box, 1)
        action = QHBoxLayout()
        action.addWidget(self.mode_box, 1)
        action.addWidget(self.run_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.token_label)
        layout.addLayout(choice)
        layout.addLayout(action)
        layout.addWidget(self.result_widget, 1)
        self.changes: list[routing.CandidateChange] = []

    def update_controls(self, trace: Trace, layer: int, position: int, reset_expert: bool) -> None:
        lt = trace.layers[layer]
        chosen = set(int(e) for e in lt.expert_ids[position])
        self.token_label.setText(f"Force token {html.escape(quoted(trace, position))} in layer {layer} "
                                 f"(now routed to {expert_list(lt.expert_ids[position])}). "
                                 "Click a row of the heatmap to pick another token.")
        current = self.expert_box.currentIndex()
        with qt_signals_blocked(self.expert_box):
            self.expert_box.clear()
            for e, p in enumerate(lt.router_probs[position]):
                self.expert_box.addItem(f"expert {e}  (p = {p:.2f}{', chosen' if e in chosen else ''})")
            if reset_expert or current < 0 or current >= len(lt.router_probs[position]):
                current = self._best_unchosen(lt.router_probs[position], chosen)
            self.expert_box.setCurrentIndex(current)

    @staticmethod
    def _best_unchosen(probs: np.ndarray, chosen: set[int]) -> int:
        """The default to force: the likeliest expert the router did not pick (so something changes)."""
        order = [int(e) for e in np.argsort(-probs, kind="stable")]
        return next((e for e in order if e not in chosen), order[0])

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
        self.changes = next_token_changes(result)
        y = np.arange(len(self.changes), dtype=float)
        self.before_bars.setOpts(x0=np.zeros_like(y), y=y - 0.2, width=[c.before for c in self.changes], height=0.38)
        self.after_bars.setOpts(x0=np.zeros_like(y), y=y + 0.2, width=[c.after for c in self.changes], height=0.38)
        ticks = [(i, f"{elide(before.vocab_label(c.token_id), 16)}  {c.before:.3f} → {c.after:.3f}")
                 for i, c in enumerate(self.changes)]
        self.plot.getAxis("left").setTicks([ticks, []])
        top = max([c.before for c in self.changes] + [c.after for c in self.changes] + [1e-6])
        self.plot.setRange(xRange=(0, top * 1.05), yRange=(-0.6, len(self.changes) - 0.4), padding=0)
        self.title.setText(f"Next token after {html.escape(quoted(before, position))}<br>{WHATIF_LEGEND}", size="9pt")
        self.status.setText(self._summary(result))
        self.plots.show()

    def _summary(self, result: WhatIfResult) -> str:
        request, before, after = result.request, result.request.before, result.after
        l, t = request.layer, request.position
        old_ids, new_ids = before.layers[l].expert_ids[t], after.layers[l].expert_ids[t]
        per_expert = routing.weight_matrix(new_ids[None], after.layers[l].expert_weights[t][None],
                                           after.layers[l].router_probs.shape[1])[0]  # [E]
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


# ---------------------------------------------------------------- the panel


class FillScrollArea(QScrollArea):
    """Fills its viewport; scrolls only when that is shorter than the content's minimum height.

    (widgetResizable=True sizes the content by its word-wrapped height-for-width, taller than needed.)
    """

    def __init__(self) -> None:
        super().__init__()
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        content = self.widget()
        if content is None:
            return
        height = max(self.viewport().height(), content.minimumSizeHint().height())
        width = self.viewport().width() - (self.verticalScrollBar().sizeHint().width()
                                           if height > self.viewport().height() else 0)
        content.resize(width, height)


DENSE_TEXT = ("This model has no router: every layer has one dense SwiGLU MLP that every token goes through "
              "(Llama, Mistral and Qwen are built this way), so there are no experts to show.")


class MoePanel(Panel):
    title = "MoE routing"
    object_name = "moe"
    empty_text = "Type a sentence to see which experts the router sends each token to."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # One line on screen; the full explanation (English and Chinese) on hover.
        self.caption = QLabel("The router gives every token a probability per expert; the top-k experts run and "
                              "their outputs are added by weight. <i>(hover for more, 中文)</i>", wordWrap=True)
        self.caption.setToolTip(ROUTER_EXPLANATION)
        self.banner = QLabel(wordWrap=True)
        self.banner.setStyleSheet("background:#ffe8cc; color:#7a3b00; padding:3px;")
        self.layer_bar = QHBoxLayout()
        self.layer_buttons = QButtonGroup(self)
        self.layer_buttons.idClicked.connect(lambda l: self.sigSelect.emit({"layer": int(l)}))
        self.router = RouterView()
        self.hover = QLabel("Hover over a cell for its exact numbers; click a row to select that token.", wordWrap=True)
        self.load = LoadView()
        self.whatif = WhatIfView()
        self.whatif.run_button.clicked.connect(self.request_whatif)
        self.set_content(self._content())
        self.pending: WhatIfRequest | None = None
        self.result: WhatIfResult | None = None
        self._hovered = -1                                # token whose characters are highlighted
        # What is on screen, so that a selection change that does not concern this panel (a head) costs nothing.
        self._drawn_trace: Trace | None = None
        self._drawn_target: tuple[int, int] | None = None  # (layer, token)
        self.router.sigCellClicked.connect(lambda token, _: self.sigSelect.emit({"query": token}))
        self.router.sigCellHovered.connect(self._on_hover)
        self.refresh()

    def _content(self) -> QWidget:
        page = QWidget()
        layer_row = QHBoxLayout()
        layer_row.addWidget(self.caption, 1)
        layer_row.addWidget(QLabel("Layer:"))
        layer_row.addLayout(self.layer_bar)
        # A docked panel can be small: the what-if (the panel's action) comes first, the load below it;
        # both keep a readable height and scroll instead.
        self.whatif.setMinimumHeight(300)
        self.load.setMinimumHeight(260)
        column = QWidget()
        column_layout = QVBoxLayout(column)
        column_layout.setContentsMargins(0, 0, 0, 0)
        column_layout.addWidget(self.whatif, 3)
        column_layout.addWidget(self.load, 2)
        right = FillScrollArea()
        right.setWidget(column)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.router)
        split.addWidget(right)
        split.setStretchFactor(0, 11)   # the router's cells wide enough for their numbers
        split.setStretchFactor(1, 9)
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.banner)
        layout.addLayout(layer_row)
        layout.addWidget(split, 1)
        layout.addWidget(self.hover)
        return page

    # ------------------------------------------------------------ drawing

    def unavailable(self, trace) -> str | None:
        return None if trace.config.is_moe else DENSE_TEXT

    def draw(self) -> None:
        trace = self.trace
        layer, token = self.selection.layer, self.selection.query_index(trace.n_tokens)
        same_trace = self._drawn_trace is trace  # identity: a Trace's == would compare arrays
        if not (same_trace and self._drawn_target and self._drawn_target[0] == layer):
            # only the selected row and the what-if controls depend on the selected token
            self._sync_layer_buttons(trace.num_layers, layer)
            self._draw_banner(trace)
            self.router.draw(trace, layer)
            self.load.draw(trace, layer)
        if not (same_trace and self._drawn_target == (layer, token)):
            self.router.select_row(token, trace.n_tokens, trace.config.num_local_experts)
            self.whatif.update_controls(trace, layer, token, reset_expert=self._drawn_target != (layer, token))
        self._drawn_trace, self._drawn_target = trace, (layer, token)
        self._draw_whatif()

    def _sync_layer_buttons(self, num_layers: int, layer: int) -> None:
        buttons = self.layer_buttons.buttons()
        if len(buttons) != num_layers:  # a new model: rebuild; otherwise only the checked one changes
            for button in buttons:
                self.layer_buttons.removeButton(button)
                button.deleteLater()
            for l in range(num_layers):
                button = QPushButton(f"layer {l}", checkable=True)
                self.layer_buttons.addButton(button, l)
                self.layer_bar.addWidget(button)
        self.layer_buttons.button(layer).setChecked(True)

    def _draw_banner(self, trace: Trace) -> None:
        forced: dict[tuple[int, int], list[int]] = {}  # (layer, token) -> forced experts, by slot
        for f in routing.forced_slots(trace.expert_override):
            forced.setdefault((f.layer, f.position), []).append(f.expert)
        self.banner.setVisible(bool(forced))
        if forced:
            shown = "; ".join(f"layer {l}, {quoted(trace, t)} → {expert_list(experts)}"
                              for (l, t), experts in list(forced.items())[:4])
            more = f" and {len(forced) - 4} more" if len(forced) > 4 else ""
            self.banner.setText(f"This run has forced routing (an override, not the router's choice): {shown}{more}. "
                                "Orange outlines mark the forced experts.")

    def _draw_whatif(self) -> None:
        if self.pending is not None:
            self.whatif.show_message("Running the what-if…")
        elif self.result is not None:
            self.whatif.show_result(self.result)
        else:
            self.whatif.show_message("No what-if yet: choose an expert and press <b>Run what-if</b>. The model is "
                                     "run again with that token forced; the bars then compare the next-token "
                                     "probabilities before and after.")

    # ------------------------------------------------------------ the what-if round trip

    def set_trace(self, trace: Trace | None) -> None:
        if self.result is not None and not self._same_run(self.result.request.before, trace):
            self.result = None  # the sentence or its interventions changed: the comparison no longer applies
        if self.pending is not None and not self._same_run(self.pending.before, trace):
            self.pending = None
        super().set_trace(trace)

    @staticmethod
    def _same_run(a: Trace, b: Trace | None) -> bool:
        return (b is not None and np.array_equal(a.input_ids, b.input_ids)
                and np.array_equal(a.expert_override, b.expert_override) and np.array_equal(a.head_mask, b.head_mask))

    def request_whatif(self) -> None:
        trace = self.trace
        if trace is None:
            return
        layer, position = self._drawn_target
        expert = self.whatif.expert_box.currentIndex()
        only = self.whatif.mode_box.currentIndex() == 1
        override = routing.force_expert(trace.expert_override, trace.layers[layer].router_logits[position],
                                        layer, position, expert, only)
        self.pending = WhatIfRequest(layer, position, expert, only, override, trace)
        self._draw_whatif()
        self.sigRequestVariant.emit(WHATIF_TAG, {"expert_override": override, "head_mask": np.array(trace.head_mask)})

    def set_variant(self, tag: str, trace: Trace | None) -> None:
        if tag != WHATIF_TAG or self.pending is None:
            return
        request, self.pending = self.pending, None
        if trace is None:
            self.whatif.show_message("The what-if run failed; the current run is unchanged.")
            return
        if not np.array_equal(trace.input_ids, request.before.input_ids):
            self.whatif.show_message("The sentence changed while the what-if ran; run it again.")
            return
        if not np.array_equal(trace.expert_override, request.override):
            self.pending = request  # the answer to an earlier click: keep waiting for this one
            return
        self.result = WhatIfResult(request, trace)
        self._draw_whatif()

    # ------------------------------------------------------------ mouse

    def _on_hover(self, cell) -> None:
        trace = self.trace
        if trace is None or cell is None:
            return self._hover_token(-1)
        t, e = cell
        lt = trace.layers[self.selection.layer]
        slots = [s for s in range(lt.expert_ids.shape[1]) if lt.expert_ids[t, s] == e]
        used = f"chosen (slot {slots[0]}), weight used {self.router.shown_weights[t, e]:.4f}" if slots else "not chosen"
        self.hover.setText(f"{quoted(trace, t)} · expert {e}: router logit {lt.router_logits[t, e]:.4f}, "
                                  f"probability {lt.router_probs[t, e]:.4f}; {used}")
        self._hover_token(t)

    def _hover_token(self, position: int) -> None:
        """Highlight the hovered token's characters in the sentence (-1: none); only when it changes."""
        if position == self._hovered:
            return
        self._hovered = position
        tokens = self.trace.tokenization.tokens if self.trace is not None and self.trace.tokenization else ()
        if 0 <= position < len(tokens):
            self.sigHoverText.emit(tokens[position].char_start, tokens[position].char_end)
        else:
            self.sigHoverText.emit(-1, -1)

    # ------------------------------------------------------------ export

    def figures(self) -> list[Figure]:
        if self.trace is None or not self.trace.config.is_moe:
            return []
        n = self.trace.n_tokens
        figures = [Figure("moe_router_probs", self.router, self.router_table, page_size=lambda: pages.rows_page(n)),
                   Figure("moe_expert_load", self.load, self.load_table,
                          extra_tables={"moe_expert_tokens": self.expert_tokens_table})]
        if self.result is not None:
            figures.append(Figure("moe_whatif", self.whatif.result_widget, self.whatif_table))
        return figures

    def router_table(self) -> str:
        """One row per token: probabilities, chosen flags, weights used, forced flags (selected layer)."""
        trace, layer = self.trace, self.selection.layer
        lt = trace.layers[layer]
        n_experts = lt.router_probs.shape[1]
        chosen = routing.chosen_mask(lt.expert_ids, n_experts)
        weights = routing.weight_matrix(lt.expert_ids, lt.expert_weights, n_experts)
        forced = {(f.position, f.expert) for f in routing.forced_slots(trace.expert_override) if f.layer == layer}
        experts = range(n_experts)
        header = (["layer", "position", "token"] + [f"prob_expert_{e}" for e in experts]
                  + [f"chosen_expert_{e}" for e in experts] + [f"weight_expert_{e}" for e in experts]
                  + [f"forced_expert_{e}" for e in experts])
        rows = [header]
        for t in range(trace.n_tokens):
            rows.append([layer, t, trace.label(t)] + [repr(float(p)) for p in lt.router_probs[t]]
                        + [int(c) for c in chosen[t]] + [repr(float(w)) for w in weights[t]]
                        + [int((t, e) in forced) for e in experts])
        return csv_text(rows)

    def load_table(self) -> str:
        trace, layer = self.trace, self.selection.layer
        lt = trace.layers[layer]
        load = routing.expert_load(lt.expert_ids, lt.router_probs)
        rows = [["layer", "expert", "slots", "share_of_topk_slots", "mean_router_probability"]]
        for e in range(len(load.counts)):
            rows.append([layer, e, int(load.counts[e]), repr(float(load.share[e])), repr(float(load.mean_prob[e]))])
        return csv_text(rows)

    def expert_tokens_table(self) -> str:
        trace, layer = self.trace, self.selection.layer
        lt = trace.layers[layer]
        rows = [["layer", "expert", "position", "token", "slot", "weight"]]
        for e, tokens in enumerate(routing.tokens_per_expert(lt.expert_ids, lt.expert_weights, lt.router_probs.shape[1])):
            rows += [[layer, e, r.position, trace.label(r.position), r.slot, repr(r.weight)] for r in tokens]
        return csv_text(rows)

    def whatif_table(self) -> str:
        request, before = self.result.request, self.result.request.before
        rows = [["forced_layer", "forced_position", "forced_token", "forced_expert", "mode",
                 "candidate_id", "candidate", "prob_before", "prob_after", "change"]]
        mode = "only_this_expert" if request.only_this_expert else "replace_first_choice"
        for c in next_token_changes(self.result):
            rows.append([request.layer, request.position, before.label(request.position), request.expert, mode,
                         c.token_id, before.vocab_label(c.token_id), repr(c.before), repr(c.after), repr(c.delta)])
        return csv_text(rows)
