"""Occlusion asks its sentence's run for exactly what it reads: every layer's attention and the logits at P.

Each consumer's request is checked both ways: it works on a partial trace holding only what it asked for
(so it reads nothing else), and taking any one name out of the request breaks it (so it asks for no more).
"""
from __future__ import annotations

import numpy as np
import pytest

from core.occlusion import attention_rollout, occlude, occlusion_fields
from core.runners import NumpyRunner

IDS = np.array([5, 17, 42, 9, 88, 17, 42, 3])
POSITION = 5


class Recording:
    """A runner whose runs keep only the fields asked for (minus `withheld`), recording each request."""

    def __init__(self, runner, withheld: str | None = None) -> None:
        self.runner, self.bundle, self.withheld, self.requests = runner, runner.bundle, withheld, []

    def run(self, ids, *, fields=None, **kwargs):
        self.requests.append(fields)
        assert fields is not None, "a consumer of a big model's runs must say what it reads"
        return self.runner.run(ids, fields=[f for f in fields if f != self.withheld], **kwargs)

    def run_logits(self, ids, interventions=None):
        return self.runner.run_logits(ids, interventions)


def test_occlusion_runs_on_exactly_the_fields_it_requests(bundle):
    runner = NumpyRunner(bundle)
    recording = Recording(runner)
    result = occlude(recording, IDS, POSITION)
    assert recording.requests == [occlusion_fields(POSITION)]
    full = runner.run(IDS)
    np.testing.assert_array_equal(result.rollout, attention_rollout([layer.attn for layer in full.layers])[POSITION])
    assert result.target_id == int(np.argmax(full.logits[POSITION]))


@pytest.mark.parametrize("withheld", occlusion_fields(POSITION))
def test_occlusion_needs_every_field_it_requests(bundle, withheld):
    with pytest.raises((KeyError, TypeError, AttributeError)):
        occlude(Recording(NumpyRunner(bundle), withheld), IDS, POSITION)
