"""Which fields a partial Trace holds, against what a reader (a panel, an export) needs.

A request is what Runner.run(ids, fields=...) takes (core.trace.select_outputs names), or None for
every field. Qt-free: the controller chooses what to run with it, the panels say what they miss.
"""
from __future__ import annotations

from core.trace import LAYER_FIELDS, Trace, select_outputs


def trace_holds(trace: Trace, wanted) -> bool:
    """The trace has every field of the request `wanted` (None: every field)."""
    if trace.fields is None:
        return True
    if wanted is None:
        return False
    names, last_only = select_outputs(trace.num_layers, wanted)
    if not set(names) <= trace.fields:
        return False
    return last_only or "logits" not in names or trace.logits_from == 0   # all rows of logits, not one


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
    if "logits" in held and trace.logits_from:   # it holds the last row only: keep asking for that
        held.discard("logits")
        held.add("logits.last")
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
