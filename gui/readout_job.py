"""A readout a panel shows, computed off the UI thread: the newest request wins, older ones are dropped.

The logit lens and the parity report take hundreds of milliseconds on a full context, too long for
the UI thread. A panel asks its ReadoutJob for `fn(*args)` (args: the traces the readout is a pure
function of). Once the controller has lent the job its model worker (`use_worker`), fn runs there
and the frozen result comes back on the UI thread, where the job keeps it and calls `on_ready` so
the panel redraws; until then `result_for` returns None and the panel says it is computing. A
request for other traces supersedes the pending one: skipped if it has not started, its answer
dropped if it has. With no worker (the headless export, a panel alone in a test) fn runs at once.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

# submit(fn, on_done, on_error, is_stale): the controller's compute_readout for one panel
Submit = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[str], None], Callable[[], bool]], None]


def _same_arg(x: Any, y: Any) -> bool:
    """Traces (and readouts of them) by identity: a new run is a new Trace, even of the same sentence;
    plain values (a position, a token id, a field name) by value."""
    plain = (int, np.integer, str)
    if isinstance(x, plain) and isinstance(y, plain):
        return bool(x == y)
    return x is y


def _same(a: tuple, b: tuple | None) -> bool:
    return b is not None and len(a) == len(b) and all(_same_arg(x, y) for x, y in zip(a, b))


class ReadoutJob:
    def __init__(self, on_ready: Callable[[], None]) -> None:
        self._on_ready = on_ready
        self._submit: Submit | None = None
        self._lender: ReadoutJob | None = None   # a sibling uses the worker lent to this job
        self._latest = 0                    # the newest request's number; older answers are stale
        self._pending: tuple | None = None  # the args being computed on the worker
        self._done: tuple | None = None     # the args of `_result` / `_error`
        self._result: Any = None
        self._error = ""

    def use_worker(self, submit: Submit) -> None:
        self._submit = submit

    def sibling(self) -> ReadoutJob:
        """A second readout of the same panel (its own newest-wins) on the worker lent to this job."""
        job = ReadoutJob(self._on_ready)
        job._lender = self
        return job

    def _worker(self) -> Submit | None:
        return self._lender._worker() if self._lender is not None else self._submit

    def result_for(self, fn: Callable[..., Any], *args) -> Any:
        """fn(*args) if it is known; else start computing it (unless already under way) and return None."""
        if _same(args, self._done):
            return self._result     # None if it failed: waiting_text says why
        if self._worker() is None:
            self._keep(args, fn(*args), "")
            return self._result
        if not _same(args, self._pending):
            self._request(fn, args)
        return None

    def result_now(self, fn: Callable[..., Any], *args) -> Any:
        """fn(*args) now, on this thread, unless known: for an export, which cannot wait for the worker.
        A pending request for the same traces is dropped (its answer would be the same)."""
        if not _same(args, self._done):
            if _same(args, self._pending):
                self._latest += 1
                self._pending = None
            self._keep(args, fn(*args), "")
        return self._result

    def waiting_text(self, what: str) -> str:
        """What the panel shows while result_for gives None: computing, or why it failed."""
        if self._error:
            return f"Could not compute {what}: {self._error}"
        return f"Computing {what}…"

    def _request(self, fn: Callable[..., Any], args: tuple) -> None:
        self._latest += 1
        number, self._pending = self._latest, args
        self._done, self._result, self._error = None, None, ""
        self._worker()(partial(fn, *args), partial(self._answer, number, args, ""),
                     lambda message: self._answer(number, args, message, None),
                     lambda: number != self._latest)

    def _answer(self, number: int, args: tuple, error: str, result: Any) -> None:
        if number != self._latest:
            return
        self._pending = None
        self._keep(args, result, error)
        self._on_ready()

    def _keep(self, args: tuple, result: Any, error: str) -> None:
        # A failure is kept too (result None): asking again for the same traces would fail again.
        self._done, self._result, self._error = args, result, error
