"""Glassbox entry point: the GUI by default; subcommands for headless work.

    python main.py [--model BUNDLE] [--text "..."]          open the app
    python main.py trace --text "..." --out DIR              trace.npz + tokens.csv
    python main.py random-bundle --out DIR                   a randomly initialised bundle
    python main.py corpus --out resources/corpus             build the training corpus (apt-get download)
    python main.py train --corpus PATH --out DIR [--minutes N]   train a model, write a bundle (needs torch)
    python main.py eval [BUNDLE] [--corpus PATH] [--json]    loss, head scores, copying, expert load
    python main.py export --text "..." --out DIR             every panel's figures (PNG/SVG/CSV) + trace.npz
    python main.py import HF_FOLDER --out DIR                a Hugging Face model folder as a bundle
    python main.py readouts --text "..." --out DIR           logit lens, logit attribution, head roles -> readouts.npz
    python main.py patch --clean A --corrupt B --out DIR     activation patching sweeps: patch.npz + patch.csv
    python main.py occlude --text "..." --out DIR            occlusion and attention rollout: occlusion.npz
    python main.py bench [--json]                            medians: forward, panel updates, startup, export, memory
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

# The model's matrices are small (at most 256 x 2048): one BLAS thread is faster than several,
# and several spin against the UI and ONNX Runtime threads on a 2-core machine
# (benchmarks/bench_forward.py: NumPy forward at T=256 took 19 ms single-threaded, 340 ms default
# while another process was busy). Set before NumPy is imported; a user's own setting wins.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")


def cmd_trace(args: argparse.Namespace) -> int:
    from core.bundle import load_bundle
    from core.experiment_commands import interventions_from_args
    from core.raw_export import write_trace_files
    from core.runners import make_runner
    from core.session import analyse, cut_notice

    runner = make_runner(load_bundle(args.model), args.backend)
    trace = analyse(runner, args.text, interventions=interventions_from_args(args, runner.bundle.config))
    if notice := cut_notice(trace, runner.bundle.context):
        print_note(notice)
    if trace.nonfinite_fields():
        print_note(f"NaN or infinite values in {', '.join(trace.nonfinite_fields())} (written as nan)")
    for path in write_trace_files(trace, args.out):
        print(path)
    return 0


def cmd_random_bundle(args: argparse.Namespace) -> int:
    from core.random_bundle import make_random_bundle
    from core.raw_export import check_export_folder

    check_export_folder(args.out)   # an unwritable folder or a file in the way said as every command says it
    print(make_random_bundle(args.out, seed=args.seed))
    return 0


def cmd_corpus(args: argparse.Namespace) -> int:
    from core.training.corpus import build_corpus

    manifest = build_corpus(args.out, workdir=args.workdir)
    print(f"{args.out}: {manifest['train_documents']} training and {manifest['val_documents']} validation documents")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    try:
        from core.training.trainer import settings_from_args, train
    except ImportError as exc:  # torch is the optional `train` extra
        raise ValueError(f"training needs PyTorch: pip install -e '.[train]' ({exc})") from None

    train(settings_from_args(args), log=lambda line: print(line, flush=True))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from core.bundle import load_bundle
    from core.sample_text import sample_sentences
    from core.training.corpus import load_corpus
    from core.training.evaluate import evaluate_bundle, format_report, thresholds, to_json

    bundle = load_bundle(args.bundle)
    if args.corpus:
        train_docs, val_docs, _ = load_corpus(args.corpus)
    else:  # no corpus at hand: the project's own sample sentences still give every number
        train_docs, val_docs = [], sample_sentences(200, seed=1)
    result = evaluate_bundle(bundle, val_docs, train_docs, backend=args.backend)
    if args.json:
        print(to_json({**result, "checks": thresholds(result)}))
    else:
        print(format_report(result))
        for prompt, text in result["samples"].items():
            print(f"{prompt!r} -> {text!r}")
    return 0


def add_training_commands(sub) -> None:
    corpus = sub.add_parser("corpus", help="build the bilingual training corpus from Debian packages")
    corpus.add_argument("--out", default="resources/corpus", help="output folder (train.txt, val.txt, manifest.json)")
    corpus.add_argument("--workdir", help="keep downloaded packages here (default: a temporary folder)")
    corpus.set_defaults(func=cmd_corpus)

    tr = sub.add_parser("train", help="train a model with PyTorch and write a bundle (needs the train extra)")
    tr.add_argument("--corpus", required=True, help="corpus folder or any UTF-8 text file (documents split at blank lines)")
    tr.add_argument("--out", required=True, help="bundle folder to write")
    tr.add_argument("--config", default="default", choices=["tiny", "default", "untied", "deep"])
    tr.add_argument("--minutes", type=float, help="time budget (sets the step count from the measured speed)")
    tr.add_argument("--steps", type=int, help="exact number of optimisation steps")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    tr.add_argument("--run-dir", dest="run_dir", help="checkpoints and cache (default ~/glassbox-runs/<out name>)")
    tr.add_argument("--threads", type=int)
    for name, kind in (("batch", int), ("seq-len", int), ("lr", float), ("warmup", int), ("weight-decay", float),
                       ("aux-coef", float), ("copy-start", float), ("copy-end", float), ("copy-warmup", int), ("vocab-size", int),
                       ("min-lr-ratio", float), ("eval-every", int)):
        tr.add_argument(f"--{name}", dest=name.replace("-", "_"), type=kind)
    tr.set_defaults(func=cmd_train)

    ev = sub.add_parser("eval", help="evaluate a bundle: loss, head scores, copying, expert load")
    ev.add_argument("bundle", nargs="?", help="bundle folder (default: the shipped model)")
    ev.add_argument("--corpus", help="corpus folder or text file for validation text")
    ev.add_argument("--backend", choices=["onnx", "numpy"], default="onnx")
    ev.add_argument("--json", action="store_true")
    ev.set_defaults(func=cmd_eval)


def print_note(line: str) -> None:
    print(f"note: {line}", file=sys.stderr)


def cmd_export(args: argparse.Namespace) -> int:
    from gui.headless import ExportRequest, export_sentence, export_texts, terminal_progress

    request = ExportRequest.parse(args.formats, args.figures, width=args.width, dpi=args.dpi, layer=args.layer,
                                  head=args.head, query=args.query, key=args.key,
                                  expert_layer=args.expert_layer, theme=args.theme)
    if (args.text is None) == (args.texts is None):
        raise ValueError("give --text SENTENCE or --texts FILE (one sentence per line)")
    if args.texts is not None:
        result = export_texts(args.texts, args.out, request, model=args.model, backend=args.backend,
                              progress=terminal_progress())
        for note in result.notes:   # after the progress bar, which they would break
            print_note(note)
        print(result.summary())
        return 0
    for path in export_sentence(args.text, args.out, model=args.model, backend=args.backend, request=request,
                                notify=print_note):
        print(path)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from core.bundle import load_bundle
    from core.hf_import import import_model

    out = import_model(args.folder, args.out, progress=lambda line: print(line, file=sys.stderr))
    print("checking that it opens (the bundle checks, a test run through both runners)", file=sys.stderr)
    load_bundle(out)   # refused now, with its reason, rather than at the first open
    print(out)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from benchmarks.bench_gui import report

    return report(args)


def cmd_gui(args: argparse.Namespace) -> int:
    from gui.platform_check import display_problem

    problem = display_problem()  # before Qt loads: Qt aborts the process with a misleading message
    if problem:
        raise ValueError(problem)
    from gui.app import run_app

    return run_app(model=args.model, text=args.text)


# Subcommands declared in modules slow to import (NumPy, the readouts): module -> (its function adding
# them, their names). build_parser imports such a module only for arguments that may run one of them.
LAZY_COMMANDS = {"core.readouts": ("add_readouts_command", ("readouts",)),
                 "core.experiment_commands": ("add_experiment_commands", ("patch", "occlude"))}


def needs_module(argv: list[str] | None, commands: tuple[str, ...]) -> bool:
    """Whether arguments may run one of `commands`: they name one, ask for help (the listing shows every
    command), or are not known (argv None)."""
    if argv is None:
        return True
    return any(arg in commands or arg == "-h" or (len(arg) > 2 and "--help".startswith(arg)) for arg in argv)


def add_lazy_commands(sub, module: str, argv: list[str] | None) -> None:
    """The commands `module` declares; for arguments that cannot run them, their bare names (never chosen:
    the arguments do not name them), so that an unknown command's message still lists every command."""
    adder, commands = LAZY_COMMANDS[module]
    if needs_module(argv, commands):
        getattr(importlib.import_module(module), adder)(sub)
    else:
        for name in commands:
            sub.add_parser(name)


class OneLineParser(argparse.ArgumentParser):
    """A bad argument gets one line (argparse's own message, which names the valid choices), not the usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every command's parser. Given the arguments it will parse, it imports a module of LAZY_COMMANDS
    only if they may run one of its commands: the app's start (no subcommand) imports none."""
    parser = OneLineParser(prog="glassbox", description="See inside a small transformer.")
    parser.add_argument("--model", help="bundle folder (default: the shipped model in resources/model)")
    parser.add_argument("--text", help="sentence to analyse")
    parser.set_defaults(func=cmd_gui)
    sub = parser.add_subparsers(dest="command")

    trace = sub.add_parser("trace", help="run the model on a text; write trace.npz and tokens.csv")
    trace.add_argument("--text", required=True)
    trace.add_argument("--out", required=True, help="output folder")
    trace.add_argument("--model", help="bundle folder")
    trace.add_argument("--backend", choices=["onnx", "numpy"], default="onnx")
    if needs_module(argv, ("trace",)):
        importlib.import_module("core.experiment_commands").add_intervention_flags(trace)
    trace.set_defaults(func=cmd_trace)

    exp = sub.add_parser("export", help="write the panels' figures for a text (or each line of a file), no display")
    exp.add_argument("--text", help="the sentence to analyse")
    exp.add_argument("--texts", help="a UTF-8 file, one sentence per line: one sub-folder each, plus index.csv")
    exp.add_argument("--out", required=True, help="output folder")
    exp.add_argument("--model", help="bundle folder")
    exp.add_argument("--formats", "--format", dest="formats", default="png,svg,csv,npz",
                     help="comma-separated: png,svg,pdf,csv,npz")
    exp.add_argument("--figures", help="comma-separated figure names (default: every figure; an unknown name "
                                        "lists them all)")
    exp.add_argument("--width", type=int, help="PNG width in pixels (default: twice the on-screen width, at most 4 million pixels)")
    exp.add_argument("--dpi", type=float, help="PNG resolution instead of --width (96 = on-screen size)")
    selected = {"layer": "the layer the Attention, Positions and Step by step figures show (default 0)",
                "head": "the head they show (default 0)",
                "query": "the query token's position (default: the last token)",
                "key": "the key token's position, at most the query's (default: the query itself)",
                "expert-layer": "the layer the MoE routing figures show (default: --layer)"}
    for name, meaning in selected.items():
        exp.add_argument(f"--{name}", dest=name.replace("-", "_"), type=int, help=meaning)
    exp.add_argument("--theme", choices=["light", "dark"], default="light")
    exp.add_argument("--backend", choices=["onnx", "numpy"], default="onnx")
    exp.set_defaults(func=cmd_export)

    rand = sub.add_parser("random-bundle", help="write a randomly initialised bundle (for tests and demos)")
    rand.add_argument("--out", required=True)
    rand.add_argument("--seed", type=int, default=0)
    rand.set_defaults(func=cmd_random_bundle)
    add_training_commands(sub)
    imp = sub.add_parser("import", help="turn a Hugging Face model folder (config.json, safetensors) into a bundle")
    imp.add_argument("folder")
    imp.add_argument("--out", required=True, help="bundle folder to write")
    imp.set_defaults(func=cmd_import)
    add_lazy_commands(sub, "core.readouts", argv)
    add_lazy_commands(sub, "core.experiment_commands", argv)
    bench = sub.add_parser("bench", help="medians: forward pass, panel updates, startup, export, memory")
    bench.add_argument("--json", action="store_true", help="one JSON object (ms, MB)")
    bench.add_argument("--repeats", type=int, default=7, help="runs per median")
    bench.set_defaults(func=cmd_bench)
    add_import_to_cache(parser, sub)
    keep_flags_given_before_the_command(sub)
    return parser


def add_import_to_cache(parser: argparse.ArgumentParser, sub) -> None:
    """--import-to-cache wherever --model is taken: on the app and on every subcommand that reads a model."""
    help_text = "--model may be a Hugging Face folder: import it once into ~/.cache/glassbox"
    parser.add_argument("--import-to-cache", action="store_true", help=help_text)
    for command in sub.choices.values():
        if "--model" in command._option_string_actions:
            command.add_argument("--import-to-cache", action="store_true", help=help_text)


def keep_flags_given_before_the_command(sub) -> None:
    """`glassbox --model M trace ...` means M: a subcommand's own default (None) must not reset a flag the
    top level already parsed, so the subcommands' copies of the top-level flags set nothing unless given."""
    for command in sub.choices.values():
        for flag in ("--model", "--text", "--import-to-cache"):
            action = command._option_string_actions.get(flag)
            if action is not None and not action.required:
                action.default = argparse.SUPPRESS


# What a user can cause: bad input, files, bundles (ValueError covers BundleError and ExportError),
# a disk or permission problem, or input so large or deep that Python or a library gives up.
USER_ERRORS = (ValueError, OSError, MemoryError, RecursionError, OverflowError)
EXIT_USER_ERROR, EXIT_INTERNAL_ERROR = 2, 70  # 70: sysexits' EX_SOFTWARE, "an internal software error"


def is_user_error(exc: BaseException) -> bool:
    """onnxruntime's exceptions derive from Exception only; any of them means the graph or its input is bad."""
    return isinstance(exc, USER_ERRORS) or type(exc).__module__.startswith("onnxruntime")


def error_line(exc: BaseException) -> str:
    """One line for stderr: the message's first line, or what the exception class means."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, MemoryError):
        return f"out of memory{': ' + text if text else ''}"
    if isinstance(exc, RecursionError):
        return "input nested too deeply to read"
    return text or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    args = build_parser(sys.argv[1:] if argv is None else argv).parse_args(argv)
    try:
        # the app offers to import a Hugging Face --model itself; every other command needs --import-to-cache
        if getattr(args, "model", None) and (args.func is not cmd_gui or getattr(args, "import_to_cache", False)):
            from core.hf_import import resolve_model

            args.model = resolve_model(args.model, getattr(args, "import_to_cache", False))
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one line, never a traceback; a bug still says it is one
        if is_user_error(exc):
            print(f"glassbox: error: {error_line(exc)}", file=sys.stderr)
            return EXIT_USER_ERROR
        if os.environ.get("GLASSBOX_TRACEBACK"):
            raise
        print(f"glassbox: error: internal error ({type(exc).__name__}: {error_line(exc)}); please report it "
              f"with the command you ran (GLASSBOX_TRACEBACK=1 shows where it happened)", file=sys.stderr)
        return EXIT_INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
