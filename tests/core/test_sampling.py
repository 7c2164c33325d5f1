"""Properties of core.sampling: the distribution the Next-token panel shows is the one generation uses."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from core.sampling import (SamplingSettings, candidate_distribution, choose, generate, ranked, softmax,
                           top_candidates)

# Logits of a small vocabulary; bounded so the softmax of the untruncated distribution is well defined.
logit_vectors = arrays(np.float64, st.integers(2, 40),
                       elements=st.floats(-30, 30, allow_nan=False, allow_infinity=False))
temperatures = st.floats(0.05, 5.0)
top_ks = st.integers(0, 50)
top_ps = st.floats(0.01, 1.0)


@st.composite
def sampling_settings(draw) -> SamplingSettings:
    return SamplingSettings(temperature=draw(temperatures), top_k=draw(top_ks), top_p=draw(top_ps),
                            greedy=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)))


@given(logit_vectors, sampling_settings())
def test_candidate_distribution_is_a_distribution(logits, s):
    dist = candidate_distribution(logits, s)
    assert dist.shape == logits.shape
    assert np.all(dist >= 0)
    assert abs(dist.sum() - 1.0) < 1e-9


@given(logit_vectors, temperatures, st.integers(1, 50))
def test_top_k_keeps_at_most_k_tokens_and_they_are_the_most_likely(logits, temperature, k):
    dist = candidate_distribution(logits, SamplingSettings(temperature=temperature, top_k=k))
    kept = np.flatnonzero(dist)
    assert 1 <= len(kept) <= k
    # every kept token is at least as likely as every dropped one
    dropped = np.setdiff1d(np.arange(len(logits)), kept)
    if len(dropped):
        assert logits[kept].min() >= logits[dropped].max()


# Temperatures from 0.5 keep every probability of these logits above 0 (e^-120 at worst), so the
# kept set can be read off as the non-zero entries.
warm_temperatures = st.floats(0.5, 5.0)


def _assert_nucleus(dist: np.ndarray, source: np.ndarray, order: np.ndarray, p: float) -> None:
    """dist keeps the smallest prefix of `order` whose `source` probability reaches p, renormalised."""
    n_kept = int(np.count_nonzero(dist))
    assert np.all(dist[order[:n_kept]] > 0)   # what is kept is a prefix of the ranking
    running = np.cumsum(source[order] / source.sum())
    if n_kept < np.count_nonzero(source):
        assert running[n_kept - 1] >= p - 1e-12   # the prefix reaches p ...
    if n_kept > 1:
        assert running[n_kept - 2] < p + 1e-12    # ... and one token fewer would not
    kept = order[:n_kept]
    np.testing.assert_allclose(dist[kept], source[kept] / source[kept].sum(), rtol=1e-9)


@given(logit_vectors, warm_temperatures, top_ps)
def test_top_p_keeps_the_smallest_prefix_reaching_p(logits, temperature, p):
    dist = candidate_distribution(logits, SamplingSettings(temperature=temperature, top_p=p))
    _assert_nucleus(dist, softmax(logits, temperature), ranked(logits), p)


@given(logit_vectors, warm_temperatures, st.integers(1, 50), top_ps)
def test_top_p_applies_to_what_top_k_left(logits, temperature, k, p):
    """Hugging Face's order: the nucleus is taken from the renormalised top-k distribution."""
    only_k = candidate_distribution(logits, SamplingSettings(temperature=temperature, top_k=k))
    both = candidate_distribution(logits, SamplingSettings(temperature=temperature, top_k=k, top_p=p))
    _assert_nucleus(both, only_k, ranked(logits), p)


@given(logit_vectors, sampling_settings())
def test_greedy_keeps_only_the_argmax(logits, s):
    greedy = SamplingSettings(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, greedy=True)
    dist = candidate_distribution(logits, greedy)
    assert np.flatnonzero(dist).tolist() == [int(np.argmax(logits))]
    assert choose(logits, greedy, np.random.default_rng(s.seed)) == int(np.argmax(logits))


@given(arrays(np.float64, st.integers(2, 40), elements=st.integers(-20, 20).map(float)))
def test_low_temperature_approaches_greedy(logits):
    """With logits at least 1 apart, T = 0.01 puts all but e^-100 of the mass on the argmax."""
    best = logits == logits.max()  # tied maxima share the mass
    cold = candidate_distribution(logits, SamplingSettings(temperature=0.01))
    assert cold[best].sum() > 1 - 1e-12
    np.testing.assert_allclose(cold[best], 1 / best.sum())


@given(logit_vectors, st.floats(0.05, 1.0), st.floats(1.0, 5.0))
def test_temperature_sharpens_below_one_and_flattens_above(logits, cold, hot):
    """The most likely token gains mass as the temperature falls."""
    best = int(np.argmax(logits))
    assert softmax(logits, cold)[best] >= softmax(logits, 1.0)[best] - 1e-12
    assert softmax(logits, hot)[best] <= softmax(logits, 1.0)[best] + 1e-12


def _toy_model(vocab: int):
    """A fixed 'model': the next logits depend on the last two ids, so generation has something to follow."""
    table = np.random.default_rng(123).normal(size=(vocab, vocab, vocab)) * 2
    return lambda ids: table[ids[-2] if len(ids) > 1 else 0, ids[-1]]


@settings(max_examples=30, deadline=None)
@given(sampling_settings(), st.integers(0, 12))
def test_generate_is_deterministic_per_seed(s, n):
    model = _toy_model(12)
    first = generate(model, [1, 2], n, s)
    assert first == generate(model, [1, 2], n, s)
    assert len(first) == 2 + n and first[:2] == [1, 2]
    assert all(candidate_distribution(model(first[: i]), s)[first[i]] > 0 for i in range(2, len(first)))


def test_different_seeds_give_different_samples():
    model = _toy_model(12)
    runs = {tuple(generate(model, [1, 2], 10, SamplingSettings(temperature=5.0, seed=seed))) for seed in range(5)}
    assert len(runs) > 1


def test_generate_stops_at_max_len():
    model = _toy_model(12)
    assert len(generate(model, [1, 2, 3], 10, SamplingSettings(greedy=True), max_len=5)) == 5


@given(logit_vectors, sampling_settings(), st.integers(0, 50))
def test_top_candidates_are_the_most_likely_with_both_probabilities(logits, s, n):
    c = top_candidates(logits, s, n)
    expected = ranked(logits)[:n]
    np.testing.assert_array_equal(c.ids, expected)
    np.testing.assert_allclose(c.probability, softmax(logits)[expected])
    np.testing.assert_allclose(c.after, candidate_distribution(logits, s)[expected])
    np.testing.assert_array_equal(c.in_sampling_set, candidate_distribution(logits, s)[expected] > 0)
