"""The Transformer's learning-rate schedule against the paper's formula."""

import pytest

from keras_attn.training import TransformerSchedule


def test_schedule_is_the_papers_formula():
    schedule = TransformerSchedule(512, warmup_steps=4000)
    for step in (0, 1, 100, 3999, 4000, 10_000, 100_000):
        n = step + 1
        expected = 512**-0.5 * min(n**-0.5, n * 4000**-1.5)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-5)
    rates = [float(schedule(s)) for s in range(0, 8000, 100)]
    assert max(rates) == pytest.approx((512 * 4000) ** -0.5, rel=1e-2)
    assert (
        TransformerSchedule.from_config(schedule.get_config()).get_config() == schedule.get_config()
    )
    with pytest.raises(ValueError, match="warmup_steps"):
        TransformerSchedule(512, warmup_steps=0)
