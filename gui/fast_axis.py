"""A pyqtgraph AxisItem that draws its labels from cached layouts: the same picture, a fraction of the time.

pyqtgraph's AxisItem measures every label with QPainter.boundingRect, records the axis into a
QPicture and plays it back, so each label is laid out three times per repaint (~0.1 ms each: a
64-token axis cost several ms, an update repaints half a dozen axes). FastAxis places the ticks
and labels exactly as AxisItem.generateDrawSpecs does, but takes each label's layout from
gui.static_texts (laid out once per string and font) and paints straight from that.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pyqtgraph as pg
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QPainter, QPen, QStaticText
from PySide6.QtWidgets import QApplication

from gui.static_texts import StaticTexts, static_texts


@dataclass
class AxisDrawing:
    """An axis laid out for one range and size: what FastAxis.paint draws."""
    length: float                                   # the axis' length in device pixels it was laid out for
    axis: QLineF
    ticks: list[tuple[QPen, list[QLineF]]]         # per tick level
    texts: list[tuple[QPointF, QStaticText]]        # each label's top-left corner
    labelled: list[tuple[float, str]] = field(default_factory=list)   # (position, text) of the first level


class FastAxis(pg.AxisItem):
    """pyqtgraph sets `picture` to None whenever the axis must be drawn anew (range, size, style,
    ticks); here it holds the AxisDrawing in between instead of a QPicture."""

    def label_texts(self) -> StaticTexts:
        """The label layouts in the tick font (pyqtgraph: no tick font is the view's, the app's font)."""
        return static_texts(self.style["tickFont"] or QApplication.font())

    def paint(self, p, opt, widget) -> None:
        drawing = self.drawing()
        if drawing is None:
            return
        p.save()
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing, True)
        p.setPen(self.pen())
        p.drawLine(drawing.axis)
        for pen, lines in drawing.ticks:
            p.setPen(pen)
            p.drawLines(lines)
        p.setFont(self.label_texts().font)
        p.setPen(self.textPen())
        p.setClipRect(self.boundingRect().toAlignedRect())
        for corner, laid_out in drawing.texts:
            p.drawStaticText(corner, laid_out)
        p.restore()

    # ------------------------------------------------------------ layout, as generateDrawSpecs
    def drawing(self) -> AxisDrawing | None:
        """The axis laid out now, or the one laid out before if nothing changed since."""
        bounds = self.mapRectFromParent(self.geometry())
        linked = self.linkedView()
        gridded = linked is not None and self.grid is not False   # grid lines run across the linked view
        tick_bounds = linked.mapRectToItem(self, linked.boundingRect()) if gridded else bounds
        span, tick_start, tick_stop, direction = self._span(bounds, tick_bounds)
        points = [self.mapToDevice(point) for point in span]
        if None in points:
            return None
        length = math.hypot(points[1].x() - points[0].x(), points[1].y() - points[0].y())
        if length == 0:
            return None
        if isinstance(self.picture, AxisDrawing) and self.picture.length == length:
            return self.picture
        levels, strings = self._levels(length)
        scale, offset = self._value_to_pixel(bounds)
        ends = sorted(value * scale - offset for value in self.range)
        positions = [[x if ends[0] <= x <= ends[1] else None for x in (v * scale - offset for v in values)]
                     for _, values in levels]
        ticks = []
        for i, at in enumerate(positions):   # major ticks first, each level shorter and fainter
            length_here = self.style["tickLength"] / (i * 0.5 + 1)
            stop = tick_stop if self.grid is not False else tick_stop + direction * length_here
            ticks.append((self._level_pen(i, length, len(at)), [self._tick_line(x, tick_start, stop) for x in at
                                                                if x is not None]))
        span = self._stop_at_ticks(span, positions)
        drawing = AxisDrawing(length, QLineF(*span), ticks, [])
        if self.style["showValues"]:
            self._place_texts(drawing, levels, strings, positions, length, tick_stop)
        self.picture = drawing
        return drawing

    def _levels(self, length: float) -> tuple[list, list | None]:
        """[(spacing, values)] per tick level, and their strings when set by setTicks (else None)."""
        if self._tickLevels is None:
            return self.tickValues(self.range[0], self.range[1], length), None
        return ([(None, [value for value, _ in level]) for level in self._tickLevels],
                [[text for _, text in level] for level in self._tickLevels])

    def _along_x(self) -> bool:
        return self.orientation in ("top", "bottom")

    def _span(self, bounds: QRectF, tick_bounds: QRectF):
        """The axis line's ends, where ticks start and stop (the edge facing the plot) and which way they point."""
        if self.orientation == "left":
            return ((bounds.topRight() + QPointF(-1, -1), bounds.bottomRight() + QPointF(-1, 1)),
                    tick_bounds.right(), bounds.right(), -1)
        if self.orientation == "right":
            return ((bounds.topLeft() + QPointF(1, -1), bounds.bottomLeft() + QPointF(1, 1)),
                    tick_bounds.left(), bounds.left(), 1)
        if self.orientation == "top":
            return ((bounds.bottomLeft() + QPointF(-1, -1), bounds.bottomRight() + QPointF(1, -1)),
                    tick_bounds.bottom(), bounds.bottom(), -1)
        return ((bounds.topLeft() + QPointF(-1, 1), bounds.topRight() + QPointF(1, 1)),
                tick_bounds.top(), bounds.top(), 1)

    def _value_to_pixel(self, bounds: QRectF) -> tuple[float, float]:
        """(scale, offset): a value v sits at v * scale - offset along the axis."""
        low, high = self.range
        if high == low:
            return 1.0, 0.0
        if self._along_x():
            scale = bounds.width() / (high - low)
            return scale, low * scale
        scale = -bounds.height() / (high - low)
        return scale, low * scale - bounds.height()

    def _tick_line(self, x: float, start: float, stop: float) -> QLineF:
        return QLineF(x, start, x, stop) if self._along_x() else QLineF(start, x, stop, x)

    def _level_pen(self, level: int, length: float, count: int) -> QPen:
        """The base class's tick pen for a level: fainter for minor levels (and with a grid)."""
        alpha = self.style["tickAlpha"]
        if alpha is None:
            alpha = 255 / (level + 1)
            if self.grid is not False:
                alpha *= self.grid / 255 * min(max(0.05 * length / (count + 1), 0.0), 1.0)
        elif isinstance(alpha, float):
            alpha = min(255, max(0, round(alpha * 255)))
        pen = self.tickPen()
        if pen.brush().style() == Qt.BrushStyle.SolidPattern:
            colour = pen.color()
            colour.setAlpha(int(alpha))
            pen.setColor(colour)
        return pen

    def _stop_at_ticks(self, span, positions) -> tuple[QPointF, QPointF]:
        """The axis line ends at the outermost ticks where the style asks for it."""
        start, end = QPointF(span[0]), QPointF(span[1])
        shown = [x for level in positions for x in level if x is not None]
        stop_first, stop_last = self.style["stopAxisAtTick"]
        if shown and self._along_x():
            start.setX(max(start.x(), min(shown)) if stop_first else start.x())
            end.setX(min(end.x(), max(shown)) if stop_last else end.x())
        elif shown:
            start.setY(max(start.y(), min(shown)) if stop_first else start.y())
            end.setY(min(end.y(), max(shown)) if stop_last else end.y())
        return start, end

    def _place_texts(self, drawing: AxisDrawing, levels, strings, positions, length: float, tick_stop: float) -> None:
        """Labels level by level while they are not too crowded, each aligned in the slot the base
        class gives it; labels whose slot sticks out of the item's bounds are left out, as there."""
        texts = self.label_texts()
        gap = max(0, self.style["tickLength"]) + self.style["tickTextOffset"][1 if self._along_x() else 0]
        allowed = self.boundingRect()
        sizes: list[tuple[float, float]] = []   # (width, trimmed height) of every label measured so far
        thickest = 0.0
        for i in range(min(len(levels), self.style["maxTextLevel"] + 1)):
            spacing, values = levels[i]
            level = list(strings[i]) if strings is not None else \
                self.tickStrings(values, self.autoSIPrefixScale * self.scale, spacing)
            if not level:
                continue
            shown = [(x, text) for x, text in zip(positions[i], level) if x is not None]
            measured = [texts.size(text) for _, text in shown]
            sizes += [(width, height * 0.8) for width, height in measured]   # the base class trims heights so
            along = sum(width if self._along_x() else height for width, height in sizes)
            if i > 0 and any(len(drawing.texts) >= n and along / length >= limit
                             for n, limit in self.style["textFillLimits"]):
                break
            thickest = max((height if self._along_x() else width for width, height in sizes), default=0.0)
            for (x, text), (width, height) in zip(shown, measured):
                slot = self._label_slot(x, width, height * 0.8, tick_stop, gap)
                if allowed & slot == slot:
                    drawing.texts.append((self._corner(slot, x, height), texts(text)))
            if i == 0:
                drawing.labelled = shown
        self._updateMaxTextSize(thickest)

    def _label_slot(self, x: float, width: float, height: float, tick_stop: float, gap: float) -> QRectF:
        if self.orientation == "left":
            return QRectF(tick_stop - gap - width, x - height / 2, width, height)
        if self.orientation == "right":
            return QRectF(tick_stop + gap, x - height / 2, width, height)
        if self.orientation == "top":
            return QRectF(x - width / 2, tick_stop - gap - height, width, height)
        return QRectF(x - width / 2, tick_stop + gap, width, height)

    def _corner(self, slot: QRectF, x: float, height: float) -> QPointF:
        """Where a label of this full height starts, aligned in its slot as the base class aligns it
        (left / right axes: centred on the tick; top: at the slot's bottom; bottom: at its top)."""
        if not self._along_x():
            return QPointF(slot.left(), x - height / 2)
        return QPointF(slot.left(), slot.top() if self.orientation == "bottom" else slot.bottom() - height)
