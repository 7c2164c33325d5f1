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

import base64
import html
import math
import re
import sys
from contextlib import contextmanager
from typing import Iterator

import numpy as np
from PySide6.QtCore import QBuffer, QIODevice, QPoint, QRect
from PySide6.QtGui import QFont, QImage, QPainter, QTransform
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsItem, QGraphicsView, QStyleOptionGraphicsItem, QWidget

import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401  (registers the exporters; the module below is its submodule)

from gui.glyph_outlines import UNITS_PER_PIXEL, text_path_data
from gui.png_encode import enlarged_png_bytes

_CLOSE_COMMANDS = ("Z", "z")


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
    """The widget as drawn on screen, as an SVG document in widget pixels that renders the same anywhere.

    SVG Tiny (QSvgGenerator's default) has no clipping, and Qt 6.11's SVG 1.1 clip paths are sometimes
    in the wrong coordinates (a QTextEdit's clip lands at the page origin). So every plot's viewport is
    drawn on its own and wrapped in a clip path of its rectangle in page coordinates, written here: a
    heatmap scrolled to its last rows then shows only those rows, as Qt does, instead of spilling all
    its rows over the title above it."""
    viewports = _plot_viewports(widget)
    with _background_uncached(widget), _scatter_symbols_as_shapes(widget), _hidden(viewports):
        document = _drawn_svg(widget, title, QPoint(), widget)
    ppp = widget.logicalDpiY() / 72.0
    document = portable_svg(document, pixels_per_point=ppp)
    clipped = []
    with _background_uncached(widget), _scatter_symbols_as_shapes(widget):
        for viewport in viewports:
            view = viewport.parentWidget()
            where = QRect(viewport.mapTo(widget, QPoint()), viewport.size())
            boxes = _clipping_boxes(view)
            with _unpainted([box.childGroup for box in boxes]):
                drawn = _drawn_svg(viewport, title, where.topLeft(), widget)
            clipped.append((where, drawn, ppp))
            for box in boxes:   # a plot's data, clipped to its box as pyqtgraph's ViewBox clips it
                box_rect = view.mapFromScene(box.sceneBoundingRect()).boundingRect().translated(where.topLeft())
                page_of_scene = view.viewportTransform() * QTransform.fromTranslate(where.x(), where.y())
                clipped.append((box_rect.intersected(where), _drawn_items_svg(box.childGroup, page_of_scene, widget),
                                1.0))   # drawn at the page's resolution: font sizes are pixels already
    clipped = [_clipped_group(f"glassbox-clip-{index}", rect, _svg_body(portable_svg(drawn, pixels_per_point=scale)))
               for index, (rect, drawn, scale) in enumerate(clipped)]
    return _with_version_1_1(document.replace(b"</svg>", b"".join(clipped) + b"</svg>", 1)) if clipped else document


def _plot_viewports(widget: QWidget) -> list[QWidget]:
    """The visible viewports of the plots (graphics views) inside the widget; a widget that is itself a plot
    is clipped by the page already."""
    views = [] if isinstance(widget, QGraphicsView) else widget.findChildren(QGraphicsView)
    return [view.viewport() for view in views if view.isVisibleTo(widget) and view.viewport().isVisibleTo(widget)]


@contextmanager
def _hidden(widgets: list[QWidget]) -> Iterator[None]:
    for each in widgets:
        each.setVisible(False)
    try:
        yield
    finally:
        for each in widgets:
            each.setVisible(True)


def _views_in(widget: QWidget) -> list[QGraphicsView]:
    return [widget] if isinstance(widget, QGraphicsView) else widget.findChildren(QGraphicsView)


@contextmanager
def _background_uncached(widget: QWidget) -> Iterator[None]:
    """pyqtgraph's views cache their background as a pixmap, which an SVG then holds as a page-sized PNG
    (Qt compresses it at every export, and it is no vector): uncached, the background is a rectangle."""
    views = _views_in(widget)
    modes = [view.cacheMode() for view in views]
    for view in views:
        view.setCacheMode(QGraphicsView.CacheModeFlag.CacheNone)
    try:
        yield
    finally:
        for view, mode in zip(views, modes):
            view.setCacheMode(mode)


@contextmanager
def _scatter_symbols_as_shapes(widget: QWidget) -> Iterator[None]:
    """pyqtgraph draws scatter symbols from a pixmap atlas unless it is exporting; as pixmaps, other renderers
    draw them as grids of squares. In export mode each symbol is a path (a dot stays a circle)."""
    views = _views_in(widget)
    items = [item for view in views for item in view.scene().items() if isinstance(item, pg.ScatterPlotItem)]
    for item in items:
        item.setExportMode(True, {"antialias": True})
    try:
        yield
    finally:
        for item in items:
            item.setExportMode(False)


def _clipping_boxes(view: QGraphicsView) -> list:
    """The view's visible plot boxes that clip their data to their rectangle (pyqtgraph's ViewBox does)."""
    clips = QGraphicsItem.GraphicsItemFlag.ItemClipsChildrenToShape
    return [item for item in view.scene().items()
            if isinstance(item, pg.ViewBox) and item.isVisible() and item.flags() & clips]


@contextmanager
def _unpainted(items: list[QGraphicsItem]) -> Iterator[None]:
    """The items (and their children) left out when the scene paints: fully transparent, not hidden, so that
    what asks whether they are visible (a legend's sample) still says they are."""
    opacities = [item.opacity() for item in items]
    for item in items:
        item.setOpacity(0.0)
    try:
        yield
    finally:
        for item, opacity in zip(items, opacities):
            item.setOpacity(opacity)


def _drawn_items_svg(root: QGraphicsItem, page_of_scene: QTransform, page: QWidget) -> bytes:
    """QSvgGenerator's SVG Tiny of one item and its descendants, as the scene would paint them on the page."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(page.size())
    generator.setViewBox(QRect(0, 0, max(1, page.width()), max(1, page.height())))
    # At the page's resolution, not the generator's 72 dpi: a QPicture (pyqtgraph's bars of several colours)
    # replays scaled by the ratio of the two, and the bars came out at three quarters of their size.
    generator.setResolution(page.logicalDpiY())
    painter = QPainter(generator)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        _paint_item_tree(painter, root, page_of_scene, QStyleOptionGraphicsItem())
    finally:
        painter.end()
    buffer.close()
    return bytes(buffer.data())


def _paint_item_tree(painter: QPainter, item: QGraphicsItem, page_of_scene: QTransform,
                     option: QStyleOptionGraphicsItem) -> None:
    """Paint item, then its children, in the scene's stacking order (children below their parent first)."""
    if not item.isVisible():
        return
    children = sorted(item.childItems(), key=lambda child: child.zValue())   # stable: insertion order kept
    below = [child for child in children if child.zValue() < 0
             or child.flags() & QGraphicsItem.GraphicsItemFlag.ItemStacksBehindParent]
    for child in below:
        _paint_item_tree(painter, child, page_of_scene, option)
    painter.save()
    painter.setTransform(item.sceneTransform() * page_of_scene)
    painter.setOpacity(item.effectiveOpacity())
    option.rect = item.boundingRect().toRect()
    option.exposedRect = item.boundingRect()
    item.paint(painter, option, None)
    painter.restore()
    for child in children:
        if child not in below:
            _paint_item_tree(painter, child, page_of_scene, option)


def _drawn_svg(widget: QWidget, title: str, offset: QPoint, page: QWidget) -> bytes:
    """QSvgGenerator's SVG Tiny of `widget` drawn at `offset` on a page the size of `page`."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(page.size())
    generator.setViewBox(QRect(0, 0, max(1, page.width()), max(1, page.height())))
    generator.setTitle(title or page.objectName() or "Glassbox figure")
    generator.setDescription("Exported by Glassbox")
    painter = QPainter(generator)
    try:
        painter.translate(offset)
        # QWidget's render, not a subclass's: QGraphicsView.render draws the scene with another signature.
        QWidget.render(widget, painter, QPoint())
    finally:
        painter.end()
    buffer.close()
    return bytes(buffer.data())


def _svg_body(document: bytes) -> bytes:
    """What a QSvgGenerator document draws: everything after its (empty) <defs>, up to </svg>."""
    start = document.find(b"</defs>")
    start = start + len(b"</defs>") if start >= 0 else document.find(b">", document.find(b"<svg")) + 1
    return document[start:document.rfind(b"</svg>")]


def _clipped_group(clip_id: str, rect: QRect, body: bytes) -> bytes:
    """body inside a group clipped to rect (page coordinates: the group has no transform)."""
    box = b'x="%d" y="%d" width="%d" height="%d"' % (rect.x(), rect.y(), rect.width(), rect.height())
    name = clip_id.encode()
    return (b'<defs><clipPath id="' + name + b'" clipPathUnits="userSpaceOnUse"><rect ' + box + b'/></clipPath></defs>\n'
            b'<g clip-path="url(#' + name + b')">' + body + b"</g>\n")


def _with_version_1_1(document: bytes) -> bytes:
    """Clip paths are SVG 1.1 (Tiny 1.2 has none): say so, so that no renderer ignores them."""
    return document.replace(b'version="1.2" baseProfile="tiny"', b'version="1.1"', 1)


# The parts of QSvgGenerator's output that may change: groups (for the transform), a whole
# <text>…</text>, images and shapes. Everything between them is copied as it is.
_TOKEN = re.compile(rb"(<g\b[^>]*>)|(</g>)|(<text\b[^>]*>.*?</text>)|(<image\b[^>]*>)"
                    rb"|(<(?:rect|polyline|path|polygon|line|ellipse|circle)\b[^>]*>)", re.DOTALL)
_OPEN, _CLOSE, _TEXT, _IMAGE, _SHAPE = range(1, 6)   # which of _TOKEN's groups matched (Match.lastindex)
_EMPTY_GROUP = re.compile(rb"<g\b[^>]*>\s*</g>")
_ATTRIBUTE = re.compile(rb'([\w:-]+)="([^"]*)"')
_MATRIX = re.compile(rb"matrix\(([^)]*)\)")
_PAIR = re.compile(rb"(-?[0-9.]+(?:e[-+]?[0-9]+)?),(-?[0-9.]+(?:e[-+]?[0-9]+)?)")
IDENTITY = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)   # SVG matrix(a, b, c, d, e, f)
UPSCALED_IMAGE_PIXELS = 4_000_000           # a heatmap raster is enlarged up to this many pixels


def portable_svg(svg: bytes, pixels_per_point: float = 96.0 / 72.0) -> bytes:
    """QSvgGenerator's SVG made to render the same in renderers other than Qt's own (cairo, librsvg, browsers).

    - text becomes glyph outlines, drawn with the fonts this app registered (Chinese needs no font);
    - a cosmetic pen (vector-effect="non-scaling-stroke") under a scaling transform is baked into
      page coordinates, so a renderer that ignores vector-effect still draws a 1-pixel line, not a
      stroke one data unit wide (the selection outline's "red blob", bars covered by their outline);
    - a small raster shown enlarged (a heatmap: one pixel per cell) is enlarged by whole pixels
      beforehand, so a renderer that smooths images (librsvg, PDF viewers) cannot blur the cells;
    - shapes that draw nothing and groups left empty are dropped.
    One pass over the document; a group's matrix is worked out only when an element inside it needs it.
    """
    svg = _EMPTY_GROUP.sub(b"", svg)   # half of QSvgGenerator's groups (one per state change) hold nothing
    out: list[bytes] = []
    groups = _OpenGroups()
    copied = 0
    for match in _TOKEN.finditer(svg):
        start, end = match.span()
        if start != copied:
            between = svg[copied:start]
            out.append(between)
            if not between.isspace():
                groups.drawn[-1] = True
        copied = end
        kind = match.lastindex
        token = match.group(kind)
        if kind == _OPEN:
            groups.open(token, len(out))
            out.append(token)
            continue
        if kind == _CLOSE:
            start, drawn = groups.close()
            if drawn:
                out.append(token)
            else:   # nothing drawn inside: the group goes, and so may its parent
                del out[start:]
            continue
        if kind == _TEXT:
            token = _text_as_path(token, pixels_per_point)
        elif kind == _IMAGE:
            token = _crisp_image(token, groups.matrix())
        else:
            if _draws_nothing(token, groups.paints[-1]):
                continue
            if b'vector-effect="non-scaling-stroke"' in token:
                matrix = groups.matrix()
                if not _keeps_stroke_width(matrix):
                    token = _baked_stroke(token, matrix)
        if token:
            out.append(token)
            groups.drawn[-1] = True
    out.append(svg[copied:])
    return b"".join(out)


class _OpenGroups:
    """The <g> elements open at a point of the document, outermost first (the page itself at the bottom)."""

    def __init__(self) -> None:
        self.tags: list[bytes] = [b""]
        self.matrices: list[tuple[float, ...] | None] = [IDENTITY]   # composed with the parents'; None: not yet
        self.paints = [True]   # does the group fill or stroke anything?
        self.drawn = [True]    # has anything been drawn inside it so far?
        self.starts = [0]      # where its tag stands in the output

    def open(self, tag: bytes, start: int) -> None:
        self.tags.append(tag)
        self.matrices.append(None)
        self.paints.append(not (b'fill="none"' in tag and b'stroke="none"' in tag))
        self.drawn.append(False)
        self.starts.append(start)

    def close(self) -> tuple[int, bool]:
        """Where the closed group's tag stands in the output, and whether it drew anything."""
        self.tags.pop()
        self.matrices.pop()
        self.paints.pop()
        drawn = self.drawn.pop()
        if drawn:
            self.drawn[-1] = True
        return self.starts.pop(), drawn

    def matrix(self) -> tuple[float, ...]:
        """The innermost group's transform composed with all its parents' (page from element coordinates)."""
        known = len(self.matrices) - 1
        while self.matrices[known] is None:
            known -= 1
        for level in range(known + 1, len(self.matrices)):
            self.matrices[level] = _compose(self.matrices[level - 1], _matrix_of(self.tags[level]))
        return self.matrices[-1]


def _draws_nothing(tag: bytes, group_paints: bool) -> bool:
    """An empty path, or a shape with neither fill nor stroke. Dropped: Qt's own renderer (used for the
    PDF) draws such a shape with a hairline when it has vector-effect, which the PNG never shows."""
    if b'd=""' in tag:
        return True
    own_paint = (b' fill="' in tag and b' fill="none"' not in tag) or (b' stroke="' in tag and b' stroke="none"' not in tag)
    return not group_paints and not own_paint


def _attributes(tag: bytes) -> dict[bytes, bytes]:
    return dict(_ATTRIBUTE.findall(tag))


def _matrix_of(tag: bytes) -> tuple[float, ...]:
    found = _MATRIX.search(tag.split(b'transform="', 1)[1]) if b'transform="' in tag else None
    return tuple(float(v) for v in found.group(1).split(b",")) if found else IDENTITY


def _compose(outer: tuple[float, ...], inner: tuple[float, ...]) -> tuple[float, ...]:
    """outer × inner for SVG matrices (a, b, c, d, e, f): inner applies first."""
    a1, b1, c1, d1, e1, f1 = outer
    a2, b2, c2, d2, e2, f2 = inner
    return (a1 * a2 + c1 * b2, b1 * a2 + d1 * b2, a1 * c2 + c1 * d2, b1 * c2 + d1 * d2,
            a1 * e2 + c1 * f2 + e1, b1 * e2 + d1 * f2 + f1)


def _keeps_stroke_width(m: tuple[float, ...]) -> bool:
    """True when the linear part is a rotation or reflection: a stroke keeps its width under it."""
    a, b, c, d = m[:4]
    return abs(a * a + b * b - 1) < 1e-6 and abs(c * c + d * d - 1) < 1e-6 and abs(a * c + b * d) < 1e-6


def _inverse(m: tuple[float, ...]) -> tuple[float, ...] | None:
    a, b, c, d, e, f = m
    det = a * d - b * c
    if abs(det) < 1e-12:
        return None
    return (d / det, -b / det, -c / det, a / det, (c * f - d * e) / det, (b * e - a * f) / det)


def _apply(m: tuple[float, ...], x: float, y: float) -> tuple[float, float]:
    a, b, c, d, e, f = m
    return a * x + c * y + e, b * x + d * y + f


def _number(value) -> float:
    match = re.match(r"\s*(-?[0-9.]+(?:e[-+]?\d+)?)", value.decode() if isinstance(value, bytes) else value)
    return float(match.group(1)) if match else 0.0


def _fmt(value: float) -> bytes:
    return f"{value:.3f}".rstrip("0").rstrip(".").encode() or b"0"


def _baked_stroke(tag: bytes, m: tuple[float, ...]) -> bytes:
    """The same shape with coordinates in page space and transform = m⁻¹: it lands where it did, but its
    own user space is the page, so its stroke is page pixels wide whether or not vector-effect is honoured."""
    transform = _inverse_transform(m)
    if transform is None:
        return tag
    if tag.startswith(b"<rect"):
        attrs = _attributes(tag)
        x, y = _number(attrs.get(b"x", b"0")), _number(attrs.get(b"y", b"0"))
        w, h = _number(attrs.get(b"width", b"0")), _number(attrs.get(b"height", b"0"))
        corners = [_apply(m, px, py) for px, py in ((x, y), (x + w, y), (x + w, y + h), (x, y + h))]
        d = b"M" + b" L".join(_fmt(px) + b"," + _fmt(py) for px, py in corners) + b" Z"
        kept = b" ".join(k + b'="' + v + b'"' for k, v in attrs.items() if k not in (b"x", b"y", b"width", b"height"))
        tag = b"<path " + kept + b' d="' + d + b'"/>'
    else:
        tag = _points_mapped(tag, m)
    return tag.replace(b"/>", transform + b"/>", 1) if tag.endswith(b"/>") else tag


def _inverse_transform(m: tuple[float, ...]) -> bytes | None:
    """' transform="matrix(m⁻¹)"', None when m has no inverse; made once per matrix (a plot's curve is
    hundreds of two-point polylines under one)."""
    transform = _INVERSE_TRANSFORMS.get(m, False)
    if transform is False:
        if len(_INVERSE_TRANSFORMS) >= _MAX_INVERSE_TRANSFORMS:
            _INVERSE_TRANSFORMS.clear()
        inverse = _inverse(m)
        transform = None if inverse is None else (
            b' transform="matrix(' + b",".join(f"{v:.9g}".encode() for v in inverse) + b')"')
        _INVERSE_TRANSFORMS[m] = transform
    return transform


_INVERSE_TRANSFORMS: dict[tuple[float, ...], bytes | None] = {}
_MAX_INVERSE_TRANSFORMS = 10_000


def _points_mapped(tag: bytes, m: tuple[float, ...]) -> bytes:
    """Every "x,y" pair of the tag mapped by m, written to a hundredth of a page pixel."""
    line = _TWO_POINT_LINE.fullmatch(tag)
    a, b, c, d, e, f = m
    if line is not None:   # most of them (a curve is hundreds of two-point polylines): no split and join
        head, x1, y1, x2, y2, tail = line.groups()
        x1, y1, x2, y2 = float(x1), float(y1), float(x2), float(y2)
        return b"%s%.2f,%.2f %.2f,%.2f%s" % (head, a * x1 + c * y1 + e, b * x1 + d * y1 + f,
                                              a * x2 + c * y2 + e, b * x2 + d * y2 + f, tail)
    pieces = _PAIR.split(tag)   # [text, x, y, text, x, y, ..., text]
    mapped = []
    for x, y in zip(map(float, pieces[1::3]), map(float, pieces[2::3])):
        mapped += (a * x + c * y + e, b * x + d * y + f)
    pairs = (b"%.2f,%.2f\n" * (len(mapped) // 2) % tuple(mapped)).split(b"\n")
    joined = [b""] * (2 * len(pairs) - 1)
    joined[0::2] = pieces[0::3]
    joined[1::2] = pairs[:-1]
    return b"".join(joined)


_NUMBER = rb"(-?[0-9.]+(?:e[-+]?[0-9]+)?)"
# a polyline of two points, as QSvgGenerator writes a line: points="x1,y1 x2,y2 " and nothing else to map
_TWO_POINT_LINE = re.compile(rb'(<polyline\b[^>]*?points=")' + _NUMBER + b"," + _NUMBER + b" " + _NUMBER + b","
                             + _NUMBER + rb'( "[^>]*>)')


def _crisp_image(tag: bytes, m: tuple[float, ...]) -> bytes:
    """Enlarge an embedded raster by a whole factor (nearest neighbour) when it is shown enlarged."""
    head, sep, rest = tag.partition(b"data:image/png;base64,")
    if not sep:
        return tag
    encoded, quote, tail = rest.partition(b'"')
    size = _png_size(encoded)
    if size is None:
        return tag
    width, height = size
    attrs = _attributes(head)
    shown_w = math.hypot(m[0], m[1]) * _number(attrs.get(b"width", b"0"))
    shown_h = math.hypot(m[2], m[3]) * _number(attrs.get(b"height", b"0"))
    # Each axis on its own: a matrix of many narrow columns and few tall rows (dimensions × tokens) is
    # enlarged along its rows too, or a renderer that smooths blurs every row into the next.
    times_w, times_h = _enlargement(shown_w / max(1, width)), _enlargement(shown_h / max(1, height))
    budget = UPSCALED_IMAGE_PIXELS / max(1, width * height)
    if times_w * times_h > budget:
        shrink = math.sqrt(budget / (times_w * times_h))
        times_w, times_h = max(1, int(times_w * shrink)), max(1, int(times_h * shrink))
    if times_w * times_h < 2:
        return tag
    enlarged = _ENLARGED.get((encoded, times_w, times_h))
    if enlarged is None:
        image = QImage.fromData(base64.b64decode(encoded), "PNG")
        if image.isNull():
            return tag
        if len(_ENLARGED) >= _MAX_ENLARGED:
            _ENLARGED.clear()
        enlarged = base64.b64encode(enlarged_png_bytes(_pixels(image), times_w, times_h))
        _ENLARGED[(encoded, times_w, times_h)] = enlarged
    head = head.replace(b"<image ", b'<image style="image-rendering:pixelated" ', 1)
    return head + sep + enlarged + quote + tail


def _enlargement(factor: float) -> int:
    """How many times to repeat each pixel along an axis shown `factor` times enlarged: 1 when it is not
    (a renderer shrinking an image does not blur it), else 2x: still whole cells at twice the page size."""
    return 1 if factor < 1.5 else math.ceil(2 * factor)


# (base64 PNG, times along x, times along y) -> base64 PNG enlarged: a figure and its overview often show
# the same heatmap
_ENLARGED: dict[tuple[bytes, int, int], bytes] = {}
_MAX_ENLARGED = 256


def _png_size(encoded: bytes) -> tuple[int, int] | None:
    """(width, height) from a base64 PNG's header, without decoding the image."""
    header = base64.b64decode(encoded[:32])
    if len(header) < 24 or header[12:16] != b"IHDR":
        return None
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def _pixels(image: QImage) -> np.ndarray:  # -> [H, W, 3] RGB, or [H, W, 4] RGBA when not opaque
    rgba = image.convertToFormat(QImage.Format.Format_RGBA8888)
    pixels = np.frombuffer(rgba.constBits(), np.uint8).reshape(rgba.height(), rgba.bytesPerLine())
    pixels = pixels[:, : rgba.width() * 4].reshape(rgba.height(), rgba.width(), 4)
    opaque = pixels[:, :, 3].min(initial=255) == 255
    return (pixels[:, :, :3] if opaque else pixels).copy()   # a copy: the converted image is freed on return


def _text_as_path(token: bytes, pixels_per_point: float) -> bytes:
    """<text x y font-…>content</text> -> <path> of its glyphs, placed with a translate (b"" for blank text).

    The path for one text with its paint and font is made once (labels repeat across figures): the
    element then only needs its own x and y."""
    parts = _TEXT_PARTS.match(token)
    if parts is None:   # no x and y where QSvgGenerator writes them: key on the whole tag
        open_tag, _, rest = token.partition(b">")
        attrs = _attributes(open_tag)
        key = (open_tag, rest.rpartition(b"</text>")[0], pixels_per_point)
        x, y = _fmt(_number(attrs.get(b"x", b"0"))), _fmt(_number(attrs.get(b"y", b"0")))
    else:
        key = (parts.group(1) + parts.group(4), parts.group(5), pixels_per_point)
        x, y = parts.group(2), parts.group(3)
    placed = _TEXT_PATHS.get(key)
    if placed is None:
        if len(_TEXT_PATHS) >= _MAX_TEXT_PATHS:
            _TEXT_PATHS.clear()
        placed = _TEXT_PATHS[key] = _text_path_parts(key[0], key[1], pixels_per_point)
    if not placed:
        return b""
    head, tail = placed
    return head + x + b"," + y + tail


_TEXT_PARTS = re.compile(rb'<text\b([^>]*?)\sx="([^"]*)"\sy="([^"]*)"([^>]*)>(.*?)</text>', re.DOTALL)
# (attributes but x and y, content, pixels per point) -> the <path> before and after its "x,y"; () if blank
_TEXT_PATHS: dict[tuple, tuple[bytes, bytes]] = {}
_MAX_TEXT_PATHS = 50_000


def _text_path_parts(attributes: bytes, content: bytes, pixels_per_point: float) -> tuple[bytes, bytes] | tuple[()]:
    attrs = _attributes(attributes)
    font_key = tuple(attrs.get(name, b"").decode() for name in (b"font-family", b"font-size", b"font-weight", b"font-style"))
    d = text_path_data(_font_of(font_key, pixels_per_point), html.unescape(content.decode("utf-8")))
    if not d:
        return ()
    paint = b"".join(b" " + name + b'="' + attrs[name] + b'"' for name in (b"fill", b"fill-opacity") if name in attrs)
    transform = attrs[b"transform"] + b" " if b"transform" in attrs else b""
    # stroke-width 0 as well as stroke none: Qt's own SVG renderer (used for the PDF) otherwise strokes
    # the outline with the enclosing group's pen, and the text comes out bold
    head = b"<path" + paint + b' stroke="none" stroke-width="0" transform="' + transform + b"translate("
    tail = b") scale(%g)" % (1 / UNITS_PER_PIXEL) + b'" d="' + d + b'"/>'
    return head, tail


def _font_of(font_key: tuple[str, str, str, str], pixels_per_point: float) -> QFont:
    """The QFont QSvgGenerator described in the element's attributes, sized in widget pixels."""
    family, size, weight, style = font_key
    font = QFont()
    families = [f.strip().strip("'\"") for f in family.split(",") if f.strip()]
    if families:
        font.setFamilies(families)
    font.setPixelSize(max(1, round(_number(size or "9") * pixels_per_point)))
    font.setWeight(QFont.Weight(int(_number(weight or "400"))))
    font.setItalic(style == "italic")
    return font


install_svg_exporter_fix()
