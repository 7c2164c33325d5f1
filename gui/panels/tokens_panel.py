"""Tokens: how the model cut the sentence, and a replay of the BPE merges that cut it.

Top: one chip per token in sentence order (readable piece, id, byte span). Hovering a chip
highlights its characters in the sentence bar; clicking makes it the query token everywhere.
Bottom: the merge replay. Step 0 is the sentence as bytes; each further step applies the model's
next merge (lowest rank first) everywhere it occurs, as the first seed does by hand for 订单.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QListWidget, QPushButton, QScrollArea, QSlider,
                               QSplitter, QStackedWidget, QVBoxLayout, QWidget)

from core.raw_export import csv_text
from core.tokenizer import Tokenization
from gui.chip_flow import Chip, ChipFlow
from gui.fonts import ui_font
from gui.panels.base import Figure, Panel

WHOLE_FILL = QColor(222, 233, 247)      # a token made of whole characters
FRAGMENT_FILL = QColor(252, 232, 200)   # a token holding only part of a character's bytes
MERGED_FILL = QColor(255, 196, 120)     # pieces the current merge step just made
PIECE_FILL = QColor(236, 236, 236)
EMPTY_TEXT = "Type a sentence above to see how the model cuts it into tokens."


def _byte_length(tokenization: Tokenization, piece: str) -> int:
    return len(tokenization.piece_bytes(piece))


def _piece_starts(tokenization: Tokenization, pieces) -> list[int]:
    """Byte offset where each piece starts in the sentence's UTF-8."""
    starts, offset = [], 0
    for piece in pieces:
        starts.append(offset)
        offset += _byte_length(tokenization, piece)
    return starts


def word_start_offsets(tokenization: Tokenization) -> set[int]:
    """Byte offsets where a pre-token (a word, a number, a space run...) begins; merges never cross them."""
    starts = _piece_starts(tokenization, tokenization.initial_pieces)
    return {starts[i] for i in tokenization.word_starts if i < len(starts)}


def pieces_at_step(tokenization: Tokenization, step: int) -> tuple[str, ...]:
    """Step 0: one piece per byte; step k: the pieces after the k-th merge."""
    return tokenization.initial_pieces if step == 0 else tokenization.steps[step - 1].pieces


def newly_merged(tokenization: Tokenization, step: int) -> list[bool]:
    """For each piece after `step`, whether that step's merge created it."""
    pieces = pieces_at_step(tokenization, step)
    if step == 0:
        return [False] * len(pieces)
    before = dict(zip(_piece_starts(tokenization, pieces_at_step(tokenization, step - 1)),
                      pieces_at_step(tokenization, step - 1)))
    merged = tokenization.steps[step - 1].merged
    return [piece == merged and before.get(start) != piece
            for start, piece in zip(_piece_starts(tokenization, pieces), pieces)]


def step_caption(tokenization: Tokenization, step: int) -> str:
    total = len(tokenization.steps)
    pieces = pieces_at_step(tokenization, step)
    if step == 0:
        unit = "bytes" if tokenization.alphabet.byte_level else "characters"  # SentencePiece starts from characters
        return f"Step 0 of {total}: the sentence as {len(pieces)} {unit}, before any merge"
    s, shown = tokenization.steps[step - 1], tokenization.display_piece
    return (f"Step {step} of {total}: merge rank {s.rank}: ‘{shown(s.left)}’ + ‘{shown(s.right)}’"
            f" → ‘{shown(s.merged)}’ ({s.count}×), {len(pieces)} pieces")


def merges_csv(tokenization: Tokenization | None) -> str:
    """One row per step: the merge applied and every piece after it (readable form, | between pieces)."""
    rows: list[list] = [["step", "rank", "left", "right", "merged", "count", "n_pieces", "pieces"]]
    if tokenization is not None:
        initial = tokenization.display_pieces(tokenization.initial_pieces)
        rows.append([0, "", "", "", "", "", len(initial), " | ".join(initial)])
        for k, s in enumerate(tokenization.steps, start=1):
            shown = tokenization.display_pieces(s.pieces)
            piece = tokenization.display_piece
            rows.append([k, s.rank, piece(s.left), piece(s.right), piece(s.merged), s.count, len(shown),
                         " | ".join(shown)])
    return csv_text(rows)


def _paint_white(widget: QWidget) -> None:
    widget.setAutoFillBackground(True)
    palette = widget.palette()
    palette.setColor(widget.backgroundRole(), QColor("white"))
    widget.setPalette(palette)


class TokensPanel(Panel):
    title = "Tokens"
    object_name = "tokens"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._shown_trace = None       # the trace the chips were built for (selection changes only re-mark)
        self._replay_tokenization: Tokenization | None = None
        self._step_follows_end = True  # while on the last step, a new sentence shows its last step too
        self._build()
        self.refresh()

    # ------------------------------------------------------------ widgets
    def _build(self) -> None:
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.chips = ChipFlow(big_point_size=12.0, small_point_size=8.0)
        self.chips.setObjectName("tokens_chips")
        self.chips.sigHovered.connect(self._on_chip_hovered)
        self.chips.sigClicked.connect(lambda index: self.sigSelect.emit({"query": index, "key": None}))

        splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter = splitter
        splitter.addWidget(self._scrolled(self.chips))
        splitter.addWidget(self._build_replay())
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([1000, 1000])  # proportions: chips and replay share the height

        self.empty = QLabel(EMPTY_TEXT)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(splitter)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.summary)
        layout.addWidget(self.stack, 1)

    @staticmethod
    def _scrolled(widget: QWidget) -> QScrollArea:
        """widget at the top of a white, vertically scrolling area (it keeps its own height)."""
        holder = QWidget()
        _paint_white(holder)
        layout = QVBoxLayout(holder)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(widget)
        layout.addStretch(1)
        area = QScrollArea()
        area.setWidget(holder)
        area.setWidgetResizable(True)
        area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        return area

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

        controls = QHBoxLayout()
        controls.addWidget(title)
        controls.addWidget(self.back_button)
        controls.addWidget(self.slider, 1)
        controls.addWidget(self.next_button)

        # What the tokens_merges figure shows: the caption and the pieces after the current step.
        self.merge_view = QWidget()
        self.merge_view.setObjectName("tokens_merges")
        _paint_white(self.merge_view)
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
        body.addWidget(self._scrolled(self.merge_view))
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
    def refresh(self) -> None:
        trace = self.trace
        if trace is None:
            self._shown_trace = None
            self.summary.setText("")
            self.chips.set_chips([], EMPTY_TEXT)
            self._fill_replay(None)
            self.stack.setCurrentWidget(self.empty)
            return
        self.stack.setCurrentIndex(1)
        if trace is not self._shown_trace:
            self._shown_trace = trace
            self.summary.setText(self._summary_text(trace))
            self.chips.set_chips(self._token_chips(trace))
            self._fill_replay(trace.tokenization)
        self.chips.set_marked(self.selection.query_index(trace.n_tokens))

    @staticmethod
    def _summary_text(trace) -> str:
        tok = trace.tokenization
        size = f" · {len(tok.text.encode('utf-8'))} bytes · {len(tok.text)} characters" if tok is not None else ""
        return (f"<b>{trace.n_tokens} tokens</b>{size}. Hover a token to see its characters in the sentence; "
                f"click it to make it the query token.")

    @staticmethod
    def _token_chips(trace) -> list[Chip]:
        tok = trace.tokenization
        if tok is None:  # tokens appended by id: no byte spans to show
            return [Chip((label, f"id {int(i)}", "bytes —"), WHOLE_FILL)
                    for label, i in zip(trace.labels(), trace.input_ids)]
        words = word_start_offsets(tok)
        return [Chip((t.display, f"id {t.id}", f"bytes {t.byte_start}–{t.byte_end}"),
                     FRAGMENT_FILL if "‹" in t.display else WHOLE_FILL,
                     gap_before=t.byte_start in words)
                for t in tok.tokens]

    def _fill_replay(self, tokenization: Tokenization | None) -> None:
        steps = len(tokenization.steps) if tokenization is not None else 0
        self.step_list.blockSignals(True)
        self.step_list.clear()
        if tokenization is not None:
            self.step_list.addItem("0  bytes")
            shown = tokenization.display_piece
            self.step_list.addItems([f"{k}  #{s.rank}  {shown(s.left)} + {shown(s.right)}  ×{s.count}"
                                     for k, s in enumerate(tokenization.steps, start=1)])
        self.step_list.blockSignals(False)
        self._replay_tokenization = tokenization
        self.slider.blockSignals(True)
        self.slider.setRange(0, steps)
        if self._step_follows_end:
            self.slider.setValue(steps)
        self.slider.blockSignals(False)
        self._show_step(self.slider.value())

    def _show_step(self, step: int) -> None:
        tok = self._replay_tokenization
        enabled = tok is not None
        for widget in (self.slider, self.back_button, self.next_button, self.step_list):
            widget.setEnabled(enabled)
        if tok is None:
            self.step_label.setText("" if self.trace is None else
                                    "No merge replay: these tokens were added by id, not typed.")
            self.pieces.set_chips([])
            return
        self._step_follows_end = step == len(tok.steps)
        words = word_start_offsets(tok)
        pieces = pieces_at_step(tok, step)
        shown = tok.display_pieces(pieces)
        fresh = newly_merged(tok, step)
        starts = _piece_starts(tok, pieces)
        self.pieces.set_chips([Chip((text,), MERGED_FILL if new else PIECE_FILL, gap_before=start in words)
                               for text, new, start in zip(shown, fresh, starts)])
        self.step_label.setText(step_caption(tok, step))
        self.step_list.blockSignals(True)
        self.step_list.setCurrentRow(step)
        self.step_list.scrollToItem(self.step_list.currentItem(), QListWidget.ScrollHint.PositionAtCenter)
        self.step_list.blockSignals(False)

    def _on_chip_hovered(self, index: int) -> None:
        tok = self.trace.tokenization if self.trace is not None else None
        if index < 0 or tok is None:
            self.sigHoverText.emit(-1, -1)
        else:
            token = tok.tokens[index]
            self.sigHoverText.emit(token.char_start, token.char_end)

    # ------------------------------------------------------------ export
    def figures(self) -> list[Figure]:
        return [Figure("tokens_chips", self.chips, self._tokens_table),
                Figure("tokens_merges", self.merge_view, lambda: merges_csv(self._replay_tokenization))]

    def _tokens_table(self) -> str:
        rows: list[list] = [["position", "id", "piece", "byte_start", "byte_end", "char_start", "char_end",
                             "utf8_hex"]]
        trace = self.trace
        if trace is not None and trace.tokenization is not None:
            rows += [[i, t.id, t.display, t.byte_start, t.byte_end, t.char_start, t.char_end, t.raw.hex(" ")]
                     for i, t in enumerate(trace.tokenization.tokens)]
        elif trace is not None:
            rows += [[i, int(token_id), trace.label(i), "", "", "", "", ""]
                     for i, token_id in enumerate(trace.input_ids)]
        return csv_text(rows)
