"""Attention: every head as a thumbnail, the selected head large, and the head view's lines.

Three pictures of the same numbers, ``trace.layers[l].attn`` [H, T, T] (row = query, column = key),
whose scales, hover text and tables come from core.attention_view:
- the layer × head grid (gui.head_grid): click a thumbnail to pick a head;
- the selected head as a heatmap (gui.heatmap): query tokens down, key tokens across, masked cells
  grey; hover a cell for its weight and score, click it to pick that query and key;
- the head view (gui.head_lines): the selected head, or every head of the layer in its own colour.

A selection change redraws only what depends on it: clicking through heads never redraws the grid.

The grid also switches heads off and on (its corner boxes, right-click, a layer's name): the panel
turns that into the app's one core.interventions.Interventions value — the head mask changed, the
ablate mode and experts kept — and asks the controller for it (sigSetInterventions), as the
Interventions panel does; both show the run in force, so a switch in one shows in the other. The
mode box here shows and edits that same ablate mode. Role badges come from core.role_badges: the
sentence's scores from the Trace, the probe's from the controller's worker (sigRequestProbe).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSizeF, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QScrollArea, QSizePolicy, QSplitter,
                               QVBoxLayout, QWidget)

from core import attention_view as av
from core.experiment_runs import ablations_only
from core.head_roles import HeadRoles
from core.interventions import Interventions
from core.role_badges import BADGE_THRESHOLD, BADGES, head_badges, score_lines
from gui import figure_pages as pages
from gui import plotting
from gui.head_grid import MARK_COLOUR, HeadGridArea
from gui.head_lines import HeadLinesView
from gui.heatmap import Heatmap
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked
from gui.theme import on_paper
from gui.wrapped_label import WrappedLabel

# Okabe–Ito: distinguishable for colour-blind readers; more heads than colours cycle through them.
HEAD_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
HOVER_HINT = "Hover a cell for its weight and score; click it to select that query and key."
ABLATE_CHOICES = (("zero", "zero"), ("mean", "its mean"))   # (Interventions.ablate_mode, shown)
MIN_WIDTH_SLACK = 40   # px the head view's minimum width may exceed what its labels need
DEEP_GRID_ROWS = 4       # rows of thumbnails a deep model's grid shows whole
DEEP_GRID_SHARE = 0.6    # of the right-hand column, at most
GRID_HINT = f"Badges: role score ≥ {BADGE_THRESHOLD:g} · switch off: corner box, right-click, or a layer's name"
GRID_HELP = (f"Badges ({' · '.join(BADGES.values())}): a role the head scores ≥ {BADGE_THRESHOLD:g} on, on this "
             "sentence or on the probe; hover a thumbnail for its scores (the Head roles panel defines them). "
             "Switch a head off with its corner box, a right-click or Ctrl+click; a whole layer by clicking its name.")
ABLATE_HELP = ("What a head switched off in the grid (or in the Interventions panel: the same setting) outputs: "
               "zero, or its mean output over this sentence's positions.")


class AttentionPanel(Panel):
    title = "Attention"
    object_name = "attention"
    figure_names = dict.fromkeys(("attention_grid", "attention_head", "attention_lines"), "")

    @property
    def fields(self) -> tuple[str, ...]:
        return av.attention_fields(self.selection.layer)
    empty_text = "Type a sentence to see how each token attends to the ones before it."

    sigRequestProbe = Signal()   # the controller answers set_probe(HeadRoles) for the current bundle

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pending: Interventions | None = None   # asked for, not yet the run shown
        self.roles: HeadRoles | None = None          # role scores on the sentence
        self.probe: HeadRoles | None = None          # role scores on the bundle's probe
        self._probe_model = None                     # the model the probe was asked for
        self._cmap = plotting.colormap()
        self._trace_serial = 0               # bumps on every set_trace: what "the trace changed" means
        self._drawn: dict[str, tuple] = {}   # what each view last drew, to skip redraws
        self._maxima: np.ndarray | None = None   # [L, H] av.head_maxima of the current trace
        self.scale: av.AttentionScale | None = None
        self.shown: tuple[int, int] | None = None  # (layer, head) in the large view
        self.read_cell: tuple[int, int] | None = None  # (query, key) the line under the heatmap reads out
        self.set_content(self._build())
        self.refresh()

    # -------------------------------------------------------------- building
    def _build(self) -> QWidget:
        self.scale_combo = QComboBox()
        for mode in av.SCALE_MODES:
            self.scale_combo.addItem(mode.choice, mode.key)
        self.scale_combo.setToolTip(av.SCALE_HELP)
        self.scale_combo.currentIndexChanged.connect(self.refresh)
        self.all_heads_box = QCheckBox("Lines: all heads of the layer")
        self.all_heads_box.setToolTip("Head view: every head of the selected layer, one colour per head")
        self.all_heads_box.toggled.connect(self.refresh)
        self.ablate_combo = QComboBox()
        for mode, shown in ABLATE_CHOICES:
            self.ablate_combo.addItem(shown, mode)
        self.ablate_combo.setToolTip(ABLATE_HELP)
        self.ablate_combo.currentIndexChanged.connect(lambda _index: self._set_ablate_mode())
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Colour scale:"))
        controls.addWidget(self.scale_combo)
        controls.addStretch(1)
        switched_off = QLabel("A switched-off head outputs")
        switched_off.setToolTip(ABLATE_HELP)
        controls.addWidget(switched_off)
        controls.addWidget(self.ablate_combo)
        controls.addWidget(self.all_heads_box)

        self.grid_area = HeadGridArea()   # big models' grids scroll: thumbnails keep a visible size
        self.grid = self.grid_area.grid
        self.grid.sigHeadClicked.connect(lambda layer, head: self.sigSelect.emit({"layer": layer, "head": head}))
        self.grid.sigHeadToggled.connect(self.toggle_head)
        self.grid.sigLayerToggled.connect(self.toggle_layer)
        self.matrix_view = self._build_matrix()
        self.hover_label = QLabel(HOVER_HINT)
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # its text never sets the panel's width (a long hover text widened the window past 1280 px): cut instead
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.lines_view = HeadLinesView()
        self.lines_view.sigTokenClicked.connect(self._on_token_clicked)
        self.lines_scroll = QScrollArea()
        self.lines_scroll.setWidgetResizable(True)
        self.lines_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.lines_scroll.setWidget(self.lines_view)

        matrix_box = QWidget()
        matrix_layout = QVBoxLayout(matrix_box)
        matrix_layout.setContentsMargins(0, 0, 0, 0)
        matrix_layout.addWidget(self.matrix_view, 1)
        matrix_layout.addWidget(self.hover_label)
        # The large head gets the full height (every row labelled while it can be); the grid sits
        # above the head view, whose width suits a row of thumbnails.
        self.grid_area.setMinimumHeight(170)   # thumbnails big enough for their boxes, badges and head names
        self.grid_help = WrappedLabel(GRID_HINT)   # two lines in a narrow column, never over the grid
        self.grid_help.setToolTip(GRID_HELP)
        grid_box = QWidget()
        grid_layout = QVBoxLayout(grid_box)
        grid_layout.setContentsMargins(0, 0, 0, 0)
        grid_layout.addWidget(self.grid_area, 1)
        grid_layout.addWidget(self.grid_help)
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(grid_box)
        right.addWidget(self.lines_scroll)
        right.setSizes([200, 360])   # proportions: a row of thumbnails, the head view below
        self._right = right
        self.grid.sigShapeChanged.connect(self._share_height_with_grid)
        content = QSplitter(Qt.Orientation.Horizontal)
        content.addWidget(matrix_box)
        content.addWidget(right)
        content.setStretchFactor(0, 3)
        content.setStretchFactor(1, 2)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(controls)
        layout.addWidget(content, 1)
        return page

    def _share_height_with_grid(self) -> None:
        """A deep model's grid gets the height of up to DEEP_GRID_ROWS rows of thumbnails (a box two rows
        high hides the model's depth), at most DEEP_GRID_SHARE of the column; two layers keep 200 : 360."""
        total = sum(self._right.sizes()) or 560
        if self.grid.shape[0] <= 2:
            grid_px = round(total * 200 / 560)
        else:
            wanted = self.grid.height_for_rows(DEEP_GRID_ROWS, self.grid_area.viewport().width()) + \
                self.grid_help.sizeHint().height()
            grid_px = min(wanted, round(DEEP_GRID_SHARE * total))
        self._right.setSizes([grid_px, total - grid_px])

    def _build_matrix(self) -> pg.GraphicsLayoutWidget:
        view = pg.GraphicsLayoutWidget()
        self.matrix = Heatmap("key token →", "query token ↓")
        view.addItem(self.matrix)
        # The bar is not linked to the image: the image is coloured by hand (masked cells grey).
        self.colour_bar = plotting.ColourBar(values=(0.0, 1.0), colorMap=self._cmap,
                                             label=av.SCALE_MODES[0].bar_label, interactive=False, width=14)
        view.addItem(self.colour_bar)
        self.query_mark = self.matrix.add_outline(MARK_COLOUR, 1.5, Qt.PenStyle.DashLine)
        self.key_mark = self.matrix.add_outline(MARK_COLOUR, 3)
        self.matrix.sigCellHovered.connect(self._on_cell_hovered)
        self.matrix.sigCellClicked.connect(
            lambda query, key: self.sigSelect.emit({"query": query, "key": key if key <= query else None}))
        return view

    # -------------------------------------------------------------- contract
    def set_trace(self, trace) -> None:
        self._trace_serial += 1
        self._pending = None   # the new run carries the interventions in force
        self._maxima = av.head_maxima(trace) if trace is not None and not self.fields_missing(trace) else None
        self.roles = None
        super().set_trace(trace)

    def set_probe(self, probe: HeadRoles) -> None:
        """The controller's answer to sigRequestProbe: role scores on the current bundle's probe."""
        self.probe = probe
        self.refresh()

    def clear(self) -> None:
        self._drawn.clear()
        self.shown = None

    def draw(self) -> None:
        trace, sel = self.trace, self.selection
        layer, head = sel.layer, sel.head
        query, key = sel.query_index(trace.n_tokens), sel.key_index(trace.n_tokens)
        self.scale = av.attention_scale(self._maxima, self.scale_combo.currentData())
        if self._changed("grid", self._trace_serial, self.scale.mode.key):
            self.grid.show_heads(trace, self.scale)
        if self._changed("switches", self._trace_serial):
            self._show_switches(self.in_force())
        self._ask_for_probe()
        if self._changed("badges", self._trace_serial, id(self.probe)):
            self._draw_badges()
        self.grid.select(layer, head)
        if self._changed("labels", self._trace_serial):
            self.read_cell = None
            self.hover_label.setText(HOVER_HINT)
            labels = trace.labels()
            self.matrix.set_row_labels(labels)
            self.matrix.set_col_labels(labels)
        if self._changed("matrix", self._trace_serial, layer, head, self.scale.mode.key):
            self._draw_matrix(layer, head)
        self.query_mark.setPath(_rect_path(0, query, trace.n_tokens, 1))
        self.key_mark.setPath(_rect_path(key, query, 1, 1))
        all_heads = self.all_heads_box.isChecked()
        if self._changed("lines", self._trace_serial, layer, head, all_heads):
            self._draw_lines(layer, head, all_heads)
        self.lines_view.set_selected(query, key)

    def figures(self) -> list[Figure]:
        if self.trace is None:
            return []
        trace, layer, head = self.trace, self.selection.layer, self.selection.head
        every_layer, every_head = range(trace.num_layers), range(trace.num_heads)
        lines_heads = every_head if self.all_heads_box.isChecked() else [head]
        n = trace.n_tokens
        return [
            Figure("attention_grid", self.grid, lambda: av.long_csv(trace, every_layer, every_head),
                   page_size=lambda: pages.grid_page(self.grid, n)),
            Figure("attention_head", self.matrix_view, lambda: av.head_csv(trace, layer, head, "attn"),
                   {"attention_head_scores": lambda: av.head_csv(trace, layer, head, "scores")},
                   page_size=lambda: pages.cells_page(self.matrix_view, self.matrix.vb, n, n,
                                                      QSizeF(pages.cell_size(n), pages.cell_size(n)))),
            Figure("attention_lines", self.lines_view, lambda: av.long_csv(trace, [layer], lines_heads),
                   page_size=lambda: pages.lines_page(self.lines_view)),
        ]

    # -------------------------------------------------------------- drawing
    def _changed(self, view: str, *key) -> bool:
        if self._drawn.get(view) == key:
            return False
        self._drawn[view] = key
        return True

    def _draw_matrix(self, layer: int, head: int) -> None:
        trace, levels = self.trace, self.scale.levels(layer, head)
        attn = trace.layers[layer].attn[head]
        self.matrix.set_rgba(plotting.masked_rgba(attn, levels, self._cmap, av.causal_mask(trace.n_tokens)))
        ablated = "  (switched off)" if trace.head_mask[layer, head] == 0 else ""
        # Two lines: as one, the title's width was the plot's least width, and a narrow dock (1280 × 800)
        # then pushed the colour bar's numbers out of the view.
        title = f"Layer {layer} · head {head}{ablated}<br>grey: masked (key after query)"
        if title != self.matrix.titleLabel.text:   # a title re-lays the plot out: only when it changes
            self.matrix.setTitle(title, size="9pt")
        self.colour_bar.setLevels(plotting.finite_levels(levels))  # NaN runs: the bar still needs numbers
        self.colour_bar.set_title(self.scale.mode.bar_label)
        self.shown = (layer, head)
        if self.read_cell is not None:   # the same cell, read from the head now shown
            self.hover_label.setText(av.cell_text(self.trace, layer, head, *self.read_cell))

    def _draw_lines(self, layer: int, head: int, all_heads: bool) -> None:
        trace = self.trace
        heads = list(range(trace.num_heads)) if all_heads else [head]
        colours = [on_paper(QColor(HEAD_COLOURS[h % len(HEAD_COLOURS)])) for h in heads]   # lighter on dark paper
        which = f"all heads of layer {layer}" if all_heads else f"layer {layer} · head {head}"
        self.lines_view.set_lines(trace.labels(), trace.layers[layer].attn[heads], colours,
                                  [f"H{h}" for h in heads], f"{which} — line opacity = weight")
        # Keep both label columns in sight: the splitter will not squeeze the head view below this. A new
        # minimum relays the whole window out, so it changes only when the labels need more room or
        # much less (a few pixels of slack from sentence to sentence cost nothing).
        scroll_bar = self.lines_scroll.verticalScrollBar().sizeHint().width()
        needed = self.lines_view.minimumSizeHint().width() + scroll_bar + 4
        if not needed <= self.lines_scroll.minimumWidth() <= needed + MIN_WIDTH_SLACK:
            self.lines_scroll.setMinimumWidth(needed)

    def _draw_badges(self) -> None:
        if self.roles is None:
            self.roles = av.sentence_roles_held(self.trace)
        L, H = self.trace.num_layers, self.trace.num_heads
        probe = self.probe if self.probe is not None and self.probe.scores.shape[:2] == (L, H) else None
        self.grid.set_badges(head_badges(self.roles, probe),
                             [[score_lines(self.roles, probe, l, h) for h in range(H)] for l in range(L)])

    def _ask_for_probe(self) -> None:
        model = self.trace.weights.get("model.norm.weight")   # one array per bundle: a new bundle, a new probe
        if model is not None and model is not self._probe_model:
            self._probe_model, self.probe = model, None
            self.sigRequestProbe.emit()

    # -------------------------------------------------------------- switching heads off
    def in_force(self) -> Interventions:
        """The ablations of the run shown, or those just asked for (a second click before the run is back)."""
        if self._pending is not None:
            return self._pending
        # The trace's own head mask is the run's; its interventions give the mode and the experts off.
        return replace(ablations_only(self.trace.interventions), head_mask=self.trace.head_mask)

    def _head_mask(self) -> np.ndarray:  # -> [L, H] float32, a copy to change
        return np.array(self.in_force().head_mask, np.float32)

    def toggle_head(self, layer: int, head: int) -> None:
        """Switch one head off (to 0), or back on (to 1) if it is off."""
        if self.trace is None:
            return
        mask = self._head_mask()
        mask[layer, head] = 0.0 if mask[layer, head] != 0 else 1.0
        self._ask(mask, self.in_force().ablate_mode)

    def toggle_layer(self, layer: int) -> None:
        """Every head of the layer off while any is on; all back on once all are off."""
        if self.trace is None:
            return
        mask = self._head_mask()
        mask[layer] = 0.0 if (mask[layer] != 0).any() else 1.0
        self._ask(mask, self.in_force().ablate_mode)

    def _set_ablate_mode(self) -> None:
        if self.trace is not None and self.ablate_combo.currentData() != self.in_force().ablate_mode:
            self._ask(self._head_mask(), self.ablate_combo.currentData())

    def _ask(self, head_mask: np.ndarray, mode: str) -> None:
        current = self.in_force()
        self._pending = Interventions(head_mask=head_mask, ablate_mode=mode, experts_off=current.experts_off)
        self._show_switches(self._pending)
        self.sigSetInterventions.emit(self._pending)

    def _show_switches(self, interventions: Interventions) -> None:
        self.grid.set_switches(interventions.head_mask, interventions.ablate_mode)
        with qt_signals_blocked(self.ablate_combo):
            self.ablate_combo.setCurrentIndex(self.ablate_combo.findData(interventions.ablate_mode))

    # -------------------------------------------------------------- mouse
    def _on_cell_hovered(self, cell) -> None:
        if cell is None or self.shown is None:
            self.matrix_view.setToolTip("")
            return
        self.read_cell = cell
        text = av.cell_text(self.trace, *self.shown, *cell)
        self.hover_label.setText(text)
        self.matrix_view.setToolTip(text)

    def _on_token_clicked(self, side: str, position: int) -> None:
        if side == "query":
            self.sigSelect.emit({"query": position, "key": None})
            return
        query = self.selection.query_index(self.trace.n_tokens)
        self.sigSelect.emit({"query": max(query, position), "key": position})


def _rect_path(x: float, y: float, width: float, height: float):
    path = pg.QtGui.QPainterPath()
    path.addRect(QRectF(x, y, width, height))
    return path
