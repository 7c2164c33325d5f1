"""The head view (as in BertViz): queries on the left, keys on the right, a line per pair whose opacity is the weight.

One head, or every head of a layer in its own colour. On screen and in PNGs the lines are one
image made by rasterise_lines (Qt blends thousands of translucent lines slowly); in SVG they are
real lines. Hovering a token shows only its lines; clicking one emits sigTokenClicked.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from PySide6.QtCore import QLineF, QPoint, QPointF, QRect, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter, QPalette, QPen, QTransform
from PySide6.QtWidgets import QSizePolicy, QWidget

from core.attention_view import causal_mask
from gui.text_fit import elide
from gui.text_widths import TextWidths

MARK_COLOUR = QColor(230, 30, 60)    # the hovered token: red stands out on every colour
SELECTED_BAND = QColor(255, 226, 140)
SELECTED_BAND_DARK = QColor(110, 85, 20)   # the same amber band on a dark background


def muted_text(palette: QPalette) -> QColor:
    """Secondary text (notes, axis names): the palette's text colour, faded towards its background."""
    text, base = palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Base)
    return QColor(*(round(0.55 * t + 0.45 * b) for t, b in zip(text.getRgb()[:3], base.getRgb()[:3])))
LINE_COLUMN_WIDTH = 4                # lines rasterised in 4-pixel columns (a quarter of the work; rows stay sharp)
LINE_BUDGET = 2000                   # at most this many lines in the full picture (strongest)


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


# The bytes of a premultiplied ARGB32 pixel (a native 32-bit word 0xAARRGGBB), as indices into RGBA.
ARGB32_BYTES = [2, 1, 0, 3] if sys.byteorder == "little" else [3, 0, 1, 2]


def widen_columns(rgba: np.ndarray, factor: int) -> np.ndarray:  # [R, C, k] -> [R, C * factor, k]
    """Each column spread over `factor`, each new column interpolated linearly between the centres of the
    two old columns around it (edge columns held), as a smooth image scaling does."""
    padded = np.concatenate([rgba[:, :1], rgba, rgba[:, -1:]], axis=1)   # [R, C + 2, k]
    centre = padded[:, 1:-1]
    widened = np.empty((rgba.shape[0], rgba.shape[1], factor, rgba.shape[2]), rgba.dtype)
    for k in range(factor):
        at = (k + 0.5) / factor - 0.5   # where new column k samples, in old columns from the centre one
        neighbour = padded[:, 2:] if at > 0 else padded[:, :-2]
        widened[:, :, k] = centre + abs(at) * (neighbour - centre)
    return widened.reshape(rgba.shape[0], rgba.shape[1] * factor, rgba.shape[2])


def _one_to_one(painter: QPainter, target: QRectF, image: QImage) -> bool:
    """Whether `image` drawn into `target` covers exactly its own number of device pixels (no stretching)."""
    device = painter.deviceTransform()
    if device.type().value > QTransform.TransformationType.TxScale.value:
        return False
    return (abs(abs(device.m11()) * target.width() - image.width()) < 0.01
            and abs(abs(device.m22()) * target.height() - image.height()) < 0.01)


def left_out_note(left_out: int, below: float, metrics, width: float, hint: bool = True) -> str:
    """The caption of the lines not drawn, whole in `width` pixels: the hover hint (on screen) only where it fits."""
    note = f"{left_out:,} lines < {below:.3f} hidden"
    hinted = f"{note} · hover a token for all its lines"
    return hinted if hint and metrics.horizontalAdvance(hinted) <= width else note


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
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)   # a click makes it the figure Copy figure copies
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
        self._labels: list[str] = []
        self._label_advances: list[float] = []   # each label's width in the regular font
        self._text_width = TextWidths(self.font())
        self._label_width = 40.0
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)   # paintEvent fills it: skip the parent's paint
        self._weights = np.zeros((0, 0, 0), np.float32)  # [heads shown, T, T]
        self._colours: list[QColor] = []
        self._names: list[str] = []   # legend entries, one per head shown
        self._title = ""
        self._on_page = False   # on an exported page nothing is hovered: no hover hint
        self._title_wrap: tuple[tuple, int] = ((), 1)   # (title, width, font) -> lines it takes
        self._focus: tuple[str, int] | None = None
        self._selected: tuple[int, int] | None = None   # (query, key)
        # ("full" or a focus, pixel ratio) -> (size and geometry it was made for, (image, where it goes))
        self._line_images: dict[tuple, tuple[tuple, tuple[QImage, QRectF]]] = {}
        self._left_out: tuple[int, float] = (0, 0.0)  # faint lines the full picture leaves out
        self._weights_drawn: dict = {}   # focus -> _lines_drawn(focus), for the weights set now

    # -------------------------------------------------------------- data
    def set_lines(self, labels: Sequence[str], weights: np.ndarray, colours: Sequence[QColor],
                  names: Sequence[str], title: str) -> None:  # weights [n, T, T]
        hints = (self.sizeHint(), self.minimumSizeHint())
        self._labels = [elide(label) for label in labels]
        if self._text_width.font != self.font():   # the widget's font changed since
            self._text_width = TextWidths(self.font())
        self._label_advances = [self._text_width(label) for label in self._labels]
        self._label_width = max(self._label_advances + [40.0]) + 4
        self._weights = np.nan_to_num(np.asarray(weights, np.float64), nan=0.0)  # a NaN run draws no line
        self._colours, self._names, self._title = list(colours), list(names), title
        self._focus, self._line_images, self._weights_drawn = None, {}, {}
        self._left_out = self.faint_lines_left_out()
        if (self.sizeHint(), self.minimumSizeHint()) != hints:   # else the layout has nothing to do again
            self.updateGeometry()
        self.update()

    def set_on_page(self, on_page: bool) -> None:
        """On an exported page (gui.figure_pages.on_page) the caption tells nothing to hover."""
        self._on_page = on_page
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

    def _drawn_weights(self, focus: tuple[str, int] | None) -> np.ndarray:  # -> [n, T, T]
        """The lines drawn for this focus (see _lines_drawn), computed once per weights and focus: set_lines,
        each paint and the hover filter all ask."""
        drawn = self._weights_drawn.get(focus)
        if drawn is None:
            if len(self._weights_drawn) > 2:   # the full picture and the hovered token's lines are enough
                self._weights_drawn = {None: self._weights_drawn[None]} if None in self._weights_drawn else {}
            drawn = self._weights_drawn[focus] = self._lines_drawn(focus)
        return drawn

    def _causal_weights(self) -> np.ndarray:  # -> [n, T, T], 0 where key > query
        return np.where(causal_mask(self._weights.shape[-1]), 0.0, np.clip(self._weights, 0.0, 1.0))

    def _lines_drawn(self, focus: tuple[str, int] | None) -> np.ndarray:  # -> [n, T, T]
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
        return self._title_lines() + (len(self._names) > 1) + (self._left_out[0] > 0)

    def _title_lines(self) -> int:
        """The title wraps rather than being cut in a narrow dock (measured once per title, width and font:
        every paint and mouse move asks)."""
        width = max(self.width() - 2 * self.MARGIN, 40)
        key = (self._title, width, self.font().key())
        if self._title_wrap[0] != key:
            metrics = QFontMetricsF(self.font())
            rect = metrics.boundingRect(QRectF(0, 0, width, 1e6), int(Qt.TextFlag.TextWordWrap), self._title)
            self._title_wrap = (key, max(1, math.ceil(rect.height() / metrics.height() - 0.01)))
        return self._title_wrap[1]

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
        painter.fillRect(self.rect(), self.palette().color(QPalette.ColorRole.Base))
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
            image, target = self._lines_image(g, ratio, event.rect())
            # Smoothing only where the image is stretched: asked for it, Qt filters every pixel of a plain copy too.
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, not _one_to_one(painter, target, image))
            painter.drawImage(target, image)
        else:  # SVG: real lines
            self._paint_vector_lines(painter, g)
        self._paint_labels(painter, g, event.rect())

    def _band(self, exposed: QRect, margin: bool) -> tuple[int, int]:
        """The rows (widget pixels) worth rasterising: what is on screen in the scroll area, and with
        `margin` as much again above and below, so that scrolling on reuses the image. A long
        sentence's view is thousands of pixels tall; the screen shows a few hundred."""
        shown = self.visibleRegion().boundingRect().united(exposed)
        if shown.isEmpty():   # rendered off screen (an export): everything
            return 0, self.height()
        extra = shown.height() if margin else 0
        return max(0, shown.top() - extra), min(self.height(), shown.bottom() + 1 + extra)

    def _lines_image(self, g: LinesGeometry, ratio: float, exposed: QRect) -> tuple[QImage, QRectF]:
        """The lines in the rows on screen (and `exposed`) as one premultiplied RGBA image at `ratio`
        device pixels per widget pixel.

        Made by rasterise_lines and kept until it changes: repaints inside its rows only copy it. A new
        picture covers what is on screen (it is drawn while the user waits for a new sentence);
        scrolling out of it rasterises a margin above and below too, so that scrolling on reuses it.
        The full picture and the hovered token's lines are cached apart, so leaving a token shows
        the full picture again at once.
        """
        key = (self.width(), self.height(), g)
        slot = ("full" if self._focus is None else self._focus, ratio)
        cached = self._line_images.get(slot)
        band = self._band(exposed, margin=False)
        if cached is not None and cached[0][0] == key:
            if cached[0][1][0] <= band[0] and band[1] <= cached[0][1][1]:
                return cached[1]
            band = self._band(exposed, margin=True)   # scrolled out of the picture: scrolling goes on
        top, height = band[0] * ratio, int(math.ceil((band[1] - band[0]) * ratio))
        weights = self._drawn_weights(self._focus)
        thickness = (self.THICK if self._focus is not None else self.THIN) * ratio
        # Painting head after head: head h shows through every later head, so its share of a pixel
        # is alpha_h × Π_{later} (1 - alpha). Shares first, colours once at the end.
        shares, see_through, first = None, None, 0
        for head_index in reversed(range(len(self._colours))):
            queries, keys = self._lines_in_band(weights[head_index], g, band)
            if queries.size == 0:
                continue
            alpha, first = rasterise_lines(height, g.x0 * ratio, g.x1 * ratio, g.row_y(queries) * ratio - top,
                                           g.row_y(keys) * ratio - top, weights[head_index][queries, keys],
                                           thickness, LINE_COLUMN_WIDTH)
            if shares is None:
                shares = np.zeros((len(self._colours), *alpha.shape), np.float32)  # [n, C, height]
                see_through = np.ones(alpha.shape, np.float32)                     # Π (1 - alpha) of later heads
            shares[head_index] = alpha * see_through
            see_through *= 1.0 - alpha
        if shares is None:
            return QImage(), QRectF()
        colours = np.array([[c.redF(), c.greenF(), c.blueF(), 1.0] for c in self._colours], np.float32)
        # Widened to full columns and in the screen's pixel format once, here (in NumPy: Qt's smooth scaling and
        # conversion wait on its thread pool): every repaint is then a plain copy. The heads' shares are widened
        # before they are coloured: one number a pixel per head (one head, most often) instead of four.
        wide = widen_columns(shares.transpose(2, 1, 0), LINE_COLUMN_WIDTH)   # [height, C * width, n]
        rgba = np.tensordot(wide, colours[:, ARGB32_BYTES] * 255, axes=(2, 0))   # premultiplied, in ARGB32's bytes
        pixels = (rgba + 0.5).astype(np.uint8, order="C")
        image = QImage(pixels.data, pixels.shape[1], height, pixels.shape[1] * 4,
                       QImage.Format.Format_ARGB32_Premultiplied).copy()   # its own pixels: `pixels` goes
        target = QRectF(first / ratio, band[0], pixels.shape[1] / ratio, height / ratio)
        self._line_images = {name: value for name, value in self._line_images.items() if name[0] == "full"}
        self._line_images[slot] = ((key, band), (image, target))
        return image, target

    def _lines_in_band(self, weights: np.ndarray, g: LinesGeometry, band: tuple[int, int]):  # [T, T] -> ([N], [N])
        """(queries, keys) of the lines drawn (weight > 0) that pass through rows [top, bottom)."""
        queries, keys = np.nonzero(weights)
        y_query, y_key = g.row_y(queries), g.row_y(keys)
        reach = self.THICK * 2
        inside = (np.minimum(y_query, y_key) - reach < band[1]) & (np.maximum(y_query, y_key) + reach > band[0])
        return queries[inside], keys[inside]

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
        painter.setPen(self.palette().color(QPalette.ColorRole.Text))
        title_lines = self._title_lines()
        painter.drawText(QRectF(self.MARGIN, y, self.width() - 2 * self.MARGIN, line * title_lines),
                         int(Qt.TextFlag.TextWordWrap), self._title)
        y += line * title_lines
        if len(self._names) > 1:
            x = float(self.MARGIN)
            for name, colour in zip(self._names, self._colours):
                painter.fillRect(QRectF(x, y + metrics.height() * 0.25, 14, metrics.height() * 0.5), colour)
                painter.drawText(QPointF(x + 18, y + metrics.ascent()), name)
                x += 26 + metrics.horizontalAdvance(name)
            y += line
        painter.setPen(muted_text(self.palette()))
        left_out, below = self._left_out
        if left_out:
            painter.drawText(QPointF(self.MARGIN, y + metrics.ascent()),
                             left_out_note(left_out, below, metrics, self.width() - 2 * self.MARGIN,
                                           hint=not self._on_page))
            y += line
        painter.drawText(QRectF(self.MARGIN, y, g.left_text - self.MARGIN, line),
                         int(Qt.AlignmentFlag.AlignRight), "query")
        painter.drawText(QRectF(g.right_text, y, self.width(), line), int(Qt.AlignmentFlag.AlignLeft), "key")

    def _paint_bands(self, painter: QPainter, g: LinesGeometry) -> None:
        """The selected query (left) and key (right) on a light band."""
        if self._selected is None:
            return
        query, key = self._selected
        band = SELECTED_BAND_DARK if self.palette().color(QPalette.ColorRole.Base).lightness() < 128 else SELECTED_BAND
        painter.fillRect(QRectF(self.MARGIN / 2, g.top + query * g.pitch, g.left_text - self.MARGIN / 2 + 3,
                                g.pitch), band)
        painter.fillRect(QRectF(g.right_text - 3, g.top + key * g.pitch, self.width() - g.right_text,
                                g.pitch), band)

    def _paint_labels(self, painter: QPainter, g: LinesGeometry, exposed: QRect) -> None:
        """Each row's label left (right-aligned) and right, in the rows exposed. Drawn at a point with
        the widths measured in set_lines (text in a rectangle is laid out anew on every paint); the
        hovered label is bold, so it alone is aligned by the painter."""
        metrics = QFontMetricsF(self.font())
        baseline = (g.pitch + metrics.ascent() - metrics.descent()) / 2
        first = max(0, math.floor((exposed.top() - g.top) / g.pitch))
        last = min(len(self._labels), math.ceil((exposed.bottom() + 1 - g.top) / g.pitch))
        painter.setFont(self.font())
        painter.setPen(self.palette().color(QPalette.ColorRole.Text))
        for row in range(first, last):
            y = g.top + row * g.pitch + baseline
            label = self._labels[row]
            if self._focus != ("query", row):
                painter.drawText(QPointF(g.left_text - self._label_advances[row], y), label)
            if self._focus != ("key", row):
                painter.drawText(QPointF(g.right_text, y), label)
        if self._focus is not None and self._focus[1] < len(self._labels):
            self._paint_focused_label(painter, g, *self._focus)

    def _paint_focused_label(self, painter: QPainter, g: LinesGeometry, side: str, row: int) -> None:
        bold = self.font()
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(MARK_COLOUR)
        top = g.top + row * g.pitch
        if side == "query":
            rect = QRectF(self.MARGIN / 2, top, g.left_text - self.MARGIN / 2, g.pitch)
            align = Qt.AlignmentFlag.AlignRight
        else:
            rect, align = QRectF(g.right_text, top, self.width() - g.right_text, g.pitch), Qt.AlignmentFlag.AlignLeft
        painter.drawText(rect, int(align | Qt.AlignmentFlag.AlignVCenter), self._labels[row])
