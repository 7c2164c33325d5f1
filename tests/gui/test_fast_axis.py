"""FastAxis lays an axis out as pyqtgraph's AxisItem does (ticks, which labels, where), from cached label
layouts; a new trace paints each plot once."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QRectF
from PySide6.QtGui import QImage, QPainter

from gui import plotting  # noqa: F401  (the app's pyqtgraph set-up)
from gui.fast_axis import FastAxis
from gui.fonts import ui_font
from tests.gui.qt_helpers import settled, type_text


def laid_out(qtbot, show, axis: pg.AxisItem, low: float, high: float):
    """The axis shown alone in a view, with a range and painted (its size settled): the view, and
    pyqtgraph's own draw specs for it at that size."""
    view = show(pg.GraphicsView(background="w"), 200, 400)
    view.setCentralItem(axis)
    axis.setStyle(tickFont=ui_font(9))
    axis.setRange(low, high)
    qtbot.wait(50)
    image = QImage(10, 10, QImage.Format.Format_ARGB32_Premultiplied)
    painter = QPainter(image)
    painter.setFont(ui_font(9))
    specs = pg.AxisItem.generateDrawSpecs(axis, painter)
    painter.end()
    return view, specs


def test_ticks_and_labels_sit_where_pyqtgraph_puts_them(qtbot, show):
    for orientation, (low, high) in (("right", (0.0, 0.37)), ("left", (-3.0, 250.0)), ("bottom", (0.0, 100.0))):
        axis = FastAxis(orientation)
        view, (_, tick_specs, text_specs) = laid_out(qtbot, show, axis, low, high)
        axis.picture = None   # laid out again now, at the size pyqtgraph's specs were made for
        drawing = axis.drawing()
        ticks = [line for _, lines in drawing.ticks for line in lines]
        assert [(round(a.x(), 3), round(a.y(), 3)) for _, a, _ in tick_specs] == \
            [(round(line.x1(), 3), round(line.y1(), 3)) for line in ticks]
        assert len(drawing.texts) == len(text_specs) > 2
        for (corner, laid_out_text), (rect, _, text) in zip(drawing.texts, text_specs):
            assert laid_out_text.text() == text
            size = laid_out_text.size()
            if orientation == "bottom":   # centred under its tick, hanging from the slot's top
                assert abs(corner.x() + size.width() / 2 - rect.center().x()) < 0.01
                assert abs(corner.y() - rect.top()) < 0.01
            else:                         # centred on its tick across the axis
                assert abs(corner.y() + size.height() / 2 - rect.center().y()) < 0.51
                edge = corner.x() + size.width() if orientation == "left" else corner.x()
                assert abs(edge - (rect.right() if orientation == "left" else rect.left())) < 0.01


def test_a_new_trace_paints_the_attention_matrix_once(qtbot, make_window):
    window = make_window()
    type_text(qtbot, window, "The cat sat on the mat.")
    first = window.controller.trace
    type_text(qtbot, window, "订单成交，订单取消。")
    qtbot.wait(200)   # that sentence's own paints are over
    viewport = window.panel("attention").matrix_view.viewport()
    paints = []

    class Count(QObject):
        def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Type.Paint:
                paints.append(QRectF(event.rect()))
            return False

    counter = Count()
    viewport.installEventFilter(counter)
    window.controller.sigTraceChanged.emit(first)   # as a finished run does
    qtbot.waitUntil(lambda: not window.panel("attention").has_posted() and bool(paints), timeout=5000)
    qtbot.wait(100)   # several frames: a second paint would have come by now
    viewport.removeEventFilter(counter)
    assert settled(window, window.controller.trace.text)
    assert len(paints) == 1, f"the plot was painted {len(paints)} times: {paints}"
