"""The head-roles probe asks its runs for every layer's attention only (all it scores), and needs it."""
from __future__ import annotations

import numpy as np
import pytest

from core.head_roles import probe_roles
from core.runners import NumpyRunner


class Requests:
    """A runner keeping only what each run asks for (minus `withheld`), recording the requests."""

    def __init__(self, runner, withheld: str | None = None) -> None:
        self.runner, self.bundle, self.withheld, self.asked = runner, runner.bundle, withheld, []

    def run(self, ids, *, fields=None, **kwargs):
        self.asked.append(fields)
        assert fields is not None, "a consumer of a big model's runs must say what it reads"
        return self.runner.run(ids, fields=[f for f in fields if f != self.withheld], **kwargs)


def test_the_probe_scores_from_exactly_the_attention_it_requests(bundle):
    runner = NumpyRunner(bundle)
    recording = Requests(runner)
    roles = probe_roles(recording, n_repeats=1)
    assert recording.asked == [("attn",)]
    np.testing.assert_array_equal(roles.scores, probe_roles(runner, n_repeats=1).scores)
    with pytest.raises((TypeError, IndexError)):   # the layers hold no attention to score
        probe_roles(Requests(runner, withheld="attn"), n_repeats=1)
