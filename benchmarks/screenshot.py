"""Take a screenshot of the whole main window with a sentence, made by the app itself.

    python benchmarks/screenshot.py --text "订单成交，订单取消。" --out docs/screenshot.png
    python benchmarks/screenshot.py --panel moe --out /tmp/moe.png            # MoE routing's tab raised
    python benchmarks/screenshot.py --each --size 1280x800 --out /tmp/shots/en.png   # en-moe.png, en-step.png, ...
    python benchmarks/screenshot.py --panel positions --tab "RoPE pairs" --out /tmp/rope.png

Uses the real display when there is one (e.g. Xvfb: DISPLAY=:99), else Qt's offscreen platform.
Settings go to a temporary file, so your own layout and last sentence are left alone.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def settle(app, rounds: int = 30) -> None:
    """Let every panel finish its deferred layout and painting."""
    for _ in range(rounds):
        app.processEvents()
        time.sleep(0.02)


def bring_up_tab(window, text: str) -> bool:
    """Make the tab titled `text` of a panel's own QTabWidget current (not a dock's tab: see --panel)."""
    from PySide6.QtWidgets import QTabWidget

    for tabs in window.findChildren(QTabWidget):
        for i in range(tabs.count()):
            if tabs.tabText(i) == text:
                tabs.setCurrentIndex(i)
                return True
    return False


def save(window, out: Path) -> bool:
    out.parent.mkdir(parents=True, exist_ok=True)
    if not window.grab().save(str(out)):
        print(f"could not save {out}", file=sys.stderr)
        return False
    print(out)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", default="订单成交，订单取消。The cat sat on the mat because it was tired.")
    parser.add_argument("--out", default="docs/screenshot.png")
    parser.add_argument("--model", help="bundle folder (default: the shipped model)")
    parser.add_argument("--size", default="1600x1000", help="window size WIDTHxHEIGHT")
    parser.add_argument("--backend", default="both", choices=["onnx", "numpy", "both"])
    parser.add_argument("--query", type=int, help="select this token as the query")
    parser.add_argument("--panel", action="append", default=[], metavar="NAME",
                        help="raise this panel's tab before the shot (repeat for several; names as in "
                             "gui/panels/registry.py: tokens, attention, next_token, positions, moe, step, "
                             "interventions, patching, occlusion, head_roles, logit_lens, attribution, parity)")
    parser.add_argument("--tab", action="append", default=[], metavar="TEXT",
                        help="bring up the tab titled TEXT inside a panel (e.g. 'RoPE pairs' in Positions)")
    parser.add_argument("--each", action="store_true",
                        help="one shot per panel, its tab raised: OUT's name + '-NAME' (default layout first)")
    parser.add_argument("--theme", default="light", choices=["light", "dark"],
                        help="dark: the palette of a dark desktop (as `main.py export --theme dark`)")
    args = parser.parse_args()
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from core.bundle import load_bundle
    from gui.app import application
    from gui.controller import Controller
    from gui.headless import apply_theme
    from gui.main_window import MainWindow

    app = application()
    apply_theme(app, args.theme)
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "screenshot.ini"), QSettings.Format.IniFormat)
    controller = Controller(load_bundle(args.model), args.backend)
    window = MainWindow(controller, settings)
    width, height = (int(v) for v in args.size.split("x"))
    window.resize(width, height)
    window.show()
    window.sentence_bar.setText(args.text)
    deadline = time.monotonic() + 60
    while (controller.trace is None or controller.busy()) and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
    if args.query is not None:
        controller.select({"query": args.query})
    for name in args.panel:
        window.docks[name].raise_()
    settle(app, 5)
    for text in args.tab:
        if not bring_up_tab(window, text):
            print(f"no tab titled {text!r}", file=sys.stderr)
    settle(app)
    out = Path(args.out)
    ok = save(window, out)
    if args.each:
        for name, dock in window.docks.items():
            dock.raise_()
            settle(app)
            ok = save(window, out.with_name(f"{out.stem}-{name}{out.suffix}")) and ok
    window.close()
    QApplication.processEvents()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
