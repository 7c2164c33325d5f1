"""Two token × expert heatmaps of one MoE layer: the router's probabilities, and the weights actually used.

Drawn from a core.routing_view.LayerRouting. The chosen cells carry a black-and-white double outline
(visible on any colour), forced cells an orange one, the selected token's row a dashed red one.
Long sentences, or a short dock, open on a window of rows around the selected token, each row tall enough
for its label and numbers (LEGIBLE_ROW_PX); drag to move, the wheel zooms.
Many experts (32, 64): each column keeps MIN_EXPERT_PX, the two heatmaps scroll sideways when that is
wider than the dock, and the expert numbers under them are thinned to the room a number has.
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QPalette, QPen
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from core.routing_view import LayerRouting, expert_ticks
from gui import plotting
from gui.fonts import ui_font
from gui.heatmap import CellText, Heatmap, cells_path, cosmetic_pen

# A column this wide still shows its colour inside the chosen cells' double outline (5 px of it).
MIN_EXPERT_PX = 12
NUMBER_EXPERT_PX = 30  # a column this wide holds its numbers ("0.27", gui.heatmap.MIN_LABEL_CELL_PX) with room
LEGIBLE_ROW_PX = 13.0  # a row this tall holds its number and keeps its token name (gui.token_axis's pitch)
CHROME_PX = 190        # the token names, the colour bar and the margins, until laid out once

CONVENTION = ("Hugging Face: softmax over all experts → keep top-k → renormalise to sum 1; "
              "mistral-inference: top-k logits → softmax over the k; the same numbers.")
CHOSEN_OUTER = QColor(0, 0, 0)
CHOSEN_INNER = QColor(255, 255, 255)
FORCED_COLOUR = QColor(255, 127, 14)      # forced by an override: orange, unlike the router's own choice
SELECTED_ROW_COLOUR = QColor(214, 39, 40)
ROW_LABEL_COLUMNS = 16                    # "12 token": the position and a short word
WINDOW_ROWS = 40                          # long sentences open on at most 40 rows around the selected token
PAGE_ROW_PX = 22.0                        # a figure's row: its number and token name with room
COLOUR_BAR_NAME = "probability · weight"  # what a colour means, in either heatmap


class RouterView(QWidget):
    """sigCellHovered / sigCellClicked: (token, expert) under the mouse in either heatmap."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.explanation = QLabel(wordWrap=True)
        self.plots = pg.GraphicsLayoutWidget()
        self.scroll = QScrollArea()   # sideways only: the rows move by dragging (the plots' own window)
        self.scroll.setWidget(self.plots)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.explanation)
        layout.addWidget(self.scroll, 1)
        self.probs_plot = self._matrix_plot(0, "router probability", rows_named=True)
        self.weights_plot = self._matrix_plot(1, "weight used", rows_named=False)
        self.weights_plot.setYLink(self.probs_plot)
        self.weights_plot.getAxis("left").setStyle(showValues=False)
        self.weights_plot.setLabel("left", "")
        # Its rows are the token names' rows: no labels, and no bare tick marks either. The ticks keep their
        # length (the axis its width: both heatmaps' columns stay as wide), drawn with no pen.
        self.weights_plot.getAxis("left").setTickPen(QPen(Qt.PenStyle.NoPen))
        self.colour_bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=plotting.colormap(), interactive=False,
                                          width=10)   # on screen its meaning is in both titles: no label to take width
        self.on_page = False
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
        self.row_labels: list[str] = []
        self.off = np.zeros(0, bool)                 # [E] the experts switched off, for the numbers under the columns
        self.selected_row = 0
        self.probs_plot.vb.sigYRangeChanged.connect(self._on_rows_moved)
        self.probs_plot.vb.sigResized.connect(self._fit_rows)
        self.probs_plot.vb.sigResized.connect(self._on_rows_moved)
        self.probs_plot.vb.sigResized.connect(self._number_experts)
        self.probs_plot.vb.sigResized.connect(self._align_colour_bar)
        for plot in both:
            plot.vb.sigResized.connect(self._even_columns)
        self.plots.ci.layout.setColumnStretchFactor(0, 1)
        self.plots.ci.layout.setColumnStretchFactor(1, 1)

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

    def set_on_page(self, on_page: bool) -> None:
        """On paper the caption sits on the page's colour with a margin, not on a band of the window's grey."""
        from gui.theme import page_background

        self.setAutoFillBackground(on_page)
        if on_page:
            palette = self.palette()
            palette.setColor(QPalette.ColorRole.Window, page_background())
            self.setPalette(palette)
        self.explanation.setContentsMargins(*((10, 6, 10, 2) if on_page else (0, 0, 0, 0)))
        self.on_page = on_page
        if on_page:   # a figure on its own: its colour bar says what the colours mean
            self.colour_bar.axis.setLabel(COLOUR_BAR_NAME)
        else:
            self.colour_bar.axis.showLabel(False)
        if self.row_labels:
            self._fit_rows()   # every row on a page, a window of them on screen

    def page_size(self, width: int) -> QSize:
        """The figure's page at `width`: every row PAGE_ROW_PX high under its caption, titles and expert
        numbers (measured laid out at that width), the plots no lower than the colour bar's name."""
        from gui.figure_pages import rows_page

        least = self.colour_bar.axis.label.boundingRect().width() + 8 if self.on_page else 0
        return rows_page(self, self.probs_plot.vb, len(self.row_labels), width, PAGE_ROW_PX, least)

    def draw(self, routing: LayerRouting) -> None:
        n_tokens, n_experts = routing.probs.shape
        self.explanation.setText(_explanation(routing))
        _draw_matrix(self.probs_plot, self.probs_text, routing.probs.astype(np.float64), None)
        _draw_matrix(self.weights_plot, self.weights_text, routing.weights, ~routing.chosen)
        self.marked = {(int(t), int(e)) for t, e in zip(*np.nonzero(routing.chosen))}
        path = cells_path(sorted(self.marked))
        for outer, inner in self.chosen_outlines:
            outer.setPath(path)
            inner.setPath(path)
        self.forced = set(routing.forced)
        forced_path = cells_path(sorted(self.forced))
        for item in self.forced_outlines:
            item.setPath(forced_path)
        self.row_labels = [f"{i} {label}" for i, label in enumerate(routing.labels)]
        self.probs_plot.set_row_labels(self.row_labels, ROW_LABEL_COLUMNS)
        self.off = np.array(routing.off, bool)
        for plot in (self.probs_plot, self.weights_plot):
            plot.setLimits(xMin=0, xMax=n_experts, yMin=0, yMax=n_tokens, minYRange=min(4, n_tokens))
            plot.setXRange(0, n_experts, padding=0)
        self.probs_plot.setYRange(0, self.window_rows(), padding=0)
        self._number_experts()
        self._on_rows_moved()

    def least_width(self, n_experts: int) -> int:
        """The plots' width at which every expert column is MIN_EXPERT_PX wide (narrower: it scrolls)."""
        return self._plots_width_for(n_experts, MIN_EXPERT_PX)

    def numbers_width(self, n_experts: int) -> int:
        """This view's width at which every expert column holds its numbers (NUMBER_EXPERT_PX)."""
        return self.width() - self.plots.width() + self._plots_width_for(n_experts, NUMBER_EXPERT_PX)

    def _plots_width_for(self, n_experts: int, column_px: float) -> int:
        narrowest = min(self.probs_plot.vb.width(), self.weights_plot.vb.width())
        if narrowest <= 0:   # not laid out yet
            return round(2 * n_experts * column_px + CHROME_PX)
        # The two plots share any width given or taken equally: the narrower (the one with the token
        # names) must reach n × column_px. Mid-layout (a panel built hidden, then shown) the plots' cells
        # can be wider than the widget holding them: then nothing is needed (Qt warns at a negative size).
        return max(0, round(self.plots.width() + 2 * (n_experts * column_px - narrowest)))

    def window_rows(self) -> int:
        """How many rows to show at once: every row while each is LEGIBLE_ROW_PX tall, at most WINDOW_ROWS;
        on a page every row (the page is as high as they need)."""
        n_tokens, height = len(self.row_labels), self.probs_plot.vb.height()
        if self.on_page:
            return max(1, n_tokens)
        fitting = int(height // LEGIBLE_ROW_PX) if height > 0 else WINDOW_ROWS   # not laid out yet: the most
        return max(1, min(n_tokens, WINDOW_ROWS, max(fitting, 4)))

    def _fit_rows(self, *args) -> None:
        """A resized view shows as many legible rows as it now holds, around the selected token."""
        top, bottom = self.probs_plot.vb.viewRange()[1]
        if self.row_labels and round(bottom - top) != self.window_rows():
            self._show_rows_around(self.selected_row, self.window_rows())

    def _even_columns(self, *args) -> None:
        """Both heatmaps' cells equally wide: the token names come out of the first heatmap's half, not on
        top of it (an even split of the plots left the probabilities' columns too narrow for numbers)."""
        probs, weights = self.probs_plot, self.weights_plot
        both = probs.width() + weights.width()
        names = (probs.width() - probs.vb.width()) - (weights.width() - weights.vb.width())
        wanted = (both + names) / 2
        if both > 0 and abs(probs.width() - wanted) > 1:
            probs.setPreferredWidth(wanted)
            weights.setPreferredWidth(both - wanted)

    def _align_colour_bar(self, *args) -> None:
        """The colour bar as tall as the heatmaps' cells, not their cells and the expert numbers beneath:
        its margins grow or shrink by how far its bar's ends are from the cells' ends."""
        cells, bar = self.probs_plot.vb.sceneBoundingRect(), self.colour_bar.vb.sceneBoundingRect()
        above, below = cells.top() - bar.top(), bar.bottom() - cells.bottom()
        if cells.height() > 0 and max(abs(above), abs(below)) > 0.5:
            left, top, right, bottom = self.colour_bar.layout.getContentsMargins()
            self.colour_bar.layout.setContentsMargins(left, max(0.0, top + above), right, max(0.0, bottom + below))

    def column_px(self) -> float:
        """How wide one expert's column is on screen (in the narrower of the two heatmaps)."""
        return min(self.probs_plot.vb.width(), self.weights_plot.vb.width()) / max(1, len(self.off))

    def _number_experts(self, *args) -> None:
        """Columns kept MIN_EXPERT_PX wide (the chrome is known once laid out: again on every resize),
        and numbers under both heatmaps, as many as fit the columns' width (✕: switched off)."""
        least = self.least_width(len(self.off))
        if least != self.plots.minimumWidth():
            self.plots.setMinimumWidth(least)
        label_px = QFontMetricsF(ui_font(9)).horizontalAdvance(f"{len(self.off) - 1}" + ("✕" if self.off.any() else "")) + 4
        ticks = [(e + 0.5, text) for e, text in expert_ticks(self.off, label_px / max(1.0, self.column_px()))]
        for plot in (self.probs_plot, self.weights_plot):
            # numbers under the axis title "expert": "expert 3" per column does not fit 8 narrow columns
            plot.getAxis("bottom").setTicks([ticks, []])

    def select_row(self, row: int, n_tokens: int, n_experts: int) -> None:
        """Outline the selected token's row and bring it into view."""
        path = cells_path([(row, 0)], width=n_experts)
        for item in self.selected_rows:
            item.setPath(path)
        self.selected_row = row
        top, bottom = self.probs_plot.vb.viewRange()[1]
        if not top <= row + 0.5 <= bottom:
            self._show_rows_around(row, min(n_tokens, max(bottom - top, 1)))

    def _show_rows_around(self, row: int, rows: float) -> None:
        n_tokens = len(self.row_labels)
        rows = min(rows, n_tokens)
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
        # Short: it runs beside the rows shown, a dozen of them in a small dock.
        self.probs_plot.setLabel("left", "token" if last - first >= total else f"tokens {first}–{last - 1} of {total}")
        small = min(row_px, self.column_px()) < 9  # a 5 px double outline would hide cells a few pixels across
        for outer, inner in self.chosen_outlines:
            outer.setPen(cosmetic_pen(CHOSEN_OUTER, 1.0 if small else 3.5))
            inner.setVisible(not small)


def _draw_matrix(plot: Heatmap, text: CellText, values: np.ndarray, mask: np.ndarray | None) -> None:
    plot.image.setImage(plotting.masked_rgba(values, (0.0, 1.0), plotting.colormap(), mask), levels=(0, 255),
                        rect=QRectF(0, 0, values.shape[1], values.shape[0]))
    text.set_matrix(values, np.ones_like(values, dtype=bool) if mask is None else ~mask)


def _explanation(routing: LayerRouting) -> str:
    text = (f"<b>Layer {routing.layer}</b> · outlined: the top-{routing.k} of {routing.n_experts} experts "
            "each token is sent to")
    if routing.off.any():
        text += f" · ✕ switched off here: expert {', '.join(str(e) for e in np.flatnonzero(routing.off))}"
    if not routing.forced:
        text += (f" · <span title='{html.escape(CONVENTION)}'>Hugging Face's and mistral-inference's "
                 f"weights agree within {routing.convention_gap():.1e}</span>")   # how each computes them: its tooltip
    else:
        text += " <span style='color:#d9650b'>Orange outline: a forced expert (override), not the router's pick.</span>"
    return text
