"""An axis that names tokens (or any rows) at cell centres, thinned to the pixels available at any zoom.

Every label is shown while a row is at least a legible line of text; below that every n-th
(multiples of n, so labels stay put while scrolling). A bottom axis turns its labels upright
(reading upwards, ending at the axis) when they do not fit side by side; the space marker "␣"
that starts many labels stays upright, as a turned "␣" reads as "]". With turn_labels False it
keeps them level instead, every n-th so that the widest fits (turned Chinese reads sideways).
"""
from __future__ import annotations

import math
from typing import Sequence

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFontMetricsF, QImage, QPainter

from gui.fast_axis import AxisDrawing, FastAxis
from gui.fonts import ui_font
from gui.text_fit import LABEL_COLUMNS, elide

SPACE_MARK = "␣"
LEGIBLE_PITCH = 1.1    # a row at least this many ems tall gets its own label
LABEL_GAP = 6          # pixels between two level labels on a bottom axis
MARK_GAP = 3           # pixels between a turned word and the upright space marker under it
UPRIGHT_PICTURES_KEPT = 4096   # turned labels kept per axis (a few kB each); a long session starts afresh
SIZE_SLACK = 16        # pixels an axis may stay wider (taller) than its labels need: a new sentence's labels,
                       # a few pixels narrower, then keep the plot's layout instead of laying it out again


def _with_slack(current: int | None, needed: int | None, slack: int) -> int | None:
    """The axis' size for labels that need `needed`: the current one while it holds them with little to spare."""
    if current is not None and needed is not None and needed <= current <= needed + slack:
        return current
    return needed


class TokenAxis(FastAxis):
    def __init__(self, orientation: str, offset: float = 0.5, point_size: float = 8.5,
                 turn_labels: bool = True, slack: int = SIZE_SLACK) -> None:
        """offset: where row i's label sits (0.5: the centre of cell [i, i+1]; 0: at i, for bars).
        turn_labels: a bottom axis turns labels that do not fit side by side (False: thins them instead).
        slack: pixels the axis may keep to spare before a new set of labels narrows it."""
        super().__init__(orientation)
        self._offset = offset
        self._slack = slack
        self.turn_labels = turn_labels
        self._labels: list[str] = []
        self._upright: list[tuple[float, float, str]] = []  # (x, y, text) drawn turned by -90°
        self._widest = 0.0
        self._turned_length = 0.0   # the longest label turned: its word, and the upright ␣ below it
        self._upright_image: tuple | None = None   # (what it shows, QImage, where it goes)
        self._upright_pictures: dict[tuple, tuple[QImage, float]] = {}   # (label, ratio, colour) -> picture, anchor
        self.setTickFont(ui_font(point_size))
        self.setStyle(tickLength=4, hideOverlappingLabels=False)
        self.enableAutoSIPrefix(False)   # names have no units; the prefix check re-lays the title out per range
        if orientation in ("left", "right"):   # sized by set_labels: no relayout after the first paint
            self.setStyle(autoExpandTextSpace=False)

    def set_labels(self, labels: Sequence[str], columns: int | None = LABEL_COLUMNS) -> None:
        """The label of each row; longer than `columns` (CJK counts double) they are elided (None: never)."""
        labels = list(labels) if columns is None else [elide(label, columns) for label in labels]
        if labels == self._labels:
            return   # nothing to draw anew
        self._labels = labels
        width = self.label_texts().width
        widths = dict(zip(labels, map(width, labels)))   # each label measured once (rows repeat labels)
        self._widest = max(widths.values(), default=0.0)
        line = self._metrics().height()
        self._turned_length = max((self._turned_extent(label, width, line) for label in widths), default=0.0)
        if self.orientation in ("left", "right"):   # width for every label, not only those shown now
            needed = int(self._widest + self.style["tickTextOffset"][0] + 6 + self._title_depth())
            self.setWidth(_with_slack(self.fixedWidth, needed, self._slack))
        else:   # pyqtgraph learns the labels' height only while painting: an export paints once, too late
            self._updateMaxTextSize(math.ceil(line))
        self.picture = None
        self._fit_to_labels()
        self.update()

    def setRange(self, mn: float, mx: float) -> None:  # noqa: N802 (pyqtgraph's name)
        super().setRange(mn, mx)
        self._fit_to_labels()

    def resizeEvent(self, event=None) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._fit_to_labels()

    def _fit_to_labels(self) -> None:
        """A bottom axis takes the height its labels need (upright or not) before it is painted: sized
        while painting, it would lay the plot out again and paint it twice."""
        if self.orientation != "bottom" or not getattr(self, "_labels", None):   # (called while AxisItem builds)
            return
        low, high = sorted(self.range)
        pixels_per_row = self.geometry().width() / max(high - low, 1e-9)
        spacing = self.label_step(pixels_per_row) * pixels_per_row
        self._fit_height(None if self._level(spacing) else self._turned_length)

    def _title_depth(self) -> float:
        """The room the axis title takes beside the labels (as pyqtgraph reserves it when it sizes the axis
        itself): without it the longest labels run under the title, or off the page's edge."""
        return self.label.boundingRect().height() * 0.8 if self.label.isVisible() else 0.0

    @staticmethod
    def _turned_extent(label: str, width, line: float) -> float:
        """How far a turned label reaches below the axis: its word (width), then a line for the upright ␣."""
        if not label.startswith(SPACE_MARK):
            return width(label)
        return width(label.lstrip(SPACE_MARK)) + line

    def labels(self) -> list[str]:
        return list(self._labels)

    def _metrics(self) -> QFontMetricsF:
        return QFontMetricsF(self.style["tickFont"])

    def label_step(self, pixels_per_row: float) -> int:
        """1: every row labelled; n: every n-th, when rows are lower than a legible line (or, on a bottom
        axis keeping its labels level, narrower than the widest label)."""
        pitch = self.legible_pitch()
        if self.orientation == "bottom" and not self.turn_labels:
            pitch = max(pitch, self._widest + LABEL_GAP)
        return max(1, math.ceil(pitch / max(pixels_per_row, 1e-9)))

    def _level(self, spacing: float) -> bool:
        """A bottom axis's labels stay level: they fit side by side `spacing` apart, or are never turned."""
        return not self.turn_labels or self._widest + LABEL_GAP <= spacing

    def legible_pitch(self) -> float:
        """The smallest row height, in pixels, that still takes a label: the font's em size and a little.

        From the point size, not the font's line height: with a CJK fallback font that is far taller
        than the glyphs, and labels would be thinned long before they touch."""
        font = self.style["tickFont"]
        return font.pointSizeF() * 96 / 72 * LEGIBLE_PITCH

    def tickValues(self, minVal: float, maxVal: float, size: float):  # noqa: N802 (pyqtgraph's name)
        low, high = sorted((minVal, maxVal))
        first = max(0, math.ceil(low - self._offset))
        last = min(len(self._labels) - 1, math.floor(high - self._offset))
        if last < first or size <= 0:
            return []
        step = self.label_step(size / max(high - low, 1e-9))
        start = math.ceil(first / step) * step
        return [(step, [i + self._offset for i in range(start, last + 1, step)])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        return [self._labels[int(v)] if 0 <= int(v) < len(self._labels) else "" for v in values]

    def drawing(self) -> AxisDrawing | None:
        """The base class's layout; a bottom axis whose labels do not fit side by side draws them
        turned instead (self._upright), and takes the height they need."""
        laid_out = self.picture
        drawing = super().drawing()
        if drawing is None:
            self._upright = []
        if drawing is None or drawing is laid_out or self.orientation != "bottom" or not self._labels:
            return drawing
        positions = [x for x, _ in drawing.labelled]
        spacing = min((b - a for a, b in zip(positions, positions[1:])), default=math.inf)
        self._upright = []
        if self._level(spacing):
            self._fit_height(None)
            return drawing
        top = self.mapRectFromParent(self.geometry()).top() + max(0, self.style["tickLength"]) \
            + self.style["tickTextOffset"][1]
        self._upright = [(x, top, text) for x, text in drawing.labelled if text]
        drawing.texts = []
        self._fit_height(self._turned_length)
        return drawing

    def _fit_height(self, text_width: float | None) -> None:
        """Room for upright labels (text_width) or the base class's automatic height (None)."""
        wanted = None
        if text_width is not None:
            label_height = self.label.boundingRect().height() * 0.8 if self.label.isVisible() else 0
            wanted = _with_slack(self.fixedHeight, int(text_width + self.style["tickTextOffset"][1] + 4 + label_height),
                                 self._slack)
        if wanted != self.fixedHeight:
            self.setHeight(wanted)

    def paint(self, p, opt, widget) -> None:
        """The axis as FastAxis draws it, then the upright labels: on screen and in PNGs from an image
        made once per label set out of pictures kept per label (turned text has no glyph cache: 64
        labels cost tens of ms a repaint), in SVG as text."""
        super().paint(p, opt, widget)
        if not self._upright:
            return
        if p.paintEngine().type() != p.paintEngine().Type.Raster:
            self._draw_upright(p, 0.0, 0.0)
            return
        ratio = min(max(abs(p.deviceTransform().m11()), 1.0), 4.0)
        key = (tuple(self._upright), ratio, self._widest)
        if self._upright_image is None or self._upright_image[0] != key:
            self._upright_image = (key, *self._render_upright(ratio))
        _, image, origin = self._upright_image
        p.drawImage(QRectF(origin.x(), origin.y(), image.width() / ratio, image.height() / ratio), image)

    def _render_upright(self, ratio: float) -> tuple[QImage, QPointF]:
        """Every upright label in one image, each copied from its own picture (a label's picture is kept:
        turned text is slow to draw, and a new sentence repeats most of the last one's labels)."""
        pictures = [self._upright_picture(text, ratio) for _, _, text in self._upright]
        reach = max(half for _, half in pictures)   # from a label's anchor to its picture's side
        xs = [x for x, _, _ in self._upright]
        left, top = min(xs) - reach, min(y for _, y, _ in self._upright)
        width = max(xs) + reach - left
        height = max(picture.height() / ratio for picture, _ in pictures)
        image = QImage(max(1, math.ceil(width * ratio)), max(1, math.ceil(height * ratio)),
                       QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(0)
        painter = QPainter(image)
        painter.scale(ratio, ratio)
        for (x, y, _), (picture, half) in zip(self._upright, pictures):
            painter.drawImage(QPointF(x - half - left, y - top), picture)
        painter.end()
        return image, QPointF(left, top)

    def _upright_picture(self, text: str, ratio: float) -> tuple[QImage, float]:
        """One turned label, and how far its anchor (where the word ends, at the axis) is from the
        picture's left edge: a line height, or half the space markers' width where that is more."""
        key = (text, ratio, self.textPen().color().rgba())
        kept = self._upright_pictures.get(key)
        if kept is None:
            if len(self._upright_pictures) >= UPRIGHT_PICTURES_KEPT:
                self._upright_pictures.clear()
            metrics = self._metrics()
            height = metrics.height()
            marks = SPACE_MARK * (len(text) - len(text.lstrip(SPACE_MARK)))
            half = max(height, metrics.horizontalAdvance(marks) / 2 + 1)
            reach = self._turned_extent(text, metrics.horizontalAdvance, height) + MARK_GAP + height
            picture = QImage(max(1, math.ceil(2 * half * ratio)), max(1, math.ceil(reach * ratio)),
                             QImage.Format.Format_ARGB32_Premultiplied)
            picture.setDevicePixelRatio(ratio)
            picture.fill(0)
            painter = QPainter(picture)
            painter.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
            self._draw_upright_label(painter, half, 0.0, text)
            painter.end()
            kept = self._upright_pictures[key] = (picture, half)
        return kept

    def _draw_upright(self, p: QPainter, dx: float, dy: float) -> None:
        for x, y, text in self._upright:
            self._draw_upright_label(p, x + dx, y + dy, text)

    def _draw_upright_label(self, p: QPainter, x: float, y: float, text: str) -> None:
        """The word turned, ending at (x, y); a space marker upright below it."""
        metrics = self._metrics()
        height = metrics.height()
        p.setFont(self.style["tickFont"])
        p.setPen(self.textPen())
        word = text.lstrip(SPACE_MARK)
        marks = len(text) - len(word)
        width = metrics.horizontalAdvance(word) + 2
        p.save()
        p.translate(x, y)
        p.rotate(-90)  # text runs upwards and ends at the axis
        p.drawText(QRectF(-width, -height / 2, width, height),
                   int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), word)
        p.restore()
        if marks:   # the space marker, upright, its ink MARK_GAP below the word's start (a line below, it
            mark = SPACE_MARK * marks   # read as a stray bracket: the glyph sits low in its line)
            ink_top = metrics.tightBoundingRect(mark).top()   # above the baseline: negative
            p.drawText(QPointF(x - metrics.horizontalAdvance(mark) / 2,
                               y + metrics.horizontalAdvance(word) + MARK_GAP - ink_top), mark)
