"""Positions: the original Transformer's sinusoids, and RoPE on the model's own q and k.

Five pages in tabs, one exportable figure each. Every RoPE number drawn comes from the Trace
(q, q_rot, k) through core.positions; the sinusoidal pages are the paper's formula, shown
because the seeds explain it, with a plain note that this model uses RoPE instead.

Pages draw lazily: draw() marks them stale and redraws only the visible one; switching
tabs or asking for figures() draws the rest.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QFontMetricsF, QPen
from PySide6.QtWidgets import (QApplication, QCheckBox, QComboBox, QHBoxLayout, QLabel, QSlider, QSpinBox,
                               QTabWidget, QVBoxLayout, QWidget)

from core import positions as pos
from core.raw_export import csv_text, matrix_csv_text
from core.trace import Trace
from gui.fonts import ui_font
from gui.panels.base import Figure, Panel
from gui.plotting import DIVERGING, colormap, colour_bar, matrix_plot
from gui.qt_signals import qt_signals_blocked
from gui.selection import Selection
from gui.text_fit import LABEL_COLUMNS
from gui.token_axis import TokenAxis

BEFORE_PEN = pg.mkPen((110, 110, 110), width=2)
AFTER_COLOUR = (0, 114, 178)        # Okabe-Ito blue: the rotated vector
KEY_COLOUR = (213, 94, 0)           # Okabe-Ito vermillion: the contrast curve
TRAIL_BRUSH = pg.mkBrush(0, 114, 178, 70)
GUIDE_PEN = pg.mkPen((170, 170, 170), width=1, style=Qt.DashLine)
MAX_LEGEND_PAIRS = 8
SMOOTH_SAMPLES = 240   # points per sinusoid curve: smooth at dock size, cheap to paint
MAX_LABELLED_CELLS = 12
CELL_WIDTH, CELL_HEIGHT = 2.8, 3.4   # small-multiples grid spacing, in unit-circle radii
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)   # tick steps for model dimensions
ROUND_STEPS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)        # tick steps for positions and tokens


# ---------------------------------------------------------------- small drawing helpers

def arrow_segments(tips: np.ndarray, origins: np.ndarray | None = None,
                   head: float = 0.15) -> tuple[np.ndarray, np.ndarray]:  # [N, 2] -> x, y for connect="pairs"
    """Shaft plus two barbs per arrow, in data coordinates (the plots lock the aspect ratio).

    Segment 0 of arrow j is origin -> tip, so x[6j+1], y[6j+1] is exactly the tip drawn.
    """
    tips = np.asarray(tips, np.float64).reshape(-1, 2)
    origins = np.zeros_like(tips) if origins is None else np.asarray(origins, np.float64).reshape(-1, 2)
    direction = tips - origins
    length = np.maximum(np.hypot(direction[:, 0], direction[:, 1]), 1e-12)[:, None]
    back = -direction / length * head  # [N, 2] a barb's length, pointing back along the shaft
    barbs = [back @ _rotation(a).T for a in (np.radians(25), -np.radians(25))]
    points = np.stack([origins, tips, tips, tips + barbs[0], tips, tips + barbs[1]], axis=1).reshape(-1, 2)
    return points[:, 0], points[:, 1]


def _rotation(angle: float) -> np.ndarray:  # -> [2, 2]
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


def line(plot: pg.PlotItem, pen: QPen, **options) -> pg.PlotDataItem:
    """A curve on `plot`. Wide antialiased polylines are slow to rasterise; drawn as separate
    segments they paint several times faster, which keeps a redraw within the debounce budget."""
    item = plot.plot(pen=pen, **options)
    item.curve.setSegmentedLineMode("on")
    return item


def circle(radius: float, centre=(0.0, 0.0), start: float = 0.0, sweep: float = 2 * np.pi,
           n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    t = start + np.linspace(0.0, sweep, n)
    return centre[0] + radius * np.cos(t), centre[1] + radius * np.sin(t)


def caption(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setTextFormat(Qt.RichText)
    label.setContentsMargins(6, 2, 6, 2)
    return label


def pi_ticks(axis: pg.AxisItem) -> None:
    names = ["0", "π/2", "π", "3π/2", "2π"]
    axis.setTicks([[(k * np.pi / 2, name) for k, name in enumerate(names)], []])


class FittedTicks:
    """Labels at cell centres (i + 0.5), thinned to what the axis can show at its current size.

    Re-thinned whenever the view is resized or zoomed, so labels never pile on each other.
    """

    def __init__(self, plot: pg.PlotItem, side: str, pixels_per_label: float,
                 steps: tuple[int, ...] = ROUND_STEPS) -> None:
        self.plot, self.side, self.pixels, self.steps = plot, side, pixels_per_label, steps
        self.axis = plot.getAxis(side)
        self.axis.setStyle(hideOverlappingLabels=False)  # the first cell's label sits at the very edge
        self.labels: list[str] = []
        plot.vb.sigResized.connect(self.fit)
        plot.vb.sigRangeChanged.connect(self.fit)

    def set_labels(self, labels) -> None:
        self.labels = list(labels)
        if self.side in ("left", "right"):
            self._fit_width()
        self.fit()

    def _fit_width(self) -> None:
        # pyqtgraph drops any label wider than the axis and widens the axis only on a later
        # layout pass, so an export made right after a new sentence would miss the long labels.
        metrics = QFontMetricsF(self.axis.style.get("tickFont") or QApplication.font())
        text = max((metrics.horizontalAdvance(label) for label in self.labels), default=0.0)
        title = metrics.height() + 6 if self.axis.label.isVisible() else 0
        self.axis.setWidth(int(np.ceil(text + title + 14)))

    def fit(self, *_) -> None:
        vertical = self.side in ("left", "right")
        view = self.plot.vb
        length_px = view.height() if vertical else view.width()
        span = view.viewRange()[1 if vertical else 0]
        cells_per_px = (span[1] - span[0]) / max(length_px, 1.0)
        needed = self.pixels * cells_per_px
        step = next((s for s in self.steps if s >= needed), self.steps[-1])
        self.axis.setTicks([[(i + 0.5, self.labels[i]) for i in range(0, len(self.labels), step)], []])


def numbers(count: int) -> list[str]:
    return [str(i) for i in range(count)]


def plain_axes(plot: pg.PlotItem) -> pg.PlotItem:
    """No automatic SI prefixes: a user reading 0.2 off the axis must not see '200 (x0.001)'."""
    for side in ("left", "bottom"):
        plot.getAxis(side).enableAutoSIPrefix(False)
    return plot


class _FigureFrame(QWidget):
    """What one figure exports: a title/caption and the plots (no controls)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAutoFillBackground(True)
        self.setStyleSheet("background: white; color: black;")
        self.caption = caption()
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setMinimumHeight(260)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.caption)
        layout.addWidget(self.graphics, 1)

    def add_plot(self, row: int, col: int, token_rows: bool = False) -> pg.PlotItem:
        """token_rows: a TokenAxis on the left names the rows (tokens)."""
        axes = {"left": TokenAxis("left")} if token_rows else {}
        return plain_axes(self.graphics.addPlot(row=row, col=col, axisItems=axes))


class _Page(QWidget):
    """One tab: optional controls above a _FigureFrame. Subclasses draw(trace, selection)."""
    figure_name = ""
    tab_title = ""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.frame = _FigureFrame()
        self.controls = QHBoxLayout()
        self.controls.setContentsMargins(6, 2, 6, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(self.controls)
        layout.addWidget(self.frame, 1)
        self.stale = True

    def draw(self, trace: Trace, selection: Selection) -> None:
        raise NotImplementedError

    def table(self) -> str:
        raise NotImplementedError


# ---------------------------------------------------------------- sinusoidal PE (the original Transformer)

class SinusoidalPage(_Page):
    figure_name = "positions_sinusoidal"
    tab_title = "Sinusoidal PE"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controls.setContentsMargins(0, 0, 0, 0)
        self.table_values = np.zeros((0, 0), np.float32)
        cmap = colormap(DIVERGING)
        self.heat_plot = self.frame.add_plot(row=0, col=0)
        matrix_plot(self.heat_plot, "dimension", "position")
        self.heat_plot.setTitle("PE[position, dimension]")
        self.image = pg.ImageItem()
        self.heat_plot.addItem(self.image)
        self.bar = colour_bar(self.heat_plot, self.image, (-1.0, 1.0), cmap, "PE value")
        self.dim_ticks = FittedTicks(self.heat_plot, "bottom", 30, POWERS_OF_TWO)
        self.position_ticks = FittedTicks(self.heat_plot, "left", 16)
        self.curve_plot = self.frame.add_plot(row=0, col=1)
        self.curve_plot.setLabel("bottom", "position")
        self.curve_plot.setLabel("left", "PE value")
        self.curve_plot.setTitle("a few dimensions over position")
        self.curve_plot.setYRange(-1.1, 1.1, padding=0)
        self.legend = pg.LegendItem(labelTextSize="8pt", colCount=3, frame=False)
        self.frame.graphics.addItem(self.legend, row=1, col=1)
        self.curves: dict[int, tuple[pg.PlotDataItem, pg.ScatterPlotItem]] = {}

    def draw(self, trace: Trace, selection: Selection) -> None:
        n, d = trace.n_tokens, trace.config.hidden_size
        self.table_values = pos.sinusoidal_table(n, d)
        self.image.setImage(self.table_values, levels=(-1.0, 1.0), autoLevels=False)
        self.heat_plot.setRange(xRange=(0, d), yRange=(0, n), padding=0)
        self.dim_ticks.set_labels(numbers(d))
        self.position_ticks.set_labels(numbers(n))
        self._draw_curves(n, d)
        self.frame.caption.setText(
            f"<b>Sinusoidal position encoding — the original Transformer's way</b> "
            f"(Vaswani et al. 2017), for this sentence's {n} positions × D = {d}: "
            f"PE[pos, 2j] = sin(pos / 10000<sup>2j/D</sup>), PE[pos, 2j+1] = cos(…), always in [−1, 1]. "
            f"<span style='color:#b00'>The loaded model does not use this table:</span> it uses RoPE "
            f"(see the RoPE tabs), rotating q and k inside attention instead of adding anything to the embedding.")

    def _draw_curves(self, n: int, d: int) -> None:
        dims = pos.sinusoidal_dims_to_show(d)
        if sorted(self.curves) != dims:
            self._rebuild_curves(dims)
        smooth = np.linspace(0, max(n - 1, 1), SMOOTH_SAMPLES)
        values = pos.sinusoidal_values(smooth, d)                       # [S, D]
        at_tokens = self.table_values                                   # [n, D]
        for dim, (curve, dots) in self.curves.items():
            curve.setData(smooth, values[:, dim])
            dots.setData(np.arange(n), at_tokens[:, dim])
        self.curve_plot.setXRange(0, max(n - 1, 1), padding=0.02)

    def _rebuild_curves(self, dims: list[int]) -> None:
        for curve, dots in self.curves.values():
            self.curve_plot.removeItem(curve)
            self.curve_plot.removeItem(dots)
        self.legend.clear()
        self.curves = {}
        for rank, dim in enumerate(dims):
            colour = pg.intColor(rank, hues=max(len(dims), 5), values=1, maxValue=200)
            kind = "sin" if dim % 2 == 0 else "cos"
            curve = line(self.curve_plot, pen=pg.mkPen(colour, width=2))
            self.legend.addItem(curve, f"dim {dim} ({kind})")
            dots = pg.ScatterPlotItem(size=5, brush=pg.mkBrush(colour), pen=None)
            self.curve_plot.addItem(dots)
            self.curves[dim] = (curve, dots)

    def table(self) -> str:
        n, d = self.table_values.shape
        return matrix_csv_text(self.table_values, [str(i) for i in range(n)],
                               [f"dim {j}" for j in range(d)], corner="position")


class EmbedPlusPePage(_Page):
    figure_name = "positions_embed_plus_pe"
    tab_title = "Embedding + PE"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.scale_box = QCheckBox("scale the embedding by √D first (as the paper does)")
        self.scale_box.toggled.connect(lambda _: self.redraw())
        self.controls.addWidget(self.scale_box)
        self.controls.addStretch(1)
        self.trace: Trace | None = None
        self.embedding = self.summed = np.zeros((0, 0), np.float32)
        self.labels: list[str] = []
        cmap = colormap(DIVERGING)
        self.plots, self.images, self.dim_ticks = [], [], []
        for col, title in enumerate(["token embedding (this run)", "embedding + PE"]):
            plot = self.frame.add_plot(row=0, col=col, token_rows=col == 0)
            matrix_plot(plot, "dimension", "token" if col == 0 else "")
            plot.setTitle(title)
            image = pg.ImageItem()
            image.setColorMap(cmap)
            plot.addItem(image)
            self.plots.append(plot)
            self.images.append(image)
            self.dim_ticks.append(FittedTicks(plot, "bottom", 30, POWERS_OF_TWO))
        self.plots[1].setYLink(self.plots[0])
        self.bar = colour_bar(self.plots[1], self.images[1], (-1.0, 1.0), cmap, "value")

    def draw(self, trace: Trace, selection: Selection) -> None:
        self.trace = trace
        self.redraw()

    def redraw(self) -> None:
        trace = self.trace
        if trace is None:
            return
        d = trace.config.hidden_size
        factor = float(np.sqrt(d)) if self.scale_box.isChecked() else 1.0
        self.embedding = (trace.embed * np.float32(factor)).astype(np.float32)
        self.summed = pos.embed_plus_pe(self.embedding)
        self.labels = [f"{i} {label}" for i, label in enumerate(trace.labels())]
        limit = float(max(np.abs(self.summed).max(), np.abs(self.embedding).max(), 1e-6))
        for plot, image, values in zip(self.plots, self.images, (self.embedding, self.summed)):
            image.setImage(values, levels=(-limit, limit), autoLevels=False)
            plot.setRange(xRange=(0, d), yRange=(0, trace.n_tokens), padding=0)
        for ticks in self.dim_ticks:
            ticks.set_labels(numbers(d))
        self.plots[0].getAxis("left").set_labels(self.labels, columns=LABEL_COLUMNS + 4)
        self.plots[1].getAxis("left").setTicks([[], []])
        self.bar.setLevels((-limit, limit))
        rms_embed = float(np.sqrt(np.mean(self.embedding.astype(np.float64) ** 2)))
        rms_pe = float(np.sqrt(np.mean((self.summed - self.embedding).astype(np.float64) ** 2)))
        scaled = f" × √D = {factor:.3g}" if factor != 1.0 else ""
        self.frame.caption.setText(
            f"<b>What the original Transformer's first block reads: embedding{scaled} + PE.</b> "
            f"Each row is one token: its embedding row (looked up by token id) plus the sinusoid row of its "
            f"position, so the same token at two positions gives two different rows. Typical size (RMS): "
            f"embedding {rms_embed:.3g}, PE {rms_pe:.3g}. Same colour scale on both. "
            f"(This model adds nothing here: its first block reads the token embedding alone.)")

    def table(self) -> str:
        corner = "token \\ embedding×√D + PE" if self.scale_box.isChecked() else "token \\ embedding + PE"
        return matrix_csv_text(self.summed, self.labels, [f"dim {j}" for j in range(self.summed.shape[1])],
                               corner=corner)

    def embedding_table(self) -> str:
        return matrix_csv_text(self.embedding, self.labels,
                               [f"dim {j}" for j in range(self.embedding.shape[1])], corner="token \\ embedding")


# ---------------------------------------------------------------- RoPE: one vector's pairs as arrows

class RopePairsPage(_Page):
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
        self.legend = pg.LegendItem(labelTextSize="8pt", colCount=3, frame=False)
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
        self.small.setTitle("all pairs, unit length", size="9pt")
        self.small.setMouseEnabled(False, False)
        self.small.scene().sigMouseClicked.connect(self._clicked_small)
        self.small_rings = line(self.small, pen=GUIDE_PEN, connect="finite")
        self.small_before = line(self.small, pen=pg.mkPen((110, 110, 110), width=1.5), connect="pairs")
        self.small_after = line(self.small, pen=pg.mkPen(AFTER_COLOUR, width=2), connect="pairs")
        self.small_box = line(self.small, pen=pg.mkPen(KEY_COLOUR, width=2))
        self.small_texts: list[pg.TextItem] = []
        self.frame.graphics.ci.layout.setColumnStretchFactor(0, 3)
        self.frame.graphics.ci.layout.setColumnStretchFactor(1, 2)

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
        self.frame.caption.setText(
            f"<b>RoPE on the model's own q</b> — layer {selection.layer}, head {selection.head}, "
            f"token {m} “{trace.label(m)}” (position m = {m}). RoPE splits q's {trace.config.head_dim} "
            f"dimensions into {n_pairs} planes — pair i is dims (i, i + {trace.config.head_dim // 2}), the "
            f"rotate-half pairing this model uses — and turns pair i by m·θ<sub>i</sub>, "
            f"θ<sub>i</sub> = {trace.config.rope_theta:g}<sup>−2i/{trace.config.head_dim}</sup>. "
            f"Grey: this run's query before RoPE; blue: the rotated query the model used. Low pairs spin fast, high pairs slowly.")

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
                          f"<span style='color:#0072b2'>m·θ{_sub(i)} = {m} × {theta:.4g} = {angle:.4g} rad "
                          f"= {angle / (2 * np.pi):.3g} turns → turned {np.degrees(turned):.1f}°</span>",
                          size="9pt")
        self.big.setRange(xRange=(-1.3 * radius, 1.3 * radius), yRange=(-1.3 * radius, 1.3 * radius), padding=0)
        self.pair_dims.setText(f"dims {dim_a} & {dim_b}")

    def _cell_centres(self, n_pairs: int) -> np.ndarray:  # -> [P, 2]
        cols = self._columns(n_pairs)
        index = np.arange(n_pairs)
        return np.stack([(index % cols) * CELL_WIDTH, -(index // cols) * CELL_HEIGHT], axis=1)

    @staticmethod
    def _columns(n_pairs: int) -> int:
        return int(np.ceil(np.sqrt(n_pairs * 1.3)))   # a little wider than tall, like the space it gets

    def _draw_small_multiples(self) -> None:
        pairs = self.pairs
        n_pairs = len(pairs.angle)
        centres = self._cell_centres(n_pairs)
        unit = np.maximum(pairs.length, 1e-12)[:, None]
        rings_x, rings_y = [], []
        for c in centres:
            x, y = circle(1.0, centre=c, n=48)
            rings_x += [x, [np.nan]]
            rings_y += [y, [np.nan]]
        self.small_rings.setData(np.concatenate(rings_x), np.concatenate(rings_y))
        self.small_before.setData(*arrow_segments(centres + pairs.before / unit, centres, head=0.25))
        self.small_after.setData(*arrow_segments(centres + pairs.after / unit, centres, head=0.25))
        self._sync_small_texts(n_pairs)
        with_degrees = n_pairs <= MAX_LABELLED_CELLS   # past that, labels would not fit a cell
        for i, (text, c) in enumerate(zip(self.small_texts, centres)):
            text.setText(f"{i}: {np.degrees(pairs.measured_angle[i]):.0f}°" if with_degrees else str(i))
            text.setPos(c[0], c[1] - 1.05)
        cols = self._columns(n_pairs)
        rows = int(np.ceil(n_pairs / cols))
        self.small.setRange(xRange=(-1.3, (cols - 1) * CELL_WIDTH + 1.3),
                            yRange=(-(rows - 1) * CELL_HEIGHT - 2.0, 1.3), padding=0)

    def _sync_small_texts(self, n_pairs: int) -> None:
        while len(self.small_texts) < n_pairs:
            text = pg.TextItem(color=(60, 60, 60), anchor=(0.5, 0))
            text.setFont(ui_font(7.5))
            self.small.addItem(text)
            self.small_texts.append(text)
        while len(self.small_texts) > n_pairs:
            self.small.removeItem(self.small_texts.pop())

    def _draw_small_box(self) -> None:
        if self.pairs is None:
            return
        cx, cy = self._cell_centres(len(self.pairs.angle))[self.pair]
        bottom, top = cy - 1.95, cy + 1.2   # the ring and the label under it
        self.small_box.setData([cx - 1.3, cx + 1.3, cx + 1.3, cx - 1.3, cx - 1.3], [bottom, bottom, top, top, bottom])

    def _clicked_small(self, event) -> None:
        if self.pairs is None or not self.small.sceneBoundingRect().contains(event.scenePos()):
            return
        point = self.small.vb.mapSceneToView(event.scenePos())
        centres = self._cell_centres(len(self.pairs.angle))
        distance = np.hypot(centres[:, 0] - point.x(), centres[:, 1] - point.y())
        if distance.min() < 1.4:
            self.set_pair(int(np.argmin(distance)))

    def table(self) -> str:
        p = self.pairs
        rows = [("pair", "dim_a", "dim_b", "position_m", "theta_i_rad_per_position", "m_theta_i_rad",
                 "turned_deg_measured", "q_a_before", "q_b_before", "q_a_after", "q_b_after")]
        for i in range(len(p.angle)):
            rows.append((i, int(p.dims[i, 0]), int(p.dims[i, 1]), p.position, repr(float(p.frequency[i])),
                         repr(float(p.angle[i])), repr(float(np.degrees(p.measured_angle[i]))),
                         *(repr(float(v)) for v in (*p.before[i], *p.after[i]))))
        return csv_text(rows)


def _sub(i: int) -> str:
    return str(i).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


# ---------------------------------------------------------------- RoPE: rotation speed of every pair

class RopeAnglesPage(_Page):
    figure_name = "positions_rope_angles"
    tab_title = "RoPE angles"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controls.setContentsMargins(0, 0, 0, 0)
        self.angles = np.zeros((0, 0))
        self.plot = self.frame.add_plot(row=0, col=0)
        self.plot.setLabel("bottom", "position m")
        self.plot.setLabel("left", "angle m·θᵢ, wrapped to [0, 2π)")
        pi_ticks(self.plot.getAxis("left"))
        self.plot.setYRange(0, 2 * np.pi, padding=0.02)
        self.legend = pg.LegendItem(labelTextSize="8pt", colCount=4, frame=False)
        self.frame.graphics.addItem(self.legend, row=1, col=0)
        self.sentence = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(0, 0, 0, 18), pen=pg.mkPen(None))
        self.plot.addItem(self.sentence)
        self.cursor = pg.InfiniteLine(angle=90, pen=pg.mkPen(KEY_COLOUR, width=1.5, style=Qt.DashLine))
        self.plot.addItem(self.cursor)
        self.speed = self.frame.add_plot(row=0, col=1)
        self.speed.setLogMode(False, True)
        self.speed.setLabel("bottom", "pair i")
        self.speed.setLabel("left", "θᵢ, radians per position")
        self.speed.setTitle("rotation speed", size="9pt")
        self.speed_points = pg.ScatterPlotItem(size=9, pen=None)
        self.speed.addItem(self.speed_points)
        self.frame.graphics.ci.layout.setColumnStretchFactor(0, 4)
        self.frame.graphics.ci.layout.setColumnStretchFactor(1, 1)
        self.curves: list[pg.PlotDataItem] = []

    def draw(self, trace: Trace, selection: Selection) -> None:
        cfg = trace.config
        context, n_pairs = cfg.max_position_embeddings, cfg.head_dim // 2
        positions = np.arange(context)
        self.angles = pos.pair_angles(positions, cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)   # [N, P] unwrapped
        wrapped = pos.wrap_angle(self.angles)
        colours = [colormap("viridis").map(x, mode="qcolor") for x in np.linspace(0.0, 0.9, n_pairs)]
        if len(self.curves) != n_pairs:
            self._rebuild_curves(n_pairs, colours)
        for i, curve in enumerate(self.curves):
            keep = np.append(np.diff(wrapped[:, i]) >= 0, True)   # break the line where it wraps past 2π
            curve.setData(positions, wrapped[:, i], connect=keep)
        m = selection.query_index(trace.n_tokens)
        self.sentence.setRegion((0, trace.n_tokens - 1))
        self.cursor.setValue(m)
        self.plot.setXRange(0, context - 1, padding=0.01)
        freq = pos.pair_frequencies(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)
        self.speed_points.setData(np.arange(n_pairs), np.log10(freq), brush=[pg.mkBrush(c) for c in colours])
        self.speed.setXRange(-0.5, n_pairs - 0.5, padding=0)
        self.plot.setTitle(f"angle of every pair over the {context}-token context", size="9pt")
        self.frame.caption.setText(
            f"<b>Different rotation speeds.</b> Each line is one of the {n_pairs} pairs: pair i turns by "
            f"θ<sub>i</sub> = {cfg.rope_theta:g}<sup>−2i/{cfg.head_dim}</sup> radians per position, so its angle "
            f"m·θ<sub>i</sub> grows linearly; shown <i>wrapped</i> to [0, 2π) (a drop is one full turn). "
            f"Pair 0 turns {np.degrees(freq[0]):.0f}° per token; pair {n_pairs - 1} only "
            f"{np.degrees(freq[-1]):.3g}°. Shaded: this sentence's positions; dashed: the selected token m = {m}.")

    def _rebuild_curves(self, n_pairs: int, colours) -> None:
        for curve in self.curves:
            self.plot.removeItem(curve)
        self.legend.clear()
        shown = set(np.round(np.linspace(0, n_pairs - 1, min(n_pairs, MAX_LEGEND_PAIRS))).astype(int))
        self.curves = []
        for i in range(n_pairs):
            curve = line(self.plot, pen=pg.mkPen(colours[i], width=1.5))
            if i in shown:
                self.legend.addItem(curve, f"pair {i}")
            self.curves.append(curve)

    def table(self) -> str:
        n, p = self.angles.shape
        return matrix_csv_text(self.angles, numbers(n), [f"pair {i} (rad, unwrapped)" for i in range(p)],
                               corner="position m")


# ---------------------------------------------------------------- RoPE: only the distance matters

class RelativePage(_Page):
    figure_name = "positions_relative"
    tab_title = "Relative position"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controls.setContentsMargins(0, 0, 0, 0)
        self.demo: pos.RelativeDemo | None = None
        self.shift_plot = self.frame.add_plot(row=0, col=0)
        self.shift_plot.setLabel("bottom", "shift s")
        self.shift_plot.setLabel("left", "q·k (= score × √Dh)")
        self.both = line(self.shift_plot, pen=pg.mkPen(AFTER_COLOUR, width=3))
        self.query_only = line(self.shift_plot, pen=pg.mkPen(KEY_COLOUR, width=1.5))
        legend = pg.LegendItem(labelTextSize="8pt", colCount=2, frame=False)
        self.frame.graphics.addItem(legend, row=1, col=0, colspan=2)
        legend.addItem(self.both, "q at m+s, k at n+s (moved together)")
        legend.addItem(self.query_only, "q at m+s, k stays at n (moved apart)")
        self.actual_shift = pg.ScatterPlotItem(size=10, brush=pg.mkBrush(0, 0, 0), pen=None)
        self.shift_plot.addItem(self.actual_shift)
        self.distance_plot = self.frame.add_plot(row=0, col=1)
        self.distance_plot.setLabel("bottom", "relative distance m − n")
        self.distance_plot.setLabel("left", "q·k")
        self.by_distance = line(self.distance_plot, pen=pg.mkPen(AFTER_COLOUR, width=1.5))
        self.actual_distance = pg.InfiniteLine(angle=90, pen=pg.mkPen(KEY_COLOUR, width=1.5, style=Qt.DashLine))
        self.distance_plot.addItem(self.actual_distance)
        self.actual_point = pg.ScatterPlotItem(size=10, brush=pg.mkBrush(0, 0, 0), pen=None)
        self.distance_plot.addItem(self.actual_point)

    def draw(self, trace: Trace, selection: Selection) -> None:
        m, n = selection.query_index(trace.n_tokens), selection.key_index(trace.n_tokens)
        demo = self.demo = pos.relative_demo(trace, selection.layer, selection.head, m, n)
        self.both.setData(demo.shifts, demo.dot_shift_both)
        self.query_only.setData(demo.shifts, demo.dot_shift_query)
        self.actual_shift.setData([0], [demo.dot_at_shift(0)])
        self.shift_plot.setTitle(f"move both by s: m − n stays {demo.distance}", size="9pt")
        self.by_distance.setData(demo.distances, demo.dot_by_distance)
        self.actual_distance.setValue(demo.distance)
        self.actual_point.setData([demo.distance], [demo.dot_by_distance[demo.distance]])
        self.distance_plot.setTitle(f"q·k against distance (this pair: {demo.distance})", size="9pt")
        self.frame.caption.setText(self._caption(trace, selection, demo))

    @staticmethod
    def _caption(trace: Trace, selection: Selection, demo: pos.RelativeDemo) -> str:
        m, n = demo.query_pos, demo.key_pos
        same = " &nbsp;·&nbsp; ".join(f"({m + s}, {n + s}) → {demo.dot_at_shift(s):.6f}"
                                      for s in demo.example_shifts())
        apart = ""
        if m + 1 < demo.context:
            moved = demo.dot_shift_query[int(np.searchsorted(demo.shifts, 1))]
            apart = f"<br>Moved apart, (m+1, n) = ({m + 1}, {n}) → {moved:.6f}: the distance changed, so did q·k."
        return (f"<b>Only the distance matters.</b> Layer {selection.layer}, head {selection.head}: the model's "
                f"q of token {m} “{trace.label(m)}” and k of token {n} “{trace.label(n)}” (Query m / Key n above), "
                f"rotated as if they sat at positions (query, key):<br>"
                f"Moved together: {same}{apart}<br>"
                f"The runner's own q_rot·k_rot at ({m}, {n}) = {demo.runner_dot:.6f}.")

    def table(self) -> str:
        d = self.demo
        rows = [("curve", "query_position", "key_position", "distance", "shift", "q_dot_k")]
        for s, both in zip(d.shifts, d.dot_shift_both):
            rows.append(("shift both", d.query_pos + s, d.key_pos + s, d.distance, s, repr(float(both))))
        for s, only in zip(d.shifts, d.dot_shift_query):
            rows.append(("shift query only", d.query_pos + s, d.key_pos, d.distance + s, s, repr(float(only))))
        for dist, value in zip(d.distances, d.dot_by_distance):
            rows.append(("by distance", int(dist), 0, int(dist), "", repr(float(value))))
        rows.append(("runner q_rot.k_rot", d.query_pos, d.key_pos, d.distance, 0, repr(d.runner_dot)))
        return csv_text(rows)


# ---------------------------------------------------------------- the panel

class PositionsPanel(Panel):
    title = "Positions"
    object_name = "positions"
    empty_text = "Type a sentence to see how position gets into the model."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._token_labels: tuple[str, ...] = ()
        self.pages: list[_Page] = [SinusoidalPage(), EmbedPlusPePage(), RopePairsPage(), RopeAnglesPage(),
                                   RelativePage()]
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        for page in self.pages:
            self.tabs.addTab(page, page.tab_title)
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

    def _draw_visible(self) -> None:
        page = self.tabs.currentWidget()
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

    def _lay_out_like_visible(self, page: _Page) -> None:
        """A hidden tab keeps its first size (Qt lays out hidden widgets lazily): give it the visible one's,
        so an exported figure has the proportions the user sees."""
        visible = self.tabs.currentWidget()
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

    # ------------------------------------------------------------ pages by name (tests, export)
    def page(self, figure_name: str) -> _Page:
        return next(p for p in self.pages if p.figure_name == figure_name)

    def figures(self) -> list[Figure]:
        if self.trace is None:
            return []
        self.draw_all()
        embed_page = self.page("positions_embed_plus_pe")
        return [Figure(page.figure_name, page.frame, page.table,
                       {"positions_embed_plus_pe_embedding": embed_page.embedding_table}
                       if page is embed_page else {})
                for page in self.pages]
