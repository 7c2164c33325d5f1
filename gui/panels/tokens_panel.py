"""Tokens: how the model cut the sentence, and a replay of the BPE merges that cut it.

Top: one chip per token in sentence order (readable piece, id, byte span). Hovering a chip
highlights its characters in the sentence bar; clicking makes it the query token everywhere.
Bottom: the merge replay (core.tokens_view.MergeReplay), from the sentence as bytes to its tokens.
A new sentence shows the replay's last step (its tokens) unless the user pinned the step.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QSize, QStringListModel, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QGridLayout, QHBoxLayout, QLabel, QListView, QPushButton,
                               QScrollArea, QSlider, QSplitter, QVBoxLayout, QWidget)

from core.tokens_view import EMPTY_REPLAY_CSV, MAX_FIGURE_ROWS, MergeReplay, token_chips, tokens_csv
from gui.chip_flow import Chip, ChipFlow
from gui.figure_pages import MAX_PAGE_WIDTH, natural_height
from gui.theme import ink, page_background
from gui.fonts import ui_font
from gui.panels.base import Figure, Panel
from gui.qt_signals import qt_signals_blocked
from gui.steady_label import SteadyLabel
from gui.theme import on_paper

WHOLE_FILL = QColor(222, 233, 247)      # a token made of whole characters
FRAGMENT_FILL = QColor(252, 232, 200)   # a token holding only part of a character's bytes
MERGED_FILL = QColor(255, 196, 120)     # pieces the current merge step just made
PIECE_FILL = QColor(236, 236, 236)


def legend_text() -> str:
    """The chips' key, its swatches as the chips show them in the theme (gui.theme.on_paper)."""
    return (f"<span style='background:{on_paper(WHOLE_FILL).name()}'>&nbsp;&nbsp;&nbsp;</span> whole characters &nbsp; "
            f"<span style='background:{on_paper(FRAGMENT_FILL).name()}'>&nbsp;&nbsp;&nbsp;</span> part of a character "
            "(its bytes in hex, ‹e8 ae›) &nbsp; ␣ a space &nbsp; bytes 3–6: bytes 3, 4 and 5 of the UTF-8 "
            "(the end is not included)")


def paper(widget: QWidget) -> QWidget:
    """The widget on the figures' paper: white, or the dark theme's window colour."""
    widget.setAutoFillBackground(True)
    palette = widget.palette()
    palette.setColor(widget.backgroundRole(), page_background())
    widget.setPalette(palette)
    return widget


def opaque(widget: QWidget) -> QWidget:
    """widget paints its own background (the window's colour, as before): a label, slider or scroll bar
    that changes inside it repaints from here down, not the main window, dock and panel beneath it."""
    widget.setAutoFillBackground(True)
    return widget


def scrolled(widget: QWidget) -> QScrollArea:
    """widget at the top of a paper-coloured, vertically scrolling area (it keeps its own height)."""
    holder = paper(QWidget())
    layout = QVBoxLayout(holder)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(widget)
    layout.addStretch(1)
    area = QScrollArea()
    area.setWidget(holder)
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return area


REPLAY_LINES = 40       # lines of chips the tokens_merges figure aims at
MIN_REPLAY_ROWS = 6
BYTE_CHIP_WIDTH = 19    # logical pixels of a one-byte chip and its gap (an estimate: wrapping is exact)


class MergeSequence(QWidget):
    """The tokens_merges figure: the whole replay as rows, bytes at the top, tokens at the bottom,
    each row the pieces after one merge (the pieces it made highlighted)."""

    def __init__(self) -> None:
        super().__init__()
        paper(self)
        self.heading = QLabel()
        self.heading.setFont(ui_font(10.5, bold=True))
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet(f"QLabel {{ color: {ink('#555', '#bbb').name()}; }}")
        self._grid = QGridLayout()
        self._grid.setHorizontalSpacing(8)
        self._grid.setVerticalSpacing(3)
        self._grid.setColumnStretch(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addWidget(self.heading)
        layout.addLayout(self._grid)
        layout.addWidget(self.note)
        self._rows: list[tuple[QLabel, ChipFlow]] = []

    def show_replay(self, replay: MergeReplay) -> None:
        # a long sentence's rows wrap: fewer of them, so the page stays about REPLAY_LINES lines high
        lines_per_row = math.ceil(len(replay.pieces_at(0)) * BYTE_CHIP_WIDTH / MAX_PAGE_WIDTH)
        steps = replay.figure_steps(max(MIN_REPLAY_ROWS, min(MAX_FIGURE_ROWS, REPLAY_LINES // lines_per_row)))
        while len(self._rows) < len(steps):
            self._rows.append(self._row(len(self._rows)))
        for i, (label, flow) in enumerate(self._rows):
            label.setVisible(i < len(steps))
            flow.setVisible(i < len(steps))
            if i < len(steps):
                shown = replay.step(steps[i])
                label.setText(replay.row_label(steps[i]))
                flow.set_chips([Chip((piece.text,), MERGED_FILL if piece.fresh else PIECE_FILL, piece.gap_before)
                                for piece in shown.pieces])
        pieces = len(replay.pieces_at(0))
        self.heading.setText(f"BPE merge replay: {pieces} {replay.row_label(0)} → "
                             f"{len(replay.pieces_at(replay.n_steps))} tokens in {replay.n_steps} merges")
        skipped = replay.n_steps + 1 - len(steps)
        self.note.setText(f"Highlighted: the pieces each merge made. {len(steps)} of {replay.n_steps + 1} steps "
                          f"shown, evenly spread; every step is in tokens_merges.csv." if skipped else
                          "Highlighted: the pieces each merge made; every step is in tokens_merges.csv.")

    def page_size(self) -> QSize:
        """Wide enough for the longest row on one line (up to the widest page), as tall as the rows need."""
        rows = [(label, flow) for label, flow in self._rows if not flow.isHidden()]
        labels = max((label.sizeHint().width() for label, _ in rows), default=0)
        widest = max((self._one_line_width(flow) for _, flow in rows), default=0)
        margins = self.layout().contentsMargins()
        width = max(480, min(MAX_PAGE_WIDTH, labels + widest + self._grid.horizontalSpacing()
                             + margins.left() + margins.right()))
        self.resize(width, self.height())   # each row wraps at its page width before the height is asked
        self.layout().activate()
        return QSize(width, natural_height(self, width))

    @staticmethod
    def _one_line_width(flow: ChipFlow) -> int:
        if not flow.chip_count():
            return 0
        flow.resize(100_000, flow.height())
        return round(flow.chip_rect(flow.chip_count() - 1).right()) + 8

    def _row(self, index: int) -> tuple[QLabel, ChipFlow]:
        label = QLabel()
        label.setFont(ui_font(8.5))
        label.setStyleSheet(f"QLabel {{ color: {ink('#333', '#ddd').name()}; }}")
        flow = ChipFlow(big_point_size=10.0, small_point_size=8.0)
        self._grid.addWidget(label, index, 0, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        self._grid.addWidget(flow, index, 1)
        return label, flow


class TokensPanel(Panel):
    title = "Tokens"
    object_name = "tokens"
    figure_names = dict.fromkeys(("tokens_chips", "tokens_merges"), "")
    fields = ()
    empty_text = "Type a sentence above to see how the model cuts it into tokens."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._shown_trace = None   # the trace the chips were built for (selection changes only re-mark)
        self.replay: MergeReplay | None = None
        self.merge_sequence = MergeSequence()   # the tokens_merges figure: off screen, drawn for export
        self.set_content(self._build())
        self.refresh()

    # ------------------------------------------------------------ widgets
    def _build(self) -> QWidget:
        self.summary = SteadyLabel()   # a new sentence changes its text, rarely its height
        self.summary.setWordWrap(True)
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
        chips_layout.addWidget(self.summary)
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
        self.merge_view = paper(QWidget())
        self.merge_view.setObjectName("tokens_merges")
        self.step_label = SteadyLabel()
        self.step_label.setWordWrap(True)
        self.step_label.label.setContentsMargins(6, 4, 6, 0)
        self.pieces = ChipFlow(big_point_size=11.0, small_point_size=8.0)
        view_layout = QVBoxLayout(self.merge_view)
        view_layout.setContentsMargins(0, 0, 0, 0)
        view_layout.setSpacing(0)
        view_layout.addWidget(self.step_label)
        view_layout.addWidget(self.pieces)

        # A C++ model: a new sentence swaps the steps in one reset, and the view asks for the rows it shows
        # without calling into Python (a QListWidget built an item for each of hundreds of steps).
        self.step_model = QStringListModel()
        self.step_list = QListView()
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
        self._shown_trace = None
        self.chips.set_chips([])
        self._fill_replay(None)

    def draw(self) -> None:
        trace = self.trace
        if trace is not self._shown_trace:
            self._shown_trace = trace
            self.summary.setText(self._summary_text(trace))
            replay = MergeReplay(trace.tokenization) if trace.tokenization is not None else None
            self.chips.set_chips([Chip(chip.lines, FRAGMENT_FILL if chip.fragment else WHOLE_FILL, chip.gap_before)
                                  for chip in token_chips(trace, replay)])
            self._fill_replay(replay)
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
        if replay is not None:   # tokens added by id have no replay: the merge_view says so on screen
            self.merge_sequence.show_replay(replay)
        figures.append(Figure("tokens_merges", self.merge_sequence if replay is not None else self.merge_view,
                              lambda: replay.csv() if replay is not None else EMPTY_REPLAY_CSV,
                              page_size=self.merge_sequence.page_size if replay is not None else None))
        return figures
