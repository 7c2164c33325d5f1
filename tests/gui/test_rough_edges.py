"""Rough edges a new user hit (issue 10), each pinned where no other test holds it: the Tokens legend says
what its colours, ␣ and byte spans mean, readable on a dark theme too; the head view's title wraps whole."""
from __future__ import annotations

import numpy as np
from PySide6.QtGui import QColor, QFontMetricsF
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QLabel

from gui.head_lines import HeadLinesView


def tokens_legend(panel) -> QLabel:
    return next(label for label in panel.findChildren(QLabel) if "part of a character" in label.text())


def test_the_tokens_legend_names_the_colours_the_space_mark_and_half_open_byte_spans(show):
    from gui.panels.tokens_panel import TokensPanel

    text = tokens_legend(show(TokensPanel(), 900, 300)).text()
    assert "whole characters" in text and "part of a character" in text
    assert "␣ a space" in text
    assert "bytes 3–6: bytes 3, 4 and 5" in text and "end is not included" in text


def test_the_tokens_legend_is_light_on_a_dark_theme(show, qapp):
    from gui.headless import apply_theme
    from gui.panels.tokens_panel import TokensPanel

    undo = apply_theme(qapp, "dark")
    try:
        legend = tokens_legend(show(TokensPanel(), 900, 300))
        image = legend.grab().toImage()
    finally:
        undo()
    greys = [QColor(image.pixel(x, y)) for x in range(0, image.width(), 2) for y in range(image.height())]
    greys = [c for c in greys if max(c.red(), c.green(), c.blue()) - min(c.red(), c.green(), c.blue()) < 8]  # not a swatch
    assert max(c.lightness() for c in greys) > 150, "the legend's text is dark on the dark background"


def test_the_head_view_title_wraps_whole_in_a_narrow_view(show):
    view = show(HeadLinesView(), 180, 300)
    title = "layer 0 · head 0 — line opacity = weight"
    view.set_lines(["a", "b"], np.full((1, 2, 2), 0.5), [QColor("blue")], ["H0"], title)
    width = view.width() - 2 * view.MARGIN
    metrics = QFontMetricsF(view.font())
    assert metrics.horizontalAdvance(title) > width          # one line would cut it ("opacity = w…")
    needed = metrics.boundingRect(QRectF(0, 0, width, 1e6), int(Qt.TextFlag.TextWordWrap), title).height()
    assert view._title_lines() * metrics.height() * 1.2 >= needed   # the rows the header gives it hold it all
