"""One figure per readout for the README, made by the readout panels themselves.

    python benchmarks/readout_figures.py [--out docs] [--model BUNDLE]

Writes readout_head_roles.png, readout_logit_lens.png, readout_attribution.png and
readout_parity.png: each panel is built offscreen at a fixed size, given the shipped model's
trace of a sentence (ONNX Runtime, with the NumPy run as the parity reference and the probe
scored as the controller would), and its main figure rendered by gui.export like any export.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPEATED = "The cat sat on the mat. The cat sat on the mat."       # repeats, so induction is defined
BILINGUAL = "订单成交，订单取消，查询订单。The cat sat on the"
INDUCTION = "The cat sat on the mat. The cat sat on the"               # what followed "the" the first time?
PANEL_SIZE = (1000, 760)
WIDTH = 1400                      # PNG pixels: sharp in a README, well under 300 KB


def render(panel, trace, figure_name: str, selection=None, then=None) -> bytes:
    """The panel's figure for `trace`; `then(panel)` sets controls that need the trace (token ids)."""
    from PySide6.QtWidgets import QApplication

    from gui import export
    from gui.selection import Selection

    panel.resize(*PANEL_SIZE)
    panel.show()
    panel.selection = selection or Selection()
    panel.set_trace(trace)
    if then is not None:
        then(panel)
    for _ in range(3):   # layouts settle and deferred repaints run before painting to a file
        QApplication.processEvents()
    figure = next(f for f in panel.figures() if f.name == figure_name)
    return export.png_bytes(figure.widget, WIDTH)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs")
    parser.add_argument("--model", help="bundle folder (default: the shipped model)")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtWidgets import QApplication

    from core.bundle import load_bundle
    from core.head_roles import probe_roles
    from core.raw_export import ensure_writable_folder, write_atomic
    from core.runners import NumpyRunner, OnnxRunner
    from core.session import analyse
    from gui.app import application
    from gui.headless import _quiet_offscreen_warnings
    from gui.panels.attribution_panel import AttributionPanel
    from gui.panels.head_roles_panel import HeadRolesPanel
    from gui.panels.logit_lens_panel import LogitLensPanel
    from gui.panels.parity_panel import ParityPanel
    from gui.selection import Selection

    _quiet_offscreen_warnings()
    application()
    bundle = load_bundle(args.model)
    onnx, numpy_runner = OnnxRunner(bundle), NumpyRunner(bundle)
    repeated, bilingual, induction = (analyse(onnx, text) for text in (REPEATED, BILINGUAL, INDUCTION))
    folder = ensure_writable_folder(args.out)

    roles = HeadRolesPanel()
    roles.sigRequestProbe.connect(lambda: roles.set_probe(probe_roles(onnx)))
    parity = ParityPanel()
    parity.set_reference_trace(analyse(numpy_runner, BILINGUAL))
    lens, attribution = LogitLensPanel(), AttributionPanel()
    # Attribute the token the first sentence had after "the": the copy induction heads should write.
    copied = int(induction.input_ids[induction.labels().index("␣the") + 1])
    panels = [roles, lens, attribution, parity]
    figures = {
        "readout_head_roles.png": render(roles, repeated, "head_roles_table", Selection(layer=1, head=1)),
        "readout_logit_lens.png": render(lens, bilingual, "logit_lens_heatmap"),
        "readout_attribution.png": render(attribution, induction, "attribution_bars",
                                          then=lambda panel: panel.target_box.setValue(copied)),
        "readout_parity.png": render(parity, bilingual, "parity_fields"),
    }
    for name, data in figures.items():
        path = write_atomic(folder / name, data)
        print(f"{path}  {len(data) / 1024:.0f} KB")
    for panel in panels:   # Qt widgets go before the QApplication does, not at interpreter exit
        panel.close()
        panel.deleteLater()
    QApplication.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
