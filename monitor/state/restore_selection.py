r"""Restore checks of selection-mode suites (PULSE best-model identification).

A selection suite's checkpoint holds the bandit (AIPW estimator, low-rank model, the
anytime-valid best-model certifier) and the requests in flight. Before any of it is used,
:func:`check_selection_dict` refuses, with a
:class:`~monitor.state.restore_checks.RefusedState` naming the field:

- parameters that differ from what the configuration builds (method, budget, batch size,
  delta, epsilon, bet cap, seed, refit rule, the AIPW weight rule, the low-rank settings):
  the configuration always wins;
- sizes that do not match the configured models and examples (arms or examples that do
  not exist, arrays of another length, more requests in flight than ``max_outstanding``);
- non-finite numbers, scores outside ``[0, 1]``, negative or non-integer counts, confidence
  bounds outside ``[0, 1]`` or crossed;
- a best-model certificate (or an alert) that the restored confidence bounds do not
  support: the certificate names the model whose lower bound clears every other upper
  bound (minus epsilon), exactly when such a model exists.

Examples
--------
>>> from monitor.selection_settings import SelectionSettings
>>> from monitor.state.selection_suites import SelectionState
>>> settings = SelectionSettings(models=["x", "y"], examples=6, method="ucbe", batch_size=3)
>>> d = SelectionState("b", settings).to_dict()
>>> check_selection_dict(settings, d)
>>> d["bandit"]["config"]["delta"] = 0.9
>>> check_selection_dict(settings, d)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
monitor.state.restore_checks.RefusedState: selection suite 'b' bandit: ...delta: checkpoint 0.9...

Notes
-----
Guarantee: a restored selection suite has the configuration's parameters and sizes, values
in range and a certificate backed by its bounds. Low-rank factors and predictions only
steer which examples are requested: the AIPW estimates are unbiased whatever the
predictions, so forged (finite) factors cost power, not validity. A consistent forged
history (other scores) is excluded only by authenticated checkpoints.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from monitor.selection_settings import SelectionSettings
from monitor.state.restore_checks import RefusedState, check_counts, count, same_parameters
from monitor.state.selection_suites import COUNT_KEYS
from monitor.stats.pulse.aipw import AIPWEstimator
from monitor.stats.pulse.bestarm import BestModelCertifier
from monitor.stats.pulse.lowrank import LogisticLowRank

__all__ = ["check_selection_dict"]


def _int(x: Any, hi: int | None, what: str) -> int:
    return count(x, what, below=hi)


def _num(x: Any, what: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    if (isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x)
            or not lo <= x <= hi):
        raise RefusedState(f"{what} must be a finite number in [{lo:g}, {hi:g}], got {x!r}")
    return float(x)


def _list(x: Any, size: int | None, what: str, cap: int | None = None) -> list[Any]:
    if not isinstance(x, list) or (size is not None and len(x) != size) \
            or (cap is not None and len(x) > cap):
        n = len(x) if isinstance(x, list) else x
        want = f"{size}" if size is not None else f"at most {cap}"
        raise RefusedState(f"{what}: {want} entries expected (the configuration), got {n!r}")
    return x


def _indices(x: Any, n: int, what: str) -> list[int]:
    idx = [_int(j, n, what) for j in _list(x, None, what, n)]
    if len(set(idx)) != len(idx):
        raise RefusedState(f"{what}: repeated indices")
    return idx


def _same(expected: dict[str, Any], got: Any, keys: Any, where: str) -> None:
    same_parameters(expected, got, keys, where, "selection")


def _aipw(st: Any, expected: dict[str, Any], m: int, n: int, w: str) -> None:
    _same(expected, st, ("n_models", "n_examples", "lambda_rule"), w)
    order = [_indices(o, n, f"{w} observed examples") for o in _list(st["order"], m, w)]
    for o, s in zip(order, _list(st["scores"], m, f"{w} scores"), strict=True):
        for x in _list(s, len(o), f"{w} scores"):
            _num(x, f"{w} score", 0.0, 1.0)
    for key in ("obs_sum", "theta_sum", "z_sum"):
        for x in _list(st[key], m, f"{w} {key}"):
            _num(x, f"{w} {key}")
    for o, t in zip(order, _list(st["thetas"], m, f"{w} thetas"), strict=True):
        for x in _list(t, None, f"{w} thetas", len(o)):
            _num(x, f"{w} theta")
    for i, p in enumerate(_list(st["pending"], m, f"{w} pending")):
        if p is not None:
            if _int(p["model"], m, f"{w} pending model") != i:
                raise RefusedState(f"{w}: pending pull of model {p['model']} in row {i}")
            _indices(p["examples"], n, f"{w} pending examples")
            for key in ("observed_sum", "lam", "pred_sum", "pred_max", "pred_min"):
                _num(p[key], f"{w} pending {key}")
            for x in _list(p["pred_batch"], None, f"{w} pending predictions", n):
                _num(x, f"{w} pending prediction", 0.0, 1.0)
    for x in _list(st["calibration"], 5, f"{w} calibration"):
        _num(x, f"{w} calibration")


def _certifier(st: Any, expected: dict[str, Any], m: int, n: int, w: str) -> None:
    _same(expected, st, ("n_models", "delta", "epsilon", "bet_cap"), w)
    total = 0
    for i in range(m):
        thetas = _list(_list(st["theta"], m, f"{w} increments")[i], None, w, n)
        total += len(thetas)
        for key in ("theta", "lp", "lm"):
            for x in _list(_list(st[key], m, f"{w} {key}")[i], len(thetas), f"{w} {key}"):
                _num(x, f"{w} {key}", 0.0 if key != "theta" else -math.inf)
    for key in ("sum", "sq"):
        for x in _list(st[key], m, f"{w} {key}"):
            _num(x, f"{w} {key}")
    lower, upper = _list(st["lower"], m, f"{w} lower"), _list(st["upper"], m, f"{w} upper")
    for lo, up in zip(lower, upper, strict=True):
        if not _num(lo, f"{w} lower bound", 0.0, 1.0) <= _num(up, f"{w} upper bound", 0.0, 1.0):
            raise RefusedState(f"{w}: lower bound {lo} above upper bound {up}")
    if _int(st["rounds"], None, f"{w} rounds") != total:
        raise RefusedState(f"{w}: {st['rounds']} rounds for {total} increments")
    best = BestModelCertifier.from_state(st).best_model
    c = st["certified"]
    if (c is None) != (best is None) or (c is not None and (
            not isinstance(c, dict) or c.get("model") != best)):
        raise RefusedState(f"{w}: certificate {c and c.get('model')!r} but the bounds "
                           f"select {best!r}")


def _lowrank(st: Any, cfg: dict[str, Any], rank: int, m: int, n: int, w: str) -> None:
    if (st is None) != (cfg["method"] == "ucbe"):
        raise RefusedState(f"{w}: low-rank state {'missing' if st is None else 'present'} "
                           f"for method {cfg['method']!r}")
    if st is None:
        return
    fresh = LogisticLowRank(m, np.zeros((n, rank)), l2=cfg["l2"],
                            freeze_examples=cfg["freeze_examples"]).to_state()
    _same(fresh, st, ("l2", "freeze_examples", "joint_sweeps", "max_newton"), w)
    for key, rows in (("u", m), ("v", n)):
        for row in _list(st[key], rows, f"{w} {key}"):
            for x in _list(row, rank, f"{w} {key} row"):
                _num(x, f"{w} {key}")


def _bandit(settings: SelectionSettings, b: Any, m: int, n: int, w: str) -> None:
    if not isinstance(b, dict) or b.get("format") != "certmon.selection" \
            or b.get("version") != 1:
        raise RefusedState(f"{w}: not a version-1 selection state")
    cfg = settings.to_selection_config()
    config = cfg.to_dict()
    _same({"n_models": m, "n_examples": n}, b, ("n_models", "n_examples"), w)
    _same(config, b["config"], sorted(config), w)
    _aipw(b["aipw"], AIPWEstimator(m, n, cfg.lambda_rule).to_state(), m, n, f"{w} AIPW")
    _certifier(b["certifier"], BestModelCertifier(m, cfg.delta, cfg.epsilon,
                                                  cfg.bet_cap).to_state(), m, n,
               f"{w} certificate")
    _lowrank(b["lowrank"], config, settings.rank, m, n, f"{w} low-rank")
    for k, pairs in b["received"].items():
        _int(int(k), m, f"{w} received model")
        for j, s in _list(pairs, None, f"{w} received", n):
            _int(j, n, f"{w} received example")
            _num(s, f"{w} received score", 0.0, 1.0)
    counts = {k: b[k] for k in ("steps", "issued", "completed", "bandit_done", "refits")}
    check_counts(counts | {"cost": b["cost"]}, f"{w} counts")
    if b["completed"] > b["issued"]:
        raise RefusedState(f"{w}: {b['completed']} pulls completed of {b['issued']} issued")
    _indices(b["dirty"], m, f"{w} models to refit")
    if not isinstance(b["predicted"], bool):
        raise RefusedState(f"{w}: predicted must be a boolean")


def check_selection_dict(settings: SelectionSettings, d: dict[str, Any]) -> None:
    """Check one selection suite's raw snapshot against its settings (module docstring).

    Raises
    ------
    RefusedState
        Naming the suite and field at fault.
    """
    w = f"selection suite {d.get('name')!r}"
    m, n = len(settings.models), len(settings.example_ids)
    try:
        _bandit(settings, d["bandit"], m, n, f"{w} bandit")
        counts = d["counts"]
        check_counts(counts, f"{w} counts")
        if sorted(counts) != sorted(COUNT_KEYS):
            raise RefusedState(f"{w}: counts {sorted(counts)}, expected {sorted(COUNT_KEYS)}")
        if not isinstance(d["started"], bool) or not isinstance(d["alerted"], bool):
            raise RefusedState(f"{w}: started and alerted must be booleans")
        if d["alerted"] and d["bandit"]["certifier"]["certified"] is None:
            raise RefusedState(f"{w}: best-model alert sent without a certificate")
        if d["watermark"] is not None:
            _num(d["watermark"], f"{w} watermark")
        requested = [_indices(r, n, f"{w} requested examples")
                     for r in _list(d["requested"], m, f"{w} requested")]
        out = _list(d["outstanding"], None, f"{w} requests in flight", settings.max_outstanding)
        if len({r[0] for r in out}) != len(out):
            raise RefusedState(f"{w}: two requests in flight for one model")
        for i, rid, ex, left, ts in out:
            _int(i, m, f"{w} request model")
            examples = set(_indices(ex, n, f"{w} request examples"))
            if not isinstance(rid, str) or not set(_indices(left, n, w)) <= examples \
                    or not examples <= set(requested[i]):
                raise RefusedState(f"{w}: request {rid!r} of model {i} is inconsistent")
            _num(ts, f"{w} request time")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, RefusedState):
            raise
        raise RefusedState(f"{w}: malformed ({exc!r})") from None
