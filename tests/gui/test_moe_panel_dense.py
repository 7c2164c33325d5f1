"""On a dense model (no router) the MoE panel says so plainly instead of drawing empty routing."""
from __future__ import annotations

from core.runners import NumpyRunner
from core.session import analyse
from gui.panels.moe_panel import DENSE_TEXT, MoePanel


def test_dense_model_shows_that_there_is_no_router(show, make_bundle):
    bundle = make_bundle(seed=2, architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0)
    panel = show(MoePanel(), 900, 600)
    panel.set_trace(analyse(NumpyRunner(bundle), "The cat sat on the mat."))
    assert panel.showing_empty_state()
    assert panel.empty.text() == DENSE_TEXT and "no router" in panel.empty.text()
    assert panel.figures() == []
