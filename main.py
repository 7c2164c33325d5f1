"""Glassbox entry point: the GUI by default; subcommands for headless work.

    python main.py [--model BUNDLE] [--text "..."]          open the app
    python main.py trace --text "..." --out DIR              trace.npz + tokens.csv
    python main.py random-bundle --out DIR                   a randomly initialised bundle
"""
from __future__ import annotations

import argparse
import sys


def cmd_trace(args: argparse.Namespace) -> int:
    from core.bundle import load_bundle
    from core.raw_export import write_trace_files
    from core.runners import make_runner
    from core.session import analyse

    runner = make_runner(load_bundle(args.model), args.backend)
    trace = analyse(runner, args.text)
    if trace.truncated_chars:
        print(f"note: the last {trace.truncated_chars} characters are past the context "
              f"of {trace.config.max_position_embeddings} tokens and were not analysed", file=sys.stderr)
    for path in write_trace_files(trace, args.out):
        print(path)
    return 0


def cmd_random_bundle(args: argparse.Namespace) -> int:
    from core.random_bundle import make_random_bundle

    print(make_random_bundle(args.out, seed=args.seed))
    return 0


def cmd_gui(args: argparse.Namespace) -> int:
    from gui.app import run_app

    return run_app(model=args.model, text=args.text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glassbox", description="See inside a small transformer.")
    parser.add_argument("--model", help="bundle folder (default: the shipped model in resources/model)")
    parser.add_argument("--text", help="sentence to analyse")
    parser.set_defaults(func=cmd_gui)
    sub = parser.add_subparsers(dest="command")

    trace = sub.add_parser("trace", help="run the model on a text; write trace.npz and tokens.csv")
    trace.add_argument("--text", required=True)
    trace.add_argument("--out", required=True, help="output folder")
    trace.add_argument("--model", help="bundle folder")
    trace.add_argument("--backend", choices=["onnx", "numpy"], default="onnx")
    trace.set_defaults(func=cmd_trace)

    rand = sub.add_parser("random-bundle", help="write a randomly initialised bundle (for tests and demos)")
    rand.add_argument("--out", required=True)
    rand.add_argument("--seed", type=int, default=0)
    rand.set_defaults(func=cmd_random_bundle)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError) as exc:  # BundleError, ExportError and bad input: one line, no traceback
        print(f"glassbox: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
