r"""Restore is configuration plus state: checks that a checkpoint cannot change a certificate.

Anyone who can write the checkpoint store (a directory, the Kafka checkpoint topic) can
write a well-formed checkpoint with a recomputed sha256. Before any of it is used,
:func:`check_suite_dict` (on the raw document) and :func:`check_restored_suite` (on the
rebuilt state) refuse, with a :class:`RefusedState` naming the field:

- certificate parameters (alpha, delta, the level after multiplicity, methods, betting
  rule, rhos, grid sizes) that differ from the configuration's, which always wins;
- negative or non-integer counts, non-finite numbers, statuses outside the known set;
- sizes beyond the configuration's bounds (dedupe window, pending and orphan maps);
- crossings and statuses the restored e-processes do not support (a *certified* status
  whose test never crossed, a crossing after the last round).

The change detectors, stratified auditing and selection-mode suites have their own checks,
run by :meth:`monitor.engine.Engine.restore` next to these: :mod:`~monitor.state.restore_detectors`,
:mod:`~monitor.state.restore_strata` and :mod:`~monitor.state.restore_selection`.

Examples
--------
>>> from monitor.config import parse_config
>>> cfg = parse_config("[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\n"
...                    "delta=0.1\nmethods=['r_eval']\ncs_grid=10\n")
>>> fresh = {"name": "s", "watermark": None, "models": [],
...          "ids": {"keys": [], "ticks": []}, "pending": {"keys": [], "ticks": []},
...          "orphans": {"keys": [], "ticks": []}, "rounded": {"keys": [], "ticks": []}}
>>> check_suite_dict(cfg.suites[0], fresh, lambda c: c.delta)
>>> check_suite_dict(cfg.suites[0], fresh | {"watermark": float("inf")},
...                  lambda c: c.delta)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
monitor.state.restore_checks.RefusedState: suite 's': watermark must be ... got inf

Notes
-----
Guarantee: a checkpoint that passes these checks is restored with the configuration's
certificate parameters and with values inside their ranges. It does not prove that the
state came from real events: a writer of the store can still forge an internally consistent
history (as could a writer of the event topic). Authenticated checkpoints
(:mod:`monitor.checkpoint`, HMAC-SHA256) close that: see ``SECURITY.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from monitor.config import CertificateConfig, SuiteConfig
from monitor.snapshot_schemas import SuiteDocument, convert
from monitor.state.model import ModelState, build_group
from monitor.state.views import active_status, hedged_status

if TYPE_CHECKING:
    from monitor.state.join import JoinWindow
    from monitor.state.prototypes import ModelFactory

__all__ = ["MAX_COUNT", "STATUSES", "RefusedState", "check_counts", "check_restored_suite",
           "check_restored_waiting",
           "check_suite_dict", "count", "same_parameters"]

STATUSES: Final = ("pending", "certified", "violated")
# the largest count a checkpoint may hold: integers up to 2**53 are exact as floats (metrics,
# STATE.json consumers); a larger one cannot come from events and would break rendering
MAX_COUNT: Final = 2**53


class RefusedState(ValueError):
    """A checkpoint value that the configuration or the value's range does not allow."""


def count(x: Any, what: str, below: int | None = None) -> int:
    """Return ``x`` when it is a count (an integer in [0, 2**53], below ``below`` if given).

    The one check of a count for every ``restore_*`` module.

    Examples
    --------
    >>> count(3, "rounds"), count(2, "index", below=3)
    (3, 2)
    >>> count(3, "index", below=3)
    Traceback (most recent call last):
    ...
    monitor.state.restore_checks.RefusedState: index must be a non-negative integer below 3, got 3
    """
    if isinstance(x, int) and not isinstance(x, bool) and x > MAX_COUNT:
        raise RefusedState(f"{what} is {x.bit_length()} bits long, above 2**53 (not a count)")
    if (isinstance(x, bool) or not isinstance(x, int) or x < 0
            or (below is not None and x >= below)):
        bound = "" if below is None else f" below {below}"
        raise RefusedState(f"{what} must be a non-negative integer{bound}, got {x!r}")
    return x


def same_parameters(expected: dict[str, Any], got: Any, keys: Any, where: str,
                    what: str) -> None:
    """Refuse a state whose configuration ``keys`` differ from what the configuration builds.

    ``what`` names the parameters in the message (``"detector"``, ``"strata"``...).

    Examples
    --------
    >>> same_parameters({"alpha": 0.1}, {"alpha": 0.2}, ["alpha"], "m",
    ...                 "detector")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    monitor.state.restore_checks.RefusedState: m: ... (alpha: checkpoint 0.2, configuration 0.1)...
    """
    if not isinstance(got, dict):
        raise RefusedState(f"{where}: missing or malformed")
    diffs = [f"{k}: checkpoint {got.get(k)!r}, configuration {expected.get(k)!r}"
             for k in keys if got.get(k) != expected.get(k)]
    if diffs:
        raise RefusedState(
            f"{where}: checkpoint was made under different {what} parameters "
            f"({'; '.join(diffs)}); the configuration always wins: restore with the "
            "original configuration or start from an empty checkpoint store")


def _finite(x: Any, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        raise RefusedState(f"{what} must be a finite number, got {x!r}")
    return float(x)


def check_counts(counts: Any, what: str) -> None:
    """Every value of a (possibly nested) dict of counts is a non-negative integer.

    Examples
    --------
    >>> check_counts({"a": 1, "b": {"c": -1}}, "counters")
    Traceback (most recent call last):
    ...
    monitor.state.restore_checks.RefusedState: counters.b.c must be a non-negative integer, got -1
    """
    if not isinstance(counts, dict):
        raise RefusedState(f"{what} must be an object")
    for k, v in counts.items():
        if isinstance(v, dict):
            check_counts(v, f"{what}.{k}")
        else:
            count(v, f"{what}.{k}")


def _check_columns(cols: Any, cap: int, what: str) -> None:
    if not isinstance(cols, dict) or not isinstance(cols.get("keys"), list):
        raise RefusedState(f"{what}: malformed columns")
    n = len(cols["keys"])
    if n > cap:
        raise RefusedState(f"{what}: {n} entries, more than the configured bound {cap}")
    total = 0
    for pair in cols.get("ticks", []):
        t, k = pair
        _finite(t, f"{what} tick")
        total += count(k, f"{what} tick count")
        if total > n:
            break
    if total != n:
        raise RefusedState(f"{what}: tick counts do not match the {n} keys")


def _check_group(expected: dict[str, Any], tdelta: float, state: Any, rounds: int,
                 where: str, missing: int = 0) -> None:
    got = state.get("config") if isinstance(state, dict) else None
    if isinstance(got, dict) and "cs_kind" not in got:
        got = {**got, "cs_kind": "grid"}  # written before cs_kind existed: the wealth grid
    bet = got.get("bet") if isinstance(got, dict) else None
    if isinstance(got, dict) and isinstance(bet, dict) and "cap_switch" not in bet:
        got = {**got, "bet": {**bet, "cap_switch": False}}  # written before it: no switch cell
    if got != expected:
        diffs = ([f"{k}: checkpoint {got.get(k)!r}, configuration {v!r}"
                  for k, v in expected.items() if got.get(k) != v]
                 if isinstance(got, dict) else ["missing"])
        raise RefusedState(
            f"{where}: checkpoint was made under different certificate parameters "
            f"({'; '.join(diffs)}); the configuration always wins: restore with the "
            "original configuration or start from an empty checkpoint store")
    if "plugin_tests" in state:  # plugin_up: one row per test
        tests = state["plugin_tests"]
        eps = [(f"{t['eprocess'].get('side')} test", t["eprocess"]) for t in tests]
        progress = [(t["max_log_e"], t["crossed_at_round"]) for t in tests]
        sums = [v for t in tests for v in (t["sum_human"], t["sum_shift"])]
    else:
        eps = [(side, state[side]) for side in ("certify", "violate")]
        progress = [(mx, crossed) for mx, crossed in state["tests"]]
        sums = [state["sum_human"], state["sum_shift"]]
    cs = state.get("cs")
    # a missing label is a round of the default (bernstein) sequences, not of the epoch
    if isinstance(cs, dict) and "rounds" in cs and not rounds <= count(
            cs["rounds"], f"{where} confidence-sequence rounds") <= rounds + missing:
        raise RefusedState(f"{where}: confidence sequence has {cs['rounds']} rounds, the "
                           f"epoch {rounds} (and {missing} missing labels)")
    # (a missing label is a round of the wsr / up rules' shared e-processes too)
    extra = 0 if "plugin_tests" in state else missing
    for side, ep in eps:
        if not rounds <= count(ep["rounds"], f"{where} {side} rounds") <= rounds + extra:
            raise RefusedState(f"{where}: {side} e-process has {ep['rounds']} rounds, "
                             f"the epoch {rounds} (and {extra} missing labels)")
    for mx, crossed in progress:
        _finite(mx, f"{where} test maximum")
        if crossed is not None:
            c = count(crossed, f"{where} crossing round")
            if not 0 <= c <= rounds + extra:
                raise RefusedState(f"{where}: crossing at round {c} outside 0..{rounds}")
            if mx < -math.log(tdelta) - 1e-9:
                raise RefusedState(f"{where}: a crossing whose maximum {mx} is below the "
                                 f"threshold log(1/{tdelta})")
    for v in sums:
        _finite(v, f"{where} sums")
    _finite(state["sum_bias"], f"{where} sum_bias")


def check_suite_dict(
    config: SuiteConfig, d: dict[str, Any],
    threshold_delta: Callable[[CertificateConfig], float],
) -> None:
    """Check one suite's raw snapshot against its configuration (see the module docstring).

    Raises
    ------
    RefusedState
        Naming the suite, model and field at fault.
    """
    what = f"suite {d.get('name')!r}" if isinstance(d, dict) else "a suite document"
    try:  # the declared schema first (types and ranges, once), then the configuration
        convert(d, SuiteDocument, what)
    except ValueError as exc:
        raise RefusedState(str(exc)) from None
    name = d["name"]
    where = f"suite {name!r}"
    wm = d["watermark"]
    if wm is not None and (isinstance(wm, bool) or not isinstance(wm, int | float)
                           or not math.isfinite(wm)):
        raise RefusedState(f"{where}: watermark must be a finite number or null, got {wm!r}")
    _check_columns(d["ids"], config.dedupe_max_ids, f"{where} ids")
    _check_columns(d["pending"], config.max_pending, f"{where} pending")
    _check_columns(d["orphans"], config.max_orphans, f"{where} orphans")
    _check_columns(d["rounded"], config.max_round_units, f"{where} rounded")
    if "refused" in d:
        count(d["refused"][0], f"{where} refused count")
    positions = _pending_positions(d["pending"], where)
    certs = {c.name: c for c in config.certificates}
    expected = {n: build_group(c, threshold_delta(c)).to_state()["config"]
                for n, c in certs.items()}  # what the configuration builds, once per suite
    for md in d["models"]:
        mw = f"{where} model {md['name']!r}"
        check_counts(md["counts"], f"{mw} counts")
        rounds = count(md["counts"]["rounds"], f"{mw} rounds")
        missing = count(md["counts"].get("expired_pending", 0), f"{mw} missing labels")
        for key in ("block_count", "pending_units", "orphan_labels"):
            count(md[key], f"{mw} {key}")
        if "audit_order" in md:
            _check_audit_order(md["audit_order"], positions.get(md["name"], []), mw)
        if not 0.0 <= _finite(md["block_sum"], f"{mw} block_sum") <= md["block_count"]:
            raise RefusedState(f"{mw}: block_sum outside [0, block_count]")
        _finite(md["bias_sum"], f"{mw} bias_sum")
        names = [str(c) for c, _ in md["groups"]]
        if sorted(names) != sorted(certs):
            raise RefusedState(f"{mw}: certificates {sorted(names)} in the checkpoint, "
                             f"{sorted(certs)} in the configuration")
        started = {str(c): count(e.get("started_round", 0), f"{mw} epoch start")
                   for c, e in md.get("epochs", [])}
        for c, state in md["groups"]:
            first = started.get(str(c), 0)
            if first > rounds:
                raise RefusedState(f"{mw}: epoch of {c!r} starts at round {first} after the "
                                 f"model's {rounds} rounds")
            _check_group(expected[c], threshold_delta(certs[c]), state, rounds - first,
                         f"{mw} certificate {c!r}", missing)
        for c, m, e in md["effective"]:
            if e[0] not in STATUSES:
                raise RefusedState(f"{mw}: unknown status {e[0]!r} for {c}/{m}")
            # under an active audit a status changes at its tests' label count
            limit = (count(md["active"]["labels"][0], f"{mw} active labels") if "active" in md
                     else rounds)
            for at in (e[1], e[2]):
                if at is not None and count(at, f"{mw} status round") > limit:
                    raise RefusedState(f"{mw}: status of {c}/{m} changed at round {at} "
                                     f"after the model's {rounds} rounds")
            if e[3] is not None:
                _finite(e[3], f"{mw} status time")


def _pending_positions(cols: Any, where: str) -> dict[str, list[int]]:
    """Audit positions of the pending units (``PendingUnit`` lists), by model."""
    out: dict[str, list[int]] = {}
    for p in cols.get("payloads") or []:
        if not isinstance(p, list) or len(p) < 2 or not isinstance(p[0], str):
            raise RefusedState(f"{where} pending: malformed unit {p!r}")
        j = _finite(p[1], f"{where} pending judge loss")
        if not 0.0 <= j <= 1.0:
            raise RefusedState(f"{where} pending: judge loss {j} outside [0, 1]")
        if len(p) > 6 and not 0.0 <= _finite(p[5], f"{where} pending block") <= count(
                p[6], f"{where} pending block count"):
            raise RefusedState(f"{where} pending: block sum outside [0, count]")
        if len(p) > 7 and p[7] != -1:
            out.setdefault(p[0], []).append(count(p[7], f"{where} pending audit position"))
        if len(p) > 8:
            _check_rhos(p[8], f"{where} pending")
    return out


def _check_rhos(v: Any, where: str) -> None:
    """Check fixed reliances: None, or ``{certificate: [rho in [0, 1], ...]}``."""
    if v is None:
        return
    if not isinstance(v, dict) or not all(
            isinstance(rs, list) and all(0.0 <= _finite(r, f"{where} reliance") <= 1.0
                                         for r in rs) for rs in v.values()):
        raise RefusedState(f"{where}: reliances must be numbers in [0, 1] per certificate")


def _check_audit_order(v: Any, pending: list[int], where: str) -> None:
    """Check the reorder buffer: positions, waiting units, labels and blocks in range."""
    if not isinstance(v, list) or len(v) != 5 or not isinstance(v[3], list):
        raise RefusedState(f"{where}: malformed audit order")
    nxt, applied, waiting = (count(x, f"{where} audit order") for x in v[:3])
    ready = []
    for e in v[3]:
        if not isinstance(e, list) or len(e) != 6:
            raise RefusedState(f"{where}: malformed waiting unit {e!r}")
        ready.append(count(e[0], f"{where} waiting position"))
        if e[1] is not None and not 0.0 <= _finite(e[1], f"{where} waiting label") <= 1.0:
            raise RefusedState(f"{where}: waiting label outside [0, 1]")
        if not 0.0 <= _finite(e[2], f"{where} waiting judge loss") <= 1.0:
            raise RefusedState(f"{where}: waiting judge loss outside [0, 1]")
        if not 0.0 <= _finite(e[3], f"{where} waiting block") <= count(e[4], f"{where} block"):
            raise RefusedState(f"{where}: waiting block sum outside [0, count]")
        _check_rhos(e[5], where)
    every = ready + pending
    if not applied <= nxt or waiting != nxt - applied or len(set(every)) != len(every) or any(
            not applied < p < nxt for p in ready) or any(not applied <= p < nxt for p in pending):
        raise RefusedState(f"{where}: audit order positions are inconsistent (next {nxt}, "
                           f"applied {applied}, waiting {waiting})")
    if len(every) != waiting:
        raise RefusedState(f"{where}: {waiting} waiting audit positions, {len(every)} units")


def check_restored_suite(multiplicity: str, models: dict[str, Any]) -> None:
    """Every effective status is supported by its restored monitor.

    *violated* needs the monitor's violation test to have crossed; *certified* needs its
    certification test to have crossed (except under ``e_bh``, where e-BH may select a
    member whose own test has not crossed; it is recomputed on the next round).

    Raises
    ------
    RefusedState
        A status the e-processes do not support.
    """
    for name, m in models.items():
        if m.active is not None:  # statuses of its active tests (monitor.state.views)
            for i, cert in enumerate(dict.fromkeys(c for c, _ in m.effective)):
                verdict = (active_status(m.active, i) if m.hedge is None
                           else hedged_status(m.hedge, i))  # or of their hedged average
                for (c, _), eff in m.effective.items():
                    if c == cert and eff.status in ("certified", "violated") \
                            and eff.status != verdict:
                        raise RefusedState(f"model {name!r} {cert}: status {eff.status!r} but "
                                           f"its active tests say {verdict!r}")
            continue
        for key, eff in m.effective.items():
            mon = m.monitors[key]
            if eff.status == "violated" and mon.status != "violated":
                raise RefusedState(f"model {name!r} {key}: status 'violated' but its "
                                 f"test did not cross (monitor {mon.status!r})")
            if (eff.status == "certified" and multiplicity != "e_bh"
                    and mon.status != "certified"):
                raise RefusedState(f"model {name!r} {key}: status 'certified' but its "
                                 f"test did not cross (monitor {mon.status!r})")


def check_restored_waiting(suite: str, config: SuiteConfig, models: Mapping[str, ModelState],
                           join: JoinWindow, factory: ModelFactory) -> None:
    """Check a rebuilt suite's models against its waiting units, then adopt their bounds.

    Refuses (:class:`RefusedState`) an active-audit state under another policy or another
    active configuration, a waiting unit whose reliances do not match its certificates'
    tests, and saved bounds of waiting audited units that differ from the units.
    """
    for m in models.values():
        if ((m.active is not None) != (config.audit_policy in ("active", "hedged"))
                or (m.hedge is not None) != (config.audit_policy == "hedged")):
            raise RefusedState(f"suite {suite!r} model {m.name!r}: the checkpoint's audit "
                               f"policy is not the configured {config.audit_policy!r}")
        fresh = factory.new(m.name).active if m.active is not None else None
        if m.active is not None and fresh is not None and not m.active.same_configuration(
                fresh):
            raise RefusedState(f"suite {suite!r} model {m.name!r}: the active audit was "
                               "made under another budget, certificates or levels")
        hedge = factory.new(m.name).hedge if m.hedge is not None else None
        if m.hedge is not None and hedge is not None and (
                m.hedge.log_threshold.tolist() != hedge.log_threshold.tolist()):
            raise RefusedState(f"suite {suite!r} model {m.name!r}: the hedged audit was "
                               "made under other certificates or levels")
        if m.hedge is not None and (m.hedge.waiting != (0, 0)
                                    or m.hedge.paired != m.order.applied):
            # between two events both sides have paired every round applied in audit order
            raise RefusedState(f"suite {suite!r} model {m.name!r}: the hedged audit's pairs "
                               "are out of step with the rounds in audit order")
        units = join.waiting_units(m.name)
        shapes = {c: len(g.reliances()) for c, g in m.groups.items()}
        for rhos in [u[2] for u in units] + [e[5] for e in m.order.ready.values()]:
            if rhos is not None and any(len(r) != shapes.get(c, -1) for c, r in rhos.items()):
                raise RefusedState(f"suite {suite!r} model {m.name!r}: a waiting unit's "
                                   "reliances do not match its certificates' tests")
        if not m.order.adopt(m.groups, units):
            raise RefusedState(f"suite {suite!r} model {m.name!r}: the saved bounds of its "
                               "waiting audited units differ from their units")
