"""Text as SVG path data, put together from glyph outlines that are each turned into path data once.

An exported figure writes the same few hundred glyphs (digits, token pieces, axis names) thousands of
times; outlining every label with QPainterPath.addText and writing its elements out one by one made
text the slowest part of an SVG export. Here Qt lays the text out (shaping, kerning, and the fallback
font for Chinese), and each glyph's outline is converted once per (font, size, glyph) into relative path
commands: placing it anywhere then costs one absolute "M" in front of the cached commands.

Path data is written in whole hundredths of a pixel (draw it scaled by 1 / UNITS_PER_PIXEL): integers are
quick to write and short, and a hundredth of a pixel is far below what any renderer shows.
"""
from __future__ import annotations

import unicodedata

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QPainterPath, QTextLayout, QTextOption

UNITS_PER_PIXEL = 100

# (family, style, pixel size, weight, italic) of a glyph run's font, glyph index -> (x, y of the first
# point, the rest as relative commands); None for a glyph that draws nothing
_GLYPHS: dict[tuple, tuple[int, int, bytes] | None] = {}


def text_path_data(font: QFont, text: str) -> bytes:
    """The outlines of `text` set in `font` with its baseline starting at (0, 0), as SVG path data in
    UNITS_PER_PIXEL units (what QPainterPath.addText(QPointF(0, 0), font, text) outlines; glyphs close
    themselves)."""
    layout = QTextLayout(text, font)
    option = layout.textOption()
    option.setTextDirection(Qt.LayoutDirection.RightToLeft if _is_right_to_left(text) else Qt.LayoutDirection.LeftToRight)
    option.setWrapMode(QTextOption.WrapMode.NoWrap)
    layout.setTextOption(option)
    layout.beginLayout()
    line = layout.createLine()
    layout.endLayout()
    if not line.isValid():
        return b""
    baseline = line.ascent()
    parts: list[bytes] = []
    for run in line.glyphRuns():
        raw = run.rawFont()
        font_key = (raw.familyName(), raw.styleName(), raw.pixelSize(), raw.weight(), raw.style())
        for index, position in zip(run.glyphIndexes(), run.positions()):
            glyph = _GLYPHS.get((font_key, index), False)
            if glyph is False:
                glyph = _GLYPHS[(font_key, index)] = _glyph_commands(raw.pathForGlyph(index))
            if glyph is not None:
                x, y, rest = glyph
                parts.append(b"M%d,%d%s" % (round(position.x() * UNITS_PER_PIXEL) + x,
                                            round((position.y() - baseline) * UNITS_PER_PIXEL) + y, rest))
    return b"".join(parts)


def _is_right_to_left(text: str) -> bool:
    """QString.isRightToLeft: is the first character with a strong direction right-to-left?"""
    for character in text:
        kind = unicodedata.bidirectional(character)
        if kind in ("R", "AL"):
            return True
        if kind == "L":
            return False
    return False


def _glyph_commands(path: QPainterPath) -> tuple[int, int, bytes] | None:
    """A glyph's outline: its first point and every later element as a relative command, in UNITS_PER_PIXEL
    units. Coordinates are rounded before they are differenced, so no rounding error adds up."""
    count = path.elementCount()
    if count == 0:
        return None
    points = [(round(e.x * UNITS_PER_PIXEL), round(e.y * UNITS_PER_PIXEL), e.type)
              for e in (path.elementAt(i) for i in range(count))]
    commands: list[bytes] = []
    x, y = points[0][0], points[0][1]
    start = (x, y)
    curve = QPainterPath.ElementType.CurveToElement
    move = QPainterPath.ElementType.MoveToElement
    i = 1
    while i < count:
        px, py, kind = points[i]
        if kind == curve:   # a cubic: this element and the next two (control point, end point)
            (qx, qy, _), (ex, ey, _) = points[i + 1], points[i + 2]
            commands.append(b"c%d,%d %d,%d %d,%d" % (px - x, py - y, qx - x, qy - y, ex - x, ey - y))
            x, y = ex, ey
            i += 3
            continue
        letter = b"m" if kind == move else b"l"
        commands.append(b"%s%d,%d" % (letter, px - x, py - y))
        x, y = px, py
        i += 1
    return start[0], start[1], b"".join(commands)

