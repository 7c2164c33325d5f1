"""Attention: every head as a thumbnail, the selected head large, and the head view's lines.

Three pictures of the same numbers, ``trace.layers[l].attn`` [H, T, T] (row = query, column = key):
- a layer × head grid of thumbnails: one ViewBox, one ImageItem per head, no per-thumbnail axes;
- the selected head as a heatmap: query tokens down, key tokens across, masked cells grey;
- the head view (as in BertViz): queries on the left, keys on the right, one line per pair
  whose opacity is the weight, for the selected head or every head of the layer in its own colour.

A selection change redraws only what depends on it: the thumbnails depend on the trace and the
colour scale alone, so clicking through heads never rebuilds them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QImage, QPainter, QPen
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QScrollArea, QSizePolicy,
                               QSplitter, QStackedWidget, QVBoxLayout, QWidget)

from core.raw_export import csv_text, matrix_csv_text
from core.trace import Trace
from gui.fonts import ui_font
from gui.panels.base import Figure, Panel
from gui.plotting import colormap, finite_levels, masked_rgba, matrix_plot

GRID_GAP = 0.18                      # space between thumbnails, in thumbnail widths
MARK_COLOUR = QColor(230, 30, 60)    # selection outlines: red stands out on every viridis colour
SELECTED_BAND = QColor(255, 226, 140)
# Okabe–Ito: distinguishable for colour-blind readers; more heads than colours cycle through them.
HEAD_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
HOVER_HINT = "Hover a cell for its weight and score; click it to select that query and key."
LINE_COLUMN_WIDTH = 2                # head view: lines rasterised in 2-pixel columns (half the work)
LINE_BUDGET = 2000                   # head view: at most this many lines in the full picture (strongest)
LABEL_CHARS = 12                     # token labels longer than this are cut with an ellipsis

SCALE_MODES: tuple[tuple[str, str, str], ...] = (
    # (key, combo text, colour bar label)
    ("shared", "Shared scale (all heads)", "attention weight · same scale for all heads"),
    ("head", "Per-head scale", "attention weight · scaled per head"),
    ("fixed", "Fixed 0 – 1", "attention weight (probability)"),
)
SCALE_TOOLTIP = ("Shared: 0 to the largest weight of any head, the same colours for every head.\n"
                 "Per head: 0 to the largest weight of each head, to see patterns in flat heads.\n"
                 "The first query row is left out of the maximum: the first token can only attend to\n"
                 "itself, so its weight is always 1 (drawn in the top colour).")


# ----------------------------------------------------------------------------- numbers


def head_maxima(trace: Trace) -> np.ndarray:  # -> [L, H]
    """The largest weight of each head, leaving out query 0 (always exactly 1)."""
    attn = np.stack([layer.attn for layer in trace.layers])  # [L, H, T, T]
    if attn.shape[2] < 2:
        return np.ones(attn.shape[:2])
    return np.maximum(attn[:, :, 1:, :].max(axis=(2, 3)), 1e-6)


def scale_tops(maxima: np.ndarray, mode: str) -> np.ndarray:  # [L, H] -> [L, H]
    """The top of each head's colour scale (the bottom is always 0)."""
    if mode == "fixed":
        return np.ones_like(maxima)
    if mode == "shared":
        return np.full_like(maxima, maxima.max())
    return maxima


def scale_caption(tops: np.ndarray, mode: str) -> str:
    """What the thumbnails' colours mean, for the grid's title (it has no colour bar)."""
    if mode == "fixed":
        return "colours 0 – 1"
    if mode == "shared":
        return f"one colour scale 0 – {tops.max():.2f}"
    return "each head scaled 0 – its own largest weight"


def causal_mask(n_tokens: int) -> np.ndarray:  # -> [T, T] bool, True where key > query
    return np.triu(np.ones((n_tokens, n_tokens), dtype=bool), k=1)


def short_label(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


def hover_text(trace: Trace, layer: int, head: int, query: int, key: int) -> str:
    """'query → key: weight' and the pre-softmax score, for one cell of one head."""
    q_label, k_label = trace.label(query), trace.label(key)
    pair = f"#{query} {q_label} → #{key} {k_label}"
    if key > query:
        return f"{pair}: masked (a query never sees later keys)"
    weight = float(trace.layers[layer].attn[head, query, key])
    score = float(trace.layers[layer].scores[head, query, key])
    return f"{pair}: weight {weight:.4f} · score {score:.3f} (before softmax)"


def attention_long_csv(trace: Trace, layers: Sequence[int], heads: Sequence[int]) -> str:
    """One row per (layer, head, query, key ≤ query): the weight and the pre-softmax score."""
    labels = trace.labels()
    queries, keys = np.tril_indices(trace.n_tokens)
    rows: list[tuple] = [("layer", "head", "query", "query_token", "key", "key_token", "weight", "score")]
    for l in layers:
        attn, scores = trace.layers[l].attn, trace.layers[l].scores
        for h in heads:
            weights, raw = attn[h][queries, keys], scores[h][queries, keys]
            rows += [(l, h, int(q), labels[q], int(k), labels[k], repr(float(w)), repr(float(s)))
                     for q, k, w, s in zip(queries, keys, weights, raw)]
    return csv_text(rows)


def numbered_labels(trace: Trace) -> list[str]:
    """'3:cat': positions keep repeated tokens apart in CSV headers."""
    return [f"{i}:{label}" for i, label in enumerate(trace.labels())]


# ----------------------------------------------------------------------------- token axis


class TokenAxis(pg.AxisItem):
    """Token labels at cell centres (i + 0.5), thinned to the pixels available at any zoom.

    A bottom axis stands its labels upright (reading upwards) when they do not fit side by side.
    """

    def __init__(self, orientation: str) -> None:
        super().__init__(orientation)
        self._labels: list[str] = []
        self._upright: list[tuple[float, float, str]] = []  # (x, y, text) drawn turned by -90°
        self._widest = 0.0  # pixel width of the longest label
        self.setTickFont(ui_font(8.5))
        self.setStyle(tickLength=4)

    def set_labels(self, labels: Sequence[str]) -> None:
        self._labels = [short_label(label) for label in labels]
        self._widest = max((self._metrics().horizontalAdvance(label) for label in self._labels), default=0.0)
        self.picture = None
        self.update()

    def _metrics(self) -> QFontMetricsF:
        return QFontMetricsF(self.style["tickFont"])

    def tickValues(self, minVal: float, maxVal: float, size: float):  # noqa: N802 (pyqtgraph's name)
        low, high = sorted((minVal, maxVal))
        first, last = max(0, math.ceil(low - 0.5)), min(len(self._labels) - 1, math.floor(high - 0.5))
        if last < first or size <= 0:
            return []
        pixels_per_token = size / max(high - low, 1e-9)
        step = max(1, math.ceil(self._metrics().height() * 1.05 / pixels_per_token))
        start = math.ceil(first / step) * step  # multiples of step: labels stay put while panning
        return [(step, [i + 0.5 for i in range(start, last + 1, step)])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        return [self._labels[int(v)] if 0 <= int(v) < len(self._labels) else "" for v in values]

    def generateDrawSpecs(self, p):  # noqa: N802
        specs = super().generateDrawSpecs(p)
        self._upright = []
        if specs is None or self.orientation != "bottom" or not self._labels:
            return specs
        axis_spec, tick_specs, text_specs = specs
        positions = sorted({float(tick[1].x()) for tick in tick_specs})
        spacing = min((b - a for a, b in zip(positions, positions[1:])), default=math.inf)
        if self._widest + 6 <= spacing:
            self._fit_height(None)
            return specs
        # Upright labels: map each tick's x back to its token, as the base class mapped it forward.
        bounds = self.mapRectFromParent(self.geometry())
        low, high = self.range
        top = bounds.top() + max(0, self.style["tickLength"]) + self.style["tickTextOffset"][1]
        for x in positions:
            index = int(math.floor(low + (x - bounds.left()) * (high - low) / max(bounds.width(), 1e-9)))
            if 0 <= index < len(self._labels):
                self._upright.append((x, top, self._labels[index]))
        self._fit_height(self._widest)
        return axis_spec, tick_specs, []

    def _fit_height(self, text_width: float | None) -> None:
        """Room for upright labels (text_width) or the base class's automatic height (None)."""
        wanted = None
        if text_width is not None:
            label_height = self.label.boundingRect().height() * 0.8 if self.label.isVisible() else 0
            wanted = int(text_width + self.style["tickTextOffset"][1] + 4 + label_height)
        if wanted != self.fixedHeight:
            self.setHeight(wanted)

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):  # noqa: N802
        super().drawPicture(p, axisSpec, tickSpecs, textSpecs)
        if not self._upright:
            return
        metrics = self._metrics()
        width = max(metrics.horizontalAdvance(text) for _, _, text in self._upright) + 2
        p.setFont(self.style["tickFont"])
        p.setPen(self.textPen())
        for x, y, text in self._upright:
            p.save()
            p.translate(x, y)
            p.rotate(-90)  # text runs upwards and ends at the axis
            p.drawText(QRectF(-width, -metrics.height() / 2, width, metrics.height()),
                       int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), text)
            p.restore()


# ----------------------------------------------------------------------------- head view


def rasterise_lines(height: int, x0: float, x1: float, y_start: np.ndarray, y_end: np.ndarray,
                    opacity: np.ndarray, thickness: float,
                    column_width: int = 1) -> tuple[np.ndarray, int]:  # [N] -> ([C, height], first column)
    """Alpha of N straight lines (x0, y_start[i]) -> (x1, y_end[i]) laid over each other.

    Qt blends translucent lines pixel by pixel, slowly (tenths of a millisecond per long line
    on the development machine); a long sentence has thousands. Here every line is a band
    `thickness` wide, spread over the columns it crosses: in each column, row r receives
    -ln(1 - opacity) × (how much of the band's height lies in [r, r+1]), and the summed
    "optical depth" S becomes alpha 1 - exp(-S). So an isolated line is drawn with exactly its
    opacity, and lines of one colour crossing add up as painting them one by one would.
    Columns are `column_width` pixels wide (2 halves the work; rows keep full resolution).
    Returns the alpha image, column by column (transposed: rows are contiguous), and the pixel
    column it starts at.
    """
    first, last = int(math.floor(x0)), int(math.ceil(x1))
    columns = np.arange(first, last, column_width, dtype=np.float32)      # [C]
    left = np.clip(columns, x0, x1)                                         # the segment's part of each column
    right = np.clip(columns + column_width, x0, x1)
    slope = ((y_end - y_start) / (x1 - x0)).astype(np.float32)[:, None]     # [N, 1]
    y_left = y_start.astype(np.float32)[:, None] + slope * (left - x0)      # [N, C]
    rise = slope * (right - left)                                           # y_right - y_left
    half = thickness * np.sqrt(1 + slope * slope) / 2                       # half the band's vertical section
    low = y_left + np.minimum(rise, 0) - half
    high = y_left + np.maximum(rise, 0) + half
    # Ink per unit of height, so that a column holds the band's true area (a steep line is thin).
    depth = -np.log1p(-np.minimum(opacity, 0.999)).astype(np.float32)[:, None]
    density = depth * ((right - left) / column_width) * (2 * half) / (high - low)  # [N, C]
    # Coverage of row r is F(r+1) - F(r) with F(y) = Σ density·(clip(y, low, high) - low): a sum of
    # ramps starting at `low` and ending at `high`, evaluated at the integers by prefix sums.
    where = np.clip(np.concatenate([low, high]), 0, height)                 # [2N, C]
    amount = np.concatenate([density, -density])
    start = np.ceil(where)
    n_columns, stride = len(columns), height + 2
    index = (start.astype(np.int64) + np.arange(n_columns) * stride).ravel()
    size = n_columns * stride
    slope_at = np.bincount(index + 1, amount.ravel(), size + 1)[:size].reshape(n_columns, stride)
    step_at = np.bincount(index, (amount * (start - where)).ravel(), size).reshape(n_columns, stride)
    integral = np.cumsum(np.cumsum(slope_at, axis=1) + step_at, axis=1)    # F at y = 0 .. height+1
    coverage = np.diff(integral[:, : height + 1], axis=1).astype(np.float32)  # [C, height]
    return -np.expm1(-np.maximum(coverage, 0.0)), first


@dataclass(frozen=True)
class LinesGeometry:
    top: float        # y of the first token row's top edge
    pitch: float      # row height
    left_text: float  # right edge of the query labels
    x0: float         # where lines start (query side)
    x1: float         # where lines end (key side)
    right_text: float # left edge of the key labels

    def row_y(self, index: np.ndarray | int):
        return self.top + (np.asarray(index) + 0.5) * self.pitch


class HeadLinesView(QWidget):
    """Queries on the left, keys on the right, a line per (query, key) with opacity = weight.

    Hovering a token shows only its lines; clicking one emits sigTokenClicked(side, position).
    """

    sigTokenClicked = Signal(str, int)  # ("query" | "key", token position)

    MARGIN = 10
    GAP = 8
    MIN_LINES_WIDTH = 90
    THIN, THICK = 1.2, 2.4  # line widths: every line / a hovered token's lines

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
        self._labels: list[str] = []
        self._label_width = 40.0
        self._weights = np.zeros((0, 0, 0), np.float32)  # [heads shown, T, T]
        self._colours: list[QColor] = []
        self._names: list[str] = []   # legend entries, one per head shown
        self._title = ""
        self._focus: tuple[str, int] | None = None
        self._selected: tuple[int, int] | None = None   # (query, key)
        # ("full" or a focus, pixel ratio) -> (size and geometry it was made for, (image, where it goes))
        self._line_images: dict[tuple, tuple[tuple, tuple[QImage, QRectF]]] = {}
        self._left_out: tuple[int, float] = (0, 0.0)  # faint lines the full picture leaves out

    # -------------------------------------------------------------- data
    def set_lines(self, labels: Sequence[str], weights: np.ndarray, colours: Sequence[QColor],
                  names: Sequence[str], title: str) -> None:  # weights [n, T, T]
        self._labels = [short_label(label) for label in labels]
        metrics = QFontMetricsF(self.font())
        self._label_width = max([metrics.horizontalAdvance(label) for label in self._labels] + [40.0]) + 4
        self._weights = np.nan_to_num(np.asarray(weights, np.float64), nan=0.0)  # a NaN run draws no line
        self._colours, self._names, self._title = list(colours), list(names), title
        self._focus, self._line_images = None, {}
        self._left_out = self.faint_lines_left_out()
        self.updateGeometry()
        self.update()

    def set_selected(self, query: int, key: int) -> None:
        if self._selected != (query, key):
            self._selected = (query, key)
            self.update()

    def set_focus(self, focus: tuple[str, int] | None) -> None:
        """Show only the lines of one token: ("query", i) or ("key", j); None shows all."""
        if focus != self._focus:
            self._focus = focus
            self.update()

    def line_opacities(self) -> np.ndarray:  # -> [n, T, T] in 0..1, 0 where no line is drawn
        """The opacity each line is drawn with when no token is hovered."""
        return self._drawn_weights(None)

    def lines_shown(self) -> list[tuple[int, int, int]]:
        """(head index, query, key) of every line drawn now, hover filter included."""
        return [tuple(int(v) for v in index) for index in np.argwhere(self._drawn_weights(self._focus) > 0)]

    def faint_lines_left_out(self) -> tuple[int, float]:
        """(how many lines, below which weight) the full picture leaves out to stay fast."""
        every = int(np.count_nonzero(self._causal_weights()))
        drawn = self._drawn_weights(None)
        left_out = every - int(np.count_nonzero(drawn))
        return left_out, float(drawn[drawn > 0].min()) if left_out else 0.0

    def _causal_weights(self) -> np.ndarray:  # -> [n, T, T], 0 where key > query
        return np.where(causal_mask(self._weights.shape[-1]), 0.0, np.clip(self._weights, 0.0, 1.0))

    def _drawn_weights(self, focus: tuple[str, int] | None) -> np.ndarray:  # -> [n, T, T]
        """Weights of the lines drawn: a hovered token's lines, or the strongest LINE_BUDGET lines.

        A long sentence has thousands of lines, most almost invisible (weight ~1/T): the faintest
        are left out of the full picture (the header says how many and below which weight), and
        hovering a token still shows every one of its lines.
        """
        weights = self._causal_weights()
        if focus is not None:
            side, index = focus
            kept = np.zeros_like(weights)
            if side == "query":
                kept[:, index, :] = weights[:, index, :]
            else:
                kept[:, :, index] = weights[:, :, index]
            return kept
        values = weights[weights > 0]
        if values.size <= LINE_BUDGET:
            return weights
        cutoff = np.partition(values, values.size - LINE_BUDGET)[values.size - LINE_BUDGET]
        return np.where(weights >= cutoff, weights, 0.0)

    # -------------------------------------------------------------- geometry
    def _header_rows(self) -> int:
        """Title, legend (several heads), the left-out note (long sentences); then query/key."""
        return 1 + (len(self._names) > 1) + (self._left_out[0] > 0)

    def _header_height(self) -> float:
        return self.MARGIN + QFontMetricsF(self.font()).height() * 1.2 * (self._header_rows() + 1)

    def _min_pitch(self) -> float:
        return max(15.0, QFontMetricsF(self.font()).height() + 3)

    def _pitch(self) -> float:
        """Rows spread out to fill the height a short sentence leaves, up to a comfortable maximum."""
        room = (self.height() - self._header_height() - self.MARGIN) / max(len(self._labels), 1)
        return max(self._min_pitch(), min(room, 2.0 * self._min_pitch()))

    def geometry_now(self) -> LinesGeometry:
        left_text = self.MARGIN + self._label_width
        right_text = max(self.width() - self.MARGIN - self._label_width, left_text + 2 * self.GAP + 40)
        return LinesGeometry(self._header_height(), self._pitch(), left_text, left_text + self.GAP,
                             right_text - self.GAP, right_text)

    def sizeHint(self) -> QSize:  # noqa: N802
        width = 2 * (self.MARGIN + self._label_width + self.GAP) + self.MIN_LINES_WIDTH + 120
        return QSize(int(width), self.minimumSizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        width = 2 * (self.MARGIN + self._label_width + self.GAP) + self.MIN_LINES_WIDTH
        height = self._header_height() + len(self._labels) * self._min_pitch() + self.MARGIN
        return QSize(int(width), int(height))

    def token_point(self, side: str, position: int) -> QPoint:
        """A point on a token's label ("query" side or "key" side), in widget pixels."""
        g = self.geometry_now()
        x = g.left_text - 6 if side == "query" else g.right_text + 6
        return QPointF(x, float(g.row_y(position))).toPoint()

    def token_at(self, point: QPointF) -> tuple[str, int] | None:
        g = self.geometry_now()
        row = math.floor((point.y() - g.top) / g.pitch)
        if not 0 <= row < len(self._labels):
            return None
        if point.x() <= g.x0:
            return ("query", row)
        if point.x() >= g.x1:
            return ("key", row)
        return None

    # -------------------------------------------------------------- events
    def mouseMoveEvent(self, event) -> None:  # noqa: N802
        self.set_focus(self.token_at(event.position()))

    def leaveEvent(self, event) -> None:  # noqa: N802
        self.set_focus(None)

    def mousePressEvent(self, event) -> None:  # noqa: N802
        token = self.token_at(event.position())
        if token is not None and event.button() == Qt.MouseButton.LeftButton:
            self.sigTokenClicked.emit(*token)

    # -------------------------------------------------------------- painting
    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.fillRect(self.rect(), Qt.GlobalColor.white)
        if not self._labels:
            return
        painter.setFont(self.font())
        g = self.geometry_now()
        self._paint_header(painter, g)
        self._paint_bands(painter, g)
        if painter.paintEngine().type() == painter.paintEngine().Type.Raster:  # screen, PNG at any width
            # Device pixels per widget pixel (2 for a PNG at twice the size); capped, as a 10x image
            # would cost far more memory than it adds sharpness to thin lines.
            ratio = min(max(self.devicePixelRatioF(), abs(painter.deviceTransform().m11())), 4.0)
            image, target = self._lines_image(g, ratio)
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, True)
            painter.drawImage(target, image)
        else:  # SVG: real lines
            self._paint_vector_lines(painter, g)
        self._paint_labels(painter, g)

    def _lines_image(self, g: LinesGeometry, ratio: float) -> tuple[QImage, QRectF]:
        """The lines as one premultiplied RGBA image at `ratio` device pixels per widget pixel.

        Made by rasterise_lines and kept until it changes: scrolling and repaints only copy it.
        The full picture and the hovered token's lines are cached apart, so leaving a token shows
        the full picture again at once.
        """
        key = (self.width(), self.height(), g)
        slot = ("full" if self._focus is None else self._focus, ratio)
        cached = self._line_images.get(slot)
        if cached is not None and cached[0] == key:
            return cached[1]
        height = int(math.ceil(self.height() * ratio))
        weights = self._drawn_weights(self._focus)
        thickness = (self.THICK if self._focus is not None else self.THIN) * ratio
        # Painting head after head: head h shows through every later head, so its share of a pixel
        # is alpha_h × Π_{later} (1 - alpha). Shares first, colours once at the end.
        shares, see_through, first = None, None, 0
        for head_index in reversed(range(len(self._colours))):
            queries, keys = np.nonzero(weights[head_index])
            if queries.size == 0:
                continue
            alpha, first = rasterise_lines(height, g.x0 * ratio, g.x1 * ratio, g.row_y(queries) * ratio,
                                           g.row_y(keys) * ratio, weights[head_index][queries, keys],
                                           thickness, LINE_COLUMN_WIDTH)
            if shares is None:
                shares = np.zeros((len(self._colours), *alpha.shape), np.float32)  # [n, C, height]
                see_through = np.ones(alpha.shape, np.float32)                     # Π (1 - alpha) of later heads
            shares[head_index] = alpha * see_through
            see_through *= 1.0 - alpha
        if shares is None:
            return QImage(), QRectF()
        colours = np.array([[c.redF(), c.greenF(), c.blueF(), 1.0] for c in self._colours], np.float32)
        rgba = np.einsum("nch,nk->hck", shares, colours)                       # [height, C, 4] premultiplied
        pixels = (rgba * 255 + 0.5).astype(np.uint8, order="C")
        image = QImage(pixels.data, pixels.shape[1], height, pixels.shape[1] * 4,
                       QImage.Format.Format_RGBA8888_Premultiplied).copy()
        target = QRectF(first / ratio, 0, pixels.shape[1] * LINE_COLUMN_WIDTH / ratio, height / ratio)
        self._line_images = {name: value for name, value in self._line_images.items() if name[0] == "full"}
        self._line_images[slot] = (key, (image, target))
        return image, target

    def _paint_vector_lines(self, painter: QPainter, g: LinesGeometry) -> None:
        """Real lines for SVG: one drawLines call per (head, opacity), faint lines first."""
        weights = self._drawn_weights(self._focus)
        width = self.THICK if self._focus is not None else self.THIN
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        groups: list[tuple[int, QPen, list[QLineF]]] = []
        for head_index, colour in enumerate(self._colours):
            queries, keys = np.nonzero(weights[head_index])
            alphas = np.rint(weights[head_index][queries, keys] * 255).astype(int)
            y_query, y_key = g.row_y(queries), g.row_y(keys)
            for value in np.unique(alphas):
                chosen = alphas == value
                pen = QPen(QColor(colour.red(), colour.green(), colour.blue(), int(value)), width)
                pen.setCapStyle(Qt.PenCapStyle.FlatCap)
                groups.append((int(value), pen, [QLineF(g.x0, a, g.x1, b) for a, b in
                                                 zip(y_query[chosen].tolist(), y_key[chosen].tolist())]))
        for _, pen, lines in sorted(groups, key=lambda group: group[0]):
            painter.setPen(pen)
            painter.drawLines(lines)

    def _paint_header(self, painter: QPainter, g: LinesGeometry) -> None:
        metrics = QFontMetricsF(self.font())
        line = metrics.height() * 1.2
        y = float(self.MARGIN)
        painter.setPen(Qt.GlobalColor.black)
        painter.drawText(QPointF(self.MARGIN, y + metrics.ascent()),
                         metrics.elidedText(self._title, Qt.TextElideMode.ElideRight, self.width() - 2 * self.MARGIN))
        y += line
        if len(self._names) > 1:
            x = float(self.MARGIN)
            for name, colour in zip(self._names, self._colours):
                painter.fillRect(QRectF(x, y + metrics.height() * 0.25, 14, metrics.height() * 0.5), colour)
                painter.drawText(QPointF(x + 18, y + metrics.ascent()), name)
                x += 26 + metrics.horizontalAdvance(name)
            y += line
        painter.setPen(QColor(90, 90, 90))
        left_out, below = self._left_out
        if left_out:
            note = f"{left_out} lines with weight < {below:.3f} not drawn · hover a token for all its lines"
            painter.drawText(QPointF(self.MARGIN, y + metrics.ascent()),
                             metrics.elidedText(note, Qt.TextElideMode.ElideRight, self.width() - 2 * self.MARGIN))
            y += line
        painter.drawText(QRectF(self.MARGIN, y, g.left_text - self.MARGIN, line),
                         int(Qt.AlignmentFlag.AlignRight), "query")
        painter.drawText(QRectF(g.right_text, y, self.width(), line), int(Qt.AlignmentFlag.AlignLeft), "key")

    def _paint_bands(self, painter: QPainter, g: LinesGeometry) -> None:
        """The selected query (left) and key (right) on a light band."""
        if self._selected is None:
            return
        query, key = self._selected
        painter.fillRect(QRectF(self.MARGIN / 2, g.top + query * g.pitch, g.left_text - self.MARGIN / 2 + 3,
                                g.pitch), SELECTED_BAND)
        painter.fillRect(QRectF(g.right_text - 3, g.top + key * g.pitch, self.width() - g.right_text,
                                g.pitch), SELECTED_BAND)

    def _paint_labels(self, painter: QPainter, g: LinesGeometry) -> None:
        bold = self.font()
        bold.setBold(True)
        for row, label in enumerate(self._labels):
            top = g.top + row * g.pitch
            for side, rect, align in (
                    ("query", QRectF(self.MARGIN / 2, top, g.left_text - self.MARGIN / 2, g.pitch),
                     Qt.AlignmentFlag.AlignRight),
                    ("key", QRectF(g.right_text, top, self.width() - g.right_text, g.pitch),
                     Qt.AlignmentFlag.AlignLeft)):
                focused = self._focus == (side, row)
                painter.setFont(bold if focused else self.font())
                painter.setPen(MARK_COLOUR if focused else Qt.GlobalColor.black)
                painter.drawText(rect, int(align | Qt.AlignmentFlag.AlignVCenter), label)


# ----------------------------------------------------------------------------- the panel


class AttentionPanel(Panel):
    title = "Attention"
    object_name = "attention"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._cmap = colormap()
        self._trace_serial = 0               # bumps on every set_trace: what "the trace changed" means
        self._drawn: dict[str, tuple] = {}   # what each view last drew, to skip redraws
        self._maxima: np.ndarray | None = None   # [L, H] head_maxima of the current trace
        self._thumbs: list[list[pg.ImageItem]] = []
        self._ablated_marks: list[list[pg.QtWidgets.QGraphicsRectItem]] = []
        self._grid_names: list[pg.TextItem] = []
        self._grid_shape = (0, 0)
        self._shown: tuple[int, int] | None = None
        self._levels = (0.0, 1.0)
        self._thumb_tops: np.ndarray | None = None
        self._build()
        self.refresh()

    # -------------------------------------------------------------- building
    def _build(self) -> None:
        self.scale_combo = QComboBox()
        for key, text, _ in SCALE_MODES:
            self.scale_combo.addItem(text, key)
        self.scale_combo.setToolTip(SCALE_TOOLTIP)
        self.scale_combo.currentIndexChanged.connect(self.refresh)
        self.all_heads_box = QCheckBox("Lines: all heads of the layer")
        self.all_heads_box.setToolTip("Head view: every head of the selected layer, one colour per head")
        self.all_heads_box.toggled.connect(self.refresh)
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Colour scale:"))
        controls.addWidget(self.scale_combo)
        controls.addStretch(1)
        controls.addWidget(self.all_heads_box)

        self.grid_view = self._build_grid()
        self.matrix_view = self._build_matrix()
        self.hover_label = QLabel(HOVER_HINT)
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
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
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.grid_view)
        left.addWidget(matrix_box)
        left.setStretchFactor(0, 1)
        left.setStretchFactor(1, 3)
        content = QSplitter(Qt.Orientation.Horizontal)
        content.addWidget(left)
        content.addWidget(self.lines_scroll)
        content.setStretchFactor(0, 3)
        content.setStretchFactor(1, 2)

        self.empty_label = QLabel("Type a sentence to see how each token attends to the ones before it.")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty_label)
        self.stack.addWidget(content)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.stack, 1)

    def _build_grid(self) -> pg.GraphicsLayoutWidget:
        view = pg.GraphicsLayoutWidget()
        self.grid_plot = view.addPlot()
        self.grid_plot.invertY(True)
        self.grid_plot.setAspectLocked(True)
        self.grid_plot.setMouseEnabled(False, False)
        self.grid_plot.hideButtons()
        for side in ("bottom", "left"):  # row and column names are TextItems beside the thumbnails
            self.grid_plot.hideAxis(side)
        self.grid_outline = pg.QtWidgets.QGraphicsRectItem(0, 0, 1, 1)
        pen = QPen(MARK_COLOUR, 3)
        pen.setCosmetic(True)
        self.grid_outline.setPen(pen)
        self.grid_outline.setZValue(10)
        self.grid_plot.addItem(self.grid_outline)
        view.scene().sigMouseClicked.connect(self._on_grid_clicked)
        view.scene().sigMouseMoved.connect(self._on_grid_hovered)
        return view

    def _build_matrix(self) -> pg.GraphicsLayoutWidget:
        view = pg.GraphicsLayoutWidget()
        self.key_axis, self.query_axis = TokenAxis("bottom"), TokenAxis("left")
        self.matrix_plot = view.addPlot(axisItems={"bottom": self.key_axis, "left": self.query_axis})
        matrix_plot(self.matrix_plot, "key token →", "query token ↓")
        self.matrix_plot.hideButtons()
        self.matrix_image = pg.ImageItem()
        self.matrix_plot.addItem(self.matrix_image)
        # The bar is not linked to the image: the image is coloured by hand (masked cells grey).
        self.colour_bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=self._cmap, label=SCALE_MODES[0][2],
                                          interactive=False, width=14)
        view.addItem(self.colour_bar)
        self.query_mark = self._mark(width=1.5, style=Qt.PenStyle.DashLine)
        self.key_mark = self._mark(width=3, style=Qt.PenStyle.SolidLine)
        view.scene().sigMouseClicked.connect(self._on_matrix_clicked)
        view.scene().sigMouseMoved.connect(self._on_matrix_hovered)
        return view

    def _mark(self, width: float, style: Qt.PenStyle) -> pg.QtWidgets.QGraphicsRectItem:
        item = pg.QtWidgets.QGraphicsRectItem(0, 0, 1, 1)
        pen = QPen(MARK_COLOUR, width, style)
        pen.setCosmetic(True)
        item.setPen(pen)
        item.setZValue(10)
        self.matrix_plot.addItem(item)
        return item

    # -------------------------------------------------------------- contract
    def set_trace(self, trace: Trace | None) -> None:
        self._trace_serial += 1
        self._maxima = head_maxima(trace) if trace is not None else None
        super().set_trace(trace)

    def refresh(self) -> None:
        if self.trace is None:
            self.stack.setCurrentWidget(self.empty_label)
            self._drawn.clear()
            self._shown = None
            return
        self.stack.setCurrentIndex(1)
        trace = self.trace
        layer, head, query, key = self._resolved_selection()
        mode = self.scale_mode()
        tops = scale_tops(self._maxima, mode)
        if self._changed("thumbnails", self._trace_serial, mode):
            self._draw_thumbnails(trace, tops, mode)
        self._place_grid_outline(layer, head)
        if self._changed("labels", self._trace_serial):
            labels = trace.labels()
            self.hover_label.setText(HOVER_HINT)
            self.key_axis.set_labels(labels)
            self.query_axis.set_labels(labels)
        if self._changed("matrix", self._trace_serial, layer, head, mode):
            self._draw_matrix(trace, layer, head, (0.0, float(tops[layer, head])), mode)
        self._place_matrix_marks(query, key)
        all_heads = self.all_heads_box.isChecked()
        if self._changed("lines", self._trace_serial, layer, head, all_heads):
            self._draw_lines(trace, layer, head, all_heads)
        self.lines_view.set_selected(query, key)

    def figures(self) -> list[Figure]:
        if self.trace is None:
            return []
        trace, (layer, head, _, _) = self.trace, self._resolved_selection()
        labels = numbered_labels(trace)
        every_layer, every_head = range(trace.num_layers), range(trace.num_heads)
        lines_heads = every_head if self.all_heads_box.isChecked() else [head]
        return [
            Figure("attention_grid", self.grid_view,
                   lambda: attention_long_csv(trace, every_layer, every_head)),
            Figure("attention_head", self.matrix_view,
                   lambda: matrix_csv_text(trace.layers[layer].attn[head], labels, labels, "query \\ key"),
                   {"attention_head_scores":
                    lambda: matrix_csv_text(trace.layers[layer].scores[head], labels, labels, "query \\ key")}),
            Figure("attention_lines", self.lines_view,
                   lambda: attention_long_csv(trace, [layer], lines_heads)),
        ]

    # -------------------------------------------------------------- read-only views (tests, main window)
    def scale_mode(self) -> str:
        return self.scale_combo.currentData()

    def shown_head(self) -> tuple[int, int] | None:
        """(layer, head) the large view shows now; None before any trace."""
        return self._shown

    def shown_matrix(self) -> np.ndarray | None:  # -> [T, T]
        if self._shown is None or self.trace is None:
            return None
        layer, head = self._shown
        return self.trace.layers[layer].attn[head]

    def shown_levels(self) -> tuple[float, float]:
        """The large view's colour scale (low, high)."""
        return self._levels

    def thumbnail_tops(self) -> np.ndarray | None:  # -> [L, H]
        """The top of each thumbnail's colour scale."""
        return self._thumb_tops

    def hover_text(self) -> str:
        return self.hover_label.text()

    def thumbnail_point(self, layer: int, head: int) -> QPoint:
        """Where the thumbnail of (layer, head) is, in grid_view's viewport pixels (for clicks in tests)."""
        x, y = self._thumb_origin(layer, head)
        return self.grid_view.mapFromScene(self.grid_plot.vb.mapViewToScene(QPointF(x + 0.5, y + 0.5)))

    def cell_point(self, query: int, key: int) -> QPoint:
        """The centre of cell (query, key) of the large view, in matrix_view's viewport pixels."""
        return self.matrix_view.mapFromScene(self.matrix_plot.vb.mapViewToScene(QPointF(key + 0.5, query + 0.5)))

    # -------------------------------------------------------------- drawing
    def _resolved_selection(self) -> tuple[int, int, int, int]:
        trace, sel = self.trace, self.selection
        n_tokens = trace.n_tokens
        layer = min(max(sel.layer, 0), trace.num_layers - 1)
        head = min(max(sel.head, 0), trace.num_heads - 1)
        return layer, head, sel.query_index(n_tokens), sel.key_index(n_tokens)

    def _changed(self, view: str, *key) -> bool:
        if self._drawn.get(view) == key:
            return False
        self._drawn[view] = key
        return True

    def _thumb_origin(self, layer: int, head: int) -> tuple[float, float]:
        return head * (1 + GRID_GAP), layer * (1 + GRID_GAP)

    def _ensure_grid_items(self, num_layers: int, num_heads: int) -> None:
        """One ImageItem per head, made again only when the model's shape changes."""
        if self._grid_shape == (num_layers, num_heads):
            return
        for item in [*sum(self._thumbs, []), *sum(self._ablated_marks, []), *self._grid_names]:
            self.grid_plot.removeItem(item)
        self._thumbs, self._ablated_marks, self._grid_names = [], [], []
        for layer in range(num_layers):
            self._thumbs.append([])
            self._ablated_marks.append([])
            for head in range(num_heads):
                image = pg.ImageItem()
                self.grid_plot.addItem(image)
                x, y = self._thumb_origin(layer, head)
                hatch = pg.QtWidgets.QGraphicsRectItem(x, y, 1, 1)  # heads switched off by a head mask
                hatch.setBrush(QBrush(QColor(255, 255, 255, 200), Qt.BrushStyle.DiagCrossPattern))
                hatch.setPen(QPen(Qt.PenStyle.NoPen))
                hatch.setZValue(5)
                self.grid_plot.addItem(hatch)
                self._thumbs[-1].append(image)
                self._ablated_marks[-1].append(hatch)
        step = 1 + GRID_GAP
        names = [(f"L{l}", (-0.06, l * step + 0.5), (1, 0.5)) for l in range(num_layers)]
        names += [(f"H{h}", (h * step + 0.5, -0.04), (0.5, 1)) for h in range(num_heads)]
        for text, (x, y), anchor in names:
            name = pg.TextItem(text, color="k", anchor=anchor)
            name.setFont(ui_font(9))
            name.setPos(x, y)
            self.grid_plot.addItem(name)
            self._grid_names.append(name)
        # Room for the names (TextItems keep their pixel size): enough for thumbnails down to ~30 px.
        self.grid_plot.setRange(xRange=(-0.6, num_heads * step - GRID_GAP / 2),
                                yRange=(-0.65, num_layers * step - GRID_GAP / 2), padding=0.02)
        self._grid_shape = (num_layers, num_heads)

    def _draw_thumbnails(self, trace: Trace, tops: np.ndarray, mode: str) -> None:
        self._ensure_grid_items(trace.num_layers, trace.num_heads)
        mask = causal_mask(trace.n_tokens)
        for layer, layer_trace in enumerate(trace.layers):
            for head in range(trace.num_heads):
                rgba = masked_rgba(layer_trace.attn[head], (0.0, float(tops[layer, head])), self._cmap, mask)
                x, y = self._thumb_origin(layer, head)
                self._thumbs[layer][head].setImage(rgba, levels=(0, 255), rect=QRectF(x, y, 1, 1))
                self._ablated_marks[layer][head].setVisible(bool(trace.head_mask[layer, head] == 0))
        self._thumb_tops = tops.copy()
        self.grid_plot.setTitle(f"Every head: layers down, heads across · {scale_caption(tops, mode)}", size="9pt")

    def _place_grid_outline(self, layer: int, head: int) -> None:
        x, y = self._thumb_origin(layer, head)
        pad = GRID_GAP * 0.25
        self.grid_outline.setRect(QRectF(x - pad, y - pad, 1 + 2 * pad, 1 + 2 * pad))

    def _draw_matrix(self, trace: Trace, layer: int, head: int, levels: tuple[float, float], mode: str) -> None:
        n_tokens = trace.n_tokens
        rgba = masked_rgba(trace.layers[layer].attn[head], levels, self._cmap, causal_mask(n_tokens))
        self.matrix_image.setImage(rgba, levels=(0, 255), rect=QRectF(0, 0, n_tokens, n_tokens))
        self.matrix_plot.setLimits(xMin=0, xMax=n_tokens, yMin=0, yMax=n_tokens)
        self.matrix_plot.setRange(xRange=(0, n_tokens), yRange=(0, n_tokens), padding=0)
        ablated = "  (switched off)" if trace.head_mask[layer, head] == 0 else ""
        self.matrix_plot.setTitle(f"Layer {layer} · head {head}{ablated} — grey: masked (key after query)",
                                  size="9pt")
        self.colour_bar.setLevels(finite_levels(levels))
        self.colour_bar.getAxis("left").setLabel(dict((k, bar) for k, _, bar in SCALE_MODES)[mode])
        self._shown, self._levels = (layer, head), levels

    def _place_matrix_marks(self, query: int, key: int) -> None:
        self.query_mark.setRect(QRectF(0, query, self.trace.n_tokens, 1))
        self.key_mark.setRect(QRectF(key, query, 1, 1))

    def _draw_lines(self, trace: Trace, layer: int, head: int, all_heads: bool) -> None:
        heads = list(range(trace.num_heads)) if all_heads else [head]
        colours = [QColor(HEAD_COLOURS[h % len(HEAD_COLOURS)]) for h in heads]
        which = f"all heads of layer {layer}" if all_heads else f"layer {layer} · head {head}"
        self.lines_view.set_lines(trace.labels(), trace.layers[layer].attn[heads], colours,
                                  [f"H{h}" for h in heads], f"{which} — line opacity = weight")
        # Keep both label columns in sight: the splitter will not squeeze the head view below this.
        scroll_bar = self.lines_scroll.verticalScrollBar().sizeHint().width()
        self.lines_scroll.setMinimumWidth(self.lines_view.minimumSizeHint().width() + scroll_bar + 4)

    # -------------------------------------------------------------- mouse
    def _grid_cell_at(self, scene_pos) -> tuple[int, int] | None:
        """(layer, head) of the thumbnail under a scene position, None in the gaps or outside."""
        if not self.grid_plot.vb.sceneBoundingRect().contains(scene_pos):
            return None
        point = self.grid_plot.vb.mapSceneToView(scene_pos)
        step = 1 + GRID_GAP
        head, layer = math.floor(point.x() / step), math.floor(point.y() / step)
        inside = point.x() - head * step <= 1 and point.y() - layer * step <= 1
        num_layers, num_heads = self._grid_shape
        return (layer, head) if inside and 0 <= layer < num_layers and 0 <= head < num_heads else None

    def _matrix_cell_at(self, scene_pos) -> tuple[int, int] | None:
        """(query, key) under a scene position of the large view."""
        if self.trace is None or not self.matrix_plot.vb.sceneBoundingRect().contains(scene_pos):
            return None
        point = self.matrix_plot.vb.mapSceneToView(scene_pos)
        query, key = math.floor(point.y()), math.floor(point.x())
        n_tokens = self.trace.n_tokens
        return (query, key) if 0 <= query < n_tokens and 0 <= key < n_tokens else None

    def _on_grid_clicked(self, event) -> None:
        cell = self._grid_cell_at(event.scenePos())
        if cell is not None and event.button() == Qt.MouseButton.LeftButton and self.trace is not None:
            self.sigSelect.emit({"layer": cell[0], "head": cell[1]})

    def _on_grid_hovered(self, scene_pos) -> None:
        cell = self._grid_cell_at(scene_pos)
        tops = self._thumb_tops
        tip = "" if cell is None or tops is None else \
            f"L{cell[0]} H{cell[1]} · colour scale 0 – {tops[cell]:.3f} · click to show it large"
        self.grid_view.setToolTip(tip)

    def _on_matrix_clicked(self, event) -> None:
        cell = self._matrix_cell_at(event.scenePos())
        if cell is None or event.button() != Qt.MouseButton.LeftButton:
            return
        query, key = cell
        self.sigSelect.emit({"query": query, "key": key if key <= query else None})

    def _on_matrix_hovered(self, scene_pos) -> None:
        cell = self._matrix_cell_at(scene_pos)
        if cell is None or self._shown is None:
            self.matrix_view.setToolTip("")
            return
        text = hover_text(self.trace, *self._shown, *cell)
        self.hover_label.setText(text)
        self.matrix_view.setToolTip(text)

    def _on_token_clicked(self, side: str, position: int) -> None:
        if side == "query":
            self.sigSelect.emit({"query": position, "key": None})
            return
        query = self._resolved_selection()[2]
        self.sigSelect.emit({"query": max(query, position), "key": position})
