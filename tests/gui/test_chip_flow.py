"""ChipFlow keeps where it drew its chips between paints and repaints only the chips whose outline changed:
what is on screen must stay what a full paint of the same state draws."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint
from PySide6.QtGui import QColor, QImage, QRegion
from PySide6.QtWidgets import QApplication

from gui.chip_flow import Chip, ChipFlow
from tests.gui.qt_helpers import hover

BLUE, ORANGE = QColor(222, 233, 247), QColor(252, 232, 200)


def chips(words: list[str], fill: QColor = BLUE) -> list[Chip]:
    return [Chip((word, f"id {i}", f"bytes {i}–{i + 1}"), fill, i % 3 == 0) for i, word in enumerate(words)]


class PaintRegions(QObject):
    """The region of every paint event the watched widget gets."""

    def __init__(self, widget) -> None:
        super().__init__()
        self.regions: list[QRegion] = []
        widget.installEventFilter(self)

    def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Paint:
            self.regions.append(QRegion(event.region()))
        return False


def on_screen(widget) -> QImage:
    """What the window shows now (its backing store), not a fresh render of the widget."""
    QApplication.processEvents()
    return widget.screen().grabWindow(widget.winId()).toImage().convertToFormat(QImage.Format.Format_RGB32)


def full_paint(widget) -> QImage:
    return widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)


def pixels(flow):  # -> [H, W, 4] int: a full paint's RGBA
    import numpy as np

    image = full_paint(flow).convertToFormat(QImage.Format.Format_RGBA8888)
    return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.width(), 4).astype(int)


def test_marking_a_chip_repaints_it_and_the_one_unmarked_not_the_rows_between(show, qtbot):
    flow = show(ChipFlow(), 420, 300)
    flow.set_chips(chips([f"word{i}" for i in range(40)]))
    flow.set_marked(0)
    QApplication.processEvents()
    paints = PaintRegions(flow)
    flow.set_marked(39)
    qtbot.waitUntil(lambda: bool(paints.regions))
    repainted = paints.regions[0]
    for index in (0, 39):
        assert repainted.contains(flow.chip_rect(index).toAlignedRect().adjusted(1, 1, -1, -1))
    assert not repainted.intersects(flow.chip_rect(20).toAlignedRect())   # a chip in a row between them
    assert on_screen(flow) == full_paint(flow)


def test_hovering_across_chips_leaves_the_screen_as_a_full_paint_draws_it(show, qtbot):
    flow = show(ChipFlow(), 420, 300)
    flow.set_chips(chips([f"w{i}" for i in range(30)]))
    flow.set_marked(4)
    for index in (2, 3, 4, 17):
        hover(flow, flow.chip_rect(index).center().toPoint())
        assert on_screen(flow) == full_paint(flow)
    hover(flow, QPoint(2, flow.height() - 2))   # off every chip: the last hover outline goes
    assert on_screen(flow) == full_paint(flow)


def test_new_chips_and_a_new_width_draw_as_a_fresh_flow_does(show):
    """Outlines, text positions and outline pens are kept between paints: a new layout must forget them."""
    flow = show(ChipFlow(), 420, 300)
    flow.set_chips(chips([f"first{i}" for i in range(25)]))
    flow.set_marked(2)
    full_paint(flow)   # draws (and keeps) the first layout
    flow.resize(300, flow.height())
    flow.set_chips(chips(["订单", "成交", "‹e5 9b›", "another", "one"] * 4, ORANGE))
    fresh = show(ChipFlow(), 300, 300)
    fresh.set_chips(chips(["订单", "成交", "‹e5 9b›", "another", "one"] * 4, ORANGE))
    fresh.set_marked(2)
    assert flow.size() == fresh.size()
    assert full_paint(flow) == full_paint(fresh)
    assert on_screen(flow) == full_paint(fresh)


def test_box_pictures_draw_what_the_paths_draw_and_are_kept_per_fill_and_size(show):
    """A plain chip's box is copied from a kept picture: within 2/255 of drawing it as a path (anti-aliased
    edges composited once more), on whole pixels, and one picture serves every chip of its fill and size."""
    import numpy as np

    import gui.chip_flow as chip_flow

    class Paths(ChipFlow):
        kept_boxes = False

    words = ["订单", "the", "the", "‹e5 9b›", "word", "word"] * 5
    copied, drawn = show(ChipFlow(), 420, 300), show(Paths(), 420, 300)
    for flow in (copied, drawn):
        flow.set_chips(chips(words) + chips(words, ORANGE))
        flow.set_marked(3)
    rects = [copied.chip_rect(i) for i in range(copied.chip_count())]
    assert all(value == int(value) for r in rects for value in (r.x(), r.y(), r.width(), r.height()))

    chip_flow._BOX_PICTURES.clear()
    a, b = pixels(copied), pixels(drawn)
    assert a.shape == b.shape and np.abs(a - b).max() <= 2
    sizes = {(chip.fill.rgba(), int(r.width()), int(r.height()))
             for index, (chip, r) in enumerate(zip(copied._chips, rects)) if index != 3}
    assert len(chip_flow._BOX_PICTURES) == len(sizes) < copied.chip_count() / 2
    pixels(copied)   # painted again: every picture reused
    assert len(chip_flow._BOX_PICTURES) == len(sizes)


def test_boxes_are_paths_in_vector_output_and_scaled_renders():
    from PySide6.QtCore import QBuffer, QByteArray
    from PySide6.QtGui import QPainter
    from PySide6.QtSvg import QSvgGenerator

    from gui.chip_flow import copies_pictures

    image = QImage(200, 100, QImage.Format.Format_ARGB32_Premultiplied)
    painter = QPainter(image)
    assert copies_pictures(painter) == 1
    painter.translate(3, 4)
    assert copies_pictures(painter) == 1   # moved by whole pixels
    painter.translate(0.5, 0)
    assert copies_pictures(painter) == 0
    painter.resetTransform()
    painter.scale(2, 2)                    # a PNG at twice the size
    assert copies_pictures(painter) == 0
    painter.end()
    data = QByteArray()   # kept: the buffer writes into it
    buffer = QBuffer(data)
    svg = QSvgGenerator()
    svg.setOutputDevice(buffer)
    svg.setSize(image.size())
    painter = QPainter(svg)
    assert copies_pictures(painter) == 0
    painter.end()


def test_whole_chip_pictures_draw_what_the_chips_draw_and_hovering_stays_whole(show):
    """A flow that keeps whole chips (the merge replay's pieces) shows what drawing them does, within the
    boxes' 2/255, and a marked or hovered chip (drawn, not copied) repaints as a full paint draws it."""
    import numpy as np

    import gui.chip_flow as chip_flow

    class Paths(ChipFlow):
        kept_boxes = False

    words = ["订单", "the", "‹e5 9b›", "word", "the"] * 6
    copied, drawn = show(ChipFlow(), 420, 300), show(Paths(), 420, 300)
    copied.kept_chips = True
    for flow in (copied, drawn):
        flow.set_chips([Chip((word,), BLUE if i % 4 else ORANGE, i % 3 == 0) for i, word in enumerate(words)])
        flow.set_marked(2)

    chip_flow._CHIP_PICTURES.clear()
    a, b = pixels(copied), pixels(drawn)
    assert a.shape == b.shape and np.abs(a - b).max() <= 2
    kept = len(chip_flow._CHIP_PICTURES)
    assert 0 < kept < copied.chip_count() / 2   # a picture per distinct chip, not per chip
    for index in (0, 1, 7):
        hover(copied, copied.chip_rect(index).center().toPoint())
        assert on_screen(copied) == full_paint(copied)
