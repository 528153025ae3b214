r"""Restore checks of the change detectors: epochs, regression/improvement and judge drift.

A checkpoint's detector states decide when an epoch ends (a ``regression``,
``certificate_lost`` or ``improvement`` alert and fresh certificates) and when the judge
reliance restarts (``judge_drift``). Before any of it is used, :func:`check_detector_dicts`
(on the raw model document) and :func:`check_restored_detectors` (on the rebuilt
:class:`~monitor.state.model.ModelState`) refuse, with a
:class:`~monitor.state.restore_checks.RefusedState` naming the field:

- detector parameters (alpha, the alarm threshold ``A``, bet fractions, the PPI settings,
  the judge-drift warm-up, range and budget) that differ from what the configuration builds:
  the configuration always wins, so a loosened or tightened threshold cannot suppress or
  fire an alarm;
- an epoch that starts after the model's last round, a history that does not lead to the
  current epoch, epoch counts that do not add up, a regression detector disarmed in an
  epoch that was not opened by a regression;
- detectors that watched more rounds than the epoch (or the model) has;
- a statistic at or above its threshold whose alarm is not latched (the last round would
  have latched it: forged to fire on the next round), and a latched alarm the last round
  would already have acted upon (an improvement or judge-drift alarm, a regression alarm of
  an armed detector outside a violation).

Examples
--------
>>> from monitor.config import parse_config
>>> from monitor.state.model import ModelState
>>> cfg = parse_config("[[suites]]\njudge_drift=false\n[[suites.certificates]]\nname='r'\n"
...                    "alpha=0.1\ndelta=0.1\nmethods=['r_eval']\ncs_grid=10\n").suites[0]
>>> md = ModelState.new("m", cfg.certificates, lambda c: c.delta).to_dict()
>>> check_detector_dicts(cfg, md, 0, "model 'm'")
>>> md["epochs"][0][1]["regression"]["detector"]["threshold"] = 1e300
>>> check_detector_dicts(cfg, md, 0, "model 'm'")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
monitor.state.restore_checks.RefusedState: model 'm' certificate 'r' regression detector: ...

Notes
-----
Guarantee: a restored detector runs with the configuration's parameters, from a state in
range and consistent with the model's rounds and statuses, so the alarm-time guarantees of
:mod:`monitor.state.epochs` and :mod:`monitor.state.judge_drift` hold from the restored
state on. A statistic forged *lower* (within its range) is a consistent history, like
forged events: only authenticated checkpoints (``CERTMON_CHECKPOINT_KEY``) exclude it.
"""

from __future__ import annotations

import math
from typing import Any, Final

from monitor.config import SuiteConfig
from monitor.state.epochs import HISTORY, CertificateEpochs
from monitor.state.judge_drift import JudgeDrift
from monitor.state.model import ModelState
from monitor.state.restore_checks import STATUSES, RefusedState, count, same_parameters
from monitor.stats.changepoint.detector import RiskIncreaseDetector
from monitor.stats.changepoint.ppi import PPIRiskDetector

__all__ = ["check_detector_dicts", "check_restored_detectors", "check_suite_detectors"]

REASONS: Final = ("start", "regression", "improvement")
# keys of a detector state that are configuration (the rest is evidence)
_RISK_CONFIG: Final = ("kind", "version", "alpha", "stat_kind", "threshold", "fractions", "views")
_PPI_STATE: Final = ("moments", "detector")
_DRIFT_STATE: Final = ("warm_sums", "band", "detector")


def _same(expected: dict[str, Any], got: Any, keys: Any, where: str) -> None:
    same_parameters(expected, got, keys, where, "detector")


def _risk(expected: dict[str, Any], got: Any, max_rounds: int, where: str) -> None:
    _same(expected, got, _RISK_CONFIG, where)
    if count(got.get("rounds"), f"{where} rounds") > max_rounds:
        raise RefusedState(f"{where}: watched {got['rounds']} rounds, more than the "
                           f"{max_rounds} it can have seen")


def _ppi(expected: dict[str, Any], got: Any, max_rounds: int, where: str) -> None:
    _same(expected, got, [k for k in expected if k not in _PPI_STATE], where)
    _risk(expected["detector"], got.get("detector"), max_rounds, where)


def _history(e: dict[str, Any], where: str) -> None:
    number, started, reason = e["number"], e["started_round"], e["reason"]
    hist = e["history"]
    if not isinstance(hist, list) or len(hist) != min(number - 1, HISTORY):
        raise RefusedState(f"{where}: {len(hist) if isinstance(hist, list) else hist!r} "
                           f"history entries for epoch {number}")
    if number == 1 and (reason != "start" or started != 0):
        raise RefusedState(f"{where}: epoch 1 must start at round 0 by 'start'")
    nxt, end_at, end_by = number, started, reason
    for h in reversed(hist):
        if not isinstance(h, list) or len(h) != 6:
            raise RefusedState(f"{where}: malformed history entry {h!r}")
        num, first, last, by, ended_by, status = h
        if (count(num, f"{where} history epoch") != nxt - 1 or last != end_at
                or ended_by != end_by or not count(first, f"{where} history round") <= last
                or by not in REASONS or (by == "start") != (num == 1)
                or status not in STATUSES or ended_by == "start"):
            raise RefusedState(f"{where}: history entry {h!r} does not lead to epoch {nxt}")
        nxt, end_at, end_by = num, first, by
    if nxt == 1 and end_at != 0:
        raise RefusedState(f"{where}: epoch 1 must start at round 0")


def _epochs(config: SuiteConfig, md: dict[str, Any], rounds: int, where: str,
            missing: int = 0) -> None:
    epochs = {str(c): e for c, e in md["epochs"]}
    if sorted(epochs) != sorted(c.name for c in config.certificates):
        raise RefusedState(f"{where}: epochs of {sorted(epochs)}, certificates "
                           f"{sorted(c.name for c in config.certificates)} in the configuration")
    for cert in config.certificates:
        cw = f"{where} certificate {cert.name!r}"
        e = epochs[cert.name]
        fresh = CertificateEpochs.new(cert.alpha, cert.detector_threshold)
        _same(fresh.to_dict(), e, ("alpha", "arl"), f"{cw} epochs")
        number = count(e["number"], f"{cw} epoch number")
        started = count(e["started_round"], f"{cw} epoch start")
        if number < 1 or started > rounds:
            raise RefusedState(f"{cw}: epoch {number} starting at round {started} "
                               f"(the model has {rounds} rounds)")
        ts = e["started_ts"]
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int | float)
                               or not math.isfinite(ts)):
            raise RefusedState(f"{cw}: epoch start time must be finite or null, got {ts!r}")
        if e["reason"] not in REASONS:
            raise RefusedState(f"{cw}: unknown epoch reason {e['reason']!r}")
        _history(e, cw)
        ended = e["ended"]
        if (not isinstance(ended, list) or len(ended) != 3
                or count(ended[0], f"{cw} regressions") + count(ended[1], f"{cw} improvements")
                != number - 1 or count(ended[2], f"{cw} certificates lost") > ended[0]):
            raise RefusedState(f"{cw}: epoch counts {ended!r} do not add up to epoch {number}")
        if e["armed"] is not True and (e["armed"] is not False or e["reason"] != "regression"):
            raise RefusedState(f"{cw}: regression detector disarmed ({e['armed']!r}) in an "
                               f"epoch opened by {e['reason']!r}")
        # a missing label feeds the detectors (at its worst value) without counting a round
        epoch_rounds = rounds + missing - started
        if fresh.regression is None:  # new() always arms one
            raise RuntimeError("a new certificate epoch has no regression detector")
        _ppi(fresh.regression.to_state(), e["regression"], epoch_rounds,
             f"{cw} regression detector")
        if e["improvement"] is not None:
            imp = PPIRiskDetector(1.0 - cert.alpha, arl=cert.detector_threshold)
            _ppi(imp.to_state(), e["improvement"], epoch_rounds, f"{cw} improvement detector")


def _judge(config: SuiteConfig, md: dict[str, Any], rounds: int, where: str) -> None:
    d = md["judge_drift"]
    if not config.judge_drift:
        if d is not None:
            raise RefusedState(f"{where}: judge-drift state, but judge_drift is off")
        return
    fresh = JudgeDrift.new(config.judge_drift_warmup, config.judge_drift_false_alarm,
                           config.judge_drift_horizon).to_dict()
    if not isinstance(d, dict):
        raise RefusedState(f"{where}: judge_drift is on but the checkpoint has no state")
    if count(d.get("alarms"), f"{where} judge-drift alarms") > rounds:
        raise RefusedState(f"{where}: {d['alarms']} judge-drift alarms in {rounds} rounds")
    for name in ("bias", "disagreement"):
        dw = f"{where} judge-drift {name} detector"
        exp, got = fresh[name], d.get(name)
        _same(exp, got, [k for k in exp if k not in _DRIFT_STATE], dw)
        if not isinstance(got, dict):  # _same refuses it first; kept for the type checker
            raise RefusedState(f"{dw}: malformed state {got!r}")
        warm = got["warm_sums"]
        if isinstance(warm, list) and warm and isinstance(warm[0], int | float) \
                and warm[0] > rounds:
            raise RefusedState(f"{dw}: warm-up of {warm[0]} rounds, the model has {rounds}")
        if got["detector"] is not None:
            inner = RiskIncreaseDetector(0.0, kind=exp["stat_kind"], arl=exp["threshold"],
                                         fractions=exp["fractions"], views=2).to_state()
            _risk(inner, got["detector"], max(rounds - exp["warmup"], 0), dw)


def check_detector_dicts(config: SuiteConfig, md: dict[str, Any], rounds: int,
                         where: str, missing: int = 0) -> None:
    """Check one model's raw epoch and judge-drift states (see the module docstring).

    Raises
    ------
    RefusedState
        Naming the model, certificate and field at fault.
    """
    try:
        _epochs(config, md, rounds, where, missing)
        _judge(config, md, rounds + missing, where)  # (a missing label feeds them)
    except (KeyError, TypeError, AttributeError) as exc:
        raise RefusedState(f"{where}: malformed detector state ({exc!r})") from None


def _unlatched(det: RiskIncreaseDetector, where: str) -> None:
    if det.alarm_round is None and det.rounds and det.log_statistic >= math.log(det.threshold):
        raise RefusedState(f"{where}: statistic {det.statistic:.6g} at or above its threshold "
                           f"{det.threshold:.6g} without an alarm (its last round would have "
                           "raised one)")


def check_restored_detectors(model: ModelState, primary: dict[str, str]) -> None:
    """Statistics and latched alarms of the restored detectors match the last round.

    Parameters
    ----------
    model : ModelState
        The restored model (its configuration already checked by :func:`check_detector_dicts`).
    primary : dict
        Certificate name -> its primary method.

    Raises
    ------
    RefusedState
        A statistic that would fire without new evidence, or an alarm the last round would
        already have acted upon.
    """
    for cert, ep in model.epochs.items():
        where = f"model {model.name!r} certificate {cert!r}"
        status = model.effective[(cert, primary[cert])].status
        if ep.regression is not None:
            _unlatched(ep.regression.detector, f"{where} regression detector")
            if ep.regression.alarm and ep.armed and status != "violated":
                raise RefusedState(f"{where}: regression alarm latched on an armed detector "
                                   f"while {status!r} (the last round would have acted on it)")
        if ep.improvement is not None:
            if status != "violated":
                raise RefusedState(f"{where}: improvement detector while {status!r}")
            _unlatched(ep.improvement.detector, f"{where} improvement detector")
            if ep.improvement.alarm:
                raise RefusedState(f"{where}: improvement alarm latched (the last round "
                                   "would have acted on it)")
    if model.judge is not None:
        for name, det in (("bias", model.judge.bias), ("disagreement", model.judge.disagreement)):
            where = f"model {model.name!r} judge-drift {name} detector"
            if det.alarm:
                raise RefusedState(f"{where}: alarm latched (the last round would have acted "
                                   "on it)")
            inner = det.to_state()["detector"]
            if inner is not None:
                _unlatched(RiskIncreaseDetector.from_state(inner), where)


def check_suite_detectors(config: SuiteConfig, d: dict[str, Any],
                          models: dict[str, ModelState] | None = None) -> None:
    """Run :func:`check_detector_dicts` on every model of a raw suite snapshot ``d``.

    With ``models`` (the restored suite's), run :func:`check_restored_detectors` instead.

    Raises
    ------
    RefusedState
        Naming the suite, model, certificate and field at fault.
    """
    if models is not None:
        primary = {c.name: c.primary_method for c in config.certificates}
        for m in models.values():
            check_restored_detectors(m, primary)
        return
    for md in d["models"]:
        check_detector_dicts(config, md, md["counts"]["rounds"],
                             f"suite {d['name']!r} model {md['name']!r}",
                             count(md["counts"].get("expired_pending", 0), "missing labels"))
