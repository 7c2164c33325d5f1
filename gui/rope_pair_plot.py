"""RoPE on the model's own q, one query vector at a time: the selected pair as a large before/after arrow
with its angle m·θ_i, and every pair as a small multiple (click one to pick it).

The arrows are the Trace's q (grey) and q_rot (blue) exactly (core.positions.query_pairs); the trail
is the same q at the sentence's other positions. The small multiples are a grid of unit cells, one per
pair, read from the bottom-left like the plot's axes, so a click is picked by gui.cell_picking.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QLabel, QSlider, QSpinBox, QWidget

from core import positions as pos
from core.trace import Trace
from gui.cell_picking import cell_under
from gui.figure_tab import FigureTab
from gui.fonts import ui_font
from gui.plot_shapes import AFTER_COLOUR, BEFORE_PEN, GUIDE_PEN, KEY_COLOUR, TRAIL_BRUSH, arrow_segments, circle, line
from gui.qt_signals import qt_signals_blocked
from gui.selection import Selection
from gui.theme import ink

LEGEND_COLUMNS = 1
MAX_LABELLED_CELLS = 12   # past that, "12: 180°" would not fit a cell: the pair number only
RING_RADIUS = 0.3         # in cells; each ring sits in the upper part of its cell, its label below
RING_HEIGHT = 0.62        # the ring's centre, up from the cell's bottom edge
LABEL_ROOM = 1 - 2 * RING_RADIUS   # of a cell, from under its ring to the ring below: a label needing more is hidden


class RopePairPlot(FigureTab):
    figure_name = "positions_rope_pairs"
    tab_title = "RoPE pairs"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pair = 0
        self.pairs: pos.RopePairs | None = None
        self.trace: Trace | None = None
        self._build_controls()
        self.big = self.frame.add_plot(row=0, col=0)
        self.big.setAspectLocked(True)
        # one column: two of these long entries held the figure wider than a 1280×800 screen's dock
        self.legend = pg.LegendItem(labelTextSize="8pt", colCount=LEGEND_COLUMNS, frame=False)
        self.frame.graphics.addItem(self.legend, row=1, col=0, colspan=2)
        self.ring = line(self.big, pen=GUIDE_PEN)
        self.trail = pg.ScatterPlotItem(size=6, brush=TRAIL_BRUSH, pen=None)
        self.big.addItem(self.trail)
        self.arc = line(self.big, pen=pg.mkPen(AFTER_COLOUR, width=1.5, style=Qt.DotLine))
        self.before_arrow = line(self.big, pen=BEFORE_PEN, connect="pairs")
        self.after_arrow = line(self.big, pen=pg.mkPen(AFTER_COLOUR, width=3), connect="pairs")
        self.legend.addItem(self.before_arrow, "q before RoPE (this run's query)")
        self.legend.addItem(self.after_arrow, "after RoPE, at position m (the rotated query from this run)")
        self.legend.addItem(self.trail, "same q at the sentence's other positions")
        self.small = self.frame.add_plot(row=0, col=1)
        self.small.setAspectLocked(True)
        self.small.hideAxis("left")
        self.small.hideAxis("bottom")
        self._title_small(on_page=False)
        self.frame.page_hooks.append(self._title_small)
        self.small.setMouseEnabled(False, False)
        self.small.scene().sigMouseClicked.connect(self._clicked_small)
        self.small_rings = line(self.small, pen=GUIDE_PEN, connect="finite")
        self.small_before = line(self.small, pen=pg.mkPen((110, 110, 110), width=1.5), connect="pairs")
        self.small_after = line(self.small, pen=pg.mkPen(AFTER_COLOUR, width=2), connect="pairs")
        self.small_box = line(self.small, pen=pg.mkPen(KEY_COLOUR, width=2))
        self.small_texts: list[pg.TextItem] = []
        self.small.vb.sigResized.connect(self._show_labels_that_fit)
        self.frame.graphics.ci.layout.setColumnStretchFactor(0, 3)
        self.frame.graphics.ci.layout.setColumnStretchFactor(1, 2)

    def _title_small(self, on_page: bool) -> None:
        """The small multiples' title; on an exported page (gui.figure_pages.on_page) nothing is clicked."""
        self.small.setTitle("all pairs, unit length" + ("" if on_page else " (click one)"), size="9pt")

    def _build_controls(self) -> None:
        self.pair_slider = QSlider(Qt.Horizontal)
        self.pair_spin = QSpinBox()
        self.pair_dims = QLabel()
        self.pair_slider.valueChanged.connect(self.set_pair)
        self.pair_spin.valueChanged.connect(self.set_pair)
        self.controls.addWidget(QLabel("pair i"))
        self.controls.addWidget(self.pair_spin)
        self.controls.addWidget(self.pair_slider, 1)
        self.controls.addWidget(self.pair_dims)

    def set_pair(self, pair: int) -> None:
        self.pair = int(pair)
        with qt_signals_blocked(self.pair_slider, self.pair_spin):
            self.pair_slider.setValue(self.pair)
            self.pair_spin.setValue(self.pair)
        self._draw_selected_pair()
        self._draw_small_box()

    def draw(self, trace: Trace, selection: Selection) -> None:
        self.trace = trace
        m = selection.query_index(trace.n_tokens)
        self.pairs = pos.query_pairs(trace, selection.layer, selection.head, m)
        n_pairs = len(self.pairs.angle)
        with qt_signals_blocked(self.pair_slider, self.pair_spin):
            self.pair_slider.setRange(0, n_pairs - 1)
            self.pair_spin.setRange(0, n_pairs - 1)
        self.pair = min(self.pair, n_pairs - 1)
        self._draw_small_multiples()
        self.set_pair(self.pair)
        cfg = trace.config
        self.frame.caption.setText(
            f"<b>RoPE on the model's own q</b> — layer {selection.layer}, head {selection.head}, "
            f"token {m} “{trace.label(m)}” (position m = {m}). RoPE splits q's {cfg.head_dim} "
            f"dimensions into {n_pairs} planes — pair i is dims (i, i + {cfg.head_dim // 2}), the "
            f"rotate-half pairing this model uses — and turns pair i by m·θ<sub>i</sub>, "
            f"θ<sub>i</sub> = {cfg.rope_theta:g}<sup>−2i/{cfg.head_dim}</sup>. "
            f"Grey: this run's query before RoPE; blue: the rotated query the model used. Low pairs spin fast, high pairs slowly.")

    def table(self) -> str:
        return self.pairs.csv()

    # ------------------------------------------------------------ the selected pair, large
    def _draw_selected_pair(self) -> None:
        pairs, trace = self.pairs, self.trace
        if pairs is None or trace is None:
            return
        i, m = self.pair, pairs.position
        radius = max(float(np.nan_to_num(pairs.length[i], nan=1.0, posinf=1.0)), 1e-9)  # NaN run: a unit ring
        self.ring.setData(*circle(radius))
        self.trail.setData(pos=pos.pair_trail(pairs, np.arange(trace.n_tokens), i))
        head = 0.12 * radius
        self.before_arrow.setData(*arrow_segments(pairs.before[i], head=head))
        self.after_arrow.setData(*arrow_segments(pairs.after[i], head=head))
        start = float(np.arctan2(pairs.before[i, 1], pairs.before[i, 0]))
        turned = float(pairs.measured_angle[i])
        self.arc.setData(*circle(0.35 * radius, start=start, sweep=turned))
        dim_a, dim_b = (int(v) for v in pairs.dims[i])
        angle, theta = float(pairs.angle[i]), float(pairs.frequency[i])
        self.big.setLabel("bottom", f"q[{dim_a}]")
        self.big.setLabel("left", f"q[{dim_b}]")
        self.big.setTitle(f"pair {i}: dims ({dim_a}, {dim_b}), θ{_sub(i)} = {theta:.4g} rad per position<br>"
                          f"<span style='color:{ink('#0072b2', '#56b4e9').name()}'>m·θ{_sub(i)} = {m} × {theta:.4g} = {angle:.4g} rad "
                          f"= {angle / (2 * np.pi):.3g} turns → turned {np.degrees(turned):.1f}°</span>",
                          size="9pt")
        self.big.setRange(xRange=(-1.3 * radius, 1.3 * radius), yRange=(-1.3 * radius, 1.3 * radius), padding=0)
        self.pair_dims.setText(f"dims {dim_a} & {dim_b}")

    # ------------------------------------------------------------ every pair, small
    def _draw_small_multiples(self) -> None:
        pairs = self.pairs
        n_pairs = len(pairs.angle)
        centres = ring_centres(n_pairs)
        unit = np.maximum(pairs.length, 1e-12)[:, None] / RING_RADIUS
        rings = [circle(RING_RADIUS, centre=c, n=48) for c in centres]
        self.small_rings.setData(np.concatenate([np.append(x, np.nan) for x, _ in rings]),
                                 np.concatenate([np.append(y, np.nan) for _, y in rings]))
        self.small_before.setData(*arrow_segments(centres + pairs.before / unit, centres, head=0.08))
        self.small_after.setData(*arrow_segments(centres + pairs.after / unit, centres, head=0.08))
        self._sync_small_texts(n_pairs)
        with_degrees = n_pairs <= MAX_LABELLED_CELLS
        for i, (text, c) in enumerate(zip(self.small_texts, centres)):
            text.setText(f"{i}: {np.degrees(pairs.measured_angle[i]):.0f}°" if with_degrees else str(i))
            text.setPos(c[0], c[1] - RING_RADIUS - 0.02)
        rows, cols = grid_shape(n_pairs)
        self.small.setRange(xRange=(0, cols), yRange=(0, rows), padding=0.02)
        self._show_labels_that_fit()

    def _show_labels_that_fit(self) -> None:
        """The pair numbers only while a cell has room for one under its ring: in a short dock they lay over
        the rings of the row below, and the bottom row's ran off the plot (the pair picked is named in the
        spin box and the large plot's title)."""
        if not self.small_texts:
            return
        cell_px = 1 / max(self.small.vb.viewPixelSize()[1], 1e-9)   # screen pixels per cell, up and down
        first = self.small_texts[0].textItem   # the digits' ink: the item's top padding, then their ascent
        needed = first.document().documentMargin() + QFontMetricsF(first.font()).ascent()
        fits = needed <= LABEL_ROOM * cell_px
        for label in self.small_texts:
            label.setVisible(fits)

    def _sync_small_texts(self, n_pairs: int) -> None:
        while len(self.small_texts) < n_pairs:
            text = pg.TextItem(color=ink("#3c3c3c", "#b4b4b4"), anchor=(0.5, 0))   # seen on either theme
            text.setFont(ui_font(7.5))
            self.small.addItem(text)
            self.small_texts.append(text)
        while len(self.small_texts) > n_pairs:
            self.small.removeItem(self.small_texts.pop())

    def _draw_small_box(self) -> None:
        if self.pairs is None:
            return
        row, col = pair_cell(self.pair, len(self.pairs.angle))
        left, right, bottom, top = col + 0.04, col + 0.96, row + 0.02, row + 0.98
        self.small_box.setData([left, right, right, left, left], [bottom, bottom, top, top, bottom])

    def _clicked_small(self, event) -> None:
        if self.pairs is None:
            return
        n_pairs = len(self.pairs.angle)
        cell = cell_under(self.small, event.scenePos(), *grid_shape(n_pairs))
        pair = next((i for i in range(n_pairs) if pair_cell(i, n_pairs) == cell), None)
        if pair is not None:
            self.set_pair(pair)


def grid_shape(n_pairs: int) -> tuple[int, int]:  # -> (rows, cols)
    cols = int(np.ceil(np.sqrt(n_pairs * 1.3)))   # a little wider than tall, like the space it gets
    return int(np.ceil(n_pairs / cols)), cols


def pair_cell(pair: int, n_pairs: int) -> tuple[int, int]:
    """(row, col) of a pair's unit cell: pair 0 top left, rows counted up from the bottom like y."""
    rows, cols = grid_shape(n_pairs)
    return rows - 1 - pair // cols, pair % cols


def ring_centres(n_pairs: int) -> np.ndarray:  # -> [P, 2] in data coordinates
    cells = np.array([pair_cell(i, n_pairs) for i in range(n_pairs)], np.float64).reshape(-1, 2)
    return np.stack([cells[:, 1] + 0.5, cells[:, 0] + RING_HEIGHT], axis=1)


def _sub(i: int) -> str:
    return str(i).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))
