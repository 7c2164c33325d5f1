"""SVG out: any widget as an SVG document, and a fix for pyqtgraph 0.14.0's own SVG exporter.

Two things live here because both are about SVG and nothing else:

1. `widget_svg_bytes(widget)`: QSvgGenerator + QWidget.render. Text is turned into glyph outlines
   (as matplotlib does by default) so Chinese shows as glyphs on a machine without a CJK font.
2. `install_svg_exporter_fix()`: pyqtgraph 0.14.0's SVGExporter rewrites every <path> "d" attribute
   assuming each space-separated item is "x,y"; Qt 6.11 ends closed sub-paths with a "Z" command,
   so the exporter raises ValueError for any filled item (pyqtgraph issue #3495, fixed upstream
   after 0.14.0). We set the "Z" commands aside while pyqtgraph transforms the coordinates and put
   them back afterwards. Applied on import; harmless on a fixed pyqtgraph.
"""
from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

from PySide6.QtCore import QBuffer, QIODevice, QPoint, QPointF, QRect
from PySide6.QtGui import QFont, QPainter, QPainterPath
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QWidget

import pyqtgraph.exporters  # noqa: F401  (registers the exporters; the module below is its submodule)

_CLOSE_COMMANDS = ("Z", "z")
SVG_NAMESPACE = "http://www.w3.org/2000/svg"
_TEXT, _PATH = f"{{{SVG_NAMESPACE}}}text", f"{{{SVG_NAMESPACE}}}path"
ET.register_namespace("", SVG_NAMESPACE)   # write plain <svg>, <path>... rather than ns0: prefixes
ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")


# ---------------------------------------------------------------- pyqtgraph SVGExporter fix

def split_close_commands(d: str) -> tuple[str, list[int]]:
    """Remove the close-path commands from an SVG path; return the rest and where each one stood.

    "M0,0 L1,0 L1,1 Z" -> ("M0,0 L1,0 L1,1", [3]): a "Z" at index i follows the i-th kept item.
    """
    kept: list[str] = []
    closes: list[int] = []
    for item in d.split():
        if item in _CLOSE_COMMANDS:
            closes.append(len(kept))
        elif item[-1] in _CLOSE_COMMANDS:   # "L0,0Z": a close command glued to the last point
            kept.append(item[:-1])
            closes.append(len(kept))
        else:
            kept.append(item)
    return " ".join(kept), closes


def restore_close_commands(d: str, closes: list[int]) -> str:
    """Put the "Z" commands back at the item positions split_close_commands recorded."""
    items = d.split()
    for position in sorted(closes, reverse=True):
        items.insert(position, "Z")
    return " ".join(items)


def _svg_exporter_module():
    return sys.modules["pyqtgraph.exporters.SVGExporter"]


def install_svg_exporter_fix() -> None:
    """Wrap pyqtgraph's correctCoordinates so closed paths survive it (idempotent)."""
    module = _svg_exporter_module()
    original = module.correctCoordinates
    if getattr(original, "_glassbox_close_fix", False):
        return

    def correct_coordinates_keeping_closes(node, defs, item, options):
        # pyqtgraph may move paths into new groups, but the <path> elements themselves stay the same objects.
        set_aside = []
        for path in node.getElementsByTagName("path"):
            d, closes = split_close_commands(path.getAttribute("d"))
            if closes:
                path.setAttribute("d", d)
                set_aside.append((path, closes))
        original(node, defs, item, options)
        for path, closes in set_aside:
            path.setAttribute("d", restore_close_commands(path.getAttribute("d"), closes))

    correct_coordinates_keeping_closes._glassbox_close_fix = True
    module.correctCoordinates = correct_coordinates_keeping_closes


# ---------------------------------------------------------------- any widget as SVG

def widget_svg_bytes(widget: QWidget, title: str = "") -> bytes:
    """The widget as drawn on screen, as an SVG document in widget pixels, text as outlines."""
    width, height = max(1, widget.width()), max(1, widget.height())
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(widget.size())
    generator.setViewBox(QRect(0, 0, width, height))
    generator.setTitle(title or widget.objectName() or "Glassbox figure")
    generator.setDescription("Exported by Glassbox")
    painter = QPainter(generator)
    try:
        # QWidget's render, not a subclass's: QGraphicsView.render draws the scene with another signature.
        QWidget.render(widget, painter, QPoint())
    finally:
        painter.end()
    buffer.close()
    return outline_text(bytes(buffer.data()), pixels_per_point=widget.logicalDpiY() / 72.0)


def outline_text(svg: bytes, pixels_per_point: float = 96.0 / 72.0) -> bytes:
    """Replace every <text> with a <path> of its glyphs, drawn with the fonts this app registered.

    QSvgGenerator writes font sizes in points but positions in widget pixels, hence pixels_per_point.
    A figure repeats the same labels in the same font (ticks, token pieces): each (font, text) is
    outlined once at the origin and placed with a translate.
    """
    root = ET.fromstring(svg)
    outlines: dict[tuple, str] = {}
    parents = [element for element in root.iter() if any(child.tag == _TEXT for child in element)]
    for parent in parents:
        for index, child in enumerate(list(parent)):
            if child.tag == _TEXT:
                parent[index] = _text_as_path(child, pixels_per_point, outlines)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _text_as_path(text: ET.Element, pixels_per_point: float, outlines: dict[tuple, str]) -> ET.Element:
    content = "".join(text.itertext())
    font_key = tuple(text.get(name, "") for name in ("font-family", "font-size", "font-weight", "font-style"))
    key = (font_key, content)
    if key not in outlines:
        outline = QPainterPath()
        outline.addText(QPointF(0, 0), _font_of(text, pixels_per_point), content)
        outlines[key] = painter_path_d(outline)
    path = ET.Element(_PATH)
    for name in ("fill", "fill-opacity"):
        if text.get(name) is not None:
            path.set(name, text.get(name))
    placed = f"translate({_number(text.get('x', '0')):.2f},{_number(text.get('y', '0')):.2f})"
    path.set("transform", f"{text.get('transform')} {placed}" if text.get("transform") else placed)
    path.set("stroke", "none")
    path.set("d", outlines[key])
    path.tail = text.tail
    return path


def _font_of(text: ET.Element, pixels_per_point: float) -> QFont:
    """The QFont QSvgGenerator described in the element's attributes, sized in widget pixels."""
    font = QFont()
    families = [f.strip().strip("'\"") for f in text.get("font-family", "").split(",") if f.strip()]
    if families:
        font.setFamilies(families)
    font.setPixelSize(max(1, round(_number(text.get("font-size") or "9") * pixels_per_point)))
    font.setWeight(QFont.Weight(int(_number(text.get("font-weight") or "400"))))
    font.setItalic(text.get("font-style") == "italic")
    return font


def _number(value: str) -> float:
    match = re.match(r"\s*(-?[0-9.]+(?:e-?\d+)?)", value)
    return float(match.group(1)) if match else 0.0


def painter_path_d(path: QPainterPath) -> str:
    """A QPainterPath as SVG path data (M, L, C; glyph outlines close themselves)."""
    parts: list[str] = []
    element_at, i, n = path.elementAt, 0, path.elementCount()
    while i < n:
        e = element_at(i)
        if e.isCurveTo():   # a cubic: this element and the next two (control point, end point)
            c2, end = element_at(i + 1), element_at(i + 2)
            parts.append(f"C{e.x:.2f},{e.y:.2f} {c2.x:.2f},{c2.y:.2f} {end.x:.2f},{end.y:.2f}")
            i += 3
            continue
        parts.append(f"{'M' if e.isMoveTo() else 'L'}{e.x:.2f},{e.y:.2f}")
        i += 1
    return " ".join(parts)


install_svg_exporter_fix()
