"""A figure laid out for the page: its size comes from its content, never from the dock it sits in.

Figures and the screen share their widgets (the same view classes draw both), but an export
first lays the figure's widget out at its page size — a heatmap sized by its token count, a
card at its natural height, bars by their count — paints it, and gives the widget back to its
dock at the size it had. The dock's size therefore never decides what a figure looks like.

Page sizes are logical pixels (1/96 inch); a PNG is painted at twice that by default.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator

import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QObject, QSize, QSizeF, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QAbstractScrollArea, QGraphicsView, QGraphicsWidget, QLabel, QScrollArea, QScrollBar, QWidget

from gui.fast_axis import FastAxis
from gui.panels.base import Figure

PAGE_WIDTH = 900            # a slide-width figure; its text stays legible shown at slide width
PAGE_HEIGHT = 560           # figures with no size of their own: a 16:10-ish plot
MAX_PAGE_SIDE = 12_000      # a page taller than this (thousands of tokens) is cut to it


MAX_PAGE_WIDTH = 1400       # a figure of many heads or tokens shrinks its cells to stay this wide
MIN_CELL = 12.0             # a heatmap cell never shrinks below a legible row of 8.5 pt labels
MATRIX_SIDE = (1000.0, 600.0)   # a matrix of many rows or columns shrinks its cells to about this many pixels
PLOT_HEIGHT = 440           # a figure of curves: its plots this high, under a caption as high as its text


def cell_size(n: int) -> float:
    """Logical pixels per heatmap cell for n tokens: large for a short sentence, shrinking slowly
    (24 px at 16 tokens, 12 px from 64), so the page still grows with the token count."""
    return max(MIN_CELL, min(32.0, 24.0 * (16.0 / max(1, n)) ** 0.5))


def matrix_cell(rows: int, cols: int, widest: float = 40.0, tallest: float = 32.0) -> QSizeF:
    """A cell of a rows × cols matrix whose axes are not the same (stages × tokens, layers × heads): as
    large as widest × tallest, narrower (lower) when the columns (rows) would pass MATRIX_SIDE, never
    below MIN_CELL, so the page grows with the count once the cells are at their least."""
    width = max(MIN_CELL, min(widest, MATRIX_SIDE[0] / max(1, cols)))
    height = max(MIN_CELL, min(tallest, MATRIX_SIDE[1] / max(1, rows)))
    return QSizeF(width, height)


def fit_view(widget: QWidget, view: QGraphicsWidget, content: QSizeF, rounds: int = 4) -> QSize:
    """The page on which `view` (a plot's ViewBox) is `content` logical pixels, and the rest of the page
    exactly what surrounds it: axes with their labels, titles, the colour bar and its scale, a caption.

    That surround is measured by laying the widget out, not guessed: it depends on the labels (a long
    token widens an axis, labels turned upright deepen one) and on the width (a caption wraps), so a
    few rounds of lay out, measure, resize settle it. The widget's least size (its layout's) may make it larger.
    """
    size = _around(widget, view, content)   # a first guess from the layout the widget has now
    for _ in range(rounds):
        _resize_and_settle(widget, size)
        wanted = _around(widget, view, content)
        if wanted == size:
            break
        size = wanted
    return size


def _around(widget: QWidget, view: QGraphicsWidget, content: QSizeF) -> QSize:
    """The widget's size with `view` at `content`, the rest of the widget as it is laid out now."""
    box = view.sceneBoundingRect()   # a graphics view draws its scene 1:1: scene pixels are widget pixels
    wanted = QSize(math.ceil(widget.width() - box.width() + content.width()),
                   math.ceil(widget.height() - box.height() + content.height()))
    return wanted.expandedTo(least_size(widget, wanted.width())).expandedTo(scene_least_size(widget))


def scene_least_size(widget: QWidget) -> QSize:
    """The least size at which each plot in the widget has room for its scene's layout (a PlotItem's
    title, axes and colour bar side by side), the rest of the widget as it is laid out now.

    A graphics view does not tell the widget's layout about its scene: smaller than this, the scene
    overflows its view and the right of the figure is cut off (a short sentence under a long title)."""
    least = QSize(0, 0)
    for view in _graphics_views(widget):
        central = getattr(view, "centralWidget", None)
        if isinstance(central, QGraphicsWidget):
            scene = central.effectiveSizeHint(Qt.SizeHint.MinimumSize)
            around = widget.size() - view.viewport().size()   # the view's frame and the widget's other parts
            least = least.expandedTo(QSize(math.ceil(scene.width()) + around.width(),
                                           math.ceil(scene.height()) + around.height()))
    return least


def least_size(widget: QWidget, width: int) -> QSize:
    """The least size the widget's layout lets it have at `width` (a caption wrapped at that width)."""
    least = widget.minimumSizeHint().expandedTo(widget.minimumSize())
    layout = widget.layout()
    if layout is not None and layout.hasHeightForWidth():
        least.setHeight(max(least.height(), layout.totalMinimumHeightForWidth(max(width, least.width()))))
    return least


def cells_page(widget: QWidget, view: QGraphicsWidget, rows: int, cols: int, cell: QSizeF) -> QSize:
    """A heatmap's page: rows × cols cells of `cell` pixels, its axes, titles and colour bar around them.

    Titles wider (axis titles longer) than a few tokens' cells make the cells larger rather than being
    cut off or running into the colour bar: square cells stay square, others grow where they must."""
    content = QSizeF(cols * cell.width(), rows * cell.height())
    size = fit_view(widget, view, content)
    least = _least_view(view)
    grow_x, grow_y = max(1.0, least.width() / content.width()), max(1.0, least.height() / content.height())
    if cell.width() == cell.height():
        grow_x = grow_y = max(grow_x, grow_y)
    if grow_x > 1.0 or grow_y > 1.0:
        size = fit_view(widget, view, QSizeF(content.width() * grow_x, content.height() * grow_y))
    return size


def _least_view(view: QGraphicsWidget) -> QSizeF:
    """The least size of a plot's view box as laid out now: no less than its layout gives it (a long
    plot title), nor than its axis titles are long (they are centred on the view box)."""
    least = view.sceneBoundingRect().size()
    plot = view.parentItem()
    if isinstance(plot, pg.PlotItem):
        for side, along in (("bottom", "width"), ("left", "height")):
            axis = plot.getAxis(side)
            if axis.isVisible() and axis.labelText:
                titled = axis.label.boundingRect().width() + 8   # the title's length, a little apart from its neighbours
                if along == "width":
                    least.setWidth(max(least.width(), titled))
                else:
                    least.setHeight(max(least.height(), titled))
    return least


def captioned_page(caption: QLabel, plots_height: int, width: int = PAGE_WIDTH) -> QSize:
    """A caption above plots (a positions figure): the caption as high as its text needs at `width`,
    the plots `plots_height` high, whatever the caption's length."""
    text = caption.heightForWidth(width) if caption.hasHeightForWidth() else caption.sizeHint().height()
    return QSize(width, max(text, 0) + plots_height)


def grid_page(grid, tokens: int) -> QSize:
    """A layer × head grid (gui.head_grid.HeadGrid) of square thumbnails, each showing tokens × tokens cells:
    thumbnails 8 px a token (110-220 px), smaller when the grid would pass MAX_PAGE_WIDTH."""
    thumb = max(110.0, min(220.0, 8.0 * tokens))
    thumb = min(thumb, thumb * MAX_PAGE_WIDTH / grid.content_size(thumb).width())
    return fit_view(grid, grid.view, grid.content_size(thumb))


def natural_height(widget: QWidget, width: int) -> int:
    """The height the widget's content asks for at `width` (wrapped text, tables, flows of chips).

    The widget is resized to that width first: what a child needs often depends on its own width
    (a wrapped title, a table's scroll bar), and must not depend on the width the dock gave it."""
    widget.resize(width, max(1, widget.height()))
    layout = widget.layout()
    if layout is None:
        return max(widget.sizeHint().height(), widget.minimumHeight(),
                   widget.heightForWidth(width) if widget.hasHeightForWidth() else 0)
    layout.invalidate()
    layout.activate()
    if layout.hasHeightForWidth():
        return layout.totalHeightForWidth(width)
    return max(layout.totalSizeHint().height(), layout.totalMinimumSize().height())


def has_plot(widget: QWidget) -> bool:
    """Does the widget hold a plot (a graphics view), which fills whatever height it is given?"""
    return isinstance(widget, QGraphicsView) or bool(widget.findChildren(QGraphicsView))


def default_page(widget: QWidget) -> QSize:
    """PAGE_WIDTH wide; a plot PAGE_HEIGHT high (or its least height), tables and text as high as their
    content needs at that width."""
    if has_plot(widget):   # a plot fills any height: its least height, or PAGE_HEIGHT
        least = widget.layout().totalMinimumSize().height() if widget.layout() is not None else 0
        return QSize(PAGE_WIDTH, max(PAGE_HEIGHT, least))
    return QSize(PAGE_WIDTH, natural_height(widget, PAGE_WIDTH))


def page_size(figure: Figure) -> QSize:
    """The figure's page size: its own (Figure.page_size), else PAGE_WIDTH by its natural height
    (tables and text), with at least PAGE_HEIGHT when it holds a plot."""
    if figure.page_size is not None:
        size = figure.page_size()
    else:
        size = default_page(figure.widget)
    minimum = figure.widget.minimumSizeHint().expandedTo(figure.widget.minimumSize())
    size = size.expandedTo(QSize(min(minimum.width(), PAGE_WIDTH), 0))
    return size.boundedTo(QSize(MAX_PAGE_SIDE, MAX_PAGE_SIDE))


def _scroll_areas(widget: QWidget) -> list[QAbstractScrollArea]:
    areas = widget.findChildren(QAbstractScrollArea)
    return [widget, *areas] if isinstance(widget, QAbstractScrollArea) else areas


@contextmanager
def on_page(figure: Figure) -> Iterator[QWidget]:
    """The figure's widget laid out at its page size, scroll bars off, for painting; then put back."""
    widget = figure.widget
    scroll_area = _scroll_area_holding(widget)
    if scroll_area is not None:   # a scroll area keeps its widget at the viewport's size: take it out
        scroll_area.takeWidget()
    shown_here = widget.isWindow() and not widget.isVisible()
    if shown_here:   # an off-screen figure: a hidden widget defers its children's resize events
        widget.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        widget.show()
    held = _ParentHold(widget.parentWidget())   # while on the page, the dock must not put the widget back
    drawn_for_paper = _set_on_page(widget, True)
    before = widget.size()
    fitted_axes = _fit_colour_bar_axes(widget)
    size = page_size(figure)   # a page size measured by laying the widget out resizes it: after `before`
    areas = _scroll_areas(widget)
    policies = [(area.horizontalScrollBarPolicy(), area.verticalScrollBarPolicy()) for area in areas]
    for area in areas:   # a page shows all of its content: a scroll bar on paper scrolls nothing
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        area.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    _resize_and_settle(widget, size)
    try:
        yield widget
    finally:
        for area, (horizontal, vertical) in zip(areas, policies):
            area.setHorizontalScrollBarPolicy(horizontal)
            area.setVerticalScrollBarPolicy(vertical)
        for part in drawn_for_paper:
            part.set_on_page(False)
        for axis, width in fitted_axes:
            axis.setWidth(width)
        _resize_and_settle(widget, before)
        held.release()
        if shown_here:
            widget.hide()
        if scroll_area is not None:
            scroll_area.setWidget(widget)
            widget.show()


def _fit_colour_bar_axes(widget: QWidget) -> list[tuple[FastAxis, float | None]]:
    """Each colour bar's value axis as wide as its widest label; returns (axis, its width before) to put back.

    pyqtgraph's ColorBarItem fixes the axis at 45 px (on screen a bar does not jump as its labels change),
    which left ~25 px of white at a page's right edge after labels like "0.9". Measured again from nothing
    (FastAxis.drawing), the axis takes its labels' width."""
    fitted = []
    for view in _graphics_views(widget):
        for item in view.scene().items():
            if isinstance(item, pg.ColorBarItem) and not item.horizontal and isinstance(item.axis, FastAxis):
                fitted.append((item.axis, item.axis.fixedWidth))
                item.axis.setWidth(None)
                item.axis.textWidth, item.axis.picture = 0, None
                item.axis.drawing()
    return fitted


def _graphics_views(widget: QWidget) -> list[QGraphicsView]:
    views = [widget] if isinstance(widget, QGraphicsView) else []
    return [view for view in (*views, *widget.findChildren(QGraphicsView)) if view.scene() is not None]


def _set_on_page(widget: QWidget, on_page: bool) -> list[QWidget]:
    """Tell the parts of a figure that draw differently on paper (`set_on_page(bool)`, e.g. the head grid
    leaves out its switches) that they are on a page now; returns them, to be told again after it."""
    parts = [part for part in (widget, *widget.findChildren(QWidget)) if callable(getattr(part, "set_on_page", None))]
    for part in parts:
        part.set_on_page(on_page)
    return parts


class _ParentHold(QObject):
    """Keeps a widget's parent from laying the widget out while it is on its page.

    A parent's layout is switched off; a parent that places its children itself (a QSplitter) has its
    layout requests held back: handling one, it would put the widget back at its dock size (the
    occlusion strips sit in a splitter, and each chip flow that wraps to a new height asks for one)."""

    def __init__(self, parent: QWidget | None) -> None:
        super().__init__()
        self._parent = parent
        layout = parent.layout() if parent is not None else None
        self._layout = layout if layout is not None and layout.isEnabled() else None
        if self._layout is not None:
            self._layout.setEnabled(False)
        elif parent is not None and layout is None:
            parent.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        return event.type() == QEvent.Type.LayoutRequest

    def release(self) -> None:
        if self._layout is not None:
            self._layout.setEnabled(True)
        elif self._parent is not None:
            self._parent.removeEventFilter(self)
            QCoreApplication.postEvent(self._parent, QEvent(QEvent.Type.LayoutRequest))   # the one it missed


def _send_pending_resizes(widget: QWidget) -> None:
    """A widget on a hidden page (a tab not shown) keeps its resize events until it is shown: a plot
    would then be painted laid out at its old size. Deliver them now, as showing it would."""
    for child in (widget, *widget.findChildren(QWidget)):
        if child.testAttribute(Qt.WidgetAttribute.WA_PendingResizeEvent):
            child.setAttribute(Qt.WidgetAttribute.WA_PendingResizeEvent, False)
            QCoreApplication.sendEvent(child, QResizeEvent(child.size(), QSize()))


def _scroll_area_holding(widget: QWidget) -> QScrollArea | None:
    viewport = widget.parentWidget()
    area = viewport.parentWidget() if viewport is not None else None
    return area if isinstance(area, QScrollArea) and area.widget() is widget else None


def _resize_and_settle(widget: QWidget, size: QSize) -> None:
    """Resize, then run the layout passes Qt posts (nested layouts, pyqtgraph's scene layouts).

    Those passes may include the dock's own layout, which puts the widget back at its dock size:
    resize again until the size holds (no pass is left pending after the second round)."""
    for _ in range(3):
        widget.resize(size)
        if widget.layout() is not None:
            widget.layout().activate()
        _send_pending_resizes(widget)
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)   # layouts only: no paints
        if widget.size() == size.expandedTo(widget.minimumSize()).boundedTo(widget.maximumSize()):
            return


def visible_scroll_bars(widget: QWidget) -> list[QScrollBar]:
    """The scroll bars a painting of `widget` would show (tests: a page has none)."""
    return [bar for bar in widget.findChildren(QScrollBar) if bar.isVisibleTo(widget) and bar.width() > 0]


def lines_page(view: QWidget) -> QSize:
    """A head view (query tokens left, keys right): room for the lines between, rows a little apart."""
    width = view.minimumSizeHint().width() + 320   # the labels' width: the title's wrapping depends on it
    view.resize(width, max(1, view.height()))
    return QSize(width, round(view.minimumSizeHint().height() * 1.35))


def rows_page(widget: QWidget, view: QGraphicsWidget, rows: int, width: int, row_height: float,
              least_view: float = 0.0) -> QSize:
    """A figure of one row per token (the router's heatmaps): `width` wide, its view `rows` × row_height high
    (at least least_view), and the rest of the page what surrounds the view laid out at that width (a caption
    wraps), so one token makes a low page, not a tall row."""
    _resize_and_settle(widget, QSize(width, max(1, widget.height())))
    around = widget.height() - view.sceneBoundingRect().height()
    size = QSize(width, math.ceil(around + max(rows * row_height, least_view)))
    return size.expandedTo(least_size(widget, width))


def laid_out_size(figure: Figure) -> QSize:
    """The size the figure's page really has once laid out (what a PNG at 1x measures)."""
    with on_page(figure) as page:
        return page.size()
