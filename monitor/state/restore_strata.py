r"""Restore checks of stratified auditing (Cer-Eval / StratPPI state of each model).

A model's ``strata`` state steers the audit rates (probabilities), names the strata and
holds the per-stratum labels behind the ``precision_reached`` certificate. Before any of it
is used, :func:`check_suite_strata` refuses, with a
:class:`~monitor.state.restore_checks.RefusedState` naming the field:

- parameters that differ from what the configuration builds: the number of strata, the
  stratification (``by``), the judge-loss warm-up, the certificate's level after
  multiplicity, the StratPPI alpha, fixed weights (the configuration always wins);
- sizes that do not match the configured number of strata, more named strata than slots,
  a warm-up buffer longer than the warm-up, bin edges that are not sorted in ``[0, 1]``;
- audit rates outside ``[0, 1]`` or below the uniform rate, a target stratum that does not
  exist, non-finite or out-of-range moments, negative or non-integer counts;
- an audit order (per-stratum positions, waiting labels) that is malformed or has more
  positions than audits, more missing labels than expired units, an upper side (missing labels
  at 1) without missing labels or with counts other than the lower side's;
- counts that do not add up: per stratum, traffic = audited + unaudited units, labels <=
  audited units, the Cer-Eval and StratPPI label counts equal; over the model, traffic and
  labels within the model's judge events and labels, a precision reached with more labels
  than were seen (or without a precision goal).

Examples
--------
>>> from monitor.config import CertificateConfig, SuiteConfig, StrataConfig
>>> from monitor.state.strata import StrataSpec, StrataState
>>> cfg = SuiteConfig(audit_rate=0.2, strata=StrataConfig(by="stratum", count=3),
...     certificates=[CertificateConfig(name="r", alpha=0.1, delta=0.05, precision=0.3)])
>>> spec = StrataSpec.from_suite(cfg, lambda c: c.delta)
>>> st = StrataState(spec).to_dict()
>>> check_strata_dict(spec, st, {"judge": 0, "labels": 0}, "model 'm'")
>>> st["rates"][1] = 7.0
>>> check_strata_dict(spec, st, {"judge": 0, "labels": 0}, "model 'm'")
Traceback (most recent call last):
...
monitor.state.restore_checks.RefusedState: model 'm' strata audit rates must lie in [0, 1], got 7.0

Notes
-----
Guarantee: a restored stratified state has the configuration's parameters, sizes and
levels, probabilities in ``[0, 1]`` and counts that add up, so the validity argument of
:mod:`monitor.state.strata` applies from the restored state on. A consistent forged history
(other labels) is excluded only by authenticated checkpoints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise
from typing import Any

from monitor.config import CertificateConfig, SuiteConfig
from monitor.state.restore_checks import MAX_COUNT, RefusedState, same_parameters
from monitor.state.strata import StrataSpec, StrataState
from monitor.state.strata_order import StrataOrder

__all__ = ["check_strata_dict", "check_suite_strata"]

_TOL = 1e-9


def _ints(xs: Any, k: int, what: str) -> list[int]:
    if not isinstance(xs, list) or len(xs) != k:
        raise RefusedState(f"{what}: {k} values expected (the configured strata)")
    for x in xs:
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_COUNT:
            raise RefusedState(f"{what} must be non-negative integers (at most 2**53)")
    return xs


def _floats(xs: Any, k: int, lo: float, hi: float, what: str) -> list[float]:
    if not isinstance(xs, list) or len(xs) != k:
        raise RefusedState(f"{what}: {k} values expected (the configured strata)")
    for x in xs:
        if (isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x)
                or not lo - _TOL <= x <= hi + _TOL):
            raise RefusedState(f"{what} must lie in [{lo:g}, {hi:g}], got {x!r}")
    return [float(x) for x in xs]


def _same(expected: dict[str, Any], got: Any, keys: tuple[str, ...], where: str) -> None:
    if (expected is None) != (got is None):
        raise RefusedState(f"{where}: present in only one of checkpoint and configuration")
    if expected is None:
        return
    same_parameters(expected, got, keys, where, "strata")


def _partition(spec: StrataSpec, exp: dict[str, Any], d: dict[str, Any], where: str) -> None:
    k = spec.count
    _same(exp["labeler"], d["labeler"], ("kind", "n_strata"), f"{where} labeler")
    if d["labeler"] is not None:
        names = d["labeler"]["names"]
        fixed = exp["labeler"]["names"]
        if (not isinstance(names, list) or not all(isinstance(n, str) for n in names)
                or len(names) > max(k - 1, 0) or len(set(names)) != len(names)
                or names[: len(fixed)] != fixed):
            raise RefusedState(f"{where}: stratum names must be at most {k - 1} distinct "
                               "strings starting with the configured names")
    _same(exp["bins"], d["bins"], ("kind", "n_bins", "warmup"), f"{where} judge-loss bins")
    if d["bins"] is not None:
        edges, buf = d["bins"]["edges"], d["bins"]["buffer"]
        if edges is None:
            _floats(buf, len(buf) if isinstance(buf, list) else -1, 0.0, 1.0, f"{where} buffer")
            if len(buf) >= spec.warmup:
                raise RefusedState(f"{where}: warm-up buffer of {len(buf)} values, the warm-up "
                                   f"is {spec.warmup}")
        else:
            e = _floats(edges, len(edges) if isinstance(edges, list) else -1, 0.0, 1.0,
                        f"{where} bin edges")
            if buf != [] or len(e) > k - 1 or any(a >= b for a, b in pairwise(e)):
                raise RefusedState(f"{where}: bin edges must be at most {k - 1} increasing "
                                   "values (and the warm-up buffer empty)")


def _order(spec: StrataSpec, exp: dict[str, Any], d: dict[str, Any], audits: list[int],
           labels: list[int], counts: dict[str, Any], where: str) -> None:
    """Check the per-stratum audit order, the missing counts and the upper side's estimates."""
    if "order" not in d:  # a snapshot written before stratified labels were ordered
        return
    k = spec.count
    try:
        order = StrataOrder.from_list(d["order"], k)
    except (ValueError, TypeError) as exc:
        raise RefusedState(f"{where}: {exc}") from None
    missing = _ints(d["missing"], k, f"{where} missing labels")
    if (any(n > a for n, a in zip(order.next, audits, strict=True))
            or any(m > n for m, n in zip(missing, labels, strict=True))
            or sum(missing) > counts.get("expired_pending", 0)):
        raise RefusedState(f"{where}: audit order or missing labels do not add up (positions "
                           f"{order.next}, audits {audits}, missing {missing})")
    hi = d["hi"]
    if (hi is None) != (sum(missing) == 0):
        raise RefusedState(f"{where}: the upper side's estimates must exist iff a label is "
                           "missing")
    if hi is None:
        return
    _same(exp["cert"], hi["cert"], ("kind", "n_strata", "delta", "log_factor", "weights"),
          f"{where} upper certificate")
    _same(exp["ppi"], hi["ppi"], ("kind", "n_strata", "alpha", "weights"),
          f"{where} upper StratPPI")
    c, p = hi["cert"], hi["ppi"]
    if (c["n"] != d["cert"]["n"] or c["traffic"] != d["cert"]["traffic"]
            or p["n"] != d["ppi"]["n"] or p["N"] != d["ppi"]["N"]):
        raise RefusedState(f"{where}: the upper side's counts differ from the lower side's")
    _floats(c["mean"], k, 0.0, 1.0, f"{where} upper means")
    m2 = _floats(c["m2"], k, 0.0, math.inf, f"{where} upper m2")
    if any(m2[j] > labels[j] / 4.0 + _TOL for j in range(k)):
        raise RefusedState(f"{where}: upper m2 above its largest value")
    for name in ("my", "mf", "mfu"):
        _floats(p[name], k, 0.0, 1.0, f"{where} upper StratPPI {name}")
    for name in ("m2y", "m2f", "m2fu", "cyf"):
        _floats(p[name], k, -math.inf if name == "cyf" else 0.0, math.inf,
                f"{where} upper StratPPI {name}")


def check_strata_dict(spec: StrataSpec, d: Any, counts: dict[str, Any], where: str) -> None:
    """Check one model's raw ``strata`` state against ``spec`` and the model's ``counts``.

    Raises
    ------
    RefusedState
        Naming the model and field at fault.
    """
    where = f"{where} strata"
    if not isinstance(d, dict):
        raise RefusedState(f"{where}: missing or malformed")
    k = spec.count
    exp = StrataState(spec).to_dict()
    try:
        _partition(spec, exp, d, where)
        _same(exp["cert"], d["cert"],
              ("kind", "n_strata", "delta", "log_factor", "weights"), f"{where} certificate")
        _same(exp["ppi"], d["ppi"], ("kind", "n_strata", "alpha", "weights"), f"{where} StratPPI")
        cert, ppi = d["cert"], d["ppi"]
        labels = _ints(cert["n"], k, f"{where} labels")
        traffic = _ints(cert["traffic"], k, f"{where} traffic")
        audits = _ints(d["audits"], k, f"{where} audits")
        means = _floats(cert["mean"], k, 0.0, 1.0, f"{where} means")
        m2 = _floats(cert["m2"], k, 0.0, math.inf, f"{where} m2")
        for name in ("n", "N"):
            vals = _floats(ppi[name], k, 0.0, math.inf, f"{where} StratPPI {name}")
            if any(v != int(v) for v in vals):
                raise RefusedState(f"{where}: StratPPI counts {name} must be integers")
        for name in ("my", "mf", "mfu"):
            _floats(ppi[name], k, 0.0, 1.0, f"{where} StratPPI {name}")
        for name in ("m2y", "m2f", "m2fu", "cyf"):
            _floats(ppi[name], k, -math.inf if name == "cyf" else 0.0, math.inf,
                    f"{where} StratPPI {name}")
        for j in range(k):
            if (traffic[j] != audits[j] + ppi["N"][j] or labels[j] > audits[j]
                    or ppi["n"][j] != labels[j] or m2[j] > labels[j] / 4.0 + _TOL
                    or (labels[j] == 0 and (means[j] != 0.0 or m2[j] != 0.0))):
                raise RefusedState(f"{where}: counts of stratum {j} do not add up (traffic "
                                   f"{traffic[j]}, audits {audits[j]}, labels {labels[j]})")
        rates = _floats(d["rates"], k, 0.0, 1.0, f"{where} audit rates")
        uniform = _floats([d["uniform_rate"]], 1, 0.0, 1.0, f"{where} uniform rate")[0]
        if any(r < uniform - _TOL for r in rates):
            raise RefusedState(f"{where}: an audit rate below the uniform rate {uniform}")
        target, since = d["target"], d["since"]
        if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < k:
            raise RefusedState(f"{where}: target stratum {target!r} outside 0..{k - 1}")
        _ints([since], 1, f"{where} refresh counter")
        if since >= spec.refresh_every:
            raise RefusedState(f"{where}: refresh counter {since} >= {spec.refresh_every}")
        warm = _ints([d["warmup_units"]], 1, f"{where} warm-up units")[0]
        if (sum(traffic) + warm > counts["judge"]
                or sum(labels) > counts["labels"] + counts.get("expired_pending", 0)):
            raise RefusedState(f"{where}: more traffic or labels than the model's "
                               f"{counts['judge']} judge events and {counts['labels']} labels")
        _order(spec, exp, d, audits, labels, counts, where)
        reached = d["reached_at"]
        if reached is not None and (spec.precision is None or _ints(
                [reached], 1, f"{where} precision round")[0] > sum(labels) or reached < 1):
            raise RefusedState(f"{where}: precision reached at {reached!r} labels, with "
                               f"{sum(labels)} labels and goal {spec.precision!r}")
    except (KeyError, TypeError, AttributeError) as exc:
        raise RefusedState(f"{where}: malformed ({exc!r})") from None


def check_suite_strata(config: SuiteConfig, d: dict[str, Any],
                       threshold_delta: Callable[[CertificateConfig], float]) -> None:
    """Check the ``strata`` state of every model of a raw suite snapshot ``d``.

    Raises
    ------
    RefusedState
        Naming the suite, model and field at fault.
    """
    spec = StrataSpec.from_suite(config, threshold_delta) if StrataSpec.enabled(config) else None
    for md in d["models"]:
        where = f"suite {d['name']!r} model {md['name']!r}"
        if spec is None:
            if md.get("strata") is not None:
                raise RefusedState(f"{where}: strata state, but the suite has no strata")
            continue
        check_strata_dict(spec, md.get("strata"), md["counts"], where)
