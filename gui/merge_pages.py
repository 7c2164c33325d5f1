"""The tokens_merges figure: the whole BPE merge replay as rows, bytes at the top, tokens at the bottom.

Each row is the sentence's pieces after one merge, the pieces that merge made highlighted; every step
of core.tokens_view.MergeReplay has its row. A long sentence (past WHOLE_ROWS_BYTES) would wrap every row
over many lines: between its bytes and its tokens each row then shows only the words its merge changed.
A replay too tall for one page goes on several pages of about equal height, tokens_merges,
tokens_merges_2, …, each saying which steps it holds: no row is ever left out.
"""
from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from core.page_split import balanced_pages
from core.tokens_view import MergeReplay
from gui.chip_flow import Chip, ChipFlow
from gui.figure_pages import MAX_PAGE_WIDTH, natural_height
from gui.fonts import ui_font
from gui.theme import ink, paint_as_page

MERGED_FILL = QColor(255, 196, 120)     # pieces the row's merge just made
PIECE_FILL = QColor(236, 236, 236)
PAGE_ROWS_HEIGHT = 1200   # logical px of rows on one page: a short sentence's whole replay fits, a long one pages
MIN_PAGE_WIDTH = 480
ROW_SPACING = 3
LABEL_GAP = 8             # between a row's label and its pieces
MARGINS = (8, 6, 8, 6)
PAGE_NAME = "tokens_merges"
WHOLE_ROWS_BYTES = 80     # a sentence up to this long shows all of it on every row; a longer one (whose rows
                          # wrap over many lines: hundreds of pages) shows, between its bytes and its tokens,
                          # only the words each merge changed


def page_name(index: int) -> str:
    """tokens_merges, tokens_merges_2, tokens_merges_3, …"""
    return PAGE_NAME if index == 0 else f"{PAGE_NAME}_{index + 1}"


def whole_rows(replay: MergeReplay) -> bool:
    """Does every row show the whole sentence (else only the words its merge changed)?"""
    return len(replay.pieces_at(0)) <= WHOLE_ROWS_BYTES


def replay_chips(replay: MergeReplay, step: int, whole: bool = True) -> list[Chip]:
    """The pieces after `step` as chips (whole: all of them; else, but for the bytes and the tokens, those of the
    words its merge changed), the pieces it made highlighted, a wider gap before each word."""
    pieces = replay.step(step).pieces if whole or step in (0, replay.n_steps) else replay.changed_words(step)
    return [Chip((piece.text,), MERGED_FILL if piece.fresh else PIECE_FILL, piece.gap_before) for piece in pieces]


class ReplayRow:
    """One step of the replay: its label ("3. ‘t’ + ‘h’") and its pieces."""

    def __init__(self, replay: MergeReplay, step: int, whole: bool) -> None:
        self.step = step
        self.label = QLabel(replay.row_label(step))
        self.label.setFont(ui_font(8.5))
        self.label.setStyleSheet(f"QLabel {{ color: {ink('#333', '#ddd').name()}; }}")
        self.flow = ChipFlow(big_point_size=10.0, small_point_size=8.0)
        self.chips = replay_chips(replay, step, whole)
        self.flow.set_chips(self.chips)

    def one_line_width(self) -> float:
        """The pieces' width on one line (the flow wraps them at any narrower width)."""
        flow = self.flow
        flow.resize(100_000, flow.height())
        return flow.chip_rect(flow.chip_count() - 1).right() + 8


class MergePage(QWidget):
    """One page of the replay: a heading, its rows, and a note saying what the page holds."""

    def __init__(self, heading: str, rows: list[ReplayRow], note: str, width: int) -> None:
        super().__init__()
        paint_as_page(self)
        self.rows = rows
        self.page_width = width
        self.heading = QLabel(heading)
        self.heading.setFont(ui_font(10.5, bold=True))
        self.heading.setWordWrap(True)
        self.note = QLabel(note)
        self.note.setWordWrap(True)
        self.note.setStyleSheet(f"QLabel {{ color: {ink('#555', '#bbb').name()}; }}")
        grid = QGridLayout()
        grid.setHorizontalSpacing(LABEL_GAP)
        grid.setVerticalSpacing(ROW_SPACING)
        grid.setColumnStretch(1, 1)
        for i, row in enumerate(rows):
            grid.addWidget(row.label, i, 0, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
            grid.addWidget(row.flow, i, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(*MARGINS)
        layout.addWidget(self.heading)
        layout.addLayout(grid)
        layout.addWidget(self.note)

    @property
    def steps(self) -> list[int]:
        return [row.step for row in self.rows]

    def page_size(self) -> QSize:
        """The replay's width (its widest row on one line, up to the widest page), as tall as the rows need."""
        return QSize(self.page_width, natural_height(self, self.page_width))


class MergePages:
    """The replay's pages, built once per replay (an export asks for them again and again)."""

    def __init__(self) -> None:
        self._replay: MergeReplay | None = None
        self.pages: list[MergePage] = []

    def show_replay(self, replay: MergeReplay) -> list[MergePage]:
        if replay is not self._replay:
            for page in self.pages:
                page.deleteLater()
            self._replay = replay
            whole = whole_rows(replay)
            rows = [ReplayRow(replay, step, whole) for step in range(replay.n_steps + 1)]
            self.pages = self._paginate(replay, rows, whole)
        return self.pages

    @staticmethod
    def _paginate(replay: MergeReplay, rows: list[ReplayRow], whole: bool) -> list[MergePage]:
        labels = max(row.label.sizeHint().width() for row in rows)
        sides = MARGINS[0] + MARGINS[2] + LABEL_GAP
        width = max(MIN_PAGE_WIDTH, min(MAX_PAGE_WIDTH, round(labels + max(r.one_line_width() for r in rows) + sides)))
        flow_width = width - labels - sides
        heights = [max(row.flow.height_at(flow_width), row.label.sizeHint().height()) + ROW_SPACING for row in rows]
        split = balanced_pages(heights, PAGE_ROWS_HEIGHT)
        unit = replay.row_label(0)
        total = (f"{len(replay.pieces_at(0))} {unit} → {len(replay.pieces_at(replay.n_steps))} tokens "
                 f"in {replay.n_steps} merges")
        pages = []
        for index, page_rows in enumerate(split):
            first, last = page_rows[0], page_rows[-1]
            if len(split) == 1:
                heading, where = f"BPE merge replay: {total}", "every step is in tokens_merges.csv"
            else:
                heading = f"BPE merge replay, page {index + 1} of {len(split)} (steps {first}–{last}): {total}"
                where = (f"steps 0–{replay.n_steps} on {len(split)} pages ({page_name(0)} … "
                         f"{page_name(len(split) - 1)}), and in tokens_merges.csv")
            shown = "" if whole else " Between the bytes and the tokens, each row shows only the words its merge changed."
            note = f"Highlighted: the pieces each merge made; {where}.{shown}"
            pages.append(MergePage(heading, rows[first:last + 1], note, width))
        return pages
