"""Parity report: how far the ONNX graph and the NumPy reference are apart, field by field.

This module is the single source of the ONNX <-> NumPy tolerances. A cell passes when
``|onnx - numpy| <= atol + rtol * |numpy|`` (numpy.isclose's rule, the NumPy value as reference):
an absolute floor for values near 0, and a relative part for large values (logits, the residual
stream after a big expert output), where float32 rounding grows with the magnitude. Integer
fields (chosen experts, the run's inputs) must be equal. Masked cells (-inf in both) agree.
Measured on the shipped model and random models (GQA, MQA, 8 experts; up to 256 tokens) the
worst differences are ~1e-6 on probabilities and ~3e-5 on logits, an order of magnitude inside.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.trace import LAYER_FIELDS, MODEL_FIELDS, Trace


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float

    def at(self, reference: np.ndarray) -> np.ndarray:  # [...] -> [...] the allowed difference per cell
        return self.atol + self.rtol * np.abs(np.nan_to_num(reference, posinf=0.0, neginf=0.0))


ACTIVATION = Tolerance(atol=1e-4, rtol=1e-5)
PROBABILITY = Tolerance(atol=1e-5, rtol=0.0)    # softmax outputs lie in [0, 1]: absolute is the right scale
EXACT = Tolerance(atol=0.0, rtol=0.0)
TOLERANCES: dict[str, Tolerance] = {"attn": PROBABILITY, "router_probs": PROBABILITY,
                                    "expert_weights": PROBABILITY, "expert_ids": EXACT}

# Axis names per shape symbol, so the worst cell reads as (token 3, head 1, index 7).
_AXIS = {"T": "token", "H": "head", "Dh": "index", "D": "index", "E": "expert", "K": "slot", "V": "token id"}
_SPECS = {name: spec for name, spec, _ in LAYER_FIELDS + MODEL_FIELDS}


def tolerance(field: str) -> Tolerance:
    """The tolerance of a Trace field, by its short name (`attn`) or its output name (`layers.0.attn`)."""
    return TOLERANCES.get(field.split(".")[-1], ACTIVATION)


def axis_names(field: str) -> tuple[str, ...]:
    spec = _SPECS[field.split(".")[-1]].split()
    if spec == ["H", "T", "T"]:
        return ("head", "query", "key")
    return tuple(_AXIS[s] for s in spec)


def field_names(num_layers: int) -> list[str]:
    """Every compared Trace field under its output name, in ONNX output order."""
    names = ["embed"]
    for l in range(num_layers):
        names += [f"layers.{l}.{name}" for name, _, _ in LAYER_FIELDS]
    return names + ["final_norm", "logits"]


def difference_array(numpy_trace: Trace, onnx_trace: Trace, field: str) -> np.ndarray:  # -> field's shape, float64
    """|onnx - numpy| per cell; 0 where both are the same infinity (masked), inf where only one is finite or NaN."""
    x = numpy_trace.to_arrays()[field].astype(np.float64)
    y = onnx_trace.to_arrays()[field].astype(np.float64)
    same_inf = np.isinf(x) & (x == y)
    with np.errstate(invalid="ignore"):
        diff = np.abs(np.where(same_inf, 0.0, x - y))
    return np.where(np.isnan(diff), np.inf, diff)


@dataclass(frozen=True)
class ParityRow:
    field: str                    # output name, e.g. "layers.1.attn"
    layer: int | None             # None for embed, final_norm, logits
    max_abs: float                # the largest |onnx - numpy| in the field
    ratio: float                  # worst difference / its tolerance: <= 1 passes
    worst: dict[str, int]         # the worst cell (largest ratio), axis name -> index
    worst_diff: float
    worst_tolerance: float
    numpy_value: float
    onnx_value: float

    @property
    def ok(self) -> bool:
        return self.ratio <= 1.0

    def location(self) -> str:
        return ", ".join(f"{axis} {index}" for axis, index in self.worst.items())


def _ratio(diff: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    # a difference where none is allowed is infinitely far outside; no difference is always inside
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(diff == 0, 0.0, diff / allowed)


def field_row(numpy_trace: Trace, onnx_trace: Trace, field: str) -> ParityRow:
    diff = difference_array(numpy_trace, onnx_trace, field)
    reference = numpy_trace.to_arrays()[field].astype(np.float64)
    allowed = tolerance(field).at(reference)
    ratio = _ratio(diff, allowed)
    cell = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    layer = int(field.split(".")[1]) if field.startswith("layers.") else None
    return ParityRow(field, layer, float(diff.max()), float(ratio[cell]),
                     dict(zip(axis_names(field), map(int, cell))), float(diff[cell]), float(allowed[cell]),
                     float(reference[cell]), float(onnx_trace.to_arrays()[field][cell]))


def parity_report(numpy_trace: Trace, onnx_trace: Trace) -> list[ParityRow]:
    """One row per Trace field and layer; raises ValueError if the two runs are not of the same ids."""
    if not np.array_equal(numpy_trace.input_ids, onnx_trace.input_ids):
        raise ValueError("the two traces ran different token ids: nothing to compare")
    return [field_row(numpy_trace, onnx_trace, f) for f in field_names(numpy_trace.num_layers)]


def first_routing_difference(numpy_trace: Trace, onnx_trace: Trace) -> tuple[int, int] | None:
    """(layer, token) of the first expert choice the runners disagree on: after a near-tie routes
    differently, every later field at that token differs for that reason, not from rounding."""
    for l, (a, b) in enumerate(zip(numpy_trace.layers, onnx_trace.layers)):
        rows = np.nonzero((a.expert_ids != b.expert_ids).any(axis=-1))[0]
        if rows.size:
            return l, int(rows[0])
    return None
