"""`main.py export --figures moe_…` on a dense model: one line saying it has no router, and the figures it has."""
from __future__ import annotations

import main
from gui.panels.moe_panel import DENSE_TEXT


def export_error(capsys, tmp_path, bundle, figures: str) -> str:
    code = main.main(["export", "--text", "The cat sat.", "--out", str(tmp_path / "out"), "--model", str(bundle.path),
                      "--backend", "numpy", "--formats", "csv", "--figures", figures])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("glassbox: error: "), lines
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    return lines[0]


def test_router_figures_of_a_dense_model_say_there_is_no_router(tmp_path, make_bundle, capsys):
    dense = make_bundle(seed=2, architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0)
    line = export_error(capsys, tmp_path, dense, "moe_router_probs,moe_expert_load")
    assert "moe_router_probs, moe_expert_load: not drawn." in line and DENSE_TEXT in line
    assert "unknown figure" not in line
    assert "choose from attention_grid" in line and "moe_router_probs," not in line.split("choose from")[1]


def test_a_misspelt_figure_is_still_unknown(tmp_path, make_bundle, capsys):
    """Refused before the model runs (so before anyone knows it is dense): the misspelt name alone, and every name."""
    dense = make_bundle(seed=2, architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0)
    line = export_error(capsys, tmp_path, dense, "atention_grid,moe_router_probs")
    assert "unknown figure atention_grid: choose from attention_grid, attention_head," in line
    assert "moe_router_probs" in line.split("choose from")[1] and "not drawn" not in line


def test_figures_drawn_only_in_the_app_say_when_they_are_drawn(tmp_path, bundle, capsys):
    line = export_error(capsys, tmp_path, bundle, "moe_whatif,parity_diff")
    assert "unknown figure" not in line
    assert "moe_whatif is drawn only in the app, after a what-if run" in line
    assert "parity_diff is drawn only in the app with both backends on" in line
