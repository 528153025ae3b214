from __future__ import annotations

import json

import numpy as np
import pytest

import monitor.stats.pulse.bandit as pulse
from monitor.stats.pulse.config import SelectionConfig, ucb_index


def test_ucb_index():
    idx = ucb_index([0.5, np.nan, 0.7], [16, 4, 0], 4.0)
    assert idx[0] == pytest.approx(1.0) and idx[1] == -np.inf and idx[2] == np.inf
    cfg = SelectionConfig(method="ucbe", batch_size=3)
    assert SelectionConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_config_roundtrip_all_fields_and_validation():
    cfg = SelectionConfig(method="naive", batch_size=5, budget=77, init_pulls=2, exploration=0.3,
                          refit_every=4, l2=0.5, freeze_examples=False, lambda_rule="paper",
                          delta=0.1, epsilon=0.01, bet_cap=0.25, certify=False, seed=11)
    assert SelectionConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    for bad in ({"method": "nope"}, {"batch_size": 0}, {"init_pulls": 0}, {"refit_every": 0},
                {"budget": 0}, {"exploration": -1.0}):
        with pytest.raises(ValueError):
            SelectionConfig(**bad)  # type: ignore[arg-type]


def test_pulse_module_reexports_the_moved_names():
    assert pulse.SelectionConfig is SelectionConfig
    assert pulse.ucb_index is ucb_index
