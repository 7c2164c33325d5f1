"""Tokens: how the model cut the sentence, and a replay of the BPE merges that cut it.

Top: one chip per token in sentence order (readable piece, id, byte span). Hovering a chip
highlights its characters in the sentence bar; clicking makes it the query token everywhere.
Bottom: the merge replay (core.tokens_view.MergeReplay), from the sentence as bytes to its tokens.
A new sentence shows the replay's last step (its tokens) unless the user pinned the step.
"""
from __future__ import annotations

from PySide6.QtCore import QStringListModel, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QLabel, QListView, QPushButton,
                               QScrollArea, QSlider, QSplitter, QVBoxLayout, QWidget)

from core.tokens_view import EMPTY_REPLAY_CSV, MergeReplay, token_chips, tokens_csv
from gui.chip_flow import Chip, ChipFlow
from gui.fonts import ui_font
from gui.merge_pages import MERGED_FILL, PIECE_FILL, MergePages, page_name
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked
from gui.steady_label import SteadyLabel
from gui.theme import ink, on_paper, paint_as_page

HOVER_HINT = "Hover a token to see its characters in the sentence; click it to make it the query token."
WHOLE_FILL = QColor(222, 233, 247)      # a token made of whole characters
FRAGMENT_FILL = QColor(252, 232, 200)   # a token holding only part of a character's bytes


def legend_text() -> str:
    """The chips' key, its swatches as the chips show them in the theme (gui.theme.on_paper)."""
    return (f"<span style='background:{on_paper(WHOLE_FILL).name()}'>&nbsp;&nbsp;&nbsp;</span> whole characters &nbsp; "
            f"<span style='background:{on_paper(FRAGMENT_FILL).name()}'>&nbsp;&nbsp;&nbsp;</span> part of a character "
            "(its bytes in hex, ‹e8 ae›) &nbsp; ␣ a space &nbsp; bytes 3–6: bytes 3, 4 and 5 of the UTF-8 "
            "(the end is not included)")


def opaque(widget: QWidget) -> QWidget:
    """widget paints its own background (the window's colour, as before): a label, slider or scroll bar
    that changes inside it repaints from here down, not the main window, dock and panel beneath it."""
    widget.setAutoFillBackground(True)
    return widget


def scrolled(widget: QWidget) -> QScrollArea:
    """widget at the top of a paper-coloured, vertically scrolling area (it keeps its own height)."""
    holder = paint_as_page(QWidget())
    layout = QVBoxLayout(holder)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(widget)
    layout.addStretch(1)
    area = QScrollArea()
    area.setWidget(holder)
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return area


class StepList(QListView):
    """The merge steps, one row each. The current step stays in view when the list is resized: at a first
    start the window settles its layout after the first sentence is drawn, which left the step scrolled to
    below the list's new bottom edge."""

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        current = self.currentIndex()
        if current.isValid() and not self.viewport().rect().contains(self.visualRect(current)):
            self.updateGeometries()   # the scroll range for the new height, before scrolling within it
            self.scrollTo(current, QAbstractItemView.ScrollHint.PositionAtCenter)


class TokensPanel(Panel):
    title = "Tokens"
    object_name = "tokens"
    figure_names = dict.fromkeys(("tokens_chips", "tokens_merges"), "")
    fields = ()
    empty_text = "Type a sentence above to see how the model cuts it into tokens."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._shown_tokens = None   # the tokenization (or trace) the chips were built for: else only re-mark
        self.replay: MergeReplay | None = None
        self.merge_pages = MergePages()   # the tokens_merges figure's pages: off screen, drawn for export
        self.set_content(self._build())
        self.refresh()

    # ------------------------------------------------------------ widgets
    def _build(self) -> QWidget:
        # The counts change with every sentence, the hint never: one line measures in a fraction of the time
        # a wrapped rich text takes (~0.4 ms, twice per sentence), and the wrapping is the hint's alone.
        self.counts = SteadyLabel()
        hint = QLabel(HOVER_HINT)
        hint.setWordWrap(True)
        summary = QHBoxLayout()
        summary.setContentsMargins(0, 0, 0, 0)
        summary.addWidget(self.counts, 0, Qt.AlignmentFlag.AlignTop)
        summary.addWidget(hint, 1)
        legend = QLabel(legend_text())
        legend.setWordWrap(True)
        legend.setStyleSheet(f"QLabel {{ color: {ink('#444', '#bbb').name()}; }}")   # #444 was lost on a dark theme
        self.chips = ChipFlow(big_point_size=12.0, small_point_size=8.0)
        self.chips.setObjectName("tokens_chips")
        self.chips.sigHovered.connect(self._on_chip_hovered)
        self.chips.sigClicked.connect(lambda index: self.sigSelect.emit({"query": index, "key": None}))
        chips_box = opaque(QWidget())
        chips_layout = QVBoxLayout(chips_box)
        chips_layout.setContentsMargins(0, 0, 0, 0)
        chips_layout.addLayout(summary)
        chips_layout.addWidget(scrolled(self.chips), 1)
        chips_layout.addWidget(legend)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)   # docked along the top; resizeEvent decides
        self.splitter.addWidget(chips_box)
        self.splitter.addWidget(self._build_replay())
        self.splitter.setSizes([1300, 700])  # proportions (side by side; resizeEvent sets them again)
        return self.splitter

    def resizeEvent(self, event) -> None:  # noqa: N802
        """Wide and short (docked along the top): chips beside the replay; otherwise above it."""
        super().resizeEvent(event)
        wide = event.size().width() > 1.6 * event.size().height()   # (2.2 went tall in a new window's first layout)
        orientation = Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical
        if self.splitter.orientation() != orientation:
            self.splitter.setOrientation(orientation)
            # side by side the chips get more: their summary and legend then take a line each, not two
            self.splitter.setSizes([1300, 700] if wide else [1000, 1000])

    def _build_replay(self) -> QWidget:
        title = QLabel("Merge replay")
        title.setFont(ui_font(bold=True))
        self.back_button = QPushButton("◀")
        self.next_button = QPushButton("▶")
        for button in (self.back_button, self.next_button):
            button.setFixedWidth(34)
        self.back_button.setToolTip("Previous merge step")
        self.next_button.setToolTip("Next merge step")
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setToolTip("Replay the model's BPE merges on this sentence, one merge per step")
        self.back_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() - 1))
        self.next_button.clicked.connect(lambda: self.slider.setValue(self.slider.value() + 1))
        self.slider.valueChanged.connect(self._show_step)
        self.pin_button = QPushButton("Pin step")
        self.pin_button.setCheckable(True)
        self.pin_button.setToolTip("Keep this step number for the next sentence (else a new sentence shows "
                                   "its last step: its tokens)")

        controls = QHBoxLayout()
        for widget, stretch in ((title, 0), (self.back_button, 0), (self.slider, 1), (self.next_button, 0),
                                (self.pin_button, 0)):
            controls.addWidget(widget, stretch)

        # What the tokens_merges figure shows: the caption and the pieces after the current step.
        self.merge_view = paint_as_page(QWidget())
        self.merge_view.setObjectName("tokens_merges")
        self.step_label = SteadyLabel()
        self.step_label.setWordWrap(True)
        self.step_label.label.setContentsMargins(6, 4, 6, 0)
        self.pieces = ChipFlow(big_point_size=11.0, small_point_size=8.0)
        self.pieces.kept_chips = True   # a sentence's pieces recur in the next: copied from pictures
        view_layout = QVBoxLayout(self.merge_view)
        view_layout.setContentsMargins(0, 0, 0, 0)
        view_layout.setSpacing(0)
        view_layout.addWidget(self.step_label)
        view_layout.addWidget(self.pieces)

        # A C++ model: a new sentence swaps the steps in one reset, and the view asks for the rows it shows
        # without calling into Python (a QListWidget built an item for each of hundreds of steps).
        self.step_model = QStringListModel()
        self.step_list = StepList()
        self.step_list.setModel(self.step_model)
        self.step_list.setMinimumWidth(180)
        self.step_list.setUniformItemSizes(True)   # hundreds of steps: skip measuring every row
        self.step_list.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.step_list.selectionModel().currentRowChanged.connect(
            lambda current, _previous: current.row() >= 0 and self.slider.setValue(current.row()))

        body = QSplitter(Qt.Orientation.Horizontal)
        body.addWidget(scrolled(self.merge_view))
        body.addWidget(self.step_list)
        body.setStretchFactor(0, 3)
        body.setStretchFactor(1, 1)

        replay = opaque(QWidget())
        layout = QVBoxLayout(replay)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(controls)
        layout.addWidget(body, 1)
        return replay

    # ------------------------------------------------------------ drawing
    def clear(self) -> None:
        self._shown_tokens = None
        self.chips.set_chips([])
        self._fill_replay(None)

    def draw(self) -> None:
        trace = self.trace
        tokens = trace.tokenization if trace.tokenization is not None else trace   # the run's tokens-only trace has it too
        if tokens is not self._shown_tokens:
            self._shown_tokens = tokens
            self.counts.setText(self._counts_text(trace))
            replay = MergeReplay(trace.tokenization) if trace.tokenization is not None else None
            self.chips.set_chips([Chip(chip.lines, FRAGMENT_FILL if chip.fragment else WHOLE_FILL, chip.gap_before)
                                  for chip in token_chips(trace, replay)])
            self._fill_replay(replay)
        self.chips.set_marked(self.selection.query_index(trace.n_tokens))

    @staticmethod
    def _counts_text(trace) -> str:
        tok = trace.tokenization
        size = f" · {len(tok.text.encode('utf-8'))} bytes · {len(tok.text)} characters" if tok is not None else ""
        return f"<b>{trace.n_tokens} tokens</b>{size}."

    def _fill_replay(self, replay: MergeReplay | None) -> None:
        self.replay = replay
        steps = replay.n_steps if replay is not None else 0
        with qt_signals_blocked(self.slider):
            self.step_model.setStringList(replay.entries() if replay is not None else [])
            self.slider.setRange(0, steps)
            if not self.pin_button.isChecked():
                self.slider.setValue(steps)
        self._show_step(self.slider.value())

    def _show_step(self, step: int) -> None:
        replay = self.replay
        for widget in (self.slider, self.back_button, self.next_button, self.step_list, self.pin_button):
            widget.setEnabled(replay is not None)
        if replay is None:
            self.step_label.setText("" if self.trace is None else
                                    "No merge replay: these tokens were added by id, not typed.")
            self.pieces.set_chips([])
            return
        shown = replay.step(step)
        self.pieces.set_chips([Chip((piece.text,), MERGED_FILL if piece.fresh else PIECE_FILL, piece.gap_before)
                               for piece in shown.pieces])
        self.step_label.setText(shown.caption)
        current = self.step_model.index(step)
        self.step_list.setCurrentIndex(current)   # reports step back to the slider, which already shows it
        self.step_list.scrollTo(current, QAbstractItemView.ScrollHint.PositionAtCenter)

    def _on_chip_hovered(self, index: int) -> None:
        tok = self.trace.tokenization if self.trace is not None else None
        if index < 0 or tok is None:
            self.sigHoverText.emit(-1, -1)
        else:
            token = tok.tokens[index]
            self.sigHoverText.emit(token.char_start, token.char_end)

    # ------------------------------------------------------------ export
    def figures(self) -> list[Figure]:
        figures = [Figure("tokens_chips", self.chips, lambda: tokens_csv(self.trace))]
        replay = self.replay
        if replay is None:   # tokens added by id have no replay: the merge_view says so on screen
            return figures + [Figure(page_name(0), self.merge_view, lambda: EMPTY_REPLAY_CSV)]
        pages = self.merge_pages.show_replay(replay)
        return figures + [Figure(page_name(i), page, replay.csv if i == 0 else None, page_size=page.page_size)
                          for i, page in enumerate(pages)]
