"""All readouts of one sentence at once, as plain arrays: what `main.py readouts` writes to readouts.npz.

    lens_probs      [S, T, V]  logit lens: S stages (embed, then per layer after attention, after the layer)
    dla_names       [N] str    `embed`, `L{l}.H{h}`, `L{l}.E{e}`
    dla_values      [N]        each part's contribution to the target's logit at `position`
    dla_logit       []         the logit they sum to
    position, target_id []     the position read (0-based) and the token attributed
    role_names      [R] str    head roles, defined in core.head_roles.ROLE_DEFINITIONS
    roles_sentence  [L, H, R]  role scores on the sentence (NaN: undefined there)
    roles_probe     [L, H, R]  role scores on the bundle's fixed repeated-random-token probe
"""
from __future__ import annotations

import argparse
import io
import sys

import numpy as np

from core.attribution import check_target, direct_logit_attribution
from core.head_roles import ROLE_NAMES, probe_roles, sentence_roles
from core.logit_lens import logit_lens
from core.raw_export import ensure_writable_folder, write_atomic
from core.trace import Trace

READOUTS_FILE = "readouts.npz"


def default_target(trace: Trace, position: int) -> int:
    """The model's own most likely next token at a position (ties: the lower id)."""
    return int(np.argmax(trace.logits[position]))


def readout_arrays(runner, trace: Trace, position: int | None = None,
                   target: int | None = None) -> dict[str, np.ndarray]:
    """Every readout of `trace` (run by `runner`, which also runs the probe) under readouts.npz's keys."""
    position = check_target(trace, trace.n_tokens - 1 if position is None else position, target)
    target = default_target(trace, position) if target is None else target
    dla = direct_logit_attribution(trace, position, target)
    return {
        "lens_probs": logit_lens(trace).probs,
        "dla_names": np.array(dla.names),
        "dla_values": dla.values,
        "dla_logit": np.float64(dla.logit),
        "position": np.int64(position),
        "target_id": np.int64(target),
        "role_names": np.array(ROLE_NAMES),
        "roles_sentence": sentence_roles(trace).scores,
        "roles_probe": probe_roles(runner).scores,
    }


def readouts_npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def cmd_readouts(args: argparse.Namespace) -> int:
    from core.bundle import load_bundle
    from core.runners import make_runner
    from core.session import analyse, cut_notice

    runner = make_runner(load_bundle(args.model), args.backend)
    trace = analyse(runner, args.text)
    if notice := cut_notice(trace, runner.bundle.context):
        print(f"note: {notice}", file=sys.stderr)
    arrays = readout_arrays(runner, trace, args.position, args.target)
    folder = ensure_writable_folder(args.out)
    print(write_atomic(folder / READOUTS_FILE, readouts_npz_bytes(arrays)))
    return 0


def add_readouts_command(sub) -> None:
    p = sub.add_parser("readouts", help="logit lens, direct logit attribution and head roles of a text -> readouts.npz")
    p.add_argument("--text", required=True)
    p.add_argument("--position", type=int,
                   help="token position to attribute (default: the last; negative counts from the end)")
    p.add_argument("--target", type=int, help="token id to attribute (default: the model's top token at the position)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--model", help="bundle folder")
    p.add_argument("--backend", choices=["onnx", "numpy"], default="onnx")
    p.set_defaults(func=cmd_readouts)
