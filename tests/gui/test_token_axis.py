"""TokenAxis: turned (upright) key labels keep the space marker ␣ upright and in its word's column,
a bottom axis is sized for its labels before it is painted, and one kept level thins them instead."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage

from gui import plotting  # noqa: F401  (the app's pyqtgraph set-up: black text on white)
from gui.token_axis import SIZE_SLACK, TokenAxis

N_LABELS, WIDTH, HEIGHT = 40, 200, 160


def turned_axis() -> TokenAxis:
    """A bottom axis whose 40 long labels cannot sit side by side in 200 px: they are drawn turned."""
    axis = TokenAxis("bottom")
    axis.set_labels(["␣because"] * N_LABELS)
    axis.setRange(0, N_LABELS)
    return axis


def ink(show, axis: TokenAxis) -> np.ndarray:  # -> [HEIGHT, WIDTH] bool: dark pixels
    view = show(pg.GraphicsView(background="w"), WIDTH, HEIGHT)
    view.setCentralItem(axis)
    image = view.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)
    return pixels[:HEIGHT, :WIDTH, :3].min(axis=2) < 128


def blobs(rows: np.ndarray, gap: int = 3) -> list[tuple[int, int]]:
    """Runs of ink rows, runs closer than `gap` rows merged (the letters of a turned word): [(first, last)]."""
    runs, start = [], rows[0]
    for previous, row in zip(rows, rows[1:]):
        if row > previous + gap:
            runs.append((start, previous))
            start = row
    runs.append((start, rows[-1]))
    return runs


def test_the_space_marker_of_a_turned_label_is_upright_and_under_its_word(show):
    axis = turned_axis()
    dark = ink(show, axis)
    step = axis.label_step(WIDTH / N_LABELS)
    assert step > 1 and axis.labels()[0] == "␣because"
    centre = (step + 0.5) * WIDTH / N_LABELS   # the second label shown, away from the edge
    half = step * WIDTH / N_LABELS / 2
    column = dark[:, int(centre - half):int(centre + half)]
    rows = np.flatnonzero(column[6:].any(axis=1)) + 6   # below the tick marks
    word, mark = blobs(rows)[0], blobs(rows)[-1]
    assert word != mark, "no space marker below the word"
    word_cols = np.flatnonzero(column[word[0]:word[1] + 1].any(axis=0))
    mark_cols = np.flatnonzero(column[mark[0]:mark[1] + 1].any(axis=0))
    mark_height, mark_width = mark[1] - mark[0] + 1, mark_cols[-1] - mark_cols[0] + 1
    assert mark_width > mark_height, "the marker is turned: it reads as ']'"
    assert word[1] - word[0] > 3 * (word_cols[-1] - word_cols[0] + 1), "the word is not turned"
    assert abs(mark_cols.mean() - word_cols.mean()) <= 1.0, "the marker is beside its word, not under it"
    gap = mark[0] - word[1] - 1
    assert gap <= axis._metrics().height() / 3, f"the marker floats {gap} px below its word: a stray bracket"


def test_a_bottom_axis_is_tall_enough_for_turned_labels_before_any_paint(qtbot):
    axis = turned_axis()
    axis.setGeometry(QRectF(0, 0, WIDTH, HEIGHT))
    assert axis.fixedHeight is not None and axis.fixedHeight >= axis.label_texts().width("because") + axis._metrics().height()
    axis.set_labels(["a", "b"])   # two short labels fit side by side: back to the automatic height
    axis.setRange(0, 2)
    assert axis.fixedHeight is None


def test_an_axis_that_keeps_its_labels_level_thins_them_until_the_widest_fits(show):
    axis = TokenAxis("bottom", turn_labels=False)
    axis.set_labels(["订单取消"] * N_LABELS)   # far wider than the 5 px a label has here
    axis.setRange(0, N_LABELS)
    pixels_per_label = WIDTH / N_LABELS
    step = axis.label_step(pixels_per_label)
    assert step > 1 and step * pixels_per_label >= axis.label_texts().width("订单取消")
    view = show(pg.GraphicsView(background="w"), WIDTH, HEIGHT)
    view.setCentralItem(axis)
    view.grab()   # painted
    drawing = axis.drawing()
    assert len(drawing.texts) >= 2   # drawn level (turned labels are not among the level texts)
    assert axis.fixedHeight is None   # the automatic one-line height, not the room turned labels take


def test_a_side_axis_keeps_its_width_for_slightly_narrower_labels_and_grows_or_shrinks_beyond(qtbot):
    """A new sentence whose widest label is a few pixels narrower keeps the axis' width (the plot is not
    laid out again); labels wider than the axis widen it, and much narrower ones (past the slack) narrow it."""
    axis = TokenAxis("left")
    axis.set_labels(["␣because", "a"])
    first = axis.fixedWidth
    width = axis.label_texts().width
    narrower = "␣becaus"
    assert 0 < width("␣because") - width(narrower) <= SIZE_SLACK
    axis.set_labels([narrower, "b"])
    assert axis.fixedWidth == first
    axis.set_labels(["␣because of the weather", "c"], columns=None)   # not elided
    assert axis.fixedWidth > first + width(" of the weather") - 2   # room for the new widest label
    wide = axis.fixedWidth
    axis.set_labels(["a", "b"])
    assert axis.fixedWidth < wide - SIZE_SLACK   # far narrower labels give the room back
    assert axis.fixedWidth >= width("a")
