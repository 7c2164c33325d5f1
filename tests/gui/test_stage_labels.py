"""Stages read the same in every view: emb, L0.attn, L0, … (core.logit_lens.stage_label) in the Logit lens,
the Patching sweep's stage axis and the Logit attribution bars."""
from __future__ import annotations

import core.logit_lens
import core.patching
from gui.panels.attribution_panel import AttributionPanel
from gui.panels.logit_lens_panel import LogitLensPanel


def short_stages(num_layers: int) -> list[str]:
    return ["emb", *(name for l in range(num_layers) for name in (f"L{l}.attn", f"L{l}"))]


def test_the_lens_labels_its_rows_and_table_with_the_short_stage_names(show, analysed):
    trace = analysed("The cat sat on the mat.")
    panel = show(LogitLensPanel())
    panel.set_trace(trace)
    stages = short_stages(trace.num_layers)
    assert panel.heatmap.getAxis("left").labels() == stages
    assert [panel.table.item(s, 0).text() for s in range(panel.table.rowCount())] == stages
    assert core.logit_lens.STAGES_NOTE in panel.heatmap_title.text()


def test_patching_and_attribution_use_the_same_stage_names(show, analysed):
    assert core.patching.stage_label is core.logit_lens.stage_label   # the sweep's stage axis: one definition
    panel = show(AttributionPanel())
    panel.set_trace(analysed("The cat sat on the mat."))
    labels = panel.axis.labels()
    assert any(label.startswith("emb  ") for label in labels)
    assert not any(label.startswith("embed") for label in labels)
