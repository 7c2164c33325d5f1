"""A SteadyLabel's new text lays its parents out again only when the text needs a different size:
counted LayoutRequest events and geometry, never times."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QVBoxLayout, QWidget

from gui.steady_label import SteadyLabel


class LayoutRequests(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


def holding(label: SteadyLabel) -> QWidget:
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.addWidget(label)
    layout.addStretch(1)
    return box


def test_a_new_text_of_the_same_size_does_not_lay_the_parent_out(qtbot, show):
    label = SteadyLabel("alphabetical one")
    label.setWordWrap(True)
    box = show(holding(label), 400, 200)
    qtbot.wait(20)
    requests = LayoutRequests()
    box.installEventFilter(requests)
    label.setText("alphabetical two")   # one line still; its longest word unchanged
    qtbot.wait(20)
    assert requests.count == 0 and label.text() == "alphabetical two"


def test_a_text_needing_more_lines_grows_the_label(qtbot, show):
    label = SteadyLabel("short")
    label.setWordWrap(True)
    box = show(holding(label), 300, 400)
    qtbot.wait(20)
    one_line = label.height()
    requests = LayoutRequests()
    box.installEventFilter(requests)
    label.setText(" ".join(["several words that wrap"] * 12))
    qtbot.waitUntil(lambda: label.height() > 2 * one_line, timeout=5000)
    assert requests.count >= 1
    assert label.label.geometry() == label.rect()   # the QLabel fills its holder


def test_a_label_changed_while_hidden_has_its_new_size_when_shown(qtbot, show):
    label = SteadyLabel("short")
    label.setWordWrap(True)
    box = show(holding(label), 300, 400)
    one_line = label.height()
    label.hide()
    label.setText(" ".join(["several words that wrap"] * 12))
    label.show()
    qtbot.waitUntil(lambda: label.height() > 2 * one_line, timeout=5000)
    assert box.isVisible()


def test_status_texts_that_keep_their_sizes_do_not_lay_the_window_out(qtbot, make_window):
    window = make_window(panel_classes=[])   # the status bar alone is what this is about
    qtbot.waitUntil(lambda: not window.controller.busy(), timeout=5000)
    qtbot.wait(50)
    requests = LayoutRequests()
    window.installEventFilter(requests)
    label = window.tokens_label
    text, metrics = label.text(), label.label.fontMetrics()
    same_width = next(new for new in (digit + text[1:] for digit in "0123456789")
                      if new != text and metrics.horizontalAdvance(new) == metrics.horizontalAdvance(text))
    label.setText(same_width)                # e.g. "0 / 256 tokens" -> "1 / 256 tokens"
    window.busy_label.setText("running…")   # a fixed size
    window.busy_label.setText("")
    qtbot.wait(50)
    assert requests.count == 0 and label.text() == same_width


def test_the_same_text_again_is_not_set_on_the_label(qtbot, monkeypatch):
    """Setting it would make Qt measure the (wrapped, rich) text again for nothing."""
    label = SteadyLabel("<b>28 tokens</b> · 74 bytes")
    label.setWordWrap(True)
    qtbot.addWidget(label)
    measured = []
    monkeypatch.setattr(label.label, "setText", lambda text: measured.append(text))
    label.setText("<b>28 tokens</b> · 74 bytes")
    assert measured == []
    label.setText("<b>29 tokens</b> · 75 bytes")
    assert measured == ["<b>29 tokens</b> · 75 bytes"]


def test_a_slightly_narrower_text_keeps_its_room_and_a_wider_one_is_laid_out(qtbot, show):
    """While typing, a count going from 183 to 169 bytes must not move the words beside it."""
    from gui.steady_label import WIDTH_SLACK

    label = SteadyLabel("<b>64 tokens</b> · 183 bytes")
    box = show(holding(label), 400, 200)
    qtbot.wait(20)
    requests = LayoutRequests()
    box.installEventFilter(requests)
    laid_out = label.label.sizeHint().width()
    narrower = next(text for text in ("<b>64 tokens</b> · 83 bytes", "<b>64 tokens</b> · 3 bytes")
                    if 0 < laid_out - SteadyLabel(text).sizeHint().width() <= WIDTH_SLACK)
    label.setText(narrower)
    qtbot.wait(20)
    assert requests.count == 0
    label.setText("<b>64 tokens</b> · 183 bytes · 121 characters")   # wider: laid out at once
    qtbot.waitUntil(lambda: requests.count >= 1, timeout=5000)
    qtbot.waitUntil(lambda: label.width() >= label.label.sizeHint().width(), timeout=5000)


def test_a_text_far_narrower_than_the_slack_is_laid_out_again(qtbot, show):
    label = SteadyLabel("a fairly long status text that takes room")
    box = show(holding(label), 600, 200)
    qtbot.wait(20)
    requests = LayoutRequests()
    box.installEventFilter(requests)
    label.setText("short")
    qtbot.waitUntil(lambda: requests.count >= 1, timeout=5000)


def test_a_wrapped_label_passes_on_a_longer_word_only_once_it_no_longer_fits(qtbot, show):
    """A merge caption's longest word changes with every sentence; the layout needs to hear of it only
    when the label, as it is, is too narrow for the word."""
    label = SteadyLabel("Step 80 of 80: merge ‘ab’ + ‘c’")
    label.setWordWrap(True)
    box = show(holding(label), 300, 200)
    qtbot.wait(20)
    requests = LayoutRequests()
    box.installEventFilter(requests)
    label.setText("Step 81 of 81: merge ‘abcdefgh’ + ‘c’")   # a longer word, on one line still
    qtbot.wait(20)
    assert requests.count == 0
    label.setText("Step 82 of 82: merge ‘" + "x" * 80 + "’")   # a word wider than the label
    qtbot.waitUntil(lambda: requests.count >= 1, timeout=5000)
