"""Headless experiments: `main.py trace` ablation flags, `main.py patch`, `main.py occlude`.

File contracts (arrays float32 unless said):
  trace    trace.npz of the intervened run, with the interventions used (core.interventions keys)
  patch    patch.npz: metric_clean, metric_corrupt, resid [S, T], heads [L, H], heads_pos [L, H, T],
           experts [L, E], answer_id, wrong_id, input_ids_clean, input_ids_corrupt; and patch.csv
  occlude  occlusion.npz: delta_logprob [T], rollout [T], baseline (-1: removed), position, target_id,
           logprob, input_ids; and occlusion.csv (a row per token, delta_logprob blank where not run)
Heavy imports wait until a command runs, so building the parser stays cheap.
"""
from __future__ import annotations

import argparse
import io
import sys

import numpy as np


def add_intervention_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ablate-heads", dest="ablate_heads", metavar="L.H,...",
                        help="heads to ablate, e.g. 0.1,1.3 (layer.head)")
    parser.add_argument("--ablate-mode", dest="ablate_mode", choices=["zero", "mean"], default="zero",
                        help="an ablated head outputs zero, or its mean output over the sentence's positions")
    parser.add_argument("--ablate-experts", dest="ablate_experts", metavar="L.E,...",
                        help="experts to switch off, e.g. 0.2 (layer.expert); the router picks among the rest")


def interventions_from_args(args: argparse.Namespace, config):
    """The Interventions the trace flags ask for; ValueError naming a head or expert that does not exist."""
    from core.interventions import Interventions, experts_off_mask, head_mask_off, parse_sites

    L = config.num_hidden_layers
    heads = parse_sites(args.ablate_heads, "head", L, config.num_attention_heads) if args.ablate_heads else []
    if args.ablate_experts and not config.is_moe:
        raise ValueError(f"--ablate-experts {args.ablate_experts}: this model has no experts (dense MLP)")
    experts = parse_sites(args.ablate_experts, "expert", L, config.num_local_experts) if args.ablate_experts else []
    return Interventions(head_mask=head_mask_off(config, heads), ablate_mode=args.ablate_mode,
                         experts_off=experts_off_mask(config, experts))


def add_experiment_commands(sub) -> None:
    patch = sub.add_parser("patch", help="activation patching from a clean text into a corrupt one; patch.npz + csv")
    patch.add_argument("--clean", required=True, help="text A, whose activations are patched in")
    patch.add_argument("--corrupt", required=True, help="text B, run again with one site of A at a time")
    patch.add_argument("--answer", help="one token (text, or #ID); default: A's top prediction after its last token")
    patch.add_argument("--wrong", help="one token (text, or #ID); default: B's top prediction after its last token")
    patch.add_argument("--out", required=True, help="output folder")
    patch.add_argument("--model", help="bundle folder")
    patch.add_argument("--backend", choices=["onnx", "numpy"], default="onnx")
    patch.set_defaults(func=cmd_patch)

    occ = sub.add_parser("occlude", help="occlusion and attention rollout for one prediction; occlusion.npz + csv")
    occ.add_argument("--text", required=True)
    occ.add_argument("--position", type=int, help="the prediction after this token (default: the last)")
    occ.add_argument("--target", type=int, help="target token id (default: the top prediction there)")
    occ.add_argument("--baseline", help="a token (text, or #ID) put in each token's place (default: remove it)")
    occ.add_argument("--out", required=True, help="output folder")
    occ.add_argument("--model", help="bundle folder")
    occ.add_argument("--backend", choices=["onnx", "numpy"], default="onnx")
    occ.set_defaults(func=cmd_occlude)


def _npz_bytes(arrays: dict) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def cmd_patch(args: argparse.Namespace) -> int:
    from core.bundle import load_bundle
    from core.experiment_runs import patch_typed, text_tokens
    from core.patching import patch_arrays
    from core.raw_export import check_export_folder, ensure_writable_folder, write_atomic
    from core.runners import make_runner

    runner = make_runner(load_bundle(args.model), args.backend)
    tokenizer = runner.bundle.tokenizer
    clean_ids, clean_labels = text_tokens(tokenizer, args.clean, "--clean")
    check_export_folder(args.out)   # before the sweeps, the slow part
    result = patch_typed(runner, clean_ids, clean_labels, args.corrupt, args.answer or "", args.wrong or "")
    folder = ensure_writable_folder(args.out)
    for path in (write_atomic(folder / "patch.npz", _npz_bytes(patch_arrays(result))),
                 write_atomic(folder / "patch.csv", result.csv().encode("utf-8"))):
        print(path)
    pair = result.pair
    name = lambda i: tokenizer.display_piece(tokenizer.id_to_piece(i))  # noqa: E731
    print(f"answer {name(pair.answer_id)!r} (#{pair.answer_id}) vs wrong {name(pair.wrong_id)!r} (#{pair.wrong_id}): "
          f"metric clean {pair.metric_clean:.4f}, corrupt {pair.metric_corrupt:.4f}", file=sys.stderr)
    return 0


def cmd_occlude(args: argparse.Namespace) -> int:
    from core.bundle import load_bundle
    from core.experiment_runs import occlude_typed, text_tokens
    from core.occlusion import occlusion_arrays
    from core.raw_export import ensure_writable_folder, write_atomic
    from core.runners import make_runner

    runner = make_runner(load_bundle(args.model), args.backend)
    ids, labels = text_tokens(runner.bundle.tokenizer, args.text, "--text")
    target = f"#{args.target}" if args.target is not None else ""   # an id, typed as the panel's field takes one
    result = occlude_typed(runner, ids, labels, args.position, target, args.baseline or "", ("--target", "--baseline"))
    folder = ensure_writable_folder(args.out)
    for path in (write_atomic(folder / "occlusion.npz", _npz_bytes(occlusion_arrays(result))),
                 write_atomic(folder / "occlusion.csv", result.csv().encode("utf-8"))):
        print(path)
    return 0
