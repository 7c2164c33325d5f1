"""How closely the NumPy reference and the ONNX graph agree: one rule, applied field by field.

Both runners compute in float32 but sum in different orders (MLAS blocks its GEMMs), so the
difference grows with a field's magnitude: on 200 random full-length sequences through the
shipped model, moe_out and resid_post (values up to ~175) differ by up to 1.1e-4 absolute, yet
only 1.0e-6 of their largest value; attention probabilities (at most 1) by 2.2e-6. So a field
agrees when every finite cell satisfies

    |numpy - onnx| <= ABS_TOL + REL_TOL * max|onnx field|

and both have their non-finite cells (the causal mask's -inf, any NaN) in the same places.
The largest relative difference measured on any field of the shipped and random models is
2.8e-6 (final_norm); REL_TOL leaves a margin of 3.5x over it.

Rounding differences also add up with depth: each block rounds again, on inputs that already
differ. On a 30-layer imported Llama-shaped model with random weights (std 0.3, so the softmax is
peaked and amplifies its inputs' differences), attention probabilities differ by 1.2e-6 of their
largest value at layer 0 and by up to 1.45e-4 at layer 28; every field stays under 5.2e-6 per
block passed. So REL_TOL is allowed once per block a field has passed (`depth`): a layer-0 field
keeps the tolerance above, and a graph that does not match its config (rope_theta, rms_norm_eps)
differs already at layer 0.
"""
from __future__ import annotations

import numpy as np

from core.trace import Trace

ABS_TOL = 1e-5   # floor for fields whose values are all near zero
REL_TOL = 1e-5   # of the field's largest finite magnitude


def depth(field: str, num_layers: int) -> int:
    """How many blocks a Trace field's value has passed, counting its own: `layers.3.attn` 4, the
    embedding 1, final_norm and logits num_layers + 1."""
    if field.startswith("layers."):
        return int(field.split(".")[1]) + 1
    return 1 if field == "embed" else num_layers + 1


def field_tolerance(reference: np.ndarray, blocks: int = 1) -> float:
    """The largest difference allowed on a field whose reference values are `reference`, after `blocks`
    blocks (see depth)."""
    finite = reference[np.isfinite(reference)]
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    return ABS_TOL + REL_TOL * blocks * scale


def field_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b| over cells finite in both; inf when their non-finite cells differ."""
    if a.shape != b.shape:
        return float("inf")
    finite_a, finite_b = np.isfinite(a), np.isfinite(b)
    same_special = np.array_equal(finite_a, finite_b) and np.array_equal(a[~finite_a], b[~finite_b], equal_nan=True)
    if not same_special:
        return float("inf")
    diff = np.abs(a[finite_a].astype(np.float64) - b[finite_b].astype(np.float64))
    return float(diff.max(initial=0.0))


def first_disagreement(a: Trace, b: Trace) -> str | None:
    """Name (and numbers) of the first float field where a and b differ past its tolerance, else None.

    b is the reference whose magnitude sets each field's tolerance.
    """
    arrays_b = b.to_arrays()
    for name, x in a.to_arrays().items():
        y = arrays_b[name]
        if x.dtype.kind != "f":
            continue
        difference, allowed = field_difference(x, y), field_tolerance(y, depth(name, b.num_layers))
        if not difference <= allowed:
            return f"{name} (difference {difference:.3g}, allowed {allowed:.3g})"
    return None
