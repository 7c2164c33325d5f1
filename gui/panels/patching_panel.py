"""Activation patching: B (typed here) run again with one site of A (the sentence bar) at a time; which sites restore A?

The metric is logit(answer) - logit(wrong) after the last token, normalised so 0 = B's value and
1 = A's (core.patching). Four sweeps, each a heatmap: the residual stream [stage, position],
every head's output [layer, head], every head at one position [layer.head, position], every
expert [layer, expert]. The sweeps run on the controller's experiment worker with a progress bar and
Cancel; clicking a cell shows B with that one site patched in every panel (the sentence bar then holds B,
and Ctrl+Z there brings A back).

The sweeps are shown only while they describe what is on screen: the trace is A, or B with one of their
cells patched in, and the B field holds the B they were run with. Otherwise (another sentence typed,
B edited, a run that failed) they are hidden and not exported: a cell of them would patch B with the
values of a sentence no longer shown, and the summary naming their A and B would be gone. A cancelled
run brings back the sweeps before it.
"""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (QGridLayout, QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton, QScrollArea,
                               QVBoxLayout, QWidget)

from core.experiment_runs import patch_typed
from core.logit_lens import STAGES_NOTE
from core.patching import PairWording, PatchResult, cell_interventions, is_patched_b, pair_mismatch
from gui import figure_pages as pages
from gui import plotting
from gui.experiment_job import ExperimentJob, ProgressRelay
from gui.heatmap import Heatmap
from gui.panels.base import Figure, Panel

METRIC_LEVELS = (-1.0, 1.0)   # normalised metric: 0 = B, 1 = A; overshoots are clipped to the ends
SWEEP_TITLES = {"resid": "Residual stream [stage × position]", "heads": "Heads [layer × head], all positions",
                "heads_pos": "Head × position [layer.head × position]", "experts": "Experts [layer × expert]"}
MIN_VIEW_SIZE = (360, 260)   # a sweep's heatmap stays legible: below two of these side by side, one column
INTRO = ("Type sentence B (as many tokens as A) and press Run sweeps: four heatmaps then show what patching one "
         "site of A into B does. Metric: 0 = B's value, 1 = A's.")
CHANGED = {"A": "Sentence A (the sentence bar) changed", "B": "Sentence B changed",
           "switches": "The heads and experts switched off changed"}


# The messages name this panel's own fields, not the CLI's flags.
WORDING = PairWording(clean="sentence A (the sentence bar)", corrupt="sentence B",
                      other_tokens="type another token in the answer or wrong field", corrupt_input="sentence B",
                      answer_input="the answer field's", wrong_input="the wrong field's")


def scale_bar(levels: tuple[float, float], cmap: pg.ColorMap, label: str) -> pg.ColorBarItem:
    """A colour scale beside a heatmap, not tied to its image (the cells are coloured by masked_rgba)."""
    return pg.ColorBarItem(values=levels, colorMap=cmap, label=label, interactive=False, width=14)


class SweepViews(QScrollArea):
    """The sweep views, two to a row when each gets MIN_VIEW_SIZE and one to a row below that; it scrolls."""

    def __init__(self, views: list[QWidget]) -> None:
        super().__init__()
        self.views = views
        inner = QWidget()
        self.grid = QGridLayout(inner)
        self.grid.setContentsMargins(0, 0, 0, 0)
        for view in views:
            view.setMinimumSize(*MIN_VIEW_SIZE)
        self.columns = 0
        self._place(2)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setWidget(inner)

    def _place(self, columns: int) -> None:
        if columns == self.columns:
            return
        for view in self.views:
            self.grid.removeWidget(view)
        for i, view in enumerate(self.views):
            self.grid.addWidget(view, i // columns, i % columns)
        self.columns = columns

    def resizeEvent(self, event) -> None:  # noqa: N802
        # The room the scroll area has, not the inner widget's width (which two columns would hold open).
        wide = event.size().width() - self.verticalScrollBar().sizeHint().width() >= 2 * MIN_VIEW_SIZE[0] + 8
        self._place(2 if wide else 1)
        super().resizeEvent(event)


class PatchingPanel(Panel):
    title = "Patching"
    object_name = "patching"
    figure_names = dict.fromkeys(("patching_resid", "patching_heads", "patching_heads_pos", "patching_experts"),
                                 "in the app, after a sweep (sentence B and Run in the Patching panel; headless, "
                                 "`python main.py patch` writes its numbers)")
    fields = ()   # its numbers come from its own runs; of the trace only the ids
    empty_text = "Type sentence A in the sentence bar, then B here, to patch activations from A into B."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: PatchResult | None = None
        self.kept: PatchResult | None = None   # the sweeps before the run under way, for a Cancel to bring back
        self.corrupt_text = ""            # B of the result shown
        self.error = ""                   # why the last run failed ("" when it did not)
        self.job: ExperimentJob | None = None
        self.relay = ProgressRelay(self)
        self.relay.sigProgress.connect(self._on_progress)
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addLayout(self._build_inputs())
        self.summary = QLabel(INTRO)
        self.summary.setObjectName("patching_summary")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        stages = QLabel(STAGES_NOTE)
        stages.setWordWrap(True)
        layout.addWidget(stages)
        self.views: dict[str, pg.GraphicsLayoutWidget] = {}
        self.plots: dict[str, Heatmap] = {}
        self.sweeps = SweepViews([self._build_view(kind) for kind in SWEEP_TITLES])
        self.sweeps.hide()   # empty axes before the first run read as a broken plot: shown with the first result
        layout.addWidget(self.sweeps, 1)
        layout.addStretch(0)   # while the sweeps are hidden, the inputs and notes stay at the top
        self.set_content(page)

    def _build_inputs(self) -> QVBoxLayout:
        """Sentence B on its own line (it is as long as A), then the two tokens, Run, Cancel and the progress."""
        rows, row, tokens = QVBoxLayout(), QHBoxLayout(), QHBoxLayout()
        self.corrupt_edit = QLineEdit()
        self.corrupt_edit.setPlaceholderText("sentence B (the corrupt run), e.g. 订单取消了。订单")
        self.corrupt_edit.textChanged.connect(lambda _text: self._show_state())
        self.answer_edit, self.wrong_edit = QLineEdit(), QLineEdit()
        self.answer_edit.setPlaceholderText("A's top token")
        self.wrong_edit.setPlaceholderText("B's top token")
        for edit in (self.answer_edit, self.wrong_edit):
            edit.setToolTip("one token, as text or #ID; empty: the default")
            edit.setMaximumWidth(150)
        self.run_button, self.cancel_button = QPushButton("Run sweeps"), QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.run_button.clicked.connect(self.run_sweeps)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(160)
        self.progress.hide()   # idle, an empty bar reads as a text box with no label: shown while sweeps run
        row.addWidget(QLabel("B:"))
        row.addWidget(self.corrupt_edit, 1)
        for widget in (QLabel("answer:"), self.answer_edit, QLabel("wrong:"), self.wrong_edit, self.run_button,
                       self.cancel_button, self.progress):
            tokens.addWidget(widget)
        tokens.addStretch(1)
        rows.addLayout(row)
        rows.addLayout(tokens)
        return rows

    def _build_view(self, kind: str) -> pg.GraphicsLayoutWidget:
        view = pg.GraphicsLayoutWidget()
        view.addLabel(SWEEP_TITLES[kind], row=0, col=0)
        x_title = {"heads": "head", "experts": "expert"}.get(kind, "position (B's token)")
        # The stage and layer.head rows are named in the title: an axis title would sit on their labels.
        y_title = {"resid": "", "heads_pos": ""}.get(kind, "layer")
        plot = Heatmap(x_title, y_title)
        plot.getAxis("bottom").turn_labels = False   # B's tokens level, thinned when narrow: turned, 取 lies on its side
        view.addItem(plot, row=1, col=0)
        view.addItem(scale_bar(METRIC_LEVELS, plotting.colormap(plotting.DIVERGING), "0 = B, 1 = A"), row=1, col=1)
        plot.sigCellClicked.connect(lambda r, c, kind=kind: self.show_cell(kind, r, c))
        self.views[kind], self.plots[kind] = view, plot
        return view

    # ------------------------------------------------------------ running
    def run_sweeps(self) -> None:
        if self.trace is None or self.job is not None:
            return
        (clean_ids, clean_labels), corrupt = self._sentence_a(), self.corrupt_edit.text()
        answer, wrong = self.answer_edit.text().strip(), self.wrong_edit.text().strip()
        self.job = job = ExperimentJob(None, lambda result: self._on_done(result, corrupt), self._on_error, self.relay)
        job.fn = lambda runner: patch_typed(runner, clean_ids, clean_labels, corrupt, answer, wrong, WORDING,
                                            job.progress)
        # The new run replaces the sweeps: a failure must not leave them under its message; a Cancel brings them back.
        self.kept, self.result, self.error = self.result, None, ""
        self._set_running(True)
        self._show_state()
        self.sigRunExperiment.emit(job)

    def _sentence_a(self) -> tuple:
        """A's ids and token texts: the trace shown, or, while that is B with a sweep cell patched in, the A
        of those sweeps (the sentence bar holds B then, and a run of B against B could only fail)."""
        result, trace = self.result, self.trace
        if result is not None and is_patched_b(result.pair, trace.input_ids, trace.interventions):
            return result.pair.clean.input_ids, result.token_labels()[0]
        return trace.input_ids, trace.labels()

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        if running:
            self.progress.setValue(0)

    def _on_progress(self, done: int, total: int) -> None:
        self.progress.setMaximum(total)
        self.progress.setValue(done)

    def _on_error(self, message: str) -> None:
        cancelled = self.job is not None and self.job.cancel_event.is_set()
        self.job = None
        self._set_running(False)
        if cancelled and self.kept is not None:
            self.result = self.kept   # as before the run
        else:
            self.error = message
        self.kept = None
        self._show_state()

    def _on_done(self, result: PatchResult, corrupt_text: str) -> None:
        self.job, self.kept = None, None
        self._set_running(False)
        self.result, self.corrupt_text = result, corrupt_text
        self._draw_result()
        self._show_state()

    # ------------------------------------------------------------ what is shown
    def stale(self) -> str:
        """"" when the result describes what is shown, else what changed since its run ("A", "B", "switches")."""
        if self.result is None:
            return ""
        if self.trace is None:
            return "A"
        changed = pair_mismatch(self.result.pair, self.trace.input_ids, self.trace.interventions)
        return changed or ("B" if self.corrupt_edit.text() != self.corrupt_text else "")

    def showing_result(self) -> bool:
        return self.result is not None and self.job is None and not self.stale()

    def _show_state(self) -> None:
        """The summary for the panel's state, and the sweeps only while they are the current A and B's."""
        self.summary.setText(self._summary_text())
        self.sweeps.setVisible(self.showing_result())

    def _summary_text(self) -> str:
        if self.job is not None:
            return "running the sweeps…"
        if self.result is None:
            return f"patching: {self.error}" if self.error else INTRO
        changed = self.stale()
        if changed:
            return (f"{CHANGED[changed]} since the last sweeps, so they are hidden: they were run for what was "
                    "given then. Press Run sweeps to run them for what is given now.")
        pair = self.result.pair
        return (f"metric = logit({self._piece(pair.answer_id)}) − logit({self._piece(pair.wrong_id)}) after the "
                f"last token: A {pair.metric_clean:.3g}, B {pair.metric_corrupt:.3g}; cells normalised, 0 = B, "
                "1 = A. Click a cell to show B with that site patched in every panel (Ctrl+Z in the sentence bar "
                "brings A back).")

    def _piece(self, token_id: int) -> str:
        return repr(self.trace.vocab_label(token_id)) if self.trace is not None else f"#{token_id}"

    # ------------------------------------------------------------ drawing
    def _draw_result(self) -> None:
        for kind, plot in self.plots.items():
            matrix, rows, cols = self.result.sweep_table(kind)
            plot.set_rgba(plotting.masked_rgba(matrix, METRIC_LEVELS, plotting.colormap(plotting.DIVERGING)))
            plot.set_row_labels(rows, columns=None)
            plot.set_col_labels(cols)

    def draw(self) -> None:
        """The sweeps are not run again for a new trace: they are shown while it is theirs, hidden otherwise."""
        self._show_state()

    def show_cell(self, kind: str, row: int, col: int) -> None:
        if not self.showing_result():   # a hidden result's cell would put its B in the sentence bar
            return
        if kind == "heads_pos":
            heads = self.result.heads.shape[1]
            cell = (row // heads, row % heads, col)
        else:
            cell = (row, col)
        self.sigShowPatched.emit(self.corrupt_text, cell_interventions(self.result.pair, kind, cell))

    # ------------------------------------------------------------ export
    def figures(self) -> list[Figure]:
        if not self.showing_result():   # empty axes, or the sweeps of sentences no longer shown, are no figure
            return []
        kinds = [kind for kind in SWEEP_TITLES if kind != "experts" or self.result.experts.size]   # dense: no experts
        return [Figure(f"patching_{kind}", self.views[kind], table=lambda kind=kind: self.result.sweep_csv(kind),
                       page_size=lambda kind=kind: self.sweep_page(kind))
                for kind in kinds]

    def sweep_page(self, kind: str) -> QSize:
        """A sweep's page: its matrix's cells (none before a sweep ran: the view's least size), axes, title, bar."""
        rows, cols = self.result.sweep_table(kind)[0].shape if self.result is not None else (0, 0)
        return pages.cells_page(self.views[kind], self.plots[kind].vb, rows, cols, pages.matrix_cell(rows, cols))

    def why_no_figures(self) -> str:
        if self.showing_empty_state() or self.showing_result():
            return super().why_no_figures()
        if self.job is not None:
            return "The patching sweeps are running."
        if self.result is not None:
            return f"{CHANGED[self.stale()]} since the last patching sweeps: run them again."
        return f"The patching sweeps failed: {self.error}." if self.error else super().why_no_figures()
