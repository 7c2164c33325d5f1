"""The one place that runs the model for the GUI: text in, Trace and Selection out.

All model work happens on one worker QThread, so the UI never waits for a forward pass, a bundle
load or a file write. Jobs run one at a time, in order; only plain data (Trace, Bundle, lists of
paths) comes back, through queued signals, to the main thread.

Stale results: every change of what should be shown (a keystroke, an append, a new bundle...)
bumps `generation`. A job remembers the generation it was made for; if that is no longer current
when the job is about to start, it is skipped, and if it finishes late its result is dropped and
never shown.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from core.bundle import Bundle, load_bundle
from core.head_roles import probe_roles
from core.runners import NumpyRunner, OnnxRunner, Runner, max_difference
from core.sampling import SamplingSettings, generate
from core.session import analyse, prepare_text, run_ids
from core.trace import Trace
from gui.selection import Selection

BACKENDS = ("onnx", "numpy", "both")
DEBOUNCE_MS = 50
VARIANT_KEYS = {"head_mask", "expert_override"}


@dataclass(frozen=True)
class SentenceState:
    """What is analysed: typed text, or token ids (after Append / Generate, which need not re-tokenize alike)."""
    text: str = ""
    ids: tuple[int, ...] | None = None   # None: analyse `text`; else run exactly these ids


@dataclass(frozen=True)
class RunResult:
    trace: Trace
    parity: float | None = None   # largest ONNX <-> NumPy difference when the backend is "both"
    reference: Trace | None = None   # the NumPy trace of the same ids when the backend is "both"


class Runners:
    """The bundle's runners, built on first use. Only the worker thread calls `get`."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle
        self._made: dict[str, Runner] = {}

    def get(self, name: str) -> Runner:
        if name not in self._made:
            self._made[name] = OnnxRunner(self.bundle) if name == "onnx" else NumpyRunner(self.bundle)
        return self._made[name]


@dataclass
class _Job:
    fn: Callable[[], Any]                 # runs on the worker thread
    on_done: Callable[[Any], None]        # runs on the main thread
    on_error: Callable[[str], None]
    is_stale: Callable[[], bool] = lambda: False
    counts_as_busy: bool = True


class _Worker(QObject):
    sigDone = Signal(int, object)     # (job id, result)
    sigFailed = Signal(int, str)      # (job id, one-line message)
    sigSkipped = Signal(int)

    @Slot(int, object, object)
    def run(self, job_id: int, fn: Callable[[], Any], is_stale: Callable[[], bool]) -> None:
        if is_stale():   # superseded while it waited in the queue: do not spend time on it
            self.sigSkipped.emit(job_id)
            return
        try:
            result = fn()
        except Exception as exc:  # reported on the main thread; the worker keeps serving
            self.sigFailed.emit(job_id, _one_line(exc))
            return
        self.sigDone.emit(job_id, result)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def run_with_backend(runners: Runners, backend: str, state: SentenceState, **interventions) -> RunResult:
    """One analysis of `state` (worker thread). "both" runs ONNX and NumPy and measures their difference."""
    def once(name: str) -> Trace:
        runner = runners.get(name)
        if state.ids is not None:
            return run_ids(runner, list(state.ids), **interventions)
        return analyse(runner, state.text, **interventions)

    if backend != "both":
        return RunResult(once(backend))
    onnx_trace, numpy_trace = once("onnx"), once("numpy")
    return RunResult(onnx_trace, max_difference(onnx_trace, numpy_trace), numpy_trace)


def generate_ids(runners: Runners, backend: str, ids: list[int], n: int, settings: SamplingSettings) -> list[int]:
    """Append n sampled tokens (worker thread), never past the model's context."""
    runner = runners.get("onnx" if backend == "both" else backend)
    context = runners.bundle.config.max_position_embeddings
    return generate(lambda so_far: runner.run(so_far).logits[-1], ids, n, settings, max_len=context)


def open_bundle_runners(path: str, backend: str) -> Runners:
    """Load and validate a bundle and build the runner(s) the backend needs (worker thread)."""
    runners = Runners(load_bundle(path))
    for name in (("onnx", "numpy") if backend == "both" else (backend,)):
        runners.get(name)   # a graph onnxruntime cannot load fails here, not on the first keystroke
    return runners


class Controller(QObject):
    sigTraceChanged = Signal(object)      # Trace | None (None: empty text)
    sigSelectionChanged = Signal(object)  # Selection
    sigNotice = Signal(str)               # something the user should know (cut text...); "" clears
    sigError = Signal(str)                # a failure, one line
    sigBusy = Signal(bool)
    sigStatus = Signal(object)            # dict: tokens, context, backend, elapsed_ms, parity, bundle
    sigHighlight = Signal(int, int)       # characters [start, end) of the sentence to highlight; -1 clears
    sigTextReplaced = Signal(str)         # the sentence changed by an append/generate/undo (not typing)
    sigBundleChanged = Signal(object)     # Bundle
    sigFilesWritten = Signal(object)      # list[Path] of a finished write job
    sigReferenceTrace = Signal(object)    # the NumPy Trace behind the parity badge (None), before sigTraceChanged

    _sigSubmit = Signal(int, object, object)

    def __init__(self, bundle: Bundle, backend: str = "onnx", parent: QObject | None = None) -> None:
        super().__init__(parent)
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r} (choose {', '.join(BACKENDS)})")
        self._runners = Runners(bundle)
        self._backend = backend
        self._state = SentenceState()
        self._undo: list[SentenceState] = []
        self.trace: Trace | None = None
        self.parity: float | None = None
        self.selection = Selection()
        self.generation = 0
        self._jobs: dict[int, _Job] = {}
        self._job_ids = itertools.count(1)
        self._latest_variant: dict[tuple[int, str], int] = {}

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self._request_trace)

        self._thread = QThread()
        self._thread.setObjectName("glassbox-model-worker")
        self._worker = _Worker()
        self._worker.moveToThread(self._thread)
        self._sigSubmit.connect(self._worker.run)
        self._worker.sigDone.connect(self._on_done)
        self._worker.sigFailed.connect(self._on_failed)
        self._worker.sigSkipped.connect(self._on_skipped)
        self._thread.finished.connect(self._worker.deleteLater)
        self._thread.start()

    # ------------------------------------------------------------ facts
    @property
    def bundle(self) -> Bundle:
        return self._runners.bundle

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def text(self) -> str:
        return self._state.text

    @property
    def context(self) -> int:
        return self.bundle.config.max_position_embeddings

    def is_running(self) -> bool:
        return self._thread.isRunning()

    def busy(self) -> bool:
        return any(job.counts_as_busy for job in self._jobs.values())

    def can_step_back(self) -> bool:
        return bool(self._undo) or len(self._current_ids()) > 1

    # ------------------------------------------------------------ the sentence
    def set_text(self, text: str) -> None:
        """The user typed: analyse after a short pause (typing resets the undo stack)."""
        if self._state.ids is None and text == self._state.text:
            return
        self._undo.clear()
        self._state = SentenceState(text)
        self.generation += 1
        self._debounce.start()

    def flush(self) -> None:
        """Analyse now (Enter), instead of waiting for the debounce."""
        self._debounce.stop()
        self.generation += 1
        self._request_trace()

    def _replace_state(self, state: SentenceState, push_undo: bool) -> None:
        if push_undo:
            self._undo.append(self._state)
        self._state = state
        self.sigTextReplaced.emit(state.text)
        self.flush()

    def _current_ids(self) -> list[int]:
        if self._state.ids is not None:
            return list(self._state.ids)
        prepared = prepare_text(self.bundle.tokenizer, self._state.text, self.context)
        return prepared.tokenization.ids

    def append_tokens(self, ids: list) -> None:
        if not ids:
            return
        combined = (self._current_ids() + [int(i) for i in ids])
        if len(combined) > self.context:
            self.sigNotice.emit(f"the context is full ({self.context} tokens): "
                                f"{len(combined) - self.context} token(s) were not appended")
            combined = combined[: self.context]
        self._replace_state(SentenceState(self.bundle.tokenizer.decode(combined), tuple(combined)), push_undo=True)

    def step_back(self) -> None:
        """Undo the last append/generate; with nothing to undo, drop the last token."""
        if self._undo:
            self._replace_state(self._undo.pop(), push_undo=False)
            return
        ids = self._current_ids()
        if len(ids) > 1:
            self._replace_state(SentenceState(self.bundle.tokenizer.decode(ids[:-1]), tuple(ids[:-1])),
                                push_undo=False)

    def generate(self, request) -> None:
        """request: (n_tokens, SamplingSettings) from a panel's sigGenerate."""
        n, settings = request
        ids = self._current_ids()
        if not ids:
            self.sigNotice.emit("type something first: generation continues a sentence")
            return
        self.generation += 1
        generation, runners, backend = self.generation, self._runners, self._backend

        def done(new_ids: list[int]) -> None:
            self._replace_state(SentenceState(runners.bundle.tokenizer.decode(new_ids), tuple(new_ids)),
                                push_undo=True)

        self._submit(_Job(partial(generate_ids, runners, backend, ids, int(n), settings), done,
                          self._report_error, lambda: generation != self.generation))

    # ------------------------------------------------------------ running
    def _request_trace(self) -> None:
        state, generation = self._state, self.generation
        if state.ids is None and not state.text:
            self._show(None, None)   # empty text: an empty state, not an error
            return
        self._submit(_Job(partial(run_with_backend, self._runners, self._backend, state),
                          lambda result: self._show(result.trace, result.parity, result.reference),
                          self._report_error, lambda: generation != self.generation))

    def _show(self, trace: Trace | None, parity: float | None, reference: Trace | None = None) -> None:
        previous, self.trace, self.parity = self.trace, trace, parity
        self.sigReferenceTrace.emit(reference)
        if trace is not None:
            if previous is not None and previous.text != trace.text:   # a new sentence: look at its last token
                self.selection = self.selection.updated(query=None, key=None)
            self.selection = self.selection.clamped(trace.num_layers, trace.num_heads, trace.n_tokens)
        self.sigTraceChanged.emit(trace)
        self.sigNotice.emit(self._cut_notice(trace))
        self.sigStatus.emit(self.status())

    def _cut_notice(self, trace: Trace | None) -> str:
        if trace is None or not trace.truncated_chars:
            return ""
        return (f"text cut at {self.context} tokens: the last {trace.truncated_chars} characters "
                f"were not analysed")

    def status(self) -> dict:
        trace = self.trace
        return {"tokens": trace.n_tokens if trace is not None else 0, "context": self.context,
                "backend": self._backend, "elapsed_ms": trace.elapsed_s * 1000 if trace is not None else None,
                "parity": self.parity, "bundle": self.bundle.name}

    def set_backend(self, backend: str) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r} (choose {', '.join(BACKENDS)})")
        if backend != self._backend:
            self._backend = backend
            self.flush()

    def open_bundle(self, path: str) -> None:
        """Load another bundle off the UI thread; a bad one leaves the current bundle in place."""
        backend = self._backend

        def done(runners: Runners) -> None:
            self._runners = runners
            self._undo.clear()
            if self._state.ids is not None:   # ids of the old vocabulary mean nothing to the new one
                self._state = SentenceState(self._state.text)
            self.sigBundleChanged.emit(runners.bundle)
            self.flush()

        self._submit(_Job(partial(open_bundle_runners, path, backend), done,
                          lambda message: self.sigError.emit(f"could not open the bundle {path}: {message}")))

    def write_files(self, folder, files: dict, on_done: Callable[[list], None] | None = None,
                    on_error: Callable[[str], None] | None = None) -> None:
        """Write rendered export files off the UI thread (atomically, see gui.export.write_files)."""
        from gui.export import write_files

        def done(paths: list) -> None:
            self.sigFilesWritten.emit(paths)
            if on_done is not None:
                on_done(paths)

        self._submit(_Job(partial(write_files, folder, files), done, on_error or self._report_error,
                          counts_as_busy=False))

    # ------------------------------------------------------------ panels
    def connect_panel(self, panel) -> None:
        panel.sigSelect.connect(self.select)
        panel.sigAppendTokens.connect(self.append_tokens)
        panel.sigStepBack.connect(self.step_back)
        panel.sigGenerate.connect(self.generate)
        panel.sigRequestVariant.connect(partial(self.request_variant, panel))
        panel.sigHoverText.connect(self.sigHighlight)
        if hasattr(panel, "set_reference_trace"):   # the parity panel compares both backends' traces
            self.sigReferenceTrace.connect(panel.set_reference_trace)
        if hasattr(panel, "sigRequestProbe"):       # the head-roles panel's probe runs the model
            panel.sigRequestProbe.connect(partial(self.request_probe, panel))

    def select(self, changes: dict) -> None:
        known = {k: v for k, v in changes.items() if k in ("layer", "head", "query", "key")}
        selection = self.selection.updated(**known)
        if self.trace is not None:
            selection = selection.clamped(self.trace.num_layers, self.trace.num_heads, self.trace.n_tokens)
        self.selection = selection
        self.sigSelectionChanged.emit(selection)

    def request_variant(self, panel, tag: str, interventions: dict) -> None:
        """Run the current sentence with interventions; answer panel.set_variant(tag, trace or None)."""
        unknown = set(interventions or {}) - VARIANT_KEYS
        if unknown:
            self.sigError.emit(f"unknown intervention {sorted(unknown)[0]!r}")
            return
        key = (id(panel), tag)
        job_id = next(self._job_ids)
        self._latest_variant[key] = job_id
        generation, state = self.generation, self._state
        backend = "onnx" if self._backend == "both" else self._backend

        def stale() -> bool:
            return generation != self.generation or self._latest_variant.get(key) != job_id

        def answer(trace: Trace | None) -> None:
            if _alive(panel):
                panel.set_variant(tag, trace)

        def failed(message: str) -> None:
            answer(None)
            self.sigError.emit(f"the variant run failed: {message}")

        if state.ids is None and not state.text:
            answer(None)
            return
        run = partial(run_with_backend, self._runners, backend, state, **dict(interventions or {}))
        self._submit(_Job(lambda: run().trace, answer, failed, stale, counts_as_busy=False), job_id=job_id)

    def request_probe(self, panel) -> None:
        """Score every head on the bundle's fixed probe (core.head_roles.probe_roles); answer panel.set_probe."""
        runners, backend = self._runners, "onnx" if self._backend == "both" else self._backend

        def answer(roles) -> None:
            if _alive(panel):
                panel.set_probe(roles)

        self._submit(_Job(lambda: probe_roles(runners.get(backend)), answer, self._report_error,
                          lambda: runners is not self._runners, counts_as_busy=False))

    # ------------------------------------------------------------ the worker
    def _submit(self, job: _Job, job_id: int | None = None) -> None:
        job_id = job_id if job_id is not None else next(self._job_ids)
        self._jobs[job_id] = job
        self._emit_busy()
        self._sigSubmit.emit(job_id, job.fn, job.is_stale)

    def _on_done(self, job_id: int, result: Any) -> None:
        job = self._jobs.pop(job_id, None)
        self._emit_busy()
        if job is not None and not job.is_stale():
            job.on_done(result)

    def _on_failed(self, job_id: int, message: str) -> None:
        job = self._jobs.pop(job_id, None)
        self._emit_busy()
        if job is not None and not job.is_stale():
            job.on_error(message)

    def _on_skipped(self, job_id: int) -> None:
        self._jobs.pop(job_id, None)
        self._emit_busy()

    def _report_error(self, message: str) -> None:
        self.sigError.emit(message)

    def _emit_busy(self) -> None:
        self.sigBusy.emit(self.busy())

    def shutdown(self) -> None:
        """Stop the worker thread and wait for it (the job running now finishes first)."""
        self._debounce.stop()
        self.generation += 1          # whatever is still queued is stale: skip it
        if self._thread.isRunning():
            self._thread.quit()
            self._thread.wait()
        self._jobs.clear()


def _alive(obj: QObject) -> bool:
    try:
        import shiboken6
        return shiboken6.isValid(obj)
    except ImportError:  # pragma: no cover - shiboken6 ships with PySide6
        return True
