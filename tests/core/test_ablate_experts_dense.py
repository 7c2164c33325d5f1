"""`--ablate-experts` on a dense model names the reason, not an empty expert range."""
from __future__ import annotations

import main


def test_ablate_experts_on_a_dense_model_says_it_has_no_experts(make_bundle, tmp_path, capsys):
    dense = make_bundle(seed=2, architecture="LlamaForCausalLM", num_local_experts=0, num_experts_per_tok=0)
    status = main.main(["trace", "--model", str(dense.path), "--text", "订单", "--out", str(tmp_path / "t"),
                        "--ablate-experts", "0.0"])
    err = capsys.readouterr().err
    assert status == 2 and "this model has no experts (dense MLP)" in err, err
    assert "0--1" not in err and len(err.strip().splitlines()) == 1
