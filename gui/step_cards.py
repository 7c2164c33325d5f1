"""The Step-by-step panel's widgets: a card per stage (title, formula, note, a compact table of the
shown rows and columns, a heatmap of the whole matrix with the shown window marked) and the
overview of every stage on one page (the step_by_step figure)."""
from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QImage, QPainter, QPalette, QPen
from PySide6.QtWidgets import (QAbstractItemView, QFrame, QHBoxLayout, QHeaderView, QLabel, QGridLayout,
                               QSizePolicy, QTableView, QVBoxLayout, QWidget)

from core.steps import Step
from gui.figure_pages import MAX_PAGE_WIDTH, PAGE_WIDTH, natural_height
from gui.theme import ink, page_background
from gui.fonts import ui_font
from gui.plotting import DIVERGING, SEQUENTIAL, colormap, masked_colour
from gui.text_fit import elide

QUERY_TINT = QColor(255, 236, 179)    # the selected query row
KEY_TINT = QColor(200, 225, 255)      # the selected key column (or this head's columns)
BOTH_TINT = QColor(255, 205, 150)     # the selected cell itself
FORMULA_FAMILIES = ("DejaVu Sans", "Noto Sans", "Arial")
FORMULA_INK = ("#1a4d8f", "#8fb8f0")  # (on white, on the dark theme)
NUMBER_COLUMN, GAP_COLUMN = 52, 18    # px: a column of numbers ("-0.00385"), a column of "…"
MIN_COLUMNS = 4                       # number columns a table shows however narrow the panel
CARD_CHROME = 36                      # px of a card's width that its table cannot use: margins, frames
PAGE_ROWS = 24                        # rows a step's figure shows (the dock: core.steps.MAX_TOKENS_SHOWN); a
# sentence for a slide fits (more rows cost export time and are not legible at slide width)


def format_value(v: float) -> str:
    """About 3 significant digits; the mask's −∞ spelled out."""
    if v != v:  # NaN: a blank cell
        return ""
    if math.isinf(v):  # the mask's −∞, or an overflow
        return "−∞" if v < 0 else "∞"
    if v == 0:
        return "0"
    if abs(v) < 1e-3 or abs(v) >= 1e5:  # "-1.6e-4", not "-0.000158": fits a narrow column
        mantissa, exponent = f"{v:.2e}".split("e")
        return f"{float(mantissa):.3g}e{int(exponent)}"
    return f"{v:.3g}"


def with_gaps(indices: Sequence[int], total: int | None = None) -> list[int | None]:
    """[0, 1, 5, 6] -> [0, 1, None, 5, 6]: a gap marker wherever shown indices skip some, and at the end
    when `total` says there are more after the last one."""
    out: list[int | None] = []
    for i in map(int, indices):
        if out and out[-1] is not None and i != out[-1] + 1:
            out.append(None)
        out.append(i)
    if total is not None and out and out[-1] is not None and out[-1] < total - 1:
        out.append(None)
    return out


def left_out(shown: Sequence[int | None], position: int, total: int) -> int:
    """How many indices the gap at `position` of with_gaps' list stands for."""
    before = shown[position - 1] if position > 0 else -1
    after = shown[position + 1] if position + 1 < len(shown) else total
    return after - before - 1


def two_lines(label: str) -> str:
    """"12 ␣because" -> "12\n␣because": position above token (elided as every token label is), for a narrow column."""
    position, _, token = label.partition(" ")
    return f"{position}\n{elide(token)}"


def runs(indices: Sequence[int]) -> list[tuple[int, int]]:
    """[3, 4, 5, 9] -> [(3, 5), (9, 9)]: contiguous blocks, outlined as one rectangle each."""
    out: list[tuple[int, int]] = []
    for i in sorted(map(int, indices)):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


DISPLAY, TOOLTIP, BACKGROUND, ALIGNMENT = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole,
                                          Qt.ItemDataRole.BackgroundRole, Qt.ItemDataRole.TextAlignmentRole)
FOREGROUND = Qt.ItemDataRole.ForegroundRole
TINTED_TEXT = QColor(20, 20, 20)
RIGHT, CENTRE = int(Qt.AlignRight | Qt.AlignVCenter), int(Qt.AlignCenter)


class WindowTableModel(QAbstractTableModel):
    """A window onto a large matrix: chosen rows and columns, gaps shown as ⋮ / …, no per-cell objects.

    Texts and tints are worked out once per update, so data() (called per cell and role on
    every paint) is a lookup.
    """

    def __init__(self) -> None:
        super().__init__()
        self._values = np.zeros((0, 0), np.float32)
        self._rows: list[int | None] = []
        self._cols: list[int | None] = []
        self._row_labels: Sequence[str] = ()
        self._col_labels: Sequence[str] = ()
        self._text: list[list[str]] = []
        self._tint: list[list[QColor | None]] = []
        self._headers: dict[Qt.Orientation, list[str]] = {Qt.Horizontal: [], Qt.Vertical: []}
        self._hl_rows: frozenset[int] = frozenset()
        self._hl_cols: frozenset[int] = frozenset()

    def set_window(self, values: np.ndarray, rows: Sequence[int], cols: Sequence[int],
                   row_labels: Sequence[str], col_labels: Sequence[str],
                   highlight_rows: Sequence[int] = (), highlight_cols: Sequence[int] = (),
                   token_columns: bool = False) -> None:
        """token_columns: column labels are "position token", drawn on two lines to fit a narrow column."""
        new_rows, new_cols = with_gaps(rows), with_gaps(cols, values.shape[1])
        # Same window as before (the usual case while typing): new numbers, no reset. A reset makes the
        # view rebuild its headers and the whole page relayout.
        same_shape = _gap_pattern(new_rows) == _gap_pattern(self._rows) and \
            _gap_pattern(new_cols) == _gap_pattern(self._cols)
        if not same_shape:
            self.beginResetModel()
        self._values = values
        self._rows, self._cols = new_rows, new_cols
        self._row_labels, self._col_labels = row_labels, col_labels
        hl_rows, hl_cols = frozenset(highlight_rows), frozenset(highlight_cols)
        self._hl_rows, self._hl_cols = hl_rows, hl_cols
        self._text = [[self._cell_text(r, c) for c in self._cols] for r in self._rows]
        self._tint = [[_tint(r in hl_rows, c in hl_cols) for c in self._cols] for r in self._rows]
        column_header = two_lines if token_columns else elide
        self._headers = {Qt.Horizontal: [("…" if c is None else column_header(col_labels[c])) for c in self._cols],
                         Qt.Vertical: [("⋮" if r is None else elide(row_labels[r])) for r in self._rows]}
        if not same_shape:
            self.endResetModel()
        elif self._rows and self._cols:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, len(self._cols) - 1))
            self.headerDataChanged.emit(Qt.Vertical, 0, len(self._rows) - 1)
            self.headerDataChanged.emit(Qt.Horizontal, 0, len(self._cols) - 1)

    def _cell_text(self, r: int | None, c: int | None) -> str:
        if r is None:
            return "⋮"
        return "…" if c is None else format_value(float(self._values[r, c]))

    def source_index(self, index: QModelIndex) -> tuple[int | None, int | None]:
        """The full-matrix (row, column) a displayed cell stands for (None for a gap)."""
        return self._rows[index.row()], self._cols[index.column()]

    def first_highlight(self) -> tuple[int, int]:
        """Display (row, column) of the first tinted cell's row and column (0 where none)."""
        row = next((i for i, r in enumerate(self._rows) if r in self._hl_rows), 0)
        col = next((j for j, c in enumerate(self._cols) if c in self._hl_cols), 0)
        return row, col

    def is_gap_column(self, column: int) -> bool:
        return self._cols[column] is None

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 (Qt's name)
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._cols)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = DISPLAY):
        row, col = index.row(), index.column()
        if role == DISPLAY:
            return self._text[row][col]
        if role == BACKGROUND:
            return self._tint[row][col]
        if role == FOREGROUND and self._tint[row][col] is not None:
            return TINTED_TEXT   # dark text on the light tints, in the dark theme too
        if role == ALIGNMENT:
            return CENTRE if self._rows[row] is None or self._cols[col] is None else RIGHT
        if role == TOOLTIP:
            r, c = self._rows[row], self._cols[col]
            if r is None or c is None:
                return self._gap_tooltip(row, col)
            v = float(self._values[r, c])
            return f"{self._row_labels[r]} · {self._col_labels[c]}\n{format_value(v) if v == -math.inf else repr(v)}"
        return None

    def _gap_tooltip(self, row: int, col: int) -> str:
        if self._cols[col] is None:
            n, what = left_out(self._cols, col, self._values.shape[1]), "columns"
        else:
            n, what = left_out(self._rows, row, self._values.shape[0]), "rows"
        return f"{n} {what} left out here (all of them are in the CSV export)"

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = DISPLAY):  # noqa: N802
        if role == DISPLAY:
            return self._headers[orientation][section]
        if role == TOOLTIP:
            i = (self._cols if orientation == Qt.Horizontal else self._rows)[section]
            if i is None:
                return self._gap_tooltip(0, section) if orientation == Qt.Horizontal else self._gap_tooltip(section, 0)
            return (self._col_labels if orientation == Qt.Horizontal else self._row_labels)[i]
        return None


def _gap_pattern(indices: list[int | None]) -> list[bool]:
    """Where the gaps are: two windows with the same pattern draw the same grid, only the labels differ."""
    return [i is None for i in indices]


def _tint(in_row: bool, in_col: bool) -> QColor | None:
    if in_row and in_col:
        return BOTH_TINT
    return QUERY_TINT if in_row else KEY_TINT if in_col else None


class CompactTable(QTableView):
    """A table exactly as tall as its rows (the page scrolls, not the table); wide ones scroll sideways."""

    def __init__(self, model: QAbstractTableModel) -> None:
        super().__init__()
        self.setModel(model)
        self.setFont(ui_font(8.5))
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAsNeeded)
        self.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.NoSelection)
        self.setWordWrap(False)
        for header in (self.horizontalHeader(), self.verticalHeader()):
            header.setFont(ui_font(8))
            header.setHighlightSections(False)
        self.horizontalHeader().setDefaultSectionSize(NUMBER_COLUMN)
        self.horizontalHeader().setMinimumSectionSize(16)
        self.verticalHeader().setDefaultSectionSize(20)
        self.verticalHeader().setSectionResizeMode(QHeaderView.Fixed)
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
        self._content_width = 0
        self._header_height = self.horizontalHeader().fontMetrics().height() + 8
        self._header_heights: dict[int, int] = {}
        model.modelReset.connect(self._fit)
        model.headerDataChanged.connect(self._fit_row_header)

    def _fit(self) -> None:
        self._set_column_widths()
        model = self.model()
        lines = max((str(model.headerData(c, Qt.Horizontal) or "").count("\n") + 1
                     for c in range(model.columnCount())), default=1)
        if lines not in self._header_heights:  # QHeaderView.sizeHint walks every section: measure once per line count
            self._header_heights[lines] = self.horizontalHeader().sizeHint().height()
        self._header_height = self._header_heights[lines]
        self._update_content_width()
        self.setFixedHeight(self._content_height())

    def _set_column_widths(self) -> None:
        """Gap columns narrow; number columns NUMBER_COLUMN px, widened up to 1.8x to use the card's width."""
        model, default = self.model(), self.horizontalHeader().defaultSectionSize()
        gaps = [model.is_gap_column(c) for c in range(model.columnCount())]
        numbers = gaps.count(False)
        room = self.width() - self._row_header_width() - 2 * self.frameWidth() - GAP_COLUMN * gaps.count(True)
        width = int(min(max(default, room / max(numbers, 1)), 1.8 * default))
        for c, gap in enumerate(gaps):
            self.setColumnWidth(c, GAP_COLUMN if gap else width)

    def scroll_to_highlight(self) -> None:
        """A table wider than the card scrolls sideways to the selected key's column."""
        if self.width() >= self._content_width or not self.model().columnCount():
            return  # everything fits: scrollTo would only cost a layout pass
        row, col = self.model().first_highlight()
        self.scrollTo(self.model().index(row, col), QAbstractItemView.PositionAtCenter)

    def _fit_row_header(self, orientation: Qt.Orientation) -> None:
        """Token labels change with the sentence: keep the row header as wide as the longest."""
        if orientation == Qt.Vertical:
            self._update_content_width()

    def _update_content_width(self) -> None:
        width = self._row_header_width() + self.horizontalHeader().length() + 2 * self.frameWidth()
        if width != self._content_width:  # a geometry update relayouts the whole page of cards: only when needed
            self._content_width = width
            self.updateGeometry()

    def _row_header_width(self) -> int:
        """From the font, not QHeaderView.sizeHint (which walks every section and is slow)."""
        header, model = self.verticalHeader(), self.model()
        metrics = header.fontMetrics()
        widest = max((metrics.horizontalAdvance(model.headerData(r, Qt.Vertical) or "")
                      for r in range(model.rowCount())), default=0)
        header.setFixedWidth(widest + 12)
        return widest + 12

    def _content_height(self) -> int:
        scroll = self.horizontalScrollBar().sizeHint().height() if self.width() < self._content_width else 0
        return (self._header_height + self.model().rowCount() * self.verticalHeader().defaultSectionSize()
                + 2 * self.frameWidth() + scroll)

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(self._content_width, self._content_height())

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._set_column_widths()
        self.setFixedHeight(self._content_height())  # the scroll bar comes and goes with the width


@functools.lru_cache(maxsize=None)
def _lookup_table(name: str) -> np.ndarray:  # -> [256, 4] uint8
    return np.asarray(colormap(name).getLookupTable(0.0, 1.0, 256, alpha=True), np.uint8)


def matrix_rgba(values: np.ndarray, signed: bool) -> tuple[np.ndarray, tuple[float, float]]:  # [R, C] -> [R, C, 4]
    """Colours for a matrix: signed values on a symmetric diverging scale, weights on [0, 1]; −∞ grey."""
    masked = np.isneginf(values)
    if signed:
        top = float(np.abs(values[~masked]).max(initial=0.0)) or 1.0
        levels, lut = (-top, top), _lookup_table(DIVERGING)
    else:
        levels, lut = (0.0, 1.0), _lookup_table(SEQUENTIAL)
    scaled = np.where(masked, 0.0, (values - levels[0]) * (255.0 / (levels[1] - levels[0])))
    rgba = lut[np.clip(scaled, 0, 255).astype(np.uint8)]
    rgba[masked] = masked_colour()
    return np.ascontiguousarray(rgba), levels


class HeatmapThumb(QWidget):
    """The whole matrix as one image, the shown rows/columns ticked on its edges, the selection outlined."""

    IMAGE = QSize(130, 96)
    MARGIN = 8

    def __init__(self) -> None:
        super().__init__()
        self._image = QImage()
        self._shape = (0, 0)
        self._rows: Sequence[int] = ()
        self._cols: Sequence[int] = ()
        self._hl_rows: Sequence[int] = ()
        self._hl_cols: Sequence[int] = ()
        self._caption = ""
        self._scale = ""
        self.setFont(ui_font(7.5))
        self.setFixedSize(self.IMAGE.width() + 2 * self.MARGIN, self.IMAGE.height() + 2 * self.MARGIN + 30)

    def set_matrix(self, values: np.ndarray, signed: bool, rows: Sequence[int], cols: Sequence[int],
                   highlight_rows: Sequence[int], highlight_cols: Sequence[int], caption: str) -> None:
        rgba, levels = matrix_rgba(values, signed)  # [R, C, 4]
        h, w = rgba.shape[:2]
        # converted once to the screen's format here, not on every paint
        self._image = QImage(rgba.data, w, h, 4 * w, QImage.Format_RGBA8888).convertToFormat(
            QImage.Format_ARGB32_Premultiplied)
        self._shape = (h, w)
        self._rows, self._cols = rows, cols
        self._hl_rows, self._hl_cols = highlight_rows, highlight_cols
        self._caption = caption
        self._scale = f"colour: {format_value(levels[0])} … {format_value(levels[1])}" + ("" if signed else " (weight)")
        self.update()

    def _image_rect(self) -> QRectF:
        return QRectF(self.MARGIN, self.MARGIN, self.IMAGE.width(), self.IMAGE.height())

    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.fillRect(self.rect(), page_background())
        if self._image.isNull():
            return
        area = self._image_rect()
        painter.drawImage(area, self._image)  # nearest-neighbour: cells stay crisp
        rows, cols = self._shape
        cell_h, cell_w = area.height() / rows, area.width() / cols
        painter.setPen(QPen(ink("#282828", "#d0d0d0"), 1))
        for r in self._rows:  # ticks left of the image: the rows the table shows
            y = area.top() + (r + 0.5) * cell_h
            painter.drawLine(int(area.left() - 5), int(y), int(area.left() - 1), int(y))
        for c in self._cols:
            x = area.left() + (c + 0.5) * cell_w
            painter.drawLine(int(x), int(area.top() - 5), int(x), int(area.top() - 1))
        painter.setPen(QPen(QColor(220, 30, 30), 1.5))
        painter.setBrush(Qt.NoBrush)
        for first, last in runs(self._hl_rows):
            painter.drawRect(QRectF(area.left(), area.top() + first * cell_h, area.width(),
                                    max((last - first + 1) * cell_h, 1.5)))
        for first, last in runs(self._hl_cols):
            painter.drawRect(QRectF(area.left() + first * cell_w, area.top(),
                                    max((last - first + 1) * cell_w, 1.5), area.height()))
        painter.setPen(ink("#464646", "#c8c8c8"))
        text_top = int(area.bottom()) + 3
        caption = painter.fontMetrics().elidedText(self._caption, Qt.ElideMiddle, self.width() - 2)
        painter.drawText(QRectF(0, text_top, self.width(), 14), Qt.AlignHCenter, caption)
        painter.drawText(QRectF(0, text_top + 13, self.width(), 14), Qt.AlignHCenter, self._scale)


def label(point_size: float, bold: bool = False, colour: tuple[str, str] | None = None, formula: bool = False,
           wrap: bool = True) -> QLabel:
    label = QLabel()
    font = ui_font(point_size, bold)
    if formula:  # a Latin face with ·, ᵀ, √, ∞ and Σ; the CJK fallback draws · full-width
        font.setFamilies([*FORMULA_FAMILIES, *font.families()])
    label.setFont(font)
    label.setWordWrap(wrap)  # a wrapped label costs a text layout on every relayout of the page
    label.setTextInteractionFlags(Qt.TextSelectableByMouse)
    if colour:
        palette = label.palette()
        palette.setColor(QPalette.WindowText, ink(*colour))
        label.setPalette(palette)
    return label


def fill(widget: QWidget, colour: QColor) -> None:
    palette = widget.palette()
    palette.setColor(QPalette.Window, colour)
    widget.setPalette(palette)
    widget.setAutoFillBackground(True)


class Card(QFrame):
    """Title, formula and note with a heatmap of the whole matrix beside them; the numeric table below,
    with the card's full width (a normal dock is narrower than a table and a heatmap side by side)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFrameShape(QFrame.StyledPanel)
        # palettes, not style sheets: a style sheet routes every child's painting through the slow QStyleSheetStyle
        fill(self, page_background())
        self.title = label(10.5, bold=True, wrap=False)
        self.formula = label(10, colour=FORMULA_INK, formula=True, wrap=False)
        self.note = label(8.5, colour=("#444", "#c0c0c0"), formula=True)
        self.elided = label(8, colour=("#777", "#a0a0a0"))   # wrapped: on one line it made the card wider than a dock
        self.model = WindowTableModel()
        self.table = CompactTable(self.model)
        self.heatmap = HeatmapThumb()
        texts = QVBoxLayout()
        texts.setSpacing(3)
        for widget in (self.title, self.formula, self.note, self.elided):
            texts.addWidget(widget)
        texts.addStretch(1)
        top = QHBoxLayout()
        top.setSpacing(12)
        top.addLayout(texts, 1)
        top.addWidget(self.heatmap, 0, Qt.AlignTop)
        body = QHBoxLayout()
        body.addWidget(self.table, 0, Qt.AlignTop | Qt.AlignLeft)
        body.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 10)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addLayout(body)
        self._step: Step | None = None
        self._columns = 0   # the number columns the table was filled for
        self._on_page = False

    def set_on_page(self, on_page: bool) -> None:
        """On a page the table has room for every row of a sentence (up to PAGE_ROWS), not the dock's window."""
        self._on_page = on_page
        if self._step is not None:
            self._show_window(self.columns_that_fit())

    def show_step(self, number: int, step: Step) -> None:
        self.title.setText(f"{number}. {step.title}")
        self.formula.setText(step.formula)
        self.note.setText(step.note)
        self._step = step
        self._show_window(self.columns_that_fit())

    def columns_that_fit(self) -> int:
        """How many number columns the table has room for at the card's width, beside its row labels and
        two "…" columns (the table then widens them to fill the width exactly)."""
        room = self.width() - CARD_CHROME - self._row_header_px()
        every = self._step.values.shape[1]
        if room >= every * NUMBER_COLUMN:   # all of them: no "…" columns to leave room for
            return every
        return max(MIN_COLUMNS, (room - 2 * GAP_COLUMN) // NUMBER_COLUMN)

    def _row_header_px(self) -> int:
        metrics = QFontMetrics(self.table.verticalHeader().font())
        step = self._step.with_rows(PAGE_ROWS) if self._on_page else self._step
        return max((metrics.horizontalAdvance(elide(step.row_labels[r])) for r in step.rows), default=0) + 12

    def page_size(self) -> QSize:
        """The card's page: PAGE_WIDTH, wider (up to MAX_PAGE_WIDTH) for a table of keys to show every key
        of a sentence; as high as its table then is."""
        if self._step is None:   # a table filled by hand (the dot product): as wide as its content
            width = self._content_width()
            return QSize(width, natural_height(self, width))
        width = PAGE_WIDTH
        if self._step.col_axis == "keys":
            every_key = CARD_CHROME + self._row_header_px() + self._step.values.shape[1] * NUMBER_COLUMN
            width = max(PAGE_WIDTH, min(MAX_PAGE_WIDTH, every_key))
        return QSize(width, natural_height(self, width))

    def _content_width(self) -> int:
        """The title and formula on one line beside the heatmap, or the table, whichever is wider: the note
        wraps within that, and no blank band is left beside the heatmap."""
        texts = max(self.title.sizeHint().width(), self.formula.sizeHint().width())
        top = texts + self.layout().itemAt(0).layout().spacing() + self.heatmap.width()
        return max(top, self.table.sizeHint().width()) + CARD_CHROME

    def _show_window(self, columns: int) -> None:
        step = self._step.with_columns(columns)
        if self._on_page:
            step = step.with_rows(PAGE_ROWS)
        self._columns = columns
        self.elided.setText(step.elided)
        self.elided.setVisible(bool(step.elided))
        self.model.set_window(step.values, step.rows, step.cols, step.row_labels, step.col_labels,
                              step.highlight_rows, step.highlight_cols, token_columns=step.col_axis == "keys")
        self.table.scroll_to_highlight()
        r, c = step.values.shape
        self.heatmap.set_matrix(step.values, step.signed, step.rows, step.cols, step.highlight_rows,
                                step.highlight_cols, f"{r} {step.row_axis} × {c} {step.col_axis}")

    def resizeEvent(self, event) -> None:  # noqa: N802
        """Wider or narrower (the dock, or an export laying the card out for its page): the table shows
        as many dims as now fit."""
        super().resizeEvent(event)
        if self._step is not None and event.size().width() != event.oldSize().width():
            columns = self.columns_that_fit()
            if columns != self._columns:
                self._show_window(columns)
                # lay the new table out at once: its height (a scroll bar or not) follows its width, and
                # whoever resized the card (an export measuring the page) reads that height next
                self.layout().invalidate()
                self.layout().activate()


class StepOverview(QWidget):
    """The step_by_step figure: every step as a tile (title, formula, the whole matrix as a heatmap)
    in a grid, the calculation on one page; each step's numbers are its own figure (step_01_x, …)."""

    COLUMNS = 4

    def __init__(self) -> None:
        super().__init__()
        fill(self, page_background())
        self.heading = label(10.5, bold=True)
        self._grid = QGridLayout()
        self._grid.setHorizontalSpacing(14)
        self._grid.setVerticalSpacing(10)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 10)
        layout.addWidget(self.heading)
        layout.addLayout(self._grid)
        self._tiles: list[tuple[QLabel, QLabel, HeatmapThumb]] = []

    def show_calculation(self, heading: str, steps: Sequence[Step]) -> None:
        self.heading.setText(heading)
        while len(self._tiles) < len(steps):
            self._tiles.append(self._tile(len(self._tiles)))
        for i, (title, formula, heatmap) in enumerate(self._tiles):
            shown = i < len(steps)
            for widget in (title, formula, heatmap):
                widget.setVisible(shown)
            if shown:
                step = steps[i]
                r, c = step.values.shape
                title.setText(f"{i + 1}. {step.title}")
                formula.setText(step.formula)
                heatmap.set_matrix(step.values, step.signed, (), (), step.highlight_rows, step.highlight_cols,
                                   f"{r} {step.row_axis} × {c} {step.col_axis}")

    def _tile(self, index: int) -> tuple[QLabel, QLabel, HeatmapThumb]:
        title, formula, heatmap = label(9, bold=True), label(8.5, colour=FORMULA_INK, formula=True), HeatmapThumb()
        tile = QVBoxLayout()
        tile.setSpacing(2)
        for widget in (title, formula):
            tile.addWidget(widget)
        tile.addWidget(heatmap, 0, Qt.AlignHCenter)
        tile.addStretch(1)
        self._grid.addLayout(tile, index // self.COLUMNS, index % self.COLUMNS)
        return title, formula, heatmap

