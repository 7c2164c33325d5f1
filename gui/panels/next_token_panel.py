"""Next token: what the model would say after one position, and what sampling could pick from it.

The chart (gui.candidate_bars) shows the most likely candidates as horizontal bars, most likely
on top. Each row has two bars: a wide pale one, the softmax of the logits at temperature 1 (the
model's own distribution), and a narrow solid one, the distribution sampling draws from after
temperature, top-k and top-p (core.sampling.candidate_distribution). Clicking a bar, or pressing
1–9 / Enter on the chart, asks the controller to append that token; the panel never runs the model.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QButtonGroup, QDoubleSpinBox, QGridLayout, QHBoxLayout, QLabel,
                               QPushButton, QRadioButton, QSizePolicy, QSpinBox, QVBoxLayout, QWidget)

from core.experiment_runs import next_token_change
from core.sampling import Candidates, SamplingSettings, candidates_csv, ranked, top_candidates
from core.trace_fields import logits_from
from gui import plotting  # noqa: F401  (pyqtgraph's row-major, white-background configuration)
from gui.candidate_bars import AFTER_COLOUR, RAW_COLOUR, RULED_OUT_EDGE, CandidateBars
from gui.figure_frame import scrolling
from gui.theme import paint_as_page
from gui.fonts import ui_font
from gui.intervention_banner import interventions_text
from gui.intervention_effect_view import InterventionEffectView
from gui.panels.base import Figure, Panel
from gui.steady_label import SteadyLabel
from gui.text_fit import elide

DEFAULT_BARS = 10
HEADER_LEAST_WIDTH = 360   # px; the page is wider still (its controls), so no layout ever gives it less
LABEL_COLUMNS = 16                     # longer pieces are elided on the axis (whole in tooltip and CSV)


def format_probability(p: float) -> str:
    """Percent with one decimal from 1% up; below, two significant digits (0.15%, 0.0012%): a flat
    distribution's candidates all read "0.1%" with one decimal while their bars differ by half."""
    if p == 0:
        return "0"
    if p < 0.01:
        return f"{p * 100:#.2g}%"
    return f"{p:.1%}"


class NextTokenPanel(Panel):
    title = "Next token"
    object_name = "next_token"
    figure_names = {"next_token_bars": "", "next_token_change": "in the app while interventions are on "
                    "(`python main.py trace` with intervention flags writes the numbers)"}

    @property
    def fields(self) -> tuple[str, ...]:   # the last row of logits; the rows from an earlier query selected
        query, trace = self.selection.query, self.trace
        return ("logits.last",) if query is None or (trace is not None and query >= trace.n_tokens - 1) else (
            logits_from(query),)
    empty_text = "No sentence yet: type one in the sentence bar to see what the model predicts next."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.candidates: Candidates | None = None  # the rows drawn, most likely first
        self.position = 0                           # the position whose next token is shown

        page = QWidget(self)
        self.figure_box = QWidget(page)             # what a figure export renders: header, chart, legend
        self.header = SteadyLabel(parent=self.figure_box)          # a new text, rarely a new height
        self.settings_line = SteadyLabel(parent=self.figure_box)
        self.chart = CandidateBars(self.figure_box)
        self.chart.sigRowChosen.connect(self._append_row)
        self.chart.sigRowHovered.connect(
            lambda row: self.chart.setToolTip("" if row is None else self._row_tooltip(row)))
        self.legend = QLabel(self.figure_box)
        self._build_figure_box()
        controls = self._build_controls()
        actions = self._build_actions()

        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.figure_box, 1)
        layout.addLayout(controls)
        layout.addLayout(actions)
        self.set_content(scrolling(page))   # with the before/after chart too, both keep a label per row
        self.refresh()

    # ---------------------------------------------------------------- building (once)
    def _build_figure_box(self) -> None:
        paint_as_page(self.figure_box)   # white, or --theme dark's
        self.header.setFont(ui_font(bold=True))
        # A wrapped label's least width is its longest word, here the token in quotes: a new one would change
        # the page's least size and lay the whole window out again (the dock, every panel) for nothing.
        self.header.setMinimumWidth(HEADER_LEAST_WIDTH)
        self.header.setWordWrap(True)
        self.settings_line.setWordWrap(True)
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.RichText)
        self.legend.setText(
            f"<span style='color:{RAW_COLOUR.name()}'>■</span> softmax at temperature 1 &nbsp; "
            f"<span style='color:{AFTER_COLOUR.name()}'>■</span> after the settings (what sampling draws from)"
            f" &nbsp; <span style='color:{RULED_OUT_EDGE.name()}'>□</span> ruled out by the settings."
            " Numbers on the right: at temperature 1 → after the settings.")
        box = QVBoxLayout(self.figure_box)
        box.setContentsMargins(6, 6, 6, 6)
        box.setSpacing(2)
        box.addWidget(self.header)
        box.addWidget(self.settings_line)
        box.addWidget(self.chart, 1)
        box.addWidget(self.legend)
        self.effect, self._full = InterventionEffectView(self.figure_box), None  # before/after, while intervened
        box.addWidget(self.effect, 1)
        self.effect.hide()   # shown while intervened (_show_effect); shown before the first draw it grew the window

    def _build_controls(self) -> QGridLayout:
        self.temperature = QDoubleSpinBox(self)
        self.temperature.setRange(0.01, 5.0)
        self.temperature.setSingleStep(0.05)
        self.temperature.setValue(1.0)
        self.temperature.setToolTip("Divides the logits: below 1 sharpens the distribution, above 1 flattens it")
        self.top_k = QSpinBox(self)
        self.top_k.setRange(0, 1_000_000)
        self.top_k.setSpecialValueText("all")
        self.top_k.setToolTip("Keep only the k most likely tokens (all: no limit)")
        self.top_p = QDoubleSpinBox(self)
        self.top_p.setRange(0.01, 1.0)
        self.top_p.setSingleStep(0.05)
        self.top_p.setValue(1.0)
        self.top_p.setToolTip("Keep the smallest set of most likely tokens whose probability reaches p "
                              "(nucleus)")
        self.sampled = QRadioButton("Sampled", self)
        self.greedy = QRadioButton("Greedy", self)
        self.sampled.setChecked(True)
        self.greedy.setToolTip("Always take the most likely token; temperature, top-k, top-p and seed "
                               "do not matter")
        mode = QButtonGroup(self)
        mode.addButton(self.sampled)
        mode.addButton(self.greedy)
        self.seed = QSpinBox(self)
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setToolTip("Random seed for Generate: the same seed and settings give the same tokens")
        self.bar_count = QSpinBox(self)
        self.bar_count.setRange(1, 50)
        self.bar_count.setValue(DEFAULT_BARS)
        self.bar_count.setToolTip("How many candidates the chart shows")

        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        cells = [("Temperature", self.temperature), ("Top-k", self.top_k), ("Top-p", self.top_p),
                 ("Seed", self.seed), ("Bars", self.bar_count)]
        for i, (text, widget) in enumerate(cells):
            row, col = divmod(i, 3)
            grid.addWidget(QLabel(text, self), row, 2 * col)
            grid.addWidget(widget, row, 2 * col + 1)
        modes = QHBoxLayout()
        modes.addWidget(self.sampled)
        modes.addWidget(self.greedy)
        grid.addLayout(modes, 1, 4, 1, 2)
        for widget in (self.temperature, self.top_k, self.top_p, self.bar_count):
            widget.valueChanged.connect(self._redraw_chart)
        self.seed.valueChanged.connect(self._update_settings_line)
        self.greedy.toggled.connect(self._on_mode_changed)
        return grid

    def _build_actions(self) -> QHBoxLayout:
        self.append_button = QPushButton("Append", self)
        self.append_button.setToolTip("Append the highlighted candidate (or click a bar, "
                                      "or press 1–9 on the chart)")
        self.append_button.clicked.connect(lambda: self._append_row(self.chart.cursor_row))
        self.step_back_button = QPushButton("Step back", self)
        self.step_back_button.setToolTip("Take back the last appended or generated token: one per press, "
                                         "down to the text you typed")
        self.step_back_button.setEnabled(False)   # until a token is appended (set_can_step_back)
        self.step_back_button.clicked.connect(self.sigStepBack.emit)
        self.generate_count = QSpinBox(self)
        self.generate_count.setRange(1, 256)
        self.generate_count.setValue(8)
        self.generate_button = QPushButton("Generate", self)
        self.generate_button.setToolTip("Append this many tokens at the end of the sentence, "
                                        "chosen with these settings")
        self.generate_button.clicked.connect(self._emit_generate)
        self.show_last_button = QPushButton("Show last token", self)
        self.show_last_button.setToolTip("Appending adds to the end of the sentence: show the last position")
        self.show_last_button.clicked.connect(lambda: self.sigSelect.emit({"query": None, "key": None}))
        row = QHBoxLayout()
        for widget in (self.append_button, self.step_back_button, self.generate_button, self.generate_count):
            row.addWidget(widget)
        row.addStretch(1)
        row.addWidget(self.show_last_button)
        self.generate_count.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)
        return row

    # ---------------------------------------------------------------- state
    def set_can_step_back(self, possible: bool) -> None:
        self.step_back_button.setEnabled(possible)

    def settings(self) -> SamplingSettings:
        return SamplingSettings(temperature=self.temperature.value(), top_k=self.top_k.value(),
                                top_p=self.top_p.value(), greedy=self.greedy.isChecked(),
                                seed=self.seed.value())

    def showing_last_position(self) -> bool:
        return self.trace is not None and self.position == self.trace.n_tokens - 1

    # ---------------------------------------------------------------- drawing
    def clear(self) -> None:
        self.candidates = None
        self.chart.show_candidates(None, [], [])

    def draw(self) -> None:
        self.position = self.selection.query_index(self.trace.n_tokens)
        if self.top_k.maximum() != self.trace.config.vocab_size:   # setting it, even unchanged, relays the window out
            self.top_k.setMaximum(self.trace.config.vocab_size)
        self._redraw_chart()
        self._show_effect()

    def _show_effect(self) -> None:
        """While interventions are in force: ask once per trace for the full model's run, then draw both."""
        self.effect.setVisible(bool(interventions_text(self.trace)))
        if self.effect.isVisibleTo(self.figure_box) and (self._full is None or self._full[0] is not self.trace):
            self._full = (self.trace, None)
            self.sigRequestVariant.emit("full", {"interventions": None, "fields": ("logits",)})   # any position
        elif self._full is not None and self._full[1] is not None:
            self.set_variant("full", self._full[1])

    def set_variant(self, tag: str, trace) -> None:
        if tag != "full" or trace is None or self.trace is None or trace.n_tokens != self.trace.n_tokens:
            return
        self._full = (self.trace, trace)
        change = next_token_change(trace.logits_at(self.position), self.trace.logits_at(self.position))
        self.effect.show_change(change, [self.trace.vocab_label(int(i)) for i in change.ids])

    def _redraw_chart(self) -> None:
        """Recompute the candidates for the current settings and redraw only the chart and its text."""
        if self.trace is None:
            return
        self.candidates = top_candidates(self.trace.logits_at(self.position), self.settings(),
                                         min(self.bar_count.value(), self.trace.config.vocab_size))
        self.header.setText(self._header_text())
        self._draw_bars()
        self._update_settings_line()
        self.append_button.setEnabled(self.candidates is not None and self.showing_last_position())
        self.show_last_button.setVisible(self.trace is not None and not self.showing_last_position())

    def _row_count(self) -> int:
        return 0 if self.candidates is None else len(self.candidates.ids)

    def _header_text(self) -> str:
        trace, q = self.trace, self.position
        where = f"Next token after “{trace.label(q)}” (position {q}"
        if q == trace.n_tokens - 1:
            return where + ", the last token)"
        actual = int(trace.input_ids[q + 1])
        rank = int(np.flatnonzero(ranked(trace.logits_at(q)) == actual)[0]) + 1
        shown = " (marked ✓)" if rank <= self._row_count() else ""
        return (where + f", the selected query): the sentence goes on with “{trace.vocab_label(actual)}”, "
                f"rank {rank}{shown}")

    def _update_settings_line(self) -> None:
        if self.candidates is None:
            self.settings_line.setText("")
            return
        s = self.settings()
        if s.greedy:
            rule = "Greedy: always the most likely token"
        else:
            top_k = "all" if s.top_k <= 0 else str(s.top_k)
            rule = (f"Sampled with temperature {s.temperature:.2f}, top-k {top_k}, top-p {s.top_p:.2f}, "
                    f"seed {s.seed}")
        can_pick = int(np.count_nonzero(self.candidates.in_sampling_set))
        self.settings_line.setText(f"{rule}. Sampling can pick {can_pick} of the {self._row_count()} shown.")

    def _draw_bars(self) -> None:
        c = self.candidates
        right = [f"{format_probability(p)} → {format_probability(a)}" for p, a in zip(c.probability, c.after)]
        self.chart.show_candidates(c, self._piece_labels(), right)

    def _piece_labels(self) -> list[str]:
        """'piece  [rank]' per row (ranks 1–9 are also the keys that append them); ✓ marks what the
        sentence really has next."""
        actual = None
        if not self.showing_last_position():
            actual = int(self.trace.input_ids[self.position + 1])
        return [f"{elide(self.trace.vocab_label(int(token_id)), LABEL_COLUMNS)}"
                f"{' ✓' if int(token_id) == actual else ''}  [{rank}]"
                for rank, token_id in enumerate(self.candidates.ids, start=1)]

    # ---------------------------------------------------------------- user input
    def _row_tooltip(self, row: int) -> str:
        c = self.candidates
        token_id = int(c.ids[row])
        state = "sampling can pick it" if c.in_sampling_set[row] else "the settings rule it out"
        return (f"{self.trace.vocab_label(token_id)} (id {token_id}, rank {row + 1})\n"
                f"softmax at T=1: {format_probability(float(c.probability[row]))}\n"
                f"after the settings: {format_probability(float(c.after[row]))} ({state})"
                + ("\nclick to append" if self.showing_last_position() else ""))

    def _append_row(self, row: int) -> None:
        """Appending adds to the end of the sentence, so it only makes sense for the last position."""
        if self.candidates is None or not 0 <= row < self._row_count() or not self.showing_last_position():
            return
        self.sigAppendTokens.emit([int(self.candidates.ids[row])])

    def _emit_generate(self) -> None:
        if self.trace is not None:
            self.sigGenerate.emit((self.generate_count.value(), self.settings()))

    def _on_mode_changed(self, greedy: bool) -> None:
        for widget in (self.temperature, self.top_k, self.top_p, self.seed):
            widget.setEnabled(not greedy)
        self._redraw_chart()

    # ---------------------------------------------------------------- export
    def figures(self) -> list[Figure]:
        figures = [Figure("next_token_bars", self.figure_box, table=self.bars_csv)]
        if self.effect.isVisibleTo(self.figure_box) and self.effect.change is not None:
            figures.append(Figure("next_token_change", self.effect,
                                  table=lambda: self.effect.change.csv(self.trace.vocab_labels)))
        return figures

    def bars_csv(self) -> str:
        return candidates_csv(self.candidates, self.trace.vocab_label if self.trace is not None else str)
