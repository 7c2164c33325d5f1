"""How long from a text change to every visible panel repainted, and how long Export all takes.

    python benchmarks/bench_gui.py [--model BUNDLE] [--backend onnx] [--repeats 7]

For 16, 64 and max-context tokens: set the text, press Enter (skips the 50 ms typing debounce,
which comes on top when typing), wait for the worker's Trace, then let Qt deliver the repaints it
caused. Reports the median, and the forward pass alone. Offscreen unless a display is set.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def text_of_tokens(tokenizer, n: int, shift: int) -> str:
    """A mixed English/Chinese text of about n tokens; `shift` varies it so no run repeats the last."""
    from core.sample_text import sample_sentences

    ids = tokenizer.encode(" ".join(sample_sentences(400, seed=shift)))
    text = tokenizer.decode(ids[:n])
    while len(tokenizer.encode(text)) > n:   # decoding a prefix can re-merge: trim to fit
        text = text[:-1]
    return text


def wait_for(app, condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the model did not answer in time")
        app.processEvents()
        time.sleep(0.0005)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--backend", default="onnx", choices=["onnx", "numpy", "both"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--export-repeats", type=int, default=3)
    args = parser.parse_args()
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtCore import QSettings

    from core.bundle import load_bundle
    from gui.app import application
    from gui.controller import Controller
    from gui.main_window import MainWindow

    app = application()
    bundle = load_bundle(args.model)
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.Format.IniFormat)
    controller = Controller(bundle, args.backend)
    window = MainWindow(controller, settings)
    window.resize(1600, 1000)
    window.show()
    for _ in range(10):
        app.processEvents()
    context = bundle.config.max_position_embeddings
    visible = [p.title for p in window.panels if window.on_screen(p)]
    print(f"bundle {bundle.path}, backend {args.backend}, context {context}, visible panels: {visible}")

    for n in (16, 64, context):
        totals, forwards, sizes = [], [], []
        for run in range(args.repeats + 1):   # the first run warms caches and is not counted
            text = text_of_tokens(bundle.tokenizer, n, shift=run)
            start = time.perf_counter()
            window.sentence_bar.setText(text)
            controller.flush()
            wait_for(app, lambda: controller.trace is not None and controller.trace.text == text
                     and not controller.busy())
            for _ in range(3):   # deliver the repaints (and zero-delay timers) the new trace scheduled
                app.processEvents()
            elapsed = time.perf_counter() - start
            if run:
                totals.append(elapsed * 1000)
                forwards.append(controller.trace.elapsed_s * 1000)
                sizes.append(controller.trace.n_tokens)
        print(f"{min(sizes):>4}-{max(sizes):<4} tokens: text change -> all visible panels repainted "
              f"median {statistics.median(totals):7.1f} ms (forward pass alone {statistics.median(forwards):6.1f} ms)")

    exports = []
    for _ in range(args.export_repeats):
        folder = tempfile.mkdtemp()
        written = []
        controller.sigFilesWritten.connect(written.append)
        start = time.perf_counter()
        window.export_all_to(folder)
        wait_for(app, lambda: bool(written))
        exports.append((time.perf_counter() - start) * 1000)
        controller.sigFilesWritten.disconnect(written.append)
    print(f"Export all ({len(written[0])} files, {controller.trace.n_tokens} tokens): "
          f"median {statistics.median(exports):.0f} ms")
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
