"""The one place that runs the model for the GUI: text in, Trace and Selection out.

All model work happens on one worker thread, so the UI never waits for a forward pass, a
tokenization, a bundle load or a file write. Jobs run one at a time, in order; only plain data
(Trace, Runners, lists of paths) comes back, through queued signals, to the main thread.
Experiments (patching sweeps, occlusion, the head-roles probe) have a second worker of their own,
so a keystroke during a long sweep is analysed at once (`run_experiment`); both use the same runners
(one onnxruntime session: a real model's packed weights would otherwise be held twice).

Stale results: every change of what should be shown (a keystroke, an append, a new bundle...)
bumps `generation`. A job remembers the generation it was made for; once that is no longer
current it is skipped if it has not started, stopped at its next stage boundary (a `checkpoint`)
if it has, and its result is dropped if it finishes anyway. Esc (`cancel`) and closing the window
stop jobs the same way.

Nothing that tokenizes runs on this thread: Append, Step back and Generate need the current
sentence's ids, which are either known (ids after an append, or those of the trace on screen) or
arrive with the run of the text the user just typed; edits wait for them (`_with_ids`).
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import Any, Callable

from PySide6.QtCore import QObject, QTimer, Signal

from core.bundle import Bundle, load_bundle, trace_bytes
from core.experiment_runs import AblatedRunner, ablations_only, with_ablations
from core.interventions import Interventions
from core.head_roles import probe_roles
from core.runners import NumpyRunner, OnnxRunner, Runner, fields_context, max_difference
from core.sampling import SamplingSettings, generate
from core.session import (Checkpoint, Prepared, cut_notice, no_checkpoint, prepare_ids, prepare_text, tokens_trace,
                          run_labelled_by_id, run_prepared, text_of_ids)
from core.trace import LAST_LOGITS, Trace
from core.trace_fields import trace_holds, union_of_requests, widened
from gui.after_paints import after_pending_paints
from gui.selection import Selection

BACKENDS = ("onnx", "numpy", "both")
BACKEND_NAMES = {"onnx": "ONNX Runtime", "numpy": "the NumPy reference", "both": "ONNX Runtime + NumPy"}
DEBOUNCE_MS = 50
VARIANT_KEYS = {"head_mask", "expert_override", "interventions", "fields"}  # interventions: run with these instead;
# fields: what the asking panel reads of the variant (Runner.run's request; absent: every field)
WORKER_NAME = "glassbox-model-worker"
EXPERIMENT_WORKER_NAME = "glassbox-experiment-worker"   # sweeps, occlusion, the probe: never in typing's way
# Closing waits this long for a job to reach its next checkpoint (a stage takes tens of ms on the
# shipped model), then leaves the thread to end on its own: see _Worker.stop.
SHUTDOWN_WAIT_S = 0.5
# A model whose full trace of PARTIAL_PROBE_TOKENS tokens is above this many bytes runs with only the fields
# the panels on screen draw (Panel.fields); smaller ones keep the whole trace, as parity and export want it.
PARTIAL_TRACE_BYTES = 32 * 2**20
PARTIAL_PROBE_TOKENS = 64
PROBE_TEXT = "Hello, 你好."   # the first run of a newly opened bundle when the sentence is empty


class Cancelled(Exception):
    """Raised at a checkpoint of a job that was superseded, cancelled, or is running at shutdown."""


@dataclass(frozen=True)
class SentenceState:
    """What is analysed: typed text, or token ids (after Append / Generate, which need not re-tokenize alike)."""
    text: str = ""
    ids: tuple[int, ...] | None = None   # None: analyse `text`; else run exactly these ids (text = decode(ids))


@dataclass(frozen=True)
class RunResult:
    trace: Trace
    parity: float | None = None   # largest ONNX <-> NumPy difference when the backend is "both"
    reference: Trace | None = None   # the NumPy trace of the same ids when the backend is "both"


class Runners:
    """The bundle's runners, built on first use, shared by the model and experiment workers."""

    def __init__(self, bundle: Bundle) -> None:
        self.bundle = bundle
        self._made: dict[str, Runner] = {}
        self._lock = threading.Lock()   # both workers may ask first: one runner (one session) is built

    def get(self, name: str) -> Runner:
        with self._lock:
            if name not in self._made:
                self._made[name] = OnnxRunner(self.bundle) if name == "onnx" else NumpyRunner(self.bundle)
            return self._made[name]


def _needed(backend: str) -> tuple[str, ...]:
    return ("onnx", "numpy") if backend == "both" else (backend,)


# ---------------------------------------------------------------- work done on the worker thread

def prepare_state(runners: Runners, state: SentenceState, fields=None) -> Prepared | None:
    """Tokenize once per run: the text cut to the context a run keeping `fields` may take, or the traced
    tokenization of ids (None: they do not round-trip, and are labelled from the vocabulary)."""
    bundle = runners.bundle
    if state.ids is not None:
        return prepare_ids(bundle.tokenizer, state.ids, state.text)
    return prepare_text(bundle.tokenizer, state.text, fields_context(bundle, fields))


def run_with_backend(runners: Runners, backend: str, state: SentenceState, *,
                     checkpoint: Checkpoint = no_checkpoint, on_tokens: Callable[[Trace], None] | None = None,
                     **interventions) -> RunResult:
    """One analysis of `state`. "both" runs ONNX and NumPy on the same tokens and measures their difference.
    on_tokens(trace) hears the tokens-only trace (core.session.tokens_trace) once the text is tokenized,
    before the model runs."""
    prepared = prepare_state(runners, state, interventions.get("fields"))
    if on_tokens is not None and prepared is not None:
        preview = tokens_trace(runners.bundle, _needed(backend)[0], prepared, interventions.get("interventions"))
        if preview is not None:
            on_tokens(preview)

    def once(name: str) -> Trace:
        checkpoint()
        runner = runners.get(name)
        if prepared is None:
            trace = run_labelled_by_id(runner, state.ids, checkpoint=checkpoint, **interventions)
        else:
            trace = run_prepared(runner, prepared, checkpoint=checkpoint, **interventions)
        trace = trace.validate()   # a graph whose outputs have the wrong shapes fails here, with the field named
        trace.nonfinite_fields()   # looked for here, off the UI thread (the notice reads it)
        return trace

    if backend != "both":
        return RunResult(once(backend))
    onnx_trace, numpy_trace = once("onnx"), once("numpy")
    return RunResult(onnx_trace, max_difference(onnx_trace, numpy_trace), numpy_trace)


class _StoppableRunner:
    """A runner that stops at the job's checkpoint before each run: the head-roles probe is several runs."""

    def __init__(self, runner: Runner, checkpoint: Checkpoint) -> None:
        self.runner, self.checkpoint, self.bundle = runner, checkpoint, runner.bundle

    def run(self, ids, **interventions) -> Trace:
        self.checkpoint()
        return self.runner.run(ids, **interventions)


def probe_scores(runners: Runners, *, checkpoint: Checkpoint = no_checkpoint):
    """Every head's role scores on the bundle's fixed probe (core.head_roles.probe_roles), stoppable.

    On ONNX Runtime when it starts (fast); where it cannot (a graph this onnxruntime refuses, while the
    user works on the NumPy reference), on NumPy: the probe is the bundle's, either runner gives it."""
    try:
        runner = runners.get("onnx")
    except Exception:   # noqa: BLE001 - whatever stops ORT from starting, the reference can still answer
        runner = runners.get("numpy")
    return probe_roles(_StoppableRunner(runner, checkpoint))


def generate_ids(runners: Runners, backend: str, ids: list[int], n: int, settings: SamplingSettings, *,
                 context: int | None = None, checkpoint: Checkpoint = no_checkpoint) -> list[int]:
    """Append n sampled tokens, never past `context` (default: Bundle.context); stoppable between tokens."""
    runner = runners.get("onnx" if backend == "both" else backend)
    context = runners.bundle.context if context is None else context

    def next_logits(so_far: list[int]):
        checkpoint()
        return runner.run(so_far, fields=[LAST_LOGITS]).logits[-1]   # a big model's T x V and layers: not kept

    return generate(next_logits, ids, n, settings, max_len=context)


def first_run(runners: Runners, backend: str, state: SentenceState, checkpoint: Checkpoint) -> RunResult:
    """Build the backend's runners and run `state` (or a probe text): what must succeed before a swap."""
    for name in _needed(backend):
        checkpoint()
        runners.get(name)
    probe = state if state.ids is not None or state.text else SentenceState(PROBE_TEXT)
    return run_with_backend(runners, backend, probe, checkpoint=checkpoint)


def open_bundle_runners(path: str, backend: str, state: SentenceState, *,
                        checkpoint: Checkpoint = no_checkpoint) -> tuple[Runners, RunResult]:
    """Load a bundle, build its runners and run the sentence on it: a bundle that loads but cannot run
    fails here, before it replaces anything."""
    runners = Runners(load_bundle(path))
    return runners, first_run(runners, backend, state, checkpoint)


def switch_backend(runners: Runners, backend: str, state: SentenceState, *,
                   checkpoint: Checkpoint = no_checkpoint) -> RunResult:
    """Build the new backend's runners and run the sentence with them; a failure leaves the old backend."""
    return first_run(runners, backend, state, checkpoint)


# ---------------------------------------------------------------- the worker thread

@dataclass
class _Job:
    fn: Callable[..., Any]                # runs on the worker thread: fn(checkpoint=...)
    on_done: Callable[[Any], None]        # runs on the main thread
    on_error: Callable[[str], None]
    is_stale: Callable[[], bool] = lambda: False
    counts_as_busy: bool = True
    detachable: bool = True               # False: closing waits for it (a file write must not be cut off)


class _Mailbox(QObject):
    """Where the worker posts results; lives on the main thread, so its signals arrive there (queued)."""
    sigDone = Signal(int, object)     # (job id, result)
    sigFailed = Signal(int, str)      # (job id, one-line message)
    sigSkipped = Signal(int)          # (job id): stale before it started, or stopped at a checkpoint
    sigTokens = Signal(int, object)   # (job id, its tokens-only Trace): the text is tokenized, the model runs


@lru_cache(maxsize=16)   # every run asks (fields_to_run); the sum walks every field of every layer
def _probe_trace_bytes(config) -> int:
    """Bytes of a full trace of PARTIAL_PROBE_TOKENS tokens of this model."""
    return trace_bytes(config, PARTIAL_PROBE_TOKENS)


class _Worker:
    """One Python thread running jobs in order; after `stop` it posts nothing and ends at its next checkpoint."""

    def __init__(self, mailbox: _Mailbox, name: str = WORKER_NAME) -> None:
        self._mailbox = mailbox
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._post_lock = threading.Lock()   # held while posting, so that nothing is posted after stop()
        self._closed = False
        self._running_detachable = True
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, job_id: int, job: _Job) -> None:
        self._queue.put((job_id, job))

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            job_id, job = item

            def checkpoint(job: _Job = job) -> None:
                if self._stopping.is_set() or job.is_stale():
                    raise Cancelled

            self._running_detachable = job.detachable
            try:
                checkpoint()
                result = job.fn(checkpoint=checkpoint)
            except Cancelled:
                self._post(self._mailbox.sigSkipped, job_id)
            except Exception as exc:  # reported on the main thread; the worker keeps serving
                self._post(self._mailbox.sigFailed, job_id, _one_line(exc))
            else:
                self._post(self._mailbox.sigDone, job_id, result)
            finally:
                self._running_detachable = True

    def tokens_poster(self, job_id: int) -> Callable[[Trace], None]:
        """What a job calls on this thread with its tokens-only trace (run_with_backend's on_tokens)."""
        return lambda trace: self._post(self._mailbox.sigTokens, job_id, trace)

    def _post(self, signal, *args) -> None:
        with self._post_lock:
            if not self._closed:
                signal.emit(*args)

    def stop(self, wait_s: float) -> None:
        """Drop queued jobs, stop the running one at its next checkpoint, and wait up to wait_s for the thread.

        A stage with no checkpoint inside (one onnxruntime run, a bundle load) can outlast wait_s; the
        window must still close at once, so the thread is then left to finish that stage alone. That is
        safe: it is a daemon thread holding only plain data, nothing it does touches Qt once the mailbox
        is closed (under the lock, so no post is half done), and it ends at the stage's checkpoint; if
        the process exits first, Python stops daemon threads at exit. A file write is the exception
        (`detachable=False`): closing waits for it, so that no partial file is left behind.
        """
        self.begin_stop()
        self.join(wait_s)

    def join(self, wait_s: float) -> None:
        self._thread.join(None if not self._running_detachable else wait_s)

    def begin_stop(self) -> None:
        """The first half of stop: from now on nothing is posted and the running job ends at its checkpoint."""
        self._stopping.set()
        with self._post_lock:
            self._closed = True
        self._queue.put(None)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# ---------------------------------------------------------------- the controller (main thread)

class Controller(QObject):
    sigTraceChanged = Signal(object)      # Trace | None (None: empty text)
    sigSelectionChanged = Signal(object)  # Selection
    sigNotice = Signal(str)               # something the user should know (cut text...); "" clears
    sigError = Signal(str)                # a failure, one line
    sigBusy = Signal(bool)
    sigStatus = Signal(object)            # dict: tokens, context, backend, elapsed_ms, parity, bundle
    sigHighlight = Signal(int, int)       # characters [start, end) of the sentence to highlight; -1 clears
    sigTextReplaced = Signal(object)      # str: the sentence changed by an append/generate/step back (not typing);
                                          # object, as a QString copy would drop a leading U+FEFF
    sigTextShownUndoably = Signal(object)  # str: B of a clicked sweep cell, in place of the sentence typed, which
                                           # the bar keeps in its undo history (Ctrl+Z brings it back)
    sigBundleChanged = Signal(object)     # Bundle
    sigBackendChanged = Signal(str)       # the backend in use (also after a switch that failed: the old one)
    sigFilesWritten = Signal(object)      # list[Path] of a finished write job
    sigReferenceTrace = Signal(object)    # the NumPy Trace behind the parity badge (None), before sigTraceChanged
    sigTokensChanged = Signal(object, object)   # (Trace | None, Selection): the tokens of the run under way, or
                                                # the trace shown again when that run failed or was cancelled
    sigCanStepBack = Signal(bool)         # whether appended tokens are there for Step back to take back

    def __init__(self, bundle: Bundle, backend: str = "onnx", parent: QObject | None = None) -> None:
        super().__init__(parent)
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r} (choose {', '.join(BACKENDS)})")
        self._runners = Runners(bundle)
        self._backend = backend
        self._state = SentenceState()
        self._shown: SentenceState | None = None      # the state self.trace was made for
        # The sentence as typed and its token count, once tokens were appended to it: where Step back stops.
        self._typed: tuple[SentenceState, int] | None = None
        self._awaiting_ids: list[Callable[[list[int]], None]] = []   # edits waiting for the sentence's ids
        self.trace: Trace | None = None
        self.parity: float | None = None
        self.selection = Selection()
        self._selected_ids: list[int] | None = None   # the tokens of the last sentence shown (Selection.for_tokens)
        self.generation = 0
        self._cancels = 0          # bumped by Esc and by closing: stops jobs that typing does not supersede
        self._switch_id = 0        # the latest backend switch asked for
        self._switching_to: str | None = None
        self._jobs: dict[int, _Job] = {}
        self._job_ids = itertools.count(1)
        self._latest_variant: dict[tuple[int, str], int] = {}
        self.interventions = Interventions()   # in force for every run (gui/panels/interventions_panel.py)
        self.partial_trace_bytes = PARTIAL_TRACE_BYTES
        # The union of the on-screen panels' fields (None: every field); the main window sets it.
        self.panel_fields: Callable[[], frozenset[str] | None] = lambda: None

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self._request_trace)

        self._mailbox = _Mailbox()
        self._mailbox.sigDone.connect(self._on_done)
        self._mailbox.sigFailed.connect(self._on_failed)
        self._mailbox.sigSkipped.connect(self._on_skipped)
        self._mailbox.sigTokens.connect(self._on_tokens)
        self._preview: Trace | None = None   # the run's tokens sigTokensChanged showed; its trace has not come yet
        self._preview_select: dict = {}      # selection changes made meanwhile (a chip of the new sentence clicked)
        self._worker = _Worker(self._mailbox)
        self._experiments = _Worker(self._mailbox, EXPERIMENT_WORKER_NAME)   # see run_experiment
        self._probe: tuple[Bundle, Any] | None = None    # (bundle, its HeadRoles on the probe)
        self._probe_asked: Bundle | None = None          # the bundle whose probe is running
        self._probe_waiting: list = []                   # panels that asked for it

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
        """The tokens a sentence may have: the model's context where a partial run of what the panels on
        screen read fits in memory (a big model), else Bundle.context (sized for a full trace)."""
        return fields_context(self.bundle, self.fields_to_run())

    def is_running(self) -> bool:
        """Whether a worker thread is alive (False once shutdown has joined them)."""
        return self._worker.is_alive() or self._experiments.is_alive()

    def busy(self) -> bool:
        return any(job.counts_as_busy and not job.is_stale() for job in self._jobs.values())

    # ------------------------------------------------------------ the sentence
    def set_text(self, text: str) -> None:
        """The user typed: analyse after a short pause (typing makes this the typed text and drops pending edits)."""
        if self._state.ids is None and text == self._state.text:
            return
        self._set_typed(None)
        self._awaiting_ids.clear()
        self._state = SentenceState(text)
        self.interventions = ablations_only(self.interventions)   # a patch belongs to the sentence it was made for
        self.generation += 1
        self._debounce.start()

    def flush(self) -> None:
        """Analyse now (Enter), instead of waiting for the debounce."""
        self._debounce.stop()
        self.generation += 1
        self._request_trace()

    def cancel(self) -> None:
        """Stop the analysis, generation or bundle load in progress (Esc); the panels keep the last result."""
        if not self.busy() and not self._debounce.isActive():
            self._end_preview()
            return
        self._debounce.stop()
        self._awaiting_ids.clear()
        self.generation += 1
        self._cancels += 1
        self._end_preview()
        if self._switching_to is not None:   # a backend switch was among what stopped
            self._switching_to = None
            self.sigBackendChanged.emit(self._backend)
        self._emit_busy()
        self.sigNotice.emit("cancelled: the panels show the last finished analysis")

    def _replace_state(self, state: SentenceState) -> None:
        self._state = state
        self.interventions = ablations_only(self.interventions)
        self.sigTextReplaced.emit(state.text)
        self.flush()

    def _known_ids(self) -> list[int] | None:
        """The sentence's ids without tokenizing here: its own, or those of its trace on screen; None if unknown."""
        state = self._state
        if state.ids is not None:
            return list(state.ids)
        if not state.text:
            return []
        if self._shown == state and self.trace is not None:
            return self.trace.input_ids.tolist()
        return None

    def _with_ids(self, edit: Callable[[list[int]], None]) -> None:
        """Apply an edit to the sentence's ids now if they are known, else when its run brings them."""
        ids = self._known_ids()
        if ids is not None and not self._awaiting_ids:
            edit(ids)
            return
        self._awaiting_ids.append(edit)
        if len(self._awaiting_ids) == 1:
            self.flush()   # start the run that tokenizes the sentence now, rather than after the debounce

    def _apply_awaiting(self) -> None:
        edits, self._awaiting_ids = self._awaiting_ids, []
        for edit in edits:   # the first edit makes the ids known; later ones apply to its result
            self._with_ids(edit)

    def _state_of_ids(self, ids: list[int]) -> SentenceState:
        # Decoding at most a context of ids is cheap; it gives the text the bar shows and the run reuses.
        return SentenceState(text_of_ids(self.bundle.tokenizer, ids), tuple(ids))

    def append_tokens(self, ids: list) -> None:
        if ids:
            new = [int(i) for i in ids]
            self._with_ids(lambda current: self._append(current, new))

    def _append(self, current: list[int], new: list[int]) -> None:
        combined = current + new
        if len(combined) > self.context:
            self.sigNotice.emit(f"the context is full ({self.context} tokens): "
                                f"{len(combined) - self.context} token(s) were not appended")
            combined = combined[: self.context]
        self._extend(current, combined)

    def _extend(self, current: list[int], longer: list[int]) -> None:
        """The sentence becomes `longer` (current's ids and more); nothing added (a full context): it stays as typed."""
        if len(longer) == len(current):
            return   # and Step back has nothing to take back
        self._remember_typed(current)
        self._replace_state(self._state_of_ids(longer))

    def can_step_back(self) -> bool:
        return self._typed is not None

    def _set_typed(self, typed: tuple[SentenceState, int] | None) -> None:
        if (typed is None) != (self._typed is None):
            self.sigCanStepBack.emit(typed is not None)
        self._typed = typed

    def _remember_typed(self, ids: list[int]) -> None:
        """Before the first token is appended to the typed text: keep it, for Step back to stop at."""
        if self._typed is None:
            self._set_typed((self._state, len(ids)))

    def step_back(self) -> None:
        """Take back the last appended (or generated) token: one per press, never one of the typed text."""
        self._with_ids(self._step_back)

    def _step_back(self, ids: list[int]) -> None:
        if self._typed is None:
            return   # only typed text: nothing appended to take back
        typed, typed_count = self._typed
        if len(ids) - 1 > typed_count:
            self._replace_state(self._state_of_ids(ids[:-1]))
        else:   # the text exactly as typed, not a decoding of its ids (which need not give it back)
            self._set_typed(None)
            self._replace_state(typed)

    def generate(self, request) -> None:
        """request: (n_tokens, SamplingSettings) from a panel's sigGenerate."""
        n, settings = request
        self._with_ids(lambda ids: self._generate(ids, int(n), settings))

    def _generate(self, ids: list[int], n: int, settings: SamplingSettings) -> None:
        if not ids:
            self.sigNotice.emit("type something first: generation continues a sentence")
            return
        self.generation += 1
        generation, runners, backend = self.generation, self._runners, self._backend

        self._submit(_Job(partial(generate_ids, runners, backend, ids, n, settings, context=self.context),
                          lambda new_ids: self._extend(ids, new_ids),
                          self._report_error, lambda: generation != self.generation))

    # ------------------------------------------------------------ running
    def _request_trace(self) -> None:
        state, generation = self._state, self.generation
        if state.ids is None and not state.text:
            self._show_result(state, None)   # empty text: an empty state, not an error
            return
        job_id = next(self._job_ids)   # the tokens it posts before its result name it
        self._submit(_Job(partial(run_with_backend, self._runners, self._backend, state,
                                  on_tokens=self._worker.tokens_poster(job_id),
                                  interventions=self.interventions, fields=self.fields_to_run()),
                          lambda result: self._show_result(state, result), self._trace_failed,
                          lambda: generation != self.generation), job_id)

    def fields_to_run(self) -> frozenset[str] | None:
        """What a run keeps: every field for a small model or for two backends (parity compares whole traces),
        else only what the panels on screen draw."""
        if self._backend == "both":
            return None
        if _probe_trace_bytes(self.bundle.config) <= self.partial_trace_bytes:
            return None
        return self.panel_fields()

    def holds(self, wanted) -> bool:
        """The trace shown (if any) has every field of `wanted` (None: every field)."""
        return self.trace is None or trace_holds(self.trace, wanted)

    def fetch_fields(self, wanted, on_done: Callable[[], None] | None = None) -> None:
        """Make the trace shown hold `wanted` too (None: every field): re-run its sentence on the worker with
        the wider request and show that; on_done() once the trace holds them (now, if it already does)."""
        trace = self.trace
        if trace is None or self._shown is None or trace_holds(trace, wanted):
            if on_done is not None:
                on_done()
            return
        self._rerun_shown(widened(trace, wanted), on_done)

    def _rerun_shown(self, fields, on_done: Callable[[], None] | None = None) -> None:
        """Run the sentence shown again keeping `fields` and show that (unless typing or a newer trace wins)."""
        trace, state, generation = self.trace, self._shown, self.generation
        fits = fields_context(self.bundle, fields)
        if trace is not None and trace.n_tokens > fits:   # re-run, the text would be cut: refuse instead
            self.sigError.emit(f"the panels on screen need more than fits in memory for {trace.n_tokens} tokens "
                               f"of this model (at most {fits}): shorten the sentence or close a panel")
            return

        def show(result: RunResult) -> None:
            self._show(result.trace, result.parity, result.reference)
            if on_done is not None:
                on_done()
            self._fetch_for_panels()   # the selection may have moved on while this ran (a second layer clicked)

        self._submit(_Job(partial(run_with_backend, self._runners, self._backend, state,
                                  interventions=self.interventions, fields=fields),
                          show, self._trace_failed, lambda: generation != self.generation or self.trace is not trace))

    def _trace_failed(self, message: str) -> None:
        self._awaiting_ids.clear()   # the edits needed this run's ids
        self._end_preview()
        self.sigError.emit(message)

    def _on_tokens(self, job_id: int, trace: Trace) -> None:
        """A run's text is tokenized: its tokens are shown (by the panels that read nothing else) while the model
        runs; the run's trace replaces them, or the trace shown comes back if the run fails or is cancelled."""
        job = self._jobs.get(job_id)
        if job is None or job.is_stale():
            return
        self._preview, self._preview_select = trace, {}
        self.sigTokensChanged.emit(trace, self._selection_for(trace))

    def _end_preview(self) -> None:
        if self._preview is not None:
            self._preview, self._preview_select = None, {}
            self.sigTokensChanged.emit(self.trace, self.selection)

    def _end_orphaned_preview(self) -> None:
        """A run whose tokens are shown was dropped (superseded) and nothing is coming to replace them: a
        backend switched and switched back, a Generate that failed. The sentence shown comes back."""
        if self._preview is not None and not self.busy() and not self._debounce.isActive():
            self._end_preview()

    def _show_result(self, state: SentenceState, result: RunResult | None) -> None:
        self._shown = state
        self._show(result.trace if result else None, result.parity if result else None,
                   result.reference if result else None)
        self._apply_awaiting()
        self._fetch_for_panels()

    def _show(self, trace: Trace | None, parity: float | None, reference: Trace | None = None) -> None:
        self.trace, self.parity = trace, parity
        self.sigReferenceTrace.emit(reference)
        if trace is not None:
            self.selection = self._selection_for(trace, self._preview_select)
            self._selected_ids = trace.input_ids.tolist()
        self._preview, self._preview_select = None, {}
        self.sigTraceChanged.emit(trace)
        self.sigNotice.emit(" · ".join(n for n in (self._cut_notice(trace), self._nonfinite_notice(trace)) if n))
        self.sigStatus.emit(self.status())

    def _selection_for(self, trace: Trace, changes: dict | None = None) -> Selection:
        """The selection once `trace` is shown: on a new sentence its last token (an emptied bar in between does
        not count), then `changes` made while its tokens were shown, clamped to the trace."""
        selection = self.selection.for_tokens(self._selected_ids, trace.input_ids.tolist())
        if changes:
            selection = selection.updated(**changes)
        return selection.clamped(trace.num_layers, trace.num_heads, trace.n_tokens)

    def _cut_notice(self, trace: Trace | None) -> str:
        return cut_notice(trace, self.context) if trace is not None else ""

    @staticmethod
    def _nonfinite_notice(trace: Trace | None) -> str:
        names = trace.nonfinite_fields() if trace is not None else []
        if not names:
            return ""
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return (f"this run holds NaN or infinite values in {shown}: heatmaps draw them magenta, "
                f"CSV files write them as nan")

    def status(self) -> dict:
        trace = self.trace
        return {"tokens": trace.n_tokens if trace is not None else 0, "context": self.context,
                "backend": self._backend, "elapsed_ms": trace.elapsed_s * 1000 if trace is not None else None,
                "parity": self.parity, "bundle": self.bundle.name, "interventions": self.interventions.describe()}

    def set_backend(self, backend: str) -> None:
        """Switch backend off the UI thread; only once its runners are built and have run the sentence."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r} (choose {', '.join(BACKENDS)})")
        if backend == (self._switching_to or self._backend):
            return
        self._switch_id += 1   # a switch still under way is superseded
        if backend == self._backend:   # back to the backend in use before the other one was ready
            self._switching_to = None
            self.sigBackendChanged.emit(backend)
            if self._shown != self._state:   # the switch superseded the sentence's run: run it again
                self.flush()
            return
        self._switching_to = backend
        self.generation += 1   # a run with the old backend is no longer wanted
        state, generation, cancels, runners = self._state, self.generation, self._cancels, self._runners
        switch_id = self._switch_id

        def done(result: RunResult) -> None:
            self._switching_to = None
            if self._runners is not runners:   # a bundle opened meanwhile: the switch was tried on the old one
                self.sigBackendChanged.emit(self._backend)
                self.sigError.emit(f"the model changed while switching to {BACKEND_NAMES[backend]}: choose it again")
                return
            self._backend = backend
            self.sigBackendChanged.emit(backend)
            if self._state == state and self.generation == generation and not self.interventions.describe():
                self._show_result(state, result if state.text or state.ids else None)
            else:
                self.flush()

        def failed(message: str) -> None:
            self._switching_to = None
            self.sigBackendChanged.emit(self._backend)
            self.sigError.emit(f"could not switch to {BACKEND_NAMES[backend]}: {message} "
                               f"(still using {BACKEND_NAMES[self._backend]})")
            self.flush()

        self._submit(_Job(partial(switch_backend, runners, backend, state), done, failed,
                          lambda: cancels != self._cancels or switch_id != self._switch_id))

    def open_bundle(self, path: str) -> None:
        """Load another bundle off the UI thread. It replaces the current one only after it has loaded and
        run the sentence; any failure leaves the current bundle in place and usable."""
        # Ids of the old vocabulary mean nothing to the new one: the new bundle reads the text.
        backend, state, cancels = self._backend, SentenceState(self._state.text), self._cancels

        def done(opened: tuple[Runners, RunResult]) -> None:
            runners, result = opened
            if backend != self._backend:   # switched meanwhile: the new bundle was not tried on this backend
                self.sigError.emit(f"could not open the bundle {path}: the backend changed while it loaded")
                return
            self._runners = runners
            self.interventions = Interventions()   # another model's heads and experts
            self._set_typed(None)
            self._awaiting_ids.clear()
            if self._state.ids is not None:   # appended while it loaded: still ids of the old vocabulary
                self._state = SentenceState(self._state.text)
            self.sigBundleChanged.emit(runners.bundle)
            if self._state == state:
                self.generation += 1
                self._show_result(state, result if state.text else None)
            else:
                self.flush()

        self._submit(_Job(partial(open_bundle_runners, path, backend, state), done,
                          lambda message: self.sigError.emit(f"could not open the bundle {path}: {message}"),
                          lambda: cancels != self._cancels))

    def write_files(self, folder, files: dict, on_done: Callable[[list], None] | None = None,
                    on_error: Callable[[str], None] | None = None) -> None:
        """Write rendered export files off the UI thread (atomically, see gui.export.write_files)."""
        from gui.export import write_files

        def done(paths: list) -> None:
            self.sigFilesWritten.emit(paths)
            if on_done is not None:
                on_done(paths)

        self._submit(_Job(lambda checkpoint: write_files(folder, files), done, on_error or self._report_error,
                          counts_as_busy=False, detachable=False))

    # ------------------------------------------------------------ panels
    def connect_panel(self, panel) -> None:
        panel.sigSelect.connect(self.select)
        panel.sigAppendTokens.connect(self.append_tokens)
        panel.sigStepBack.connect(self.step_back)
        if hasattr(panel, "set_can_step_back"):     # the next-token panel's Step back button
            self.sigCanStepBack.connect(panel.set_can_step_back)
            panel.set_can_step_back(self.can_step_back())
        panel.sigGenerate.connect(self.generate)
        panel.sigRequestVariant.connect(partial(self.request_variant, panel))
        panel.sigHoverText.connect(self.sigHighlight)
        panel.sigSetInterventions.connect(self.set_interventions)
        panel.sigShowPatched.connect(self.show_patched)
        panel.sigRunExperiment.connect(self.run_experiment)
        if hasattr(panel, "set_reference_trace"):   # the parity panel compares both backends' traces
            self.sigReferenceTrace.connect(panel.set_reference_trace)
        if hasattr(panel, "sigRequestProbe"):       # the head-roles panel's probe runs the model
            panel.sigRequestProbe.connect(partial(self.request_probe, panel))
        if hasattr(panel, "readout"):               # gui.readout_job: the lens and parity report, off this thread
            panel.readout.use_worker(partial(self.compute_readout, panel))

    def select(self, changes: dict) -> None:
        known = {k: v for k, v in changes.items() if k in ("layer", "head", "query", "key")}
        selection = self.selection.updated(**known)
        if self.trace is not None:
            selection = selection.clamped(self.trace.num_layers, self.trace.num_heads, self.trace.n_tokens)
        self.selection = selection
        self.sigSelectionChanged.emit(selection)
        if self._preview is not None:   # the panels showing the new sentence's tokens see the change on it
            self._preview_select.update(known)
            self.sigTokensChanged.emit(self._preview, self._selection_for(self._preview, self._preview_select))
        self._fetch_for_panels()

    def _fetch_for_panels(self) -> None:
        """A selection can change what the panels on screen read (the Attention panel's layer, the Next token
        panel's query): run the sentence shown again for exactly that when a big model's trace lacks it."""
        wanted = self.fields_to_run()
        if wanted is not None and self.trace is not None and not trace_holds(self.trace, wanted):
            self._rerun_shown(wanted)

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
        asked = dict(interventions or {})
        fields = asked.pop("fields", None)
        chosen = asked.pop("interventions") if "interventions" in asked else replace(self.interventions, **asked)
        run = partial(run_with_backend, self._runners, backend, state, interventions=chosen or Interventions(),
                      fields=fields)
        self._submit(_Job(lambda checkpoint: run(checkpoint=checkpoint).trace, answer, failed, stale,
                          counts_as_busy=False), job_id=job_id)

    # ------------------------------------------------------------ experiments (gui/panels/*: interventions, patching)
    def set_interventions(self, interventions: Interventions) -> None:
        """Ablations in force from now on, for every run; re-run the sentence with them."""
        self.interventions = ablations_only(interventions)
        self.flush()

    def show_patched(self, text: str, interventions: Interventions) -> None:
        """Show `text` run with a patch (a clicked sweep cell) in every panel, the ablations in force kept."""
        self._set_typed(None)
        self._awaiting_ids.clear()
        self._state = SentenceState(text)
        self.interventions = with_ablations(ablations_only(self.interventions), interventions)
        self.sigTextShownUndoably.emit(text)
        self.flush()

    def run_experiment(self, job) -> None:
        """job.fn(runner) on the experiment worker, the runner adding the ablations in force; job.on_done /
        on_error here. Its own thread, so a keystroke during a sweep is analysed at once, not after it."""
        runners, ablations = self._runners_for_experiments(), ablations_only(self.interventions)
        name = "onnx" if self._backend == "both" else self._backend

        def run(checkpoint):
            job.checkpoint = checkpoint   # closing the window stops a long sweep at its next run
            return job.fn(AblatedRunner(runners.get(name), ablations))

        self._submit_experiment(_Job(run, job.on_done, job.on_error, counts_as_busy=False))

    def request_probe(self, panel) -> None:
        """Score every head on the bundle's fixed probe (core.head_roles.probe_roles); answer panel.set_probe.

        One probe per bundle answers every panel that asks (the Attention grid's badges, the Head roles
        table). It runs on ONNX Runtime whatever the backend: the probe is a property of the bundle, both
        runners agree on it within the parity tolerance, and the NumPy reference takes seconds for it."""
        bundle = self.bundle
        if self._probe is not None and self._probe[0] is bundle:
            roles = self._probe[1]
            QTimer.singleShot(0, lambda: _alive(panel) and panel.set_probe(roles))   # not inside the panel's draw
            return
        self._probe_waiting.append(panel)
        if self._probe_asked is bundle:
            return
        self._probe_asked = bundle

        def answer(roles) -> None:
            self._probe = (bundle, roles)
            waiting, self._probe_waiting = self._probe_waiting, []
            for asked in waiting:
                if _alive(asked):
                    asked.set_probe(roles)

        def failed(message: str) -> None:
            self._probe_waiting = []   # _probe_asked stays: asking again at every draw would fail again
            self._report_error(f"head roles: the probe could not run: {message}")

        job = _Job(partial(probe_scores, self._runners_for_experiments()), answer, failed,
                   lambda: bundle is not self.bundle, counts_as_busy=False)
        # Asked from inside a panel's draw: started once the paints that draw posted are done, so that its
        # session and runs do not compete with the first picture of a sentence (at start-up, for a core)
        after_pending_paints(self, lambda: self._submit_experiment(job))

    def _runners_for_experiments(self) -> Runners:
        """The current bundle's runners: the sentence's session serves the experiments too (run() is thread-safe)."""
        return self._runners

    def _submit_experiment(self, job: _Job) -> None:
        job_id = next(self._job_ids)
        self._jobs[job_id] = job
        self._experiments.submit(job_id, job)

    # ------------------------------------------------------------ readouts and sessions (gui/readout_job.py, gui/session_actions.py)
    @property
    def runners(self) -> Runners:
        return self._runners

    @property
    def state(self) -> SentenceState:
        """What is analysed: the typed text, or the ids an Append / Generate made."""
        return self._state

    def run_on_worker(self, fn: Callable[..., Any], on_done: Callable[[Any], None],
                      on_error: Callable[[str], None] | None = None, is_stale: Callable[[], bool] = lambda: False,
                      *, detachable: bool = True) -> None:
        """fn(checkpoint=...) on the model worker, in order with the runs; on_done(result) or on_error here."""
        self._submit(_Job(fn, on_done, on_error or self._report_error, is_stale, counts_as_busy=False,
                          detachable=detachable))

    def compute_readout(self, panel, fn: Callable[[], Any], on_done: Callable[[Any], None],
                        on_error: Callable[[str], None], is_stale: Callable[[], bool]) -> None:
        """A readout of traces already made (no model run) on the worker; the answer is dropped if panel is gone."""
        def if_alive(callback: Callable[[Any], None]) -> Callable[[Any], None]:
            def call(value: Any) -> None:
                if _alive(panel):
                    callback(value)
            return call

        self.run_on_worker(lambda checkpoint: fn(), if_alive(on_done), if_alive(on_error), is_stale)

    def restore_session(self, runners: Runners, backend: str, state: SentenceState, interventions: Interventions,
                        result: RunResult | None, selection: Selection) -> None:
        """Show a reopened session: the worker has loaded its bundle's runners and run its sentence with its
        interventions (gui/session_actions.py); this swaps them in, shows that run, then its selection."""
        self._debounce.stop()
        self._switch_id += 1   # a backend switch under way is superseded
        self._switching_to = None
        self._set_typed(None)
        self._awaiting_ids.clear()
        if runners is not self._runners:
            self._runners = runners
            self.sigBundleChanged.emit(runners.bundle)
        self._backend = backend
        self.sigBackendChanged.emit(backend)
        self._state = state
        self.interventions = interventions
        self.sigTextReplaced.emit(state.text)
        self.generation += 1
        self._show_result(state, result)
        self.select({"layer": selection.layer, "head": selection.head, "query": selection.query,
                     "key": selection.key})

    # ------------------------------------------------------------ the worker
    def _submit(self, job: _Job, job_id: int | None = None) -> None:
        job_id = job_id if job_id is not None else next(self._job_ids)
        self._jobs[job_id] = job
        self._emit_busy()
        self._worker.submit(job_id, job)

    def _on_done(self, job_id: int, result: Any) -> None:
        job = self._jobs.pop(job_id, None)
        self._emit_busy()
        if job is not None and not job.is_stale():
            job.on_done(result)
        self._end_orphaned_preview()

    def _on_failed(self, job_id: int, message: str) -> None:
        job = self._jobs.pop(job_id, None)
        self._emit_busy()
        if job is not None and not job.is_stale():
            job.on_error(message)
        self._end_orphaned_preview()

    def _on_skipped(self, job_id: int) -> None:
        self._jobs.pop(job_id, None)
        self._emit_busy()
        self._end_orphaned_preview()

    def _report_error(self, message: str) -> None:
        self.sigError.emit(message)

    def _emit_busy(self) -> None:
        self.sigBusy.emit(self.busy())

    def shutdown(self) -> None:
        """Stop the worker: queued jobs are dropped, the running one stops at its next checkpoint (see
        _Worker.stop for a stage that outlasts SHUTDOWN_WAIT_S). Returns without waiting on model work."""
        self._debounce.stop()
        self.generation += 1
        self._cancels += 1
        deadline = time.monotonic() + SHUTDOWN_WAIT_S   # both stop at once: closing waits SHUTDOWN_WAIT_S in all
        self._experiments.begin_stop()
        self._worker.stop(SHUTDOWN_WAIT_S)
        self._experiments.join(max(0.0, deadline - time.monotonic()))
        self._jobs.clear()


def panels_fields(panels) -> frozenset[str] | None:
    """What a run must keep for these panels (their Panel.fields); None: every field, also when no panel is
    given, as then nothing tells what will be looked at."""
    fields = union_of_requests(panel.fields for panel in panels)
    return fields or None


def _alive(obj: QObject) -> bool:
    try:
        import shiboken6
        return shiboken6.isValid(obj)
    except ImportError:  # pragma: no cover - shiboken6 ships with PySide6
        return True
