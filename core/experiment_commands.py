"""Headless experiments: `main.py trace` ablation flags, `main.py patch`, `main.py occlude`.

File contracts (arrays float32 unless said):
  trace    trace.npz of the intervened run, with the interventions used (core.interventions keys)
  patch    patch.npz: metric_clean, metric_corrupt, resid [S, T], heads [L, H], heads_pos [L, H, T],
           experts [L, E], answer_id, wrong_id, input_ids_clean, input_ids_corrupt; and patch.csv
  occlude  occlusion.npz: delta_logprob [T], rollout [T], baseline (-1: removed), position, target_id,
           logprob, input_ids; and occlusion.csv
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


def parse_token(tokenizer, text: str, flag: str) -> int:
    """One token id from "#ID" or a text that is exactly one token; ValueError otherwise."""
    if text.startswith("#") and text[1:].isdigit():
        token = int(text[1:])
        if token >= tokenizer.vocab_size:
            raise ValueError(f"{flag} {text}: ids run from 0 to {tokenizer.vocab_size - 1}")
        return token
    ids = tokenizer.encode(text, add_special=False)  # the word itself, not the template's BOS before it
    if len(ids) != 1:
        pieces = " ".join(tokenizer.display_piece(tokenizer.id_to_piece(i)) for i in ids) or "nothing"
        raise ValueError(f"{flag} {text!r} is {len(ids)} tokens ({pieces}), not one; "
                         f"give a single token, or its id as #ID (0-{tokenizer.vocab_size - 1})")
    return ids[0]


def _tokens(tokenizer, text: str, flag: str):
    tokenization = tokenizer.encode_traced(text)
    if not tokenization.tokens:
        raise ValueError(f"{flag}: the text is empty")
    return np.array(tokenization.ids, np.int64), [token.display for token in tokenization.tokens]


def _npz_bytes(arrays: dict) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def cmd_patch(args: argparse.Namespace) -> int:
    from core.bundle import load_bundle
    from core.patching import patch_arrays, patch_csv_rows, prepare_pair, run_all_sweeps
    from core.raw_export import csv_text, ensure_writable_folder, write_atomic
    from core.runners import make_runner

    runner = make_runner(load_bundle(args.model), args.backend)
    tokenizer = runner.bundle.tokenizer
    clean_ids, clean_labels = _tokens(tokenizer, args.clean, "--clean")
    corrupt_ids, corrupt_labels = _tokens(tokenizer, args.corrupt, "--corrupt")
    answer = parse_token(tokenizer, args.answer, "--answer") if args.answer is not None else None
    wrong = parse_token(tokenizer, args.wrong, "--wrong") if args.wrong is not None else None
    pair = prepare_pair(runner, clean_ids, corrupt_ids, answer, wrong)
    folder = ensure_writable_folder(args.out)
    result = run_all_sweeps(runner, pair)
    rows = patch_csv_rows(result, clean_labels, corrupt_labels)
    for path in (write_atomic(folder / "patch.npz", _npz_bytes(patch_arrays(result))),
                 write_atomic(folder / "patch.csv", csv_text(rows).encode("utf-8"))):
        print(path)
    name = lambda i: tokenizer.display_piece(tokenizer.id_to_piece(i))  # noqa: E731
    print(f"answer {name(pair.answer_id)!r} (#{pair.answer_id}) vs wrong {name(pair.wrong_id)!r} (#{pair.wrong_id}): "
          f"metric clean {pair.metric_clean:.4f}, corrupt {pair.metric_corrupt:.4f}", file=sys.stderr)
    return 0


def cmd_occlude(args: argparse.Namespace) -> int:
    from core.bundle import load_bundle
    from core.occlusion import REMOVE, occlude, occlusion_arrays
    from core.raw_export import csv_text, ensure_writable_folder, write_atomic
    from core.runners import make_runner

    runner = make_runner(load_bundle(args.model), args.backend)
    tokenizer = runner.bundle.tokenizer
    ids, labels = _tokens(tokenizer, args.text, "--text")
    baseline = parse_token(tokenizer, args.baseline, "--baseline") if args.baseline is not None else REMOVE
    result = occlude(runner, ids, args.position, args.target, baseline)
    folder = ensure_writable_folder(args.out)
    rows = [["position", "token", "delta_logprob", "rollout"]]
    rows += [[t, labels[t], repr(float(d)), repr(float(r))]
             for t, (d, r) in enumerate(zip(result.delta_logprob, result.rollout))]
    for path in (write_atomic(folder / "occlusion.npz", _npz_bytes(occlusion_arrays(result))),
                 write_atomic(folder / "occlusion.csv", csv_text(rows).encode("utf-8"))):
        print(path)
    return 0
