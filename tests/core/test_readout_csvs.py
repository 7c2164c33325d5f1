"""The readout panels' CSV tables, built in core from a trace (no Qt)."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from core.attribution import direct_logit_attribution
from core.head_roles import ROLES_CSV_HEADER, evidence_csv, roles_csv, sentence_roles
from core.logit_lens import logit_lens
from core.sampling import CANDIDATES_HEADER, SamplingSettings, candidates_csv, top_candidates


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture
def trace(analysed):
    return analysed("The cat sat on the mat.")


def test_attribution_csv_lists_every_part_largest_first_and_sums_to_the_logit(trace):
    a = direct_logit_attribution(trace, 3, int(trace.logits[3].argmax()))
    table = rows(a.csv())
    assert [row["part"] for row in table] == [name for name, _ in a.sorted()]
    assert [float(row["contribution"]) for row in table] == [value for _, value in a.sorted()]
    total = rows(a.total_csv())[0]
    assert float(total["sum_of_parts"]) == pytest.approx(float(total["logit"]), abs=1e-4)
    assert total["versus_id"] == ""


def test_head_roles_csv_has_a_row_per_head_and_empty_probe_columns_without_a_probe(trace):
    roles = sentence_roles(trace)
    table = rows(roles_csv(roles, None))
    assert tuple(table[0]) == ROLES_CSV_HEADER
    assert len(table) == trace.num_layers * trace.num_heads
    row = table[-1]
    layer, head = int(row["layer"]), int(row["head"])
    assert float(row["self_sentence"]) == roles.score(layer, head, "self")
    assert row["self_probe"] == ""


def test_evidence_csv_holds_the_attention_of_each_outlined_cell(trace):
    evidence = sentence_roles(trace).evidence["previous_token"]
    table = rows(evidence_csv(trace, evidence, 1, 0, "previous_token"))
    assert len(table) == len(evidence.queries)
    for row in table:
        assert float(row["attention"]) == float(trace.layers[1].attn[0, int(row["query"]), int(row["key"])])


def test_logit_lens_csvs_match_the_lens_fields(trace):
    lens = logit_lens(trace)
    tops = rows(lens.tops_csv(trace))
    assert len(tops) == len(lens.stage_names) * trace.n_tokens
    assert int(tops[-1]["top_id"]) == int(lens.top_ids[-1, -1, 0])
    position = rows(lens.position_csv(trace, 2))
    ids, _ = lens.top_k(2)
    assert [int(row["token_id"]) for row in position] == ids.reshape(-1).tolist()
    target = int(lens.top_ids[-1, 2, 0])
    ranks, probs = lens.target_ranks(2, target)
    table = rows(lens.target_csv(trace, 2, target, ranks, probs))
    assert [int(row["rank"]) for row in table] == ranks.tolist()
    assert table[-1]["rank"] == "1"


def test_candidates_csv_ranks_the_candidates_and_keeps_its_header_when_empty(trace):
    candidates = top_candidates(trace.logits[-1], SamplingSettings(), 5)
    table = rows(candidates_csv(candidates, trace.vocab_label))
    assert [int(row["id"]) for row in table] == candidates.ids.tolist()
    assert [float(row["probability"]) for row in table] == candidates.probability.astype(np.float64).tolist()
    assert candidates_csv(None, trace.vocab_label).splitlines() == [",".join(CANDIDATES_HEADER)]
