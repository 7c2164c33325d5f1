"""A row of labelled chips that wraps like text: token pieces, merge steps.

One painted widget rather than one QLabel per chip, so a 256-token sentence redraws in a few
milliseconds and renders to PNG/SVG exactly as on screen. Chips may carry several lines: the first
is drawn large (the piece), the others small (id, byte span).

Chips are whole pixels wide and tall, so every chip sits on whole pixels. On screen a plain chip's
box (its anti-aliased rounded fill and outline, most of a flow's paint) is then copied from a picture
kept per fill and size: chips of a sentence share a few sizes, and the next sentence's mostly repeat
them. A flow whose chips themselves recur (kept_chips: the merge replay's pieces) copies whole chips,
text and all. Vector output (SVG, PDF) and scaled renders draw every box as a path.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

from PySide6.QtCore import QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QMouseEvent, QPaintEngine, QPainter, QPalette, QPen, QPixmap
from PySide6.QtWidgets import QSizePolicy, QWidget

from gui.fonts import ui_font
from gui.head_lines import muted_text
from gui.static_texts import static_texts
from gui.text_widths import TextWidths
from gui.theme import ink, is_dark_theme, on_paper

MARGIN = 6.0
GAP = 4.0          # between chips of one word
WORD_GAP = 14.0    # before a chip that starts a new word (pre-token)
PAD_X, PAD_Y = 6.0, 3.0
MARK_COLOUR = QColor(230, 120, 20)     # the selected chip's outline
HOVER_COLOUR = QColor(40, 90, 180)
OUTLINE_ROOM = 2.0   # pixels beyond a chip's rect its thickest outline (the mark's) can reach
CORNER_RADIUS = 4.0
BOX_PICTURES_KEPT = 512   # ~13 kB each at 64 × 50 px: a few MB at most, shared by every flow
_BOX_PICTURES: "OrderedDict[tuple, QPixmap]" = OrderedDict()   # least recently drawn first
CHIP_PICTURES_KEPT = 2048   # whole chips (kept_chips), ~6 kB each
_CHIP_PICTURES: "OrderedDict[tuple, QPixmap]" = OrderedDict()


@dataclass(frozen=True)
class Chip:
    lines: tuple[str, ...]         # first line large, the rest small
    fill: QColor
    gap_before: bool = False       # a new word starts here


def box_picture(fill: QColor, pen: QPen, width: int, height: int, ratio: int) -> QPixmap:
    """A plain chip's box, width × height pixels (device pixels × ratio), as drawRoundedRect draws it there."""
    key = (fill.rgba(), pen.color().rgba(), pen.widthF(), width, height, ratio)
    picture = _BOX_PICTURES.get(key)
    if picture is not None:
        _BOX_PICTURES.move_to_end(key)
        return picture
    picture = QPixmap(width * ratio, height * ratio)
    picture.setDevicePixelRatio(ratio)
    picture.fill(Qt.GlobalColor.transparent)
    painter = QPainter(picture)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(pen)
    painter.setBrush(fill)
    painter.drawRoundedRect(QRectF(0.5, 0.5, width - 1, height - 1), CORNER_RADIUS, CORNER_RADIUS)
    painter.end()
    _BOX_PICTURES[key] = picture
    if len(_BOX_PICTURES) > BOX_PICTURES_KEPT:
        _BOX_PICTURES.popitem(last=False)
    return picture


def copies_pictures(painter: QPainter) -> int:
    """The device pixel ratio at which pictures copied onto this painter land on whole device pixels
    (a raster device, moved by whole pixels, at a whole ratio); 0 where boxes must be drawn as paths."""
    if painter.paintEngine().type() != QPaintEngine.Type.Raster:
        return 0
    ratio = painter.device().devicePixelRatioF()
    move = painter.worldTransform()   # the device's ratio aside
    whole_move = move.type() in (move.TransformationType.TxNone, move.TransformationType.TxTranslate) \
        and move.dx() == int(move.dx()) and move.dy() == int(move.dy())
    return int(ratio) if whole_move and ratio == int(ratio) else 0


class ChipFlow(QWidget):
    themed_fills = True   # the fills mark kinds (gui.theme.on_paper turns them deep on the dark theme)
    kept_boxes = True     # few fills, so box pictures are reused (a colour map's fills would not be)
    kept_chips = False    # whole chips copied from pictures: where the same chips recur (merge pieces), not
                          # where nearly every chip is new with each sentence (token chips: their byte spans)

    sigHovered = Signal(int)   # chip index under the mouse; -1 when it leaves every chip
    sigClicked = Signal(int)

    def __init__(self, big_point_size: float = 12.0, small_point_size: float = 8.0,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._big = ui_font(big_point_size)
        self._small = ui_font(small_point_size)
        self._big_metrics, self._small_metrics = QFontMetricsF(self._big), QFontMetricsF(self._small)
        self._big_height, self._small_height = self._big_metrics.height(), self._small_metrics.height()
        self._chips: list[Chip] = []
        self._line_widths: list[list[float]] = []
        self._sizes: list[tuple[float, float]] = []   # each chip's width and height
        self._big_width, self._small_width = TextWidths(self._big), TextWidths(self._small)
        self._rects: list[QRectF] = []
        self._boxes: list[QRectF | None] = []                   # each chip's outline, half a pixel inside its rect
        self._corners: list[tuple[QPointF, ...] | None] = []    # where each of a chip's lines starts (its top left)
        self._big_texts, self._small_texts = static_texts(self._big), static_texts(self._small)
        self._fonts_key = (self._big.key(), self._small.key())   # a chip picture is of these fonts
        self._pens: dict[tuple[int, bool], QPen] = {}       # a plain chip's outline, by its fill's rgba and theme
        self._laid_out_width = -1
        self._marked = -1
        self._hovered = -1
        self._placeholder = ""
        self.setMouseTracking(True)
        self.setAutoFillBackground(False)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)   # paintEvent fills it: skip the parent's paint
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    # ------------------------------------------------------------ content
    def set_chips(self, chips: Sequence[Chip], placeholder: str = "") -> None:
        self._chips = list(chips)
        self._placeholder = placeholder
        self._hovered = -1
        # Text widths and chip sizes are measured once per chip here, not at every layout or paint.
        big, small = self._big_width, self._small_width
        self._line_widths = [[big(chip.lines[0])] + [small(text) for text in chip.lines[1:]] for chip in self._chips]
        self._sizes = [self._chip_size(len(chip.lines), widths) for chip, widths in zip(self._chips, self._line_widths)]
        self._relayout()
        self.update()

    def set_marked(self, index: int) -> None:
        if index != self._marked:
            self._update_chips(self._marked, index)
            self._marked = index

    def chip_count(self) -> int:
        return len(self._chips)

    def chip_rect(self, index: int) -> QRectF:
        self._ensure_layout()
        return QRectF(self._rects[index])

    def chip_lines(self, index: int) -> tuple[str, ...]:
        return self._chips[index].lines

    def height_at(self, width: float) -> float:
        """The height the chips need at `width`, without laying the widget out (a figure's pages are cut by it)."""
        return self._flow(width)[1]

    # ------------------------------------------------------------ layout
    def _chip_size(self, lines: int, widths: list[float]) -> tuple[float, float]:
        """Whole pixels (the gaps and margins are too), so every chip's box lands on whole pixels."""
        height = self._big_height + self._small_height * (lines - 1)
        return float(math.ceil(max(widths) + 2 * PAD_X)), float(math.ceil(height + 2 * PAD_Y))

    def _flow(self, width: float) -> tuple[list[QRectF], float]:
        """Chip rectangles for a given widget width, and the height they need."""
        rects: list[QRectF] = []
        x, y, row_height = MARGIN, MARGIN, 0.0
        right = width - MARGIN
        for chip, (w, h) in zip(self._chips, self._sizes):
            gap = (WORD_GAP if chip.gap_before else GAP) if rects else 0.0
            if rects and x + gap + w > right:   # wrap to a new row
                x, y, gap = MARGIN, y + row_height + GAP + 2, 0.0
                row_height = 0.0
            rects.append(QRectF(x + gap, y, w, h))
            x += gap + w
            if h > row_height:
                row_height = h
        return rects, y + row_height + MARGIN

    def _relayout(self) -> None:
        width = max(self.width(), 200)
        self._rects, height = self._flow(width)
        self._forget_drawing()
        self._laid_out_width = self.width()
        if not self._chips:
            height = self._big_metrics.height() + 2 * MARGIN
        # Exactly as tall as the chips need: a figure of it has no empty band below.
        self.setFixedHeight(int(height + 0.5))

    def _update_chips(self, *indices: int) -> None:
        """Repaint only these chips (a new outline; the other chips are unchanged), with room for the
        thickest outline, which straddles the chip's edge."""
        self._ensure_layout()
        for index in indices:
            if 0 <= index < len(self._rects):
                self.update(self._rects[index].adjusted(-OUTLINE_ROOM, -OUTLINE_ROOM, OUTLINE_ROOM,
                                                        OUTLINE_ROOM).toAlignedRect())

    def _forget_drawing(self) -> None:
        """Forget where the chips' outlines and lines were drawn: each is worked out at its chip's first paint
        after a layout (only the chips in view), then kept for the repaints of hovering and selecting."""
        self._boxes = [None] * len(self._rects)
        self._corners = [None] * len(self._rects)

    def _box(self, index: int) -> QRectF:
        box = self._boxes[index]
        if box is None:
            box = self._boxes[index] = self._rects[index].adjusted(0.5, 0.5, -0.5, -0.5)
        return box

    def _line_corners(self, index: int) -> tuple[QPointF, ...]:
        """Where each of the chip's lines starts: centred in the chip, the big line on top."""
        corners = self._corners[index]
        if corners is None:
            rect, widths = self._rects[index], self._line_widths[index]
            x, top = rect.x(), rect.y() + PAD_Y
            corners = self._corners[index] = (
                QPointF(x + (rect.width() - widths[0]) / 2, top),
                *(QPointF(x + (rect.width() - width) / 2, top + self._big_height + row * self._small_height)
                  for row, width in enumerate(widths[1:])))
        return corners

    def _ensure_layout(self) -> None:
        if self._laid_out_width != self.width():
            self._relayout()

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(400, max(self.minimumHeight(), 40))

    def resizeEvent(self, event) -> None:  # noqa: N802
        if event.size().width() != event.oldSize().width():
            self._relayout()
        super().resizeEvent(event)

    # ------------------------------------------------------------ drawing
    def paintEvent(self, event) -> None:  # noqa: N802
        self._ensure_layout()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.fillRect(self.rect(), self.palette().color(QPalette.ColorRole.Base))
        if not self._chips:
            painter.setFont(self._small)
            painter.setPen(muted_text(self.palette()))
            painter.drawText(self.rect().adjusted(int(MARGIN), int(MARGIN), 0, 0),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop, self._placeholder)
            return
        region = event.region()   # a changed outline repaints two chips, not the rows between them
        shown = [i for i, rect in enumerate(self._rects) if region.intersects(rect.toAlignedRect())]
        ratio = copies_pictures(painter) if self.kept_boxes or self.kept_chips else 0
        if ratio and self.kept_chips:
            shown = self._copy_chips(painter, shown, ratio)   # what is left: the marked and hovered chips
        for index in shown:   # boxes first, then text by font: fewer painter state changes
            self._draw_box(painter, index, ratio if self.kept_boxes else 0)
        self._draw_lines(painter, shown, big=True)
        self._draw_lines(painter, shown, big=False)

    def _copy_chips(self, painter: QPainter, shown: list[int], ratio: int) -> list[int]:
        """Copy each plain chip, box and text, from its picture (made on its first paint); returns the
        chips left to draw (marked, hovered). Its lines sit at the same fraction of a pixel in the
        picture as on the widget, as the chip's corner is on a whole pixel: the same glyphs."""
        left = []
        ink_key = (ink("#141414", "#f0f0f0").rgba(), ink("#5a5a5a", "#c4c4c4").rgba(), is_dark_theme())
        for index in shown:
            if index == self._marked or index == self._hovered:
                left.append(index)
                continue
            chip, rect = self._chips[index], self._rects[index]
            key = (chip.lines, chip.fill.rgba(), int(rect.width()), int(rect.height()), ratio, self._fonts_key, ink_key)
            picture = _CHIP_PICTURES.get(key)
            if picture is None:
                picture = self._chip_picture(index, ratio)
                _CHIP_PICTURES[key] = picture
                if len(_CHIP_PICTURES) > CHIP_PICTURES_KEPT:
                    _CHIP_PICTURES.popitem(last=False)
            else:
                _CHIP_PICTURES.move_to_end(key)
            painter.drawPixmap(QPoint(int(rect.x()), int(rect.y())), picture)
        return left

    def _chip_picture(self, index: int, ratio: int) -> QPixmap:
        rect = self._rects[index]
        picture = QPixmap(int(rect.width()) * ratio, int(rect.height()) * ratio)
        picture.setDevicePixelRatio(ratio)
        picture.fill(Qt.GlobalColor.transparent)
        painter = QPainter(picture)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.translate(-rect.x(), -rect.y())
        self._draw_box(painter, index, ratio if self.kept_boxes else 0)
        self._draw_lines(painter, [index], big=True)
        self._draw_lines(painter, [index], big=False)
        painter.end()
        return picture

    def _draw_box(self, painter: QPainter, index: int, ratio: int = 0) -> None:
        """ratio: copy a plain box from its picture at this device pixel ratio (0: draw it as a path)."""
        fill = on_paper(self._chips[index].fill) if self.themed_fills else self._chips[index].fill
        if index == self._marked:
            pen = QPen(MARK_COLOUR, 2.5)
        elif index == self._hovered:
            pen = QPen(HOVER_COLOUR, 1.5)
        else:
            pen = self._plain_pen(fill)
            if ratio:
                rect = self._rects[index]
                painter.drawPixmap(QPoint(int(rect.x()), int(rect.y())),
                                   box_picture(fill, pen, int(rect.width()), int(rect.height()), ratio))
                return
        painter.setPen(pen)
        painter.setBrush(fill)
        painter.drawRoundedRect(self._box(index), CORNER_RADIUS, CORNER_RADIUS)

    def _plain_pen(self, fill: QColor) -> QPen:
        dark = is_dark_theme()
        pen = self._pens.get((fill.rgba(), dark))
        if pen is None:
            pen = self._pens[fill.rgba(), dark] = QPen(fill.lighter(150) if dark else fill.darker(135), 1.0)
        return pen

    def _draw_lines(self, painter: QPainter, shown: list[int], big: bool) -> None:
        """Each chip's first line (big) or its other lines (small), centred."""
        painter.setFont(self._big if big else self._small)
        painter.setPen(ink("#141414", "#f0f0f0") if big else ink("#5a5a5a", "#c4c4c4"))
        for index in shown:
            self._draw_chip_lines(painter, index, big)

    def _draw_chip_lines(self, painter: QPainter, index: int, big: bool) -> None:
        """From the layouts kept per string (gui.static_texts): drawText would lay every line out again at
        every paint (half the chips' paint time). The same glyphs in the same places."""
        lines, corners = self._chips[index].lines, self._line_corners(index)
        if big:
            painter.drawStaticText(corners[0], self._big_texts(lines[0]))
            return
        texts = self._small_texts
        for corner, text in zip(corners[1:], lines[1:]):
            painter.drawStaticText(corner, texts(text))

    # ------------------------------------------------------------ mouse
    def index_at(self, x: float, y: float) -> int:
        self._ensure_layout()
        for index, rect in enumerate(self._rects):
            if rect.contains(x, y):
                return index
        return -1

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        index = self.index_at(event.position().x(), event.position().y())
        if index != self._hovered:
            self._update_chips(self._hovered, index)
            self._hovered = index
            self.sigHovered.emit(index)

    def leaveEvent(self, event) -> None:  # noqa: N802
        if self._hovered != -1:
            self._update_chips(self._hovered)
            self._hovered = -1
            self.sigHovered.emit(-1)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        if event.button() == Qt.MouseButton.LeftButton:
            index = self.index_at(event.position().x(), event.position().y())
            if index >= 0:
                self.sigClicked.emit(index)
