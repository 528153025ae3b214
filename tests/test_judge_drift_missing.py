"""Judge-drift false alarms when labels go missing depending on their value.

Null: the judge and the humans do not change (risk 0.2, judge agreement 0.9). After the
detectors' warm-up, the labelling team stops returning most hard cases: a label that
disagrees with the judge goes missing for good with probability 0.8 (escalated, never
labelled). Skipping the missing units, as before, made the labelled rounds look like a judge
that suddenly agrees with the humans: a false ``judge_drift`` (disagreement down) in 42 of
100 streams within 2000 rounds (the ``failures`` case, 80% of failing labels missing, shifts
the bias too little to alarm within 2000 rounds either way: 0 of 100 before and after).
Each one-sided view now takes a missing label at the value least favourable to its own
alarm, and the false alarms stay within the configured budget (Clopper-Pearson, 99%).
"""

from __future__ import annotations

import numpy as np
import pytest

from monitor.state.judge_drift import JudgeDrift
from tests.stats.binomial import clopper_pearson_lower

pytestmark = pytest.mark.statistical

STREAMS = 100
WARMUP = 500
ROUNDS = 2000  # audited units after the warm-up
P = 0.02  # the false-alarm budget over the horizon


@pytest.mark.parametrize("who", ["disagreements", "failures"])
def test_no_false_judge_drift_when_labels_go_missing(who: str) -> None:
    rng = np.random.default_rng(4242 if who == "failures" else 4243)
    n = WARMUP + ROUNDS
    human = (rng.random((STREAMS, n)) < 0.2).astype(float)
    judge = np.where(rng.random((STREAMS, n)) < 0.9, human, 1.0 - human)
    hard = human != judge if who == "disagreements" else human == 1.0
    missing = hard & (rng.random((STREAMS, n)) < 0.8)
    missing[:, :WARMUP] = False  # the warm-up sees every label
    alarms = 0
    for s in range(STREAMS):
        jd = JudgeDrift.new(warmup=WARMUP, p=P, horizon=4500)
        for t in range(n):
            if missing[s, t]:
                jd.update_missing(float(judge[s, t]))
            else:
                jd.update(float(human[s, t]), float(judge[s, t]))
            if jd.alarm() is not None:
                alarms += 1
                break
    print(f"{who}: false judge-drift alarms in {alarms} of {STREAMS}")
    assert clopper_pearson_lower(alarms, STREAMS, 0.99) <= P, alarms
