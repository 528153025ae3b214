"""The suite's multiplicity rule, applied to the statuses of its (model, certificate) family.

- ``none``: each certificate x method has the status of its own monitor (level ``delta``).
- ``bonferroni``: the same, but every monitor was built with ``threshold_delta =
  delta / family_size``, so the family-wise error over all certify *and* violate claims of
  the family is at most ``delta``.
- ``fixed_sequence``: the family is ordered (models in the configured order, or in
  first-seen order when a glob is used; certificates in configured order). Member ``k``
  is *certified* only when its monitor has crossed (sticky) and every earlier member is
  certified; each test runs at the full family ``delta`` (no split).
- ``e_bh``: member ``k`` is *certified* when e-BH at level ``delta`` (FDR) selects its
  *current* certify e-value among the family (padded to ``family_size`` members with
  e-value 0 for members not seen yet). This is evaluated after every round, so a
  certification can be withdrawn (back to ``pending``, without an alert) when other
  e-values move.

For ``fixed_sequence`` and ``e_bh`` the family rule covers the *certified* claims;
*violated* is reported per test. ``delta`` for the family is the smallest ``delta`` of the
suite's certificates; under ``fixed_sequence`` every monitor runs at that level (both sides).
Every method is a separate family (alerts use the certificate's primary method).

Examples
--------
>>> target_status_fixed_sequence([("certified", False), ("pending", False), ("certified", False)])
['certified', 'pending', 'pending']
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from monitor.config import CertificateConfig
from monitor.state.model import ModelState
from monitor.stats.multiplicity import e_bh

__all__ = ["Key", "target_status_fixed_sequence", "target_statuses"]

Key = tuple[str, str, str]  # (model, certificate, method)


def target_status_fixed_sequence(members: Sequence[tuple[str, bool]]) -> list[str]:
    """Statuses under fixed-sequence gating.

    Parameters
    ----------
    members : sequence of (monitor status, unused flag)
        In testing order.

    Returns
    -------
    list of str
        A member is certified only if it and every earlier member have crossed; a violated
        monitor stays violated (per-test level) and stops the sequence.
    """
    out: list[str] = []
    chain = True
    for status, _ in members:
        if status == "violated":
            out.append("violated")
            chain = False
        elif status == "certified" and chain:
            out.append("certified")
        else:
            out.append("pending")
            chain = False
    return out


def target_statuses(
    rule: str,
    models: Sequence[ModelState],
    certificates: Sequence[CertificateConfig],
    family_size: int,
) -> dict[Key, str]:
    """Status of every (model, certificate, method) of ``models`` under ``rule``.

    For ``none`` and ``bonferroni`` any subset of the suite's models may be passed; for the
    family rules pass all of them, in family order.

    Examples
    --------
    >>> from monitor.config import CertificateConfig
    >>> c = CertificateConfig(name="r", alpha=0.3, delta=0.1, methods=["r_eval"], cs_grid=None)
    >>> ms = [ModelState.new(n, [c], lambda c: c.delta) for n in ("a", "b")]
    >>> target_statuses("e_bh", ms, [c], 2)
    {('a', 'r', 'r_eval'): 'pending', ('b', 'r', 'r_eval'): 'pending'}
    """
    out: dict[Key, str] = {}
    if rule in ("none", "bonferroni"):
        for m in models:
            for (cert, meth), mon in m.monitors.items():
                out[(m.name, cert, meth)] = mon.status
        return out
    delta = min(c.delta for c in certificates)
    methods = sorted({meth for c in certificates for meth in c.methods})
    for meth in methods:
        keys: list[Key] = []
        statuses: list[str] = []
        log_es: list[float] = []
        for m in models:
            for c in certificates:
                if meth not in c.methods:
                    continue
                mon = m.monitors[(c.name, meth)]
                keys.append((m.name, c.name, meth))
                statuses.append(mon.status)
                log_es.append(mon.log_e_certify)
        if rule == "fixed_sequence":
            result = target_status_fixed_sequence([(s, False) for s in statuses])
        else:
            padded = log_es + [-math.inf] * max(0, family_size - len(log_es))
            selected = e_bh(padded, delta)
            result = [
                "violated" if s == "violated" else ("certified" if selected[i] else "pending")
                for i, s in enumerate(statuses)
            ]
        out.update(zip(keys, result, strict=True))
    return out
