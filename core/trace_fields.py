"""Which fields a partial Trace holds, against what a reader (a panel, an export) needs.

A request is what Runner.run(ids, fields=...) takes (core.trace.select_outputs names), or None for
every field. Qt-free: the controller chooses what to run with it, the panels say what they miss.
"""
from __future__ import annotations

from core.trace import LAST_LOGITS, LAYER_FIELDS, LOGITS_FROM, Trace, select_outputs


def trace_holds(trace: Trace, wanted) -> bool:
    """The trace has every field of the request `wanted` (None: every field)."""
    if trace.fields is None:
        return True
    if wanted is None:
        return False
    names, _ = select_outputs(trace.num_layers, wanted)
    if not set(names) <= trace.fields:
        return False
    return "logits" not in names or trace.logits_from <= first_logits_row(wanted, trace.n_tokens)


def logits_from(position: int) -> str:
    """The request for the logits of positions `position`..T-1: what reading one earlier row costs."""
    return f"{LOGITS_FROM}{int(position)}"


def first_logits_row(wanted, n_tokens: int) -> int:
    """The first position whose logits a request keeps (T x V is a big vocabulary's largest output): 0 for
    every field or "logits", the smallest N of "logits.from.N" (at most T - 1), T - 1 for "logits.last"
    alone, T for a request without logits."""
    if wanted is None:
        return 0
    rows = [0 if name == "logits" else n_tokens - 1 if name == LAST_LOGITS
            else min(int(name[len(LOGITS_FROM):]), n_tokens - 1)
            for name in wanted if name in ("logits", LAST_LOGITS) or name.startswith(LOGITS_FROM)]
    return min(rows, default=n_tokens)


def union_of_requests(requests) -> frozenset[str] | None:
    """Every field any of the requests asks for; None if one of them asks for everything."""
    union: set[str] = set()
    for request in requests:
        if request is None:
            return None
        union.update(request)
    return frozenset(union)


def widened(trace: Trace, wanted) -> frozenset[str] | None:
    """A request for what the trace holds plus `wanted` (None: every field)."""
    if wanted is None or trace.fields is None:
        return None
    held = set(trace.fields)
    if "logits" in held and trace.logits_from:   # it holds the later rows only: keep asking for those
        held.discard("logits")
        held.add(logits_from(trace.logits_from))
    return frozenset(held | set(wanted))


def describe_request(wanted) -> str:
    return "every field" if wanted is None else ", ".join(sorted(wanted))


def of_layer(layer: int, names) -> tuple[str, ...]:
    """The request for these fields of one layer (e.g. of_layer(2, ["q", "k"]) -> layers.2.q, layers.2.k)."""
    return tuple(f"layers.{layer}.{name}" for name in names)


def layer_input(layer: int) -> tuple[str, ...]:
    """The residual stream entering a layer: the embedding, or the previous layer's output."""
    return ("embed",) if layer == 0 else ("embed", f"layers.{layer - 1}.resid_post")


LAYER_NAMES: tuple[str, ...] = tuple(name for name, _, _ in LAYER_FIELDS)
