"""`python main.py bench [--json]`: how fast Glassbox is, as medians anyone can rerun.

Keys (milliseconds unless named otherwise; "16", "64", "MAX" are sentence lengths in tokens,
MAX the model's context):
  forward_onnx_ms, forward_numpy_ms   one full-trace forward pass (core.bench)
  update_ms        text change -> every panel visible in the default layout repainted: the sentence
                   is set and Enter pressed (no typing debounce), and the time runs until the last
                   paint event the new trace caused has been delivered to a visible panel
  update_cpu_ms    the main thread's CPU time over that same span (what drawing costs, without
                   the waits a busy machine adds to update_ms)
  startup_ms       a fresh process: start -> the first analysed sentence painted in every visible panel
                   (the window at its first-start size, 1500 x 950)
  startup_cpu_ms   the main thread's CPU time over that same span (start-up is the main thread's work:
                   the first trace is back before the window can draw it; what a busy machine adds
                   to startup_ms is not in it)
  export_all_ms    Export all, PNG + SVG, 64 tokens
  batch_export_ms_per_text  `main.py export --texts` with 20 sentences, the attention_head PNG (per sentence)
  rss_mb           resident memory after the update runs
  matplotlib_grid_ms  the layer x head grid of labelled heatmaps drawn with matplotlib (Agg)
  grid_speedup     matplotlib_grid_ms / Glassbox's grid update (new trace -> grid repainted)
  patch_sweep_ms   residual + head activation-patching sweeps on a 16-token pair (ONNX, one thread)
Offscreen (QT_QPA_PLATFORM=offscreen) unless a display is set; window 1600 x 1000.
"""
from __future__ import annotations

import argparse
import bisect
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WINDOW_SIZE = (1600, 1000)
QUIET_S = 0.04   # no paint for this long after the trace arrived: the update is over


def _offscreen() -> None:
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")   # as main.py does for the app


def _filters():
    """The two event filters PaintLog installs (Qt is imported only once the bench runs: the startup
    probe imports it where main.py does)."""
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QWidget

    from gui.panels.base import Panel

    # A widget made inside a panel, or moved into one, is polished before it first shows: its parent hears
    # ChildPolished then, with the child whole (ChildAdded may come while it is still being built).
    paint, child_polished = QEvent.Type.Paint, QEvent.Type.ChildPolished

    class PanelPaints(QObject):
        """On every widget inside one panel: logs its paint events; a widget added inside is watched too."""

        def __init__(self, log: PaintLog, panel_name: str) -> None:
            super().__init__()
            self._log, self._name = log, panel_name

        def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
            kind = event.type()
            if kind == paint:
                self._log.log_paint(self._name)
            elif kind == child_polished and not self._log.is_paused():
                child = event.child()
                if isinstance(child, QWidget):
                    self._log.watch_tree(child, self)
            return False

    class NewPanels(QObject):
        """On the docks: a panel built into one later is watched from then on."""

        def __init__(self, log: PaintLog) -> None:
            super().__init__()
            self._log = log

        def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
            if event.type() == child_polished and isinstance(event.child(), Panel):
                self._log.watch(event.child())
            return False

    return PanelPaints, NewPanels


class PaintLog:
    """Every paint event delivered to a widget inside a panel: its time, the main thread's CPU time
    then, and the panel's object name.

    Each panel has a filter of its own on every widget inside it (and on every widget shown in it later):
    the events of the rest of the app never reach Python, and a paint needs no walk up to its panel
    (an app-wide filter cost a tenth of an update's CPU time). Panels built later into a dock are
    found by a filter on the docks that only looks at the children they are given."""

    def __init__(self, app) -> None:
        from PySide6.QtWidgets import QDockWidget

        from gui.panels.base import Panel

        self.times: list[float] = []
        self.events: list[tuple[float, str]] = []   # (CPU time, panel)
        self._app = app
        self._panel_filters: dict[int, tuple] = {}   # id(panel) -> (panel, its filter)
        self._panel_paints, new_panels = _filters()
        self._docks = [w for w in app.allWidgets() if isinstance(w, QDockWidget)]
        self._dock_filter = new_panels(self)
        self._paused = False
        for widget in app.allWidgets():
            if isinstance(widget, Panel):
                self.watch(widget)
        for dock in self._docks:
            dock.installEventFilter(self._dock_filter)

    def watch(self, panel) -> None:
        """Log the paints of every widget inside `panel`, now and added later."""
        if id(panel) not in self._panel_filters:
            self._panel_filters[id(panel)] = (panel, self._panel_paints(self, panel.object_name))
        if not self._paused:
            self.watch_tree(panel, self._panel_filters[id(panel)][1])

    def is_paused(self) -> bool:
        return self._paused

    @staticmethod
    def watch_tree(widget, log_filter) -> None:
        from PySide6.QtWidgets import QWidget

        for each in [widget, *widget.findChildren(QWidget)]:
            each.installEventFilter(log_filter)

    def log_paint(self, panel_name: str) -> None:
        self.times.append(time.perf_counter())
        self.events.append((time.thread_time(), panel_name))

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No logging meanwhile: what is timed then is the app's work, not this filter's."""
        from PySide6.QtWidgets import QWidget
        from shiboken6 import isValid

        self._paused = True
        for dock in self._docks:
            dock.removeEventFilter(self._dock_filter)
        for panel, log_filter in self._panel_filters.values():
            if isValid(panel):
                for each in [panel, *panel.findChildren(QWidget)]:
                    each.removeEventFilter(log_filter)
        try:
            yield
        finally:
            self._paused = False
            for dock in self._docks:
                if isValid(dock):
                    dock.installEventFilter(self._dock_filter)
            for panel, log_filter in self._panel_filters.values():
                if isValid(panel):
                    self.watch_tree(panel, log_filter)

    def since(self, start: float) -> dict[str, tuple[float, float]]:
        """panel -> (time, CPU time) of its last paint after `start` (only the new events are read:
        the bench asks this between every two rounds of events)."""
        last: dict[str, tuple[float, float]] = {}
        first = bisect.bisect_left(self.times, start)
        for when, (cpu, name) in zip(self.times[first:], self.events[first:]):
            last[name] = (when, cpu)
        return last


def settle(app, log: PaintLog, start: float, ready, panels: set[str], timeout: float = 120.0) -> tuple[float, float]:
    """Deliver events until ready() holds, every panel named has painted after `start`, and paints
    have stopped for QUIET_S; returns when the last of those paints was delivered, and the main
    thread's CPU time then.

    The events are delivered as the app's own event loop does: waiting for the next (the GIL released),
    and handling it as soon as it is posted, the worker's result or a repaint posted by a draw. Polling
    instead (handle what is there, sleep, look again) put a sleep between each hand-off and the next
    step, in every update."""
    from PySide6.QtCore import QEventLoop, QTimer

    deadline = time.perf_counter() + timeout
    last_paint_end, last_cpu, seen = start, time.thread_time(), len(log.events)
    wake = QTimer()   # the waits end at least this often, to see the quiet time pass
    wake.start(max(1, round(QUIET_S * 1000 / 8)))
    try:
        while True:
            app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
            now = time.perf_counter()
            if len(log.events) != seen:
                seen = len(log.events)
                last_paint_end, last_cpu = now, time.thread_time()
            painted = log.since(start)
            if ready() and panels <= painted.keys() and now - last_paint_end >= QUIET_S:
                return last_paint_end, last_cpu
            if now > deadline:
                raise TimeoutError(f"no repaint of {sorted(panels - painted.keys())} in time")
    finally:
        wake.stop()


def posted(window) -> bool:
    """A panel still holds a posted trace or selection it will draw at the next frame (Panel.post_trace)."""
    return any(panel.has_posted() for panel in window.built_panels())


def _window(settings_file: str, backend: str = "onnx"):
    from PySide6.QtCore import QSettings

    from core.bundle import load_bundle
    from gui.app import application
    from gui.controller import Controller
    from gui.main_window import MainWindow

    app = application()
    controller = Controller(load_bundle(None), backend)
    window = MainWindow(controller, QSettings(settings_file, QSettings.Format.IniFormat))
    window.resize(*WINDOW_SIZE)
    window.show()
    return app, controller, window


def update_ms(app, controller, window, log: PaintLog, repeats: int) -> tuple[dict[str, float], dict[str, float], dict]:
    """Median time from a text change to every visible panel repainted, per length; the main thread's
    median CPU time over it; and the last traces."""
    from core.bench import lengths, text_of_tokens

    visible = {p.object_name for p in window.built_panels() if window.on_screen(p)}
    result, cpu, traces = {}, {}, {}
    for key, n in lengths(controller.bundle).items():
        times, cpu_times = [], []
        for run in range(repeats + 1):   # the first run warms caches and is not counted
            text = text_of_tokens(controller.bundle.tokenizer, n, shift=run)
            start, start_cpu = time.perf_counter(), time.thread_time()
            window.sentence_bar.setText(text)
            controller.flush()
            end, end_cpu = settle(app, log, start, lambda: controller.trace is not None
                                  and controller.trace.text == text and not controller.busy()
                                  and not posted(window), visible)
            if run:
                times.append((end - start) * 1000)
                cpu_times.append((end_cpu - start_cpu) * 1000)
        result[key], cpu[key] = statistics.median(times), statistics.median(cpu_times)
        traces[key] = controller.trace
    return result, cpu, traces


def grid_ms(app, window, traces: dict, repeats: int) -> dict[str, float]:
    """Glassbox's grid update: the attention panel's head grid given a new trace, then painted."""
    from core import attention_view as av
    from core.bench import median_ms

    panel = window.panel("attention")
    result = {}
    for key, trace in traces.items():
        def update() -> None:
            panel.grid.show_heads(trace, av.attention_scale(av.head_maxima(trace), "shared"))
            panel.grid.viewport().repaint()
        result[key] = median_ms(update, repeats)
    panel.set_trace(window.controller.trace)   # back to what the window shows
    return result


def export_all_ms(app, controller, window, log: PaintLog, repeats: int) -> float:
    from core.bench import text_of_tokens

    text = text_of_tokens(controller.bundle.tokenizer, 64)
    start = time.perf_counter()
    window.sentence_bar.setText(text)
    controller.flush()
    settle(app, log, start, lambda: controller.trace is not None and controller.trace.text == text
           and not controller.busy() and not posted(window), set())
    times = []
    for _ in range(repeats):
        written: list = []
        controller.sigFilesWritten.connect(written.append)
        with tempfile.TemporaryDirectory() as folder, log.paused():   # an export paints thousands of times
            start = time.perf_counter()
            window.export_all_to(folder, formats=("png", "svg"))
            while not written:
                app.processEvents()
                time.sleep(0.0005)
            times.append((time.perf_counter() - start) * 1000)
        controller.sigFilesWritten.disconnect(written.append)
    return statistics.median(times)


def startup_probe(settings_file: str) -> int:
    """In a fresh process (see startup_ms): start as `python main.py` does (its parser, the display check,
    then gui.app.run_app: gui.app first, then open_main_window) with the first sentence, at the window's
    own first-start size (nothing resizes a window just shown); once every visible panel has painted it,
    print "painted" and the time.perf_counter() of the last of those paints, and exit."""
    _offscreen()
    import main
    from gui.platform_check import display_problem

    main.build_parser([]).parse_args([])
    display_problem()
    from gui.app import FIRST_SENTENCE, application, open_main_window   # the model code, then Qt, as main.py
    _quiet_qt_warnings()
    from PySide6.QtCore import QSettings

    from core.bundle import load_bundle
    from gui.controller import Controller

    app = application()
    controller = Controller(load_bundle(None), "onnx")
    window = open_main_window(controller, QSettings(settings_file, QSettings.Format.IniFormat), FIRST_SENTENCE)
    log = PaintLog(app)
    visible = {p.object_name for p in window.built_panels() if window.on_screen(p)}
    last_paint, cpu = settle(app, log, 0.0, lambda: controller.trace is not None and not controller.busy()
                             and not posted(window), visible)
    print(f"painted {last_paint!r} {cpu!r}", flush=True)   # the main thread's CPU counts from the process start
    os._exit(0)   # the parent has its number; tearing Qt down is not part of it


def startup_ms(repeats: int) -> tuple[float, float]:
    """Fresh process start -> the first analysed sentence painted (see startup_probe): the medians of the
    time and of the main thread's CPU time. The time's ends are both time.perf_counter(), which counts
    from one system-wide clock in every process (CLOCK_MONOTONIC on Linux).

    The probes keep their compiled modules in a folder of their own (PYTHONPYCACHEPREFIX, written even where
    PYTHONDONTWRITEBYTECODE is set), filled by one start that is not counted: an installed app starts from
    compiled modules, and compiling the project's sources on every start would be timed otherwise."""
    with tempfile.TemporaryDirectory() as folder:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "pycache")
        runs = [_startup_once(Path(folder) / f"s{run}.ini", env) for run in range(repeats + 1)][1:]
    return statistics.median(t for t, _ in runs), statistics.median(cpu for _, cpu in runs)


def _startup_once(settings_file: Path, env: dict[str, str]) -> tuple[float, float]:
    """(ms from start to the last paint, the main thread's CPU ms by then) of one probe."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, __file__, "--startup-probe", str(settings_file)],
                             stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    word, *numbers = child.stdout.readline().split()
    child.wait()
    if word != "painted" or len(numbers) != 2:
        raise RuntimeError("the startup probe did not paint its first sentence")
    return (float(numbers[0]) - start) * 1000, float(numbers[1]) * 1000


def _quiet_qt_warnings() -> None:
    """The offscreen platform warns on every dock resize; those lines would bury the report."""
    from PySide6.QtCore import qInstallMessageHandler

    def handler(kind, context, message):
        if "propagateSizeHints" not in message:
            print(message, file=sys.stderr)

    qInstallMessageHandler(handler)


def run(repeats: int = 7) -> dict:
    _offscreen()
    _quiet_qt_warnings()
    from core import bench
    from core.patching import bench_patch_sweep
    from core.runners import OnnxRunner
    from gui.fonts import cjk_font_file

    with tempfile.TemporaryDirectory() as folder:
        app, controller, window = _window(str(Path(folder) / "bench.ini"))
        log = PaintLog(app)
        result: dict = dict(bench.forward_ms(controller.bundle, repeats))
        # residual + head sweeps of a 16-token pair, one ORT thread (the 2-thread pool fights the UI)
        sweep = bench_patch_sweep(OnnxRunner(controller.bundle, threads=1), 16, repeats)
        result["patch_sweep_ms"] = {"16": sweep["patch_sweep_ms.16"]}
        result["update_ms"], result["update_cpu_ms"], traces = update_ms(app, controller, window, log, repeats)
        result["rss_mb"] = bench.resident_mb()
        glassbox_grid = grid_ms(app, window, traces, repeats)
        size = window.panel("attention").grid.size()
        result["matplotlib_grid_ms"] = bench.matplotlib_grid_ms(traces, (size.width(), size.height()),
                                                                 max(1, repeats // 2), str(cjk_font_file()))
        result["glassbox_grid_ms"] = glassbox_grid
        result["grid_speedup"] = {key: result["matplotlib_grid_ms"][key] / max(glassbox_grid[key], 1e-6)
                                  for key in glassbox_grid}
        result["export_all_ms"] = export_all_ms(app, controller, window, log, max(1, repeats // 2))
        from gui.headless import bench_batch_export

        result["batch_export_ms_per_text"] = bench_batch_export()
        window.close()
        app.processEvents()
    result["startup_ms"], result["startup_cpu_ms"] = startup_ms(max(1, repeats // 2))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="glassbox bench", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object (ms, MB) instead of a table")
    parser.add_argument("--repeats", type=int, default=7, help="runs per median (default 7)")
    parser.add_argument("--startup-probe", dest="startup_probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.startup_probe:
        return startup_probe(args.startup_probe)
    return report(args)


def rounded(value):
    """Medians to 0.1 (ms, MB): more digits would be noise."""
    if isinstance(value, dict):
        return {key: rounded(v) for key, v in value.items()}
    return round(value, 1) if isinstance(value, float) else value


def report(args: argparse.Namespace) -> int:
    from core.bench import format_report

    if args.repeats < 1:
        raise ValueError("--repeats must be at least 1")
    if importlib.util.find_spec("matplotlib") is None:  # the baseline grid_speedup is measured against
        raise ValueError("the bench draws a matplotlib baseline: pip install -e '.[bench]'")
    result = run(args.repeats)
    result = rounded(result)
    print(json.dumps(result, indent=1) if args.json else format_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
