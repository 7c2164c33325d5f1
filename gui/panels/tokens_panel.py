"""Tokens: how the model cut the sentence, and a replay of the BPE merges that cut it.

Top: one chip per token in sentence order (readable piece, id, byte span). Hovering a chip
highlights its characters in the sentence bar; clicking makes it the query token everywhere.
Bottom: the merge replay (core.tokens_view.MergeReplay), from the sentence as bytes to its tokens.
A new sentence shows the replay's last step (its tokens) unless the user pinned the step.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QListWidget, QPushButton, QScrollArea, QSlider,
                               QSplitter, QVBoxLayout, QWidget)

from core.tokens_view import EMPTY_REPLAY_CSV, MergeReplay, token_chips, tokens_csv
from gui.chip_flow import Chip, ChipFlow
from gui.fonts import ui_font
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked

WHOLE_FILL = QColor(222, 233, 247)      # a token made of whole characters
FRAGMENT_FILL = QColor(252, 232, 200)   # a token holding only part of a character's bytes
MERGED_FILL = QColor(255, 196, 120)     # pieces the current merge step just made
PIECE_FILL = QColor(236, 236, 236)
LEGEND = (f"<span style='background:{WHOLE_FILL.name()}'>&nbsp;&nbsp;&nbsp;</span> whole characters &nbsp; "
          f"<span style='background:{FRAGMENT_FILL.name()}'>&nbsp;&nbsp;&nbsp;</span> part of a character "
          "(its bytes in hex, ‹e8 ae›) &nbsp; ␣ a space &nbsp; bytes 3–6: bytes 3, 4 and 5 of the UTF-8 "
          "(the end is not included)")


def white(widget: QWidget) -> QWidget:
    widget.setAutoFillBackground(True)
    palette = widget.palette()
    palette.setColor(widget.backgroundRole(), QColor("white"))
    widget.setPalette(palette)
    return widget


def scrolled(widget: QWidget) -> QScrollArea:
    """widget at the top of a white, vertically scrolling area (it keeps its own height)."""
    holder = white(QWidget())
    layout = QVBoxLayout(holder)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(widget)
    layout.addStretch(1)
    area = QScrollArea()
    area.setWidget(holder)
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return area


class TokensPanel(Panel):
    title = "Tokens"
    object_name = "tokens"
    empty_text = "Type a sentence above to see how the model cuts it into tokens."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._shown_trace = None   # the trace the chips were built for (selection changes only re-mark)
        self.replay: MergeReplay | None = None
        self.set_content(self._build())
        self.refresh()

    # ------------------------------------------------------------ widgets
    def _build(self) -> QWidget:
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        legend = QLabel(LEGEND)
        legend.setWordWrap(True)
        legend.setStyleSheet("QLabel { color: #444; }")
        self.chips = ChipFlow(big_point_size=12.0, small_point_size=8.0)
        self.chips.setObjectName("tokens_chips")
        self.chips.sigHovered.connect(self._on_chip_hovered)
        self.chips.sigClicked.connect(lambda index: self.sigSelect.emit({"query": index, "key": None}))
        chips_box = QWidget()
        chips_layout = QVBoxLayout(chips_box)
        chips_layout.setContentsMargins(0, 0, 0, 0)
        chips_layout.addWidget(self.summary)
        chips_layout.addWidget(scrolled(self.chips), 1)
        chips_layout.addWidget(legend)

        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(chips_box)
        self.splitter.addWidget(self._build_replay())
        self.splitter.setSizes([1000, 1000])  # proportions: chips and replay share the room
        return self.splitter

    def resizeEvent(self, event) -> None:  # noqa: N802
        """Wide and short (docked along the top): chips beside the replay; otherwise above it."""
        super().resizeEvent(event)
        wide = event.size().width() > 2.2 * event.size().height()
        orientation = Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical
        if self.splitter.orientation() != orientation:
            self.splitter.setOrientation(orientation)
            self.splitter.setSizes([1000, 1000])

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
        self.merge_view = white(QWidget())
        self.merge_view.setObjectName("tokens_merges")
        self.step_label = QLabel()
        self.step_label.setWordWrap(True)
        self.step_label.setContentsMargins(6, 4, 6, 0)
        self.pieces = ChipFlow(big_point_size=11.0, small_point_size=8.0)
        view_layout = QVBoxLayout(self.merge_view)
        view_layout.setContentsMargins(0, 0, 0, 0)
        view_layout.setSpacing(0)
        view_layout.addWidget(self.step_label)
        view_layout.addWidget(self.pieces)

        self.step_list = QListWidget()
        self.step_list.setMinimumWidth(180)
        self.step_list.setUniformItemSizes(True)   # hundreds of steps: skip measuring every row
        self.step_list.currentRowChanged.connect(lambda row: row >= 0 and self.slider.setValue(row))

        body = QSplitter(Qt.Orientation.Horizontal)
        body.addWidget(scrolled(self.merge_view))
        body.addWidget(self.step_list)
        body.setStretchFactor(0, 3)
        body.setStretchFactor(1, 1)

        replay = QWidget()
        layout = QVBoxLayout(replay)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(controls)
        layout.addWidget(body, 1)
        return replay

    # ------------------------------------------------------------ drawing
    def clear(self) -> None:
        self._shown_trace = None
        self.chips.set_chips([])
        self._fill_replay(None)

    def draw(self) -> None:
        trace = self.trace
        if trace is not self._shown_trace:
            self._shown_trace = trace
            self.summary.setText(self._summary_text(trace))
            self.chips.set_chips([Chip(chip.lines, FRAGMENT_FILL if chip.fragment else WHOLE_FILL, chip.gap_before)
                                  for chip in token_chips(trace)])
            self._fill_replay(MergeReplay(trace.tokenization) if trace.tokenization is not None else None)
        self.chips.set_marked(self.selection.query_index(trace.n_tokens))

    @staticmethod
    def _summary_text(trace) -> str:
        tok = trace.tokenization
        size = f" · {len(tok.text.encode('utf-8'))} bytes · {len(tok.text)} characters" if tok is not None else ""
        return (f"<b>{trace.n_tokens} tokens</b>{size}. Hover a token to see its characters in the sentence; "
                f"click it to make it the query token.")

    def _fill_replay(self, replay: MergeReplay | None) -> None:
        self.replay = replay
        steps = replay.n_steps if replay is not None else 0
        with qt_signals_blocked(self.step_list, self.slider):
            self.step_list.clear()
            if replay is not None:
                self.step_list.addItems(replay.entries())
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
        with qt_signals_blocked(self.step_list):
            self.step_list.setCurrentRow(step)
            self.step_list.scrollToItem(self.step_list.currentItem(), QListWidget.ScrollHint.PositionAtCenter)

    def _on_chip_hovered(self, index: int) -> None:
        tok = self.trace.tokenization if self.trace is not None else None
        if index < 0 or tok is None:
            self.sigHoverText.emit(-1, -1)
        else:
            token = tok.tokens[index]
            self.sigHoverText.emit(token.char_start, token.char_end)

    # ------------------------------------------------------------ export
    def figures(self) -> list[Figure]:
        return [Figure("tokens_chips", self.chips, lambda: tokens_csv(self.trace)),
                Figure("tokens_merges", self.merge_view,
                       lambda: self.replay.csv() if self.replay is not None else EMPTY_REPLAY_CSV)]
