"""The ceiling search's one fit/edge/confirm path, against stub probes (milliseconds)."""

import itertools

import pytest

from advisor.method.ceiling import EDGE_PRIOR, ProbeTrial, next_edge_probe, search_ceiling

MIB = 2**20


def edge_at(share: float, fixed: float = 5 * MIB, per_sample: float = 0.5 * MIB, budget: int = 512 * MIB):
    """Probes whose peak is fixed + per_sample x batch, running out past ``share`` of the budget (on CPU the
    allocator's overhead puts the real edge at 65-90% of what the tensor bytes predict)."""
    def probe(batch, purpose):
        peak = fixed + per_sample * batch
        fits = peak <= share * budget
        return ProbeTrial(batch, "ok" if fits else "oom", int(peak) if fits else None, 0.01, purpose)

    return probe, budget


@pytest.mark.parametrize("share", [0.7, 0.75, 0.85, 1.0])
def test_edge_probes_go_where_the_line_puts_the_edge(share):
    probe, budget = edge_at(share)
    result = search_ceiling(probe, budget, 0.15)
    # Two fit probes, the edge bracketed inside the expected band and narrowed to 5%, one confirm: 8 probes
    # (the search that halved the whole range from the fit's batches needed 9 for each of these).
    assert len(result.trials) <= 8, [(t.batch, t.status, t.purpose) for t in result.trials]
    assert result.smallest_oom - result.largest_ok <= 0.05 * result.largest_ok
    true_edge = int((share * budget - 5 * MIB) / (0.5 * MIB))
    assert result.largest_ok <= true_edge < result.smallest_oom
    assert result.trials[-1].purpose == "confirm" and result.trials[-1].status == "ok"
    assert result.trials[-1].batch == result.per_device_max


def test_an_edge_outside_the_expected_band_is_still_found():
    probe, budget = edge_at(0.4)  # far below the band: the search falls back to bisection
    result = search_ceiling(probe, budget, 0.0)
    true_edge = int((0.4 * budget - 5 * MIB) / (0.5 * MIB))
    assert result.largest_ok <= true_edge < result.smallest_oom
    assert result.smallest_oom - result.largest_ok <= max(1, 0.05 * result.largest_ok)


def test_a_cap_of_one_sample_is_a_ceiling_of_one_not_a_crash():
    probe, budget = edge_at(0.8)
    result = search_ceiling(probe, budget, 0.15, max_batch=1, cap_reason="the data")
    assert result.per_device_max == 1 and result.fit is None and "the cap: the data" in result.reason


def test_the_next_probe_always_lies_strictly_inside_the_bracket():
    for largest_ok, gap, predicted in itertools.product(range(1, 60, 3), (None, 2, 3, 7, 40, 500),
                                                        (None, 5, 30, 80, 300)):
        smallest_oom = None if gap is None else largest_ok + gap
        guess = next_edge_probe(largest_ok, smallest_oom, predicted, max_batch=10_000)
        assert guess > largest_ok and (smallest_oom is None or guess < smallest_oom), \
            (largest_ok, smallest_oom, predicted, guess)


def test_the_first_edge_probe_sits_inside_the_expected_band():
    assert next_edge_probe(8, None, 1000, 65536) == round(EDGE_PRIOR[1] * 1000)
    # It ran there: the next one goes just past the predicted edge, where an OOM closes the band.
    assert next_edge_probe(800, None, 1000, 65536) == 1050
    # It ran out there: the band's low end.
    assert next_edge_probe(8, 800, 1000, 65536) == round(EDGE_PRIOR[0] * 1000)


def test_the_headroom_rule_keeps_its_fraction_of_the_usable_memory_free():
    from advisor.method.ceiling import MemoryFit

    fit = MemoryFit(fixed_bytes=10 * 2**20, per_sample_bytes=2**20)
    assert fit.batch_with_headroom(100 * 2**20, 0.10) == 80  # (90 MiB - 10 MiB) / 1 MiB
    assert fit.batch_with_headroom(100 * 2**20, 0.0) == 90
    assert fit.batch_with_headroom(5 * 2**20, 0.15) == 0  # the fixed part alone does not fit
