"""An exported figure explains what it shows; how to use the panel ("Click a column…") stays on screen."""
from __future__ import annotations

import re

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QBuffer, QIODevice, QPoint
from PySide6.QtGui import QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsTextItem, QGraphicsView, QLabel, QWidget

from gui import figure_pages as pages
from gui.panels.attention_panel import AttentionPanel

from gui.panels.logit_lens_panel import CLICK_HINT, LogitLensPanel
from gui.panels.registry import panel_classes
from gui.panels.step_panel import StepPanel

INSTRUCTION = re.compile(r"\b(click|hover|drag|scroll)\b|\bpick (a|an|one|the)\b", re.IGNORECASE)  # not "can pick 10"


def figure_texts(figure) -> list[str]:
    """The figure's words as laid out on its page: its labels, and its plots' titles, axis names and texts."""
    with pages.on_page(figure) as page:
        texts = [label.text() for label in page.findChildren(QLabel)] + ([page.text()] if isinstance(page, QLabel) else [])
        views = [page] if isinstance(page, QGraphicsView) else []
        for view in (*views, *page.findChildren(QGraphicsView)):
            texts += [scene_text(item) for item in view.scene().items() if item.isVisible()]
    return [text for text in texts if text]


def scene_text(item) -> str:
    if isinstance(item, pg.LabelItem):
        return item.text
    return item.toPlainText() if isinstance(item, QGraphicsTextItem) else ""


def painted_texts(widget) -> str:
    """The text a widget paints itself (QPainter.drawText), read from an SVG of it (QSvgGenerator keeps text)."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(widget.size())
    painter = QPainter(generator)
    QWidget.render(widget, painter, QPoint())
    painter.end()
    return " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", bytes(buffer.data()).decode()))


@pytest.mark.parametrize("panel_class, name", [(LogitLensPanel, "logit_lens_heatmap"),
                                               (StepPanel, "step_dot_product")])
def test_the_figure_holds_no_instructions(show, analysed, panel_class, name):
    panel = show(panel_class(), 1000, 800)
    panel.set_trace(analysed("The cat sat on the mat."))
    figure = next(f for f in panel.figures() if f.name == name)
    texts = figure_texts(figure)
    assert texts and not [text for text in texts if INSTRUCTION.search(text)]


@pytest.mark.parametrize("panel_class", panel_classes(), ids=lambda c: c.__name__)
def test_no_figure_of_any_panel_holds_instructions(show, analysed, panel_class):
    panel = show(panel_class(), 1000, 800)
    panel.set_trace(analysed("The cat sat on the mat."))
    panel.flush()
    told = {f.name: [t for t in figure_texts(f) if INSTRUCTION.search(t)] for f in panel.figures()}
    assert not {name: texts for name, texts in told.items() if texts}


def test_the_lens_still_says_on_screen_how_to_select_a_position(show, analysed):
    panel = show(LogitLensPanel(), 1000, 800)
    panel.set_trace(analysed("The cat sat on the mat."))
    hints = [label for label in panel.findChildren(QLabel) if label.text() == CLICK_HINT]
    assert hints and hints[0].isVisibleTo(panel)


def test_long_head_lines_tell_on_screen_not_on_paper_to_hover(show, analysed):
    """Past a few hundred lines the head view hides the faintest and, on screen, says to hover a token."""
    panel = show(AttentionPanel(), 1200, 800)
    panel.set_trace(analysed(" ".join(["the cat sat on the mat and the dog came in"] * 4)))
    panel.flush()
    figure = next(f for f in panel.figures() if f.name == "attention_lines")
    figure.widget.resize(1200, figure.widget.height())
    assert "hover a token" in painted_texts(figure.widget)
    with pages.on_page(figure) as page:
        on_paper = painted_texts(page)
    assert "hidden" in on_paper and not INSTRUCTION.search(on_paper)
