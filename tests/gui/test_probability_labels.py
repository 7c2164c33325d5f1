"""The Next token chart's percentages read back as the probabilities they label, small ones included."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gui.panels.next_token_panel import format_probability

probabilities = st.floats(min_value=1e-9, max_value=1.0, allow_nan=False)


def read_back(label: str) -> float:
    return float(label.rstrip("%")) / 100


@given(probabilities)
def test_a_label_reads_back_within_five_percent(p):
    assert abs(read_back(format_probability(p)) - p) <= 0.05 * p + 1e-12


@given(probabilities, probabilities)
def test_labels_keep_the_order_of_their_probabilities(p, q):
    low, high = sorted((p, q))
    assert read_back(format_probability(low)) <= read_back(format_probability(high))


def test_small_candidates_that_differ_read_differently():
    """A flat distribution (issue 10's screenshot): 0.10% and 0.155% both read "0.1%" with one decimal."""
    assert format_probability(0.0010) != format_probability(0.00155)
    assert format_probability(0) == "0"
