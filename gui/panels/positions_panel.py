"""Positions: the original Transformer's sinusoids, and RoPE on the model's own q and k.

Five tabs, one exportable figure each (gui.figure_tab.FigureTab): the sinusoidal table
(gui.sinusoid_plot), embedding + PE (gui.embed_plus_pe_plot), one query's RoPE pairs
(gui.rope_pair_plot), every pair's angle over the context (gui.rope_angle_plot) and the
relative-position property (gui.relative_position_plot). Every RoPE number drawn comes from the
Trace (q, q_rot, k) through core.positions; the sinusoidal tabs are the paper's formula, shown
because the seeds explain it, with a plain note that this model uses RoPE instead.

Tabs draw lazily: draw() marks them stale and redraws only the visible one; switching tabs or
asking for figures() draws the rest.
"""
from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QTabWidget, QVBoxLayout, QWidget

from core.trace import Trace
from core.trace_fields import of_layer
from gui import figure_pages as pages
from gui.embed_plus_pe_plot import EmbedPlusPePlot
from gui.figure_tab import FigureTab
from gui.fill_scroll_area import FillScrollArea
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked
from gui.relative_position_plot import RelativePositionPlot
from gui.rope_angle_plot import RopeAnglePlot
from gui.rope_pair_plot import RopePairPlot
from gui.sinusoid_plot import SinusoidPlot

TOKEN_ROW = 14.0     # pixels per token row of the embedding + PE heatmaps: every row keeps its label
ROWS_CHROME = 110    # their titles, dimension axis and its title


class PositionsPanel(Panel):
    title = "Positions"
    object_name = "positions"
    figure_names = dict.fromkeys(("positions_sinusoidal", "positions_embed_plus_pe", "positions_rope_pairs",
                                  "positions_rope_angles", "positions_relative"), "")

    @property
    def fields(self) -> tuple[str, ...]:   # the embedding, and the selected layer's q and k around RoPE
        return ("embed",) + of_layer(self.selection.layer, ("q", "k", "q_rot", "k_rot"))
    empty_text = "Type a sentence to see how position gets into the model."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._token_labels: tuple[str, ...] = ()
        self.pages: list[FigureTab] = [SinusoidPlot(), EmbedPlusPePlot(), RopePairPlot(), RopeAnglePlot(),
                                       RelativePositionPlot()]
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        for page in self.pages:   # a page taller than a small dock (its caption wraps to four lines) scrolls
            area = FillScrollArea()
            area.setWidget(page)
            self.tabs.addTab(area, page.tab_title)
        self.tabs.currentChanged.connect(lambda _: self._draw_visible())
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(self._build_selectors())
        layout.addWidget(self.tabs, 1)
        self.set_content(content)
        self.refresh()

    def _build_selectors(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setContentsMargins(6, 4, 6, 2)
        row.setSpacing(4)
        self.layer_spin, self.head_spin = QSpinBox(), QSpinBox()
        self.query_combo, self.key_combo = QComboBox(), QComboBox()
        for combo in (self.query_combo, self.key_combo):
            combo.setMinimumContentsLength(8)
            combo.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.layer_spin.valueChanged.connect(lambda v: self.sigSelect.emit({"layer": int(v)}))
        self.head_spin.valueChanged.connect(lambda v: self.sigSelect.emit({"head": int(v)}))
        self.query_combo.activated.connect(lambda i: self.sigSelect.emit({"query": int(i)}))
        self.key_combo.activated.connect(lambda i: self.sigSelect.emit({"key": int(i)}))
        for text, widget in (("Layer", self.layer_spin), ("Head", self.head_spin),
                             ("Query m", self.query_combo), ("Key n", self.key_combo)):
            row.addWidget(QLabel(text))
            row.addWidget(widget)
            row.addSpacing(8)
        row.addStretch(1)
        return row

    # ------------------------------------------------------------ drawing
    def draw(self) -> None:
        self._sync_selectors(self.trace)
        for page in self.pages:
            page.stale = True
        self._draw_visible()

    def visible_page(self) -> FigureTab | None:
        index = self.tabs.currentIndex()
        return self.pages[index] if 0 <= index < len(self.pages) else None

    def _draw_visible(self) -> None:
        page = self.visible_page()
        if self.trace is not None and page is not None and page.stale:
            page.draw(self.trace, self.selection)
            page.stale = False

    def draw_all(self) -> None:
        """Bring every page up to date (exports need the hidden tabs too)."""
        if self.trace is None:
            return
        for page in self.pages:
            if page.stale:
                page.draw(self.trace, self.selection)
                page.stale = False
            self._lay_out_like_visible(page)

    def _lay_out_like_visible(self, page: FigureTab) -> None:
        """A hidden tab keeps its first size (Qt lays out hidden widgets lazily): give it the visible one's,
        so an exported figure has the proportions the user sees."""
        visible = self.visible_page()
        if page is visible or visible is None or not visible.width():
            return
        page.resize(visible.size())
        page.layout().setGeometry(QRect(QPoint(0, 0), visible.size()))

    def _sync_selectors(self, trace: Trace) -> None:
        sel, n = self.selection, trace.n_tokens
        with qt_signals_blocked(self.layer_spin, self.head_spin, self.query_combo, self.key_combo):
            self.layer_spin.setRange(0, trace.num_layers - 1)
            self.layer_spin.setValue(sel.layer)
            self.head_spin.setRange(0, trace.num_heads - 1)
            self.head_spin.setValue(sel.head)
            if trace.tokens != self._token_labels or self.query_combo.count() != n:
                items = [f"{i}: {label}" for i, label in enumerate(trace.labels())]
                for combo in (self.query_combo, self.key_combo):
                    combo.clear()
                    combo.addItems(items)
                self._token_labels = trace.tokens
            self.query_combo.setCurrentIndex(sel.query_index(n))
            self.key_combo.setCurrentIndex(sel.key_index(n))

    # ------------------------------------------------------------ export
    def figures(self) -> list[Figure]:
        if self.trace is None:
            return []
        self.draw_all()
        return [Figure(page.figure_name, page.frame, page.table, page.extra_tables(),
                       page_size=lambda page=page: pages.captioned_page(page.frame.caption, self.plots_height(page)))
                for page in self.pages]

    def plots_height(self, page: FigureTab) -> int:
        """The plots' height on the page: a slide's plot, and for the embedding a legible row per token."""
        if isinstance(page, EmbedPlusPePlot):
            return max(pages.PLOT_HEIGHT, round(self.trace.n_tokens * TOKEN_ROW) + ROWS_CHROME)
        return pages.PLOT_HEIGHT
