"""MoE routing: which experts the router sends each token to, how busy each expert is, experts switched
off, and a what-if.

The numbers come from the Trace through core.routing_view; the widgets are gui.router_heatmaps (token ×
expert), gui.expert_load_bars (load, tokens per expert, a switch per expert) and gui.moe_whatif.
- Switching an expert off sends the same core.interventions.Interventions as the Interventions panel
  (sigSetInterventions), so the two always show the one set of ablations in force.
- The what-if asks the controller for a run with a forced routing (sigRequestVariant) and compares that
  run's next-token distribution with this one's.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtWidgets import QButtonGroup, QComboBox, QHBoxLayout, QLabel, QPushButton, QSplitter, QVBoxLayout, QWidget

from core import routing
from core.routing_view import LayerRouting, experts_off, layer_routing, switch_expert
from core.trace import Trace
from core.trace_fields import of_layer
from gui import figure_pages as pages
from gui.expert_load_bars import ExpertLoadBars
from gui.fill_scroll_area import FillScrollArea
from gui.moe_whatif import WhatIfRequest, WhatIfResult, WhatIfView, expert_list, quoted, whatif_fields
from gui.panels.base import Figure, Panel
from gui.router_heatmaps import RouterView

WHATIF_TAG = "moe_whatif"
ROUTER_EXPLANATION = ("The router is a trainable classifier (one linear layer) that gives every token a probability "
                      "for each expert; the top few experts are kept, each computes a new vector, and their outputs "
                      "are added by their weights. (中文：路由规则是一层分类网络，参与训练，输出一组专家概率，"
                      "选择最高的那几个专家；这些专家分别预测新的向量，按专家概率把它们加起来。)")
CAPTION = "The router sends each token to its top-k experts. <i>(hover: more, 中文)</i>"   # one line beside
# the layer buttons, in the dock a 1280×800 screen gives
HOVER_TEXT = "Hover over a cell for its exact numbers; click a row to select that token."
MORE_ROWS_TEXT = " Drag the heatmap up or down for the other tokens (the wheel zooms)."
WHATIF_LEAST_PX = 250   # the what-if column's least width when the splitter shares the width out
MAX_LAYER_BUTTONS = 8   # more layers (Mixtral 8x7B: 32) get a drop-down: 32 buttons are wider than a screen
DENSE_TEXT = ("This model has no router: every layer has one dense SwiGLU MLP that every token goes through "
              "(Llama, Mistral and Qwen are built this way), so there are no experts to show.")


class MoePanel(Panel):
    title = "MoE routing"
    object_name = "moe"
    figure_names = {"moe_router_probs": "", "moe_expert_load": "",
                    WHATIF_TAG: "in the app, after a what-if run in the MoE routing panel"}

    @property
    def fields(self) -> tuple[str, ...]:   # the selected layer's routing, and what the what-if reads
        return of_layer(self.selection.layer, ("router_logits", "router_probs", "expert_ids", "expert_weights")) + (
            whatif_fields(self.selection.layer, self.selection.query))
    empty_text = "Type a sentence to see which experts the router sends each token to."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # One line on screen; the full explanation (English and Chinese) on hover.
        self.caption = QLabel(CAPTION, wordWrap=True)
        self.caption.setToolTip(ROUTER_EXPLANATION)
        self.banner = QLabel(wordWrap=True)
        self.banner.setStyleSheet("background:#ffe8cc; color:#7a3b00; padding:3px;")
        self.layer_bar = QHBoxLayout()
        self.layer_buttons = QButtonGroup(self)
        self.layer_buttons.idClicked.connect(lambda l: self.sigSelect.emit({"layer": int(l)}))
        self.layer_box = QComboBox()   # instead of the buttons, past MAX_LAYER_BUTTONS layers
        self.layer_box.setVisible(False)
        self.layer_box.activated.connect(lambda l: self.sigSelect.emit({"layer": int(l)}))   # the user's choice only
        self.router = RouterView()
        self.hover = QLabel(HOVER_TEXT, wordWrap=True)
        self.load = ExpertLoadBars()
        self.load.sigExpertSwitched.connect(self.switch_expert)
        self.whatif = WhatIfView()
        self.whatif.run_button.clicked.connect(self.request_whatif)
        self.set_content(self._content())
        self.pending: WhatIfRequest | None = None
        self.result: WhatIfResult | None = None
        self.routing: LayerRouting | None = None          # the layer drawn
        self._hovered = -1                                # token whose characters are highlighted
        # What is on screen, so that a selection change that does not concern this panel (a head) costs nothing.
        self._drawn_trace: Trace | None = None
        self._drawn_target: tuple[int, int] | None = None  # (layer, token)
        self.router.sigCellClicked.connect(lambda token, _: self.sigSelect.emit({"query": token}))
        self.router.sigCellHovered.connect(self._on_hover)
        self.router.probs_plot.vb.sigYRangeChanged.connect(self._show_idle_hover)
        self.refresh()

    def _content(self) -> QWidget:
        page = QWidget()
        layer_row = QHBoxLayout()
        layer_row.addWidget(self.caption, 1)
        layer_row.addWidget(QLabel("Layer:"))
        layer_row.addLayout(self.layer_bar)
        layer_row.addWidget(self.layer_box)
        # A docked panel can be small: the what-if (the panel's action) comes first, the load below it;
        # both keep a readable height and scroll instead.
        self.whatif.setMinimumHeight(300)   # the load's least height is its layout's: its switches wrap
        column = QWidget()
        column_layout = QVBoxLayout(column)
        column_layout.setContentsMargins(0, 0, 0, 0)
        column_layout.addWidget(self.whatif, 3)
        column_layout.addWidget(self.load, 2)
        self.right = FillScrollArea()
        self.right.setWidget(column)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.router)
        split.addWidget(self.right)
        split.setChildrenCollapsible(False)
        split.setStretchFactor(0, 11)
        split.setStretchFactor(1, 9)
        split.splitterMoved.connect(lambda *_: setattr(self, "_split_by_user", True))
        self.split, self._split_by_user = split, False
        # the numbers' width is estimated until the plots are laid out: share the width again once they are
        self.router.probs_plot.vb.sigResized.connect(self._share_width)
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
            self.routing = layer_routing(trace, layer)
            self.router.draw(self.routing)
            self.load.draw(self.routing)
            self._share_width()
        if not (same_trace and self._drawn_target == (layer, token)):
            self.router.select_row(token, trace.n_tokens, trace.config.num_local_experts)
            self.whatif.update_controls(trace, layer, token, self.routing.off,
                                        reset_expert=self._drawn_target != (layer, token))
        self._drawn_trace, self._drawn_target = trace, (layer, token)
        self._draw_whatif()

    def _share_width(self) -> None:
        """The heatmaps get the width their numbers need (the what-if keeps WHATIF_LEAST_PX), until the user
        drags the splitter: a small dock's even split left columns too narrow for any number."""
        total = sum(self.split.sizes())
        if self._split_by_user or self.routing is None or total <= 0 or self.router.on_page:
            return   # on its page the router has the page's size: sharing the dock's width would put it back
        router = min(max(self.router.numbers_width(self.routing.n_experts), total * 11 // 20), total - WHATIF_LEAST_PX)
        if abs(router - self.split.sizes()[0]) > 2:
            self.split.setSizes([router, total - router])

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._share_width()

    def _sync_layer_buttons(self, num_layers: int, layer: int) -> None:
        many = num_layers > MAX_LAYER_BUTTONS
        buttons = self.layer_buttons.buttons()
        if len(buttons) != (0 if many else num_layers):  # a new model: rebuild; otherwise only the checked one changes
            for button in buttons:
                self.layer_buttons.removeButton(button)
                button.deleteLater()
            for l in range(0 if many else num_layers):
                button = QPushButton(f"layer {l}", checkable=True)
                self.layer_buttons.addButton(button, l)
                self.layer_bar.addWidget(button)
        if self.layer_box.count() != (num_layers if many else 0):
            self.layer_box.clear()
            self.layer_box.addItems([f"layer {l} of {num_layers}" for l in range(num_layers)] if many else [])
        self.layer_box.setVisible(many)
        if many:
            self.layer_box.setCurrentIndex(layer)
        else:
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
                and np.array_equal(a.expert_override, b.expert_override) and np.array_equal(a.head_mask, b.head_mask)
                and np.array_equal(experts_off(a), experts_off(b)))

    def request_whatif(self) -> None:
        trace = self.trace
        if trace is None:
            return
        layer, position = self._drawn_target
        expert = self.whatif.expert_box.currentIndex()
        only = self.whatif.mode_box.currentIndex() == 1
        try:
            override = routing.force_expert(trace.expert_override, trace.layers[layer].router_logits[position],
                                            layer, position, expert, only, off=self.routing.off)
        except ValueError as exc:   # e.g. an expert switched off
            self.whatif.show_message(str(exc))
            return
        self.pending = WhatIfRequest(layer, position, expert, only, override, trace)
        self._draw_whatif()
        self.sigRequestVariant.emit(WHATIF_TAG, {"expert_override": override, "head_mask": np.array(trace.head_mask),
                                                "fields": whatif_fields(layer, position)})

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
        QTimer.singleShot(0, self.scroll_to_result)   # once the column is laid out with the bars shown

    def scroll_to_result(self) -> None:
        """The result sits under the controls: in a short dock, bring its top to the top of the column."""
        top = self.whatif.result_widget.mapTo(self.right.widget(), QPoint(0, 0)).y()
        self.right.verticalScrollBar().setValue(top)

    # ------------------------------------------------------------ switching experts off

    def switch_expert(self, layer: int, expert: int, on: bool) -> None:
        """Ask for every run to have this expert on or off in this layer (the Interventions panel's value)."""
        if self.trace is None:
            return
        try:
            interventions = switch_expert(self.trace, layer, expert, on)
        except ValueError as exc:   # fewer than k experts would remain
            self.load.show_refusal(str(exc))
            self.load.draw(self.routing)   # the switch goes back to what the run has
            return
        self.load.show_refusal("")
        self.sigSetInterventions.emit(interventions)

    # ------------------------------------------------------------ mouse

    def _on_hover(self, cell) -> None:
        if self.trace is None or cell is None:
            return self._hover_token(-1)
        self.hover.setText(self.routing.cell_text(*cell))
        self._hover_token(cell[0])

    def _hover_token(self, position: int) -> None:
        """Highlight the hovered token's characters in the sentence (-1: none); only when it changes."""
        if position < 0:
            self._show_idle_hover(always=True)
        if position == self._hovered:
            return
        self._hovered = position
        tokens = self.trace.tokenization.tokens if self.trace is not None and self.trace.tokenization else ()
        if 0 <= position < len(tokens):
            self.sigHoverText.emit(tokens[position].char_start, tokens[position].char_end)
        else:
            self.sigHoverText.emit(-1, -1)

    def _show_idle_hover(self, *_, always: bool = False) -> None:
        """No cell hovered: the line says how to read the cells, and how to reach the rows out of view."""
        if always or self._hovered < 0:
            first, last = self.router.visible_rows()
            windowed = last - first < len(self.router.row_labels)
            self.hover.setText(HOVER_TEXT + (MORE_ROWS_TEXT if windowed else ""))

    # ------------------------------------------------------------ export

    def figures(self) -> list[Figure]:
        if self.trace is None or not self.trace.config.is_moe:
            return []
        shown = self.routing
        width = max(pages.PAGE_WIDTH, self.router.least_width(shown.n_experts))   # 64 experts: a wider page
        figures = [Figure("moe_router_probs", self.router, shown.csv, page_size=lambda: self.router.page_size(width)),
                   Figure("moe_expert_load", self.load.plots, shown.load_csv,   # the chart: no switches, no token list
                          extra_tables={"moe_expert_tokens": shown.tokens_csv})]
        if self.result is not None:
            figures.append(Figure("moe_whatif", self.whatif.result_widget, self.result.comparison().csv))
        return figures
