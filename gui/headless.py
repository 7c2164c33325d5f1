"""`main.py export`: the panels' figures for one sentence, or for every line of a file, without a display.

A FigureHost builds a panel only when one of its figures is first asked for (every panel for Export all),
each in its own offscreen window of a fixed size (so figures look the same on every machine), and reuses
it for every sentence: `--figures attention_head` builds, draws and paints the attention panel alone.
Each panel class declares the figures it offers (Panel.figure_names); `figure_table` reads them from the
registered classes, so a misspelt name is refused before any panel is built or the model loaded.
A panel's experiment (the occlusion sweep its draw asks for) runs on this thread, and only when one
of its figures is asked for (or all are).
gui.export renders the figures; every file of one run goes through one staged (all-or-nothing)
write, so a failed export leaves nothing behind.

Layout of the output folder:
    one sentence:  OUT/NAME.png, OUT/NAME.svg, ...   (see gui/export.py for the names)
    --texts FILE:  OUT/001_first_words/NAME.png, ... one folder per non-empty line, and
                   OUT/index.csv: line, folder, tokens, cut_chars, files, text
"""
from __future__ import annotations

import importlib
import os
import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

PANEL_SIZE = (1100, 760)   # logical pixels of each offscreen panel window
THEMES = ("light", "dark")
_FOLDER_WORDS = 40         # characters of the sentence kept in its batch folder name

def ensure_offscreen() -> None:
    """Headless export never opens windows on a desktop: use Qt's offscreen platform unless told otherwise."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _quiet_offscreen_warnings() -> None:
    """The offscreen platform warns once per window that it cannot propagate size hints: noise for a CLI."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(mode, context, message: str) -> None:
        if "propagateSizeHints" not in message:
            sys.stderr.write(message + "\n")

    qInstallMessageHandler(handler)


@dataclass(frozen=True)
class ExportRequest:
    """What to export: formats, which figures (None: all), PNG size, the selection, the theme."""
    formats: tuple[str, ...] = ("png", "svg", "csv", "npz")
    figures: tuple[str, ...] | None = None
    width: int | None = None
    dpi: float | None = None
    layer: int | None = None
    head: int | None = None
    query: int | None = None
    key: int | None = None
    expert_layer: int | None = None   # the MoE panel's layer (default: --layer)
    theme: str = "light"

    @classmethod
    def parse(cls, formats: str = "png,svg,csv,npz", figures: str | None = None, **options) -> "ExportRequest":
        """From the CLI's strings; raises ValueError with one line naming the valid choices."""
        from gui.export import check_png_size, parse_formats

        check_png_size(options.get("width"), options.get("dpi"))
        theme = options.get("theme") or "light"
        if theme not in THEMES:
            raise ValueError(f"unknown theme {theme}: choose from {', '.join(THEMES)}")
        for name in ("layer", "head", "query", "key", "expert_layer"):
            value = options.get(name)
            if value is not None and value < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be 0 or more, got {value}")
        wanted = None
        if figures:
            wanted = tuple(dict.fromkeys(part.strip() for part in figures.split(",") if part.strip())) or None
        figure_owners(wanted)   # a misspelt figure is refused before the model is even loaded
        return cls(formats=parse_formats(formats), figures=wanted, **{**options, "theme": theme})

    def selection_for(self, trace):
        """The Selection this request names, checked against the trace (ValueError naming the range)."""
        from gui.selection import Selection

        _in_range("--layer", self.layer, trace.num_layers, "layers")
        _in_range("--expert-layer", self.expert_layer, trace.num_layers, "layers")
        _in_range("--head", self.head, trace.num_heads, "heads")
        _in_range("--query", self.query, trace.n_tokens, "tokens")
        query = trace.n_tokens - 1 if self.query is None else self.query
        if self.key is not None and self.key > query:
            raise ValueError(f"--key {self.key} is out of range: a query at position {query} sees keys 0-{query}")
        return Selection(self.layer or 0, self.head or 0, self.query, self.key)


def _in_range(option: str, value: int | None, count: int, what: str) -> None:
    if value is not None and not 0 <= value < count:
        raise ValueError(f"{option} {value} is out of range: this run has {count} {what} (0-{count - 1})")


def figure_table(classes: Sequence[type] | None = None) -> dict[str, dict[str, str]]:
    """object_name -> the figures that panel class declares (Panel.figure_names: name -> "" or when it is
    drawn), in the order of `classes` (default: every registered panel, their modules imported now)."""
    if classes is None:
        from gui.panels.registry import panel_classes

        classes = panel_classes()
    return {cls.object_name: dict(cls.figure_names) for cls in classes}


def _name_pattern(declared: str) -> str:
    """A declared figure name as a regular expression: an upper-case word stands for a part that varies
    (N… that many digits, any other a word), so step_NN_KEY matches step_01_x."""
    return "_".join(r"\d" * len(part) if set(part) == {"N"} else r"\w+" if part.isupper() else re.escape(part)
                    for part in declared.split("_"))


def figure_owner(name: str, table: dict[str, dict[str, str]] | None = None) -> str | None:
    """The object_name of the panel that declares figure `name` (figure_table), or None if none does."""
    table = figure_table() if table is None else table
    return next((panel for panel, declared in table.items()
                 if any(re.fullmatch(_name_pattern(d), name) for d in declared)), None)


def figure_owners(names: Sequence[str] | None, table: dict[str, dict[str, str]] | None = None) -> list[str]:
    """The panels (object_names, in the table's order) offering the figures named (None: every panel);
    ValueError naming the choices if a name is declared by none of them."""
    table = figure_table() if table is None else table
    if names is None:
        return list(table)
    owners = {name: figure_owner(name, table) for name in names}
    unknown = [name for name, owner in owners.items() if owner is None]
    if unknown:
        choices = sorted(name for declared in table.values() for name in declared)
        raise ValueError(f"unknown figure {', '.join(unknown)}: choose from {', '.join(choices)}")
    return [panel for panel in table if panel in owners.values()]


def further_pages(name: str, figures: Sequence) -> list:
    """tokens_merges_2, … when tokens_merges is asked for: a long replay's pages are one figure."""
    if name != "tokens_merges":
        return []
    return [figure for figure in figures if MERGE_PAGE.fullmatch(figure.name)]


MERGE_PAGE = re.compile(r"tokens_merges_\d+")   # a long replay's further pages (gui.merge_pages.page_name)


class FigureHost:
    """The registered panels, each built in an offscreen window when first needed, reused for every trace."""

    def __init__(self, theme: str = "light", runner=None, classes: Sequence[type] | None = None) -> None:
        """runner: answers the panels' requests for model runs (the head-roles probe, the occlusion sweep), as
        the controller does; without one those figures are not drawn. classes: the panels (default: all)."""
        from gui.app import application
        from gui.panels.registry import PANELS, PanelEntry

        _quiet_offscreen_warnings()
        self.app = application()
        importlib.import_module("gui.plotting")   # its pyqtgraph settings first (panels import it): the theme goes over them
        self._undo_theme = apply_theme(self.app, theme)
        self._runner = runner
        self._probe = None                           # the runner's head roles on its probe, once asked for
        entries = PANELS if classes is None else [PanelEntry.of(cls) for cls in classes]
        self._entries = {entry.object_name: entry for entry in entries}
        self._table = figure_table([entry.load() for entry in entries])   # the classes only: none built yet
        self._built: dict[str, object] = {}        # object_name -> the panel, once built
        self._experiments: dict[int, tuple] = {}   # id(panel) -> (panel, the ExperimentJob its last draw asked for)

    @property
    def panels(self) -> list:
        """The panels built so far, in the registry's order."""
        return [self._built[name] for name in self._entries if name in self._built]

    def panel(self, object_name: str):
        """The panel of that object_name, built now if it is not yet."""
        if object_name not in self._built:
            self._built[object_name] = self._build(self._entries[object_name].load())
        return self._built[object_name]

    def _build(self, cls: type):
        panel = cls()
        runner = self._runner
        if runner is not None and hasattr(panel, "sigRequestProbe"):
            panel.sigRequestProbe.connect(lambda p=panel: p.set_probe(self._probe_roles()))
        if runner is not None:   # a panel's experiment (the occlusion sweep) waits until its figure is asked for
            panel.sigRunExperiment.connect(lambda job, p=panel: self._experiments.update({id(p): (p, job)}))
        panel.resize(*PANEL_SIZE)
        panel.show()
        return panel

    def _probe_roles(self):
        """The head roles on the bundle's probe (core.head_roles.probe_roles), run once for the panels that ask
        (the attention grid's badges and the head-roles panel): it depends on the bundle, not the sentence."""
        from core.head_roles import probe_roles

        if self._probe is None:
            self._probe = probe_roles(self._runner)
        return self._probe

    def figures(self, trace, request: ExportRequest) -> list:
        """The figures of `trace` that `request` asks for, drawn with its selection (ValueError if unknown).
        Only the panels offering them are built and drawn; the selection and the names are checked first."""
        selection = request.selection_for(trace)
        moe_selection = selection.updated(layer=request.expert_layer) if request.expert_layer is not None else selection
        panels = [self.panel(name) for name in figure_owners(request.figures, self._table)]
        for panel in panels:
            panel.selection = moe_selection if panel.object_name == "moe" else selection
            panel.set_trace(trace)
        self._run_experiments(request.figures)
        self._settle(panels)
        figures = [figure for panel in panels for figure in panel.figures()]
        if request.figures is None:
            return figures
        by_name = {figure.name: figure for figure in figures}
        missing = [name for name in request.figures if name not in by_name]
        if missing:   # the message names every figure this trace offers: draw them all, on this rare path
            available = sorted(figure.name for figure in self.figures(trace, replace(request, figures=None)))
            raise ValueError(missing_figures_message(missing, self.panels, available))
        return [figure for name in request.figures for figure in [by_name[name], *further_pages(name, figures)]]

    def _settle(self, panels: Sequence) -> None:
        """Let layouts settle and deferred work run before painting to files. The panels' windows are not
        painted meanwhile: no one sees them, and the export paints each figure itself."""
        for panel in panels:
            panel.setUpdatesEnabled(False)
        try:
            for _ in range(3):
                self.app.processEvents()
        finally:
            for panel in panels:   # rendering to a file paints only widgets whose updates are enabled
                panel.setUpdatesEnabled(True)

    def _run_experiments(self, names: Sequence[str] | None) -> None:
        """Run, here and now, the experiments whose panel owns an asked-for figure (every one when all are
        asked for): the GUI runs them on its worker, a CLI export waits for them anyway. The others wait:
        a batch exporting only attention_head never pays for an occlusion sweep per sentence."""
        owners = None if names is None else {figure_owner(name, self._table) for name in names}
        for key, (panel, job) in list(self._experiments.items()):
            if owners is not None and panel.object_name not in owners:
                continue
            del self._experiments[key]
            try:
                result = job.fn(self._runner)
            except ValueError as exc:   # e.g. a sentence of one token: the panel says why it drew nothing
                job.on_error(str(exc))
            else:
                job.on_done(result)

    def close(self) -> None:
        from PySide6.QtWidgets import QApplication

        for panel in self.panels:
            panel.close()
            panel.deleteLater()
        QApplication.processEvents()
        self._undo_theme()


def missing_figures_message(names: Sequence[str], panels: Sequence, available: Sequence[str]) -> str:
    """One line: a figure drawn only in the app says when it is drawn (Panel.figure_names); a figure whose
    panel draws nothing now (a figure NAME belongs to the panel whose object_name starts it: moe_router_probs
    is the moe panel's) gets the panel's reason, e.g. a dense model has no router; any other name is unknown.
    Either way the line ends with the choices."""
    idle = {panel.object_name: reason for panel in panels if (reason := panel.why_no_figures())}
    app_only = {name: when for panel in panels for name, when in panel.figure_names.items() if when}
    owner = {name: next((o for o in idle if name.startswith(o + "_")), None) for name in names if name not in app_only}
    unknown = [name for name in owner if owner[name] is None]
    choices = f"choose from {', '.join(available)}"
    if len(unknown) == len(names):
        return f"unknown figure {', '.join(unknown)}: {choices}"
    parts = [f"unknown figure {', '.join(unknown)}."] if unknown else []
    parts += [f"{name} is drawn only {app_only[name]}." for name in names if name in app_only]
    for panel_name, reason in idle.items():
        if drawn_nothing := [name for name in owner if owner[name] == panel_name]:
            parts.append(f"{', '.join(drawn_nothing)}: not drawn. {reason}")
    return " ".join([*parts, f"For this model, {choices}"])


def apply_theme(app, theme: str) -> Callable[[], None]:
    """The figures' theme and, for dark, the widgets' palette (before panels are built): gui.theme.

    Returns a function that puts the process-wide settings back."""
    from gui.theme import apply_theme as apply

    return apply(app, theme)


def _load_runner(model: str | None, backend: str):
    from core.bundle import load_bundle
    from core.runners import make_runner

    return make_runner(load_bundle(model), backend)


def export_sentence(text: str, out: str | os.PathLike, model: str | None = None,
                    formats: str = "png,svg,csv,npz", width: int | None = None,
                    backend: str = "onnx", request: ExportRequest | None = None,
                   notify: Callable[[str], None] | None = None) -> list[Path]:
    """Write the asked-for figures for `text` into `out`; return the paths written. `notify` hears
    what the user should know about the run (the text was cut at the context).

    Raises ValueError (bad text, format, width, selection, figure or bundle) or OSError (an
    unwritable folder) with a one-line message; on any failure nothing is left in `out`.
    """
    from core.raw_export import check_export_folder, staged_export
    from core.session import analyse, cut_notice

    request = request or ExportRequest.parse(formats, width=width)
    check_export_folder(out)   # fail before the slow part, not after it
    ensure_offscreen()
    runner = _load_runner(model, backend)
    trace = analyse(runner, text)
    if notify is not None and (notice := cut_notice(trace, runner.bundle.context)):
        notify(notice)
    host = FigureHost(request.theme, runner)
    try:
        files = _files_for(host, trace, request)
        with staged_export(out) as staged:
            for name, data in files.items():
                staged.write(name, data)
    finally:
        host.close()
    return staged.paths


def _files_for(host: FigureHost, trace, request: ExportRequest) -> dict[str, bytes]:
    from gui.export import all_files

    figures = host.figures(trace, request)
    return all_files(figures, trace, request.formats, request.width, request.dpi)


# ---------------------------------------------------------------- batch: one folder per line of a file

@dataclass
class BatchResult:
    out: Path
    sentences: int = 0
    files: int = 0
    seconds: float = 0.0
    skipped_blank: int = 0
    notes: list[str] = field(default_factory=list)   # what the user should know about single lines

    def summary(self) -> str:
        per = 1000 * self.seconds / max(1, self.sentences)
        blank = f"; {self.skipped_blank} blank line(s) skipped" if self.skipped_blank else ""
        return (f"wrote {self.sentences} sentence folder(s), {self.files} files and index.csv to {self.out} "
                f"in {self.seconds:.1f} s ({per:.0f} ms per sentence){blank}")


def read_texts(path: str | os.PathLike) -> list[tuple[int, str]]:
    """(line number, sentence) for every non-empty line of a UTF-8 file; ValueError if none or unreadable."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read --texts {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"--texts {path} is not UTF-8 (byte {exc.start})") from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise ValueError(f"--texts {path} has no sentences (one per line)")
    return lines


def folder_name(index: int, text: str) -> str:
    """"003_the_cat_sat" — numbered (so folders sort in file order), then the sentence's first words."""
    words = re.sub(r"[^\w]+", "_", text, flags=re.UNICODE).strip("_")[:_FOLDER_WORDS].rstrip("_")
    return f"{index:03d}_{words}" if words else f"{index:03d}"


def export_texts(texts: str | os.PathLike, out: str | os.PathLike, request: ExportRequest,
                 model: str | None = None, backend: str = "onnx",
                 progress: Callable[[int, int], None] | None = None) -> BatchResult:
    """Every non-empty line of `texts` into its own sub-folder of `out`, plus index.csv (cut_chars: how
    many characters of the line the context left out, also told in BatchResult.notes); all or nothing."""
    from core.raw_export import check_export_folder, csv_text, staged_export
    from core.session import analyse, cut_notice

    lines = read_texts(texts)
    check_export_folder(out)
    ensure_offscreen()
    runner = _load_runner(model, backend)
    started = time.perf_counter()
    result = BatchResult(Path(out), skipped_blank=_count_lines(texts) - len(lines))
    rows = [("line", "folder", "tokens", "cut_chars", "files", "text")]
    host = FigureHost(request.theme, runner)
    try:
        with staged_export(out) as staged:
            for done, (number, text) in enumerate(lines, start=1):
                trace = analyse(runner, text)
                try:
                    files = _files_for(host, trace, request)
                except ValueError as exc:
                    raise ValueError(f"line {number} of {texts}: {exc}") from None
                folder = folder_name(done, text)
                for name, data in files.items():
                    staged.write(f"{folder}/{name}", data)
                rows.append((number, folder, trace.n_tokens, trace.truncated_chars, len(files), text))
                if notice := cut_notice(trace, runner.bundle.context):
                    result.notes.append(f"line {number}: {notice}")
                result.files += len(files)
                if progress is not None:
                    progress(done, len(lines))
            staged.write("index.csv", csv_text(rows).encode("utf-8"))
    finally:
        host.close()
    result.sentences = len(lines)
    result.seconds = time.perf_counter() - started
    return result


def _count_lines(path) -> int:
    return len(Path(path).read_text(encoding="utf-8-sig").splitlines())


def terminal_progress(stream=None) -> Callable[[int, int], None] | None:
    """A one-line progress bar on stderr when it is a terminal; None (no output) otherwise."""
    stream = stream or sys.stderr
    if not stream.isatty():
        return None

    def show(done: int, total: int) -> None:
        filled = round(30 * done / total)
        stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} sentences")
        if done == total:
            stream.write("\n")
        stream.flush()

    return show


# ---------------------------------------------------------------- measured by `main.py bench`

def bench_text(tokenizer, n_tokens: int = 64) -> str:
    """An English text of exactly n_tokens tokens (English, so any token prefix decodes cleanly)."""
    from core.sample_text import ENGLISH

    ids = tokenizer.encode(" ".join(ENGLISH * (1 + n_tokens)))[:n_tokens]
    return tokenizer.decode(ids)


def bench_export_all(model: str | None = None, n_tokens: int = 64, formats: Sequence[str] = ("png", "svg"),
                     backend: str = "onnx") -> float:
    """ms to export every figure (PNG + SVG) of one n_tokens sentence into a new folder: model run,
    panels built and drawn, every file rendered and written (the bundle is loaded before the clock)."""
    import tempfile

    from core.raw_export import write_file_set
    from core.session import analyse

    ensure_offscreen()
    runner = _load_runner(model, backend)
    text = bench_text(runner.bundle.tokenizer, n_tokens)
    request = ExportRequest(formats=tuple(formats))
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        trace = analyse(runner, text)
        host = FigureHost()
        try:
            files = _files_for(host, trace, request)
            write_file_set(Path(scratch) / "out", files)
        finally:
            host.close()
        return 1000 * (time.perf_counter() - started)


def bench_batch_export(model: str | None = None, n_texts: int = 20, figures: Sequence[str] = ("attention_head",),
                       formats: Sequence[str] = ("png",), backend: str = "onnx") -> float:
    """ms per sentence of `--texts` with n_texts sample sentences and the given figures."""
    import tempfile

    from core.sample_text import sample_sentences

    ensure_offscreen()
    request = ExportRequest(formats=tuple(formats), figures=tuple(figures))
    with tempfile.TemporaryDirectory() as scratch:
        texts = Path(scratch) / "texts.txt"
        texts.write_text("\n".join(line.replace("\n", " ") for line in sample_sentences(n_texts, seed=3)) + "\n",
                         encoding="utf-8")
        result = export_texts(texts, Path(scratch) / "out", request, model=model, backend=backend)
        return 1000 * result.seconds / max(1, result.sentences)
