"""core.interventions.Switches: the on/off view of the ablations, as the Interventions panel draws and exports it."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from core.interventions import Interventions, Switches, experts_off_mask, head_mask_off
from core.random_bundle import SMALL


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


@pytest.fixture()
def switches() -> Switches:
    heads_on = np.ones((SMALL.num_hidden_layers, SMALL.num_attention_heads), bool)
    experts_on = np.ones((SMALL.num_hidden_layers, SMALL.num_local_experts), bool)
    heads_on[1, 2] = experts_on[0, 1] = False
    return Switches(heads_on, experts_on, "mean")


def test_the_csv_has_a_row_per_head_and_expert_then_the_mode(switches):
    table = rows(switches.csv())
    L, H, E = SMALL.num_hidden_layers, SMALL.num_attention_heads, SMALL.num_local_experts
    assert table[0] == ["kind", "layer", "index", "on"] and len(table) == 1 + L * H + L * E + 1
    heads = {(int(l), int(i)): int(on) for kind, l, i, on in table[1:-1] if kind == "head"}
    experts = {(int(l), int(i)): int(on) for kind, l, i, on in table[1:-1] if kind == "expert"}
    assert heads == {site: int(on) for site, on in np.ndenumerate(switches.heads_on)}
    assert experts == {site: int(on) for site, on in np.ndenumerate(switches.experts_on)}
    assert table[-1] == ["ablate_mode", "", "", "mean"]


def test_the_matrix_is_each_layers_heads_then_its_experts(switches):
    matrix = switches.matrix()
    H = SMALL.num_attention_heads
    assert matrix.shape == (SMALL.num_hidden_layers, H + SMALL.num_local_experts)
    assert set(zip(*np.nonzero(~matrix))) == {(1, 2), (0, H + 1)}


def test_switches_ask_for_the_run_they_show_and_read_back_from_it(switches):
    interventions = switches.interventions()
    np.testing.assert_array_equal(interventions.head_mask, head_mask_off(SMALL, [(1, 2)]))
    np.testing.assert_array_equal(interventions.experts_off, experts_off_mask(SMALL, [(0, 1)]))
    assert interventions.ablate_mode == "mean"
    back = Switches.in_force(interventions, SMALL)
    np.testing.assert_array_equal(back.heads_on, switches.heads_on)
    np.testing.assert_array_equal(back.experts_on, switches.experts_on)
    assert back.ablate_mode == "mean"


def test_a_run_without_interventions_has_everything_on():
    for given in (None, Interventions()):
        switches = Switches.in_force(given, SMALL)
        assert switches.matrix().all() and switches.ablate_mode == "zero"


def test_switches_are_frozen_copies():
    heads = np.ones((2, 2), bool)
    frozen = Switches(heads, np.ones((2, 0), bool))
    heads[0, 0] = False
    assert frozen.heads_on.all()
    with pytest.raises(ValueError):
        frozen.heads_on[0, 0] = False
    with pytest.raises(ValueError, match="ablate mode"):
        Switches(heads, heads, "half")
