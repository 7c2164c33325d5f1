"""Parity report: how far the ONNX graph and the NumPy reference are apart, field by field.

The tolerance rule is core.parity's (one source for the bundle check, the tests and this report):
a float cell passes when ``|onnx - numpy| <= ABS_TOL + REL_TOL * depth * max|field|`` — float32
rounding in a sum grows with the size of the values summed, so the field's largest magnitude sets
the scale, and it adds up over the blocks the value has passed (`depth`).
Integer fields (chosen experts) must be equal. Masked cells (-inf in both) agree.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.parity import ABS_TOL, REL_TOL, depth
from core.trace import LAYER_FIELDS, MODEL_FIELDS, Trace


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float

    def at(self, reference: np.ndarray, blocks: int = 1) -> np.ndarray:  # [...] -> [...] allowed difference per cell
        finite = np.abs(reference[np.isfinite(reference)])
        return np.full(reference.shape, self.atol + self.rtol * blocks * float(finite.max(initial=0.0)))


FLOAT = Tolerance(atol=ABS_TOL, rtol=REL_TOL)
EXACT = Tolerance(atol=0.0, rtol=0.0)
TOLERANCES: dict[str, Tolerance] = {"expert_ids": EXACT}

# Axis names per shape symbol, so the worst cell reads as (token 3, head 1, index 7).
_AXIS = {"T": "token", "H": "head", "Dh": "index", "D": "index", "E": "expert", "K": "slot", "V": "token id"}
_SPECS = {name: spec for name, spec, _ in LAYER_FIELDS + MODEL_FIELDS}


def tolerance(field: str) -> Tolerance:
    """The tolerance of a Trace field, by its short name (`attn`) or its output name (`layers.0.attn`)."""
    return TOLERANCES.get(field.split(".")[-1], FLOAT)


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


@dataclass(frozen=True, eq=False)
class DifferenceMap:
    """One field's |onnx - numpy| as a picture: rows are tokens; one head's slice of an [H, T, ·] field."""
    field: str
    head: int | None            # the head shown, for [H, T, ·] fields
    matrix: np.ndarray          # [T, X] float64
    logs: np.ndarray            # [T, X] log10 of matrix, 0 drawn at log10(floor), inf at 0 (1.0)
    levels: tuple[float, float]  # whole decades around logs
    worst: tuple[int, int]      # (row, column) of the largest difference

    @property
    def worst_diff(self) -> float:
        return float(self.matrix[self.worst])


def difference_map(numpy_trace: Trace, onnx_trace: Trace, field: str, head: int | None,
                   floor: float = 1e-12) -> DifferenceMap:
    """The field's differences ready to colour: a few passes over T x V cells for the logits, so a viewer
    computes it off its UI thread."""
    diff = difference_array(numpy_trace, onnx_trace, field)
    shown = diff[head] if head is not None else diff
    matrix = shown.reshape(shown.shape[0], -1)
    logs = np.log10(np.maximum(np.nan_to_num(matrix, posinf=1.0), floor))
    low = float(np.floor(logs.min()))
    worst = np.unravel_index(int(np.argmax(matrix)), matrix.shape)
    return DifferenceMap(field, head, matrix, logs, (low, float(max(np.ceil(logs.max()), low + 1))),
                         (int(worst[0]), int(worst[1])))


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
    allowed = tolerance(field).at(reference, depth(field, numpy_trace.num_layers))
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
