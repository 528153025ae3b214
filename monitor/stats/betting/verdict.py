"""The one-sided risk bound that goes with a certificate's verdict.

A certificate's verdict comes from its one-sided tests: *certified* means the certify e-process
(null ``R >= alpha``) reached ``1 / delta``, *violated* that the violate e-process (null
``R <= alpha``) did. The two-sided confidence sequence of the same rounds is a different
statement; its ends are often on the other side of ``alpha`` when a verdict is reached (the
sequence spends ``delta`` on both sides and on every candidate mean), so showing it next to the
verdict reads as a contradiction ("risk <= 10%" next to "risk in [0, 18%]").
:func:`verdict_bound` returns the bound that agrees with the verdict and is valid at the
verdict's own level ``1 - delta``.

Examples
--------
>>> verdict_bound("certified", 0.1, cs_lower=0.0, cs_upper=0.18)
('upper', 0.1)
>>> verdict_bound("certified", 0.1, cs_lower=0.01, cs_upper=0.07)
('upper', 0.07)
>>> verdict_bound("violated", 0.1, cs_lower=0.04, cs_upper=0.9)
('lower', 0.1)
>>> verdict_bound("pending", 0.1, cs_lower=0.04, cs_upper=0.2) is None
True
"""

from __future__ import annotations

import math

__all__ = ["verdict_bound"]


def verdict_bound(status: str, alpha: float, cs_lower: float = 0.0, cs_upper: float = 1.0,
                  cs_valid: bool = True) -> tuple[str, float] | None:
    """Return ``(side, bound)``: the one-sided risk bound that agrees with ``status``.

    Parameters
    ----------
    status : {"certified", "violated", "pending"}
        The certificate's verdict (its certify or violate test crossed ``1 / delta``).
    alpha : float
        The certificate's risk level.
    cs_lower, cs_upper : float, optional
        The two-sided confidence sequence of the same rounds at the same level ``1 - delta``
        (its running intersection); ``0`` and ``1`` when there is none.
    cs_valid : bool, optional
        False once the sequence is empty; then only ``alpha`` is used.

    Returns
    -------
    tuple of (str, float), or None
        ``("upper", min(alpha, cs_upper))`` when certified, ``("lower", max(alpha,
        cs_lower))`` when violated, None when pending (no one-sided statement is made yet).

    Notes
    -----
    Guarantee: if the certify e-process is valid under every risk ``R >= alpha`` and the
    sequence covers the true risk at all rounds with probability ``>= 1 - delta`` (both fed the
    same rounds: random audits, the stationarity of the certificate's epoch), then with
    probability ``>= 1 - delta`` the true risk ``R`` never exceeds ``U_t``, where ``U_t`` is
    ``min(alpha, cs_upper_t)`` from certification on (and ``1`` before) -- at the same level,
    with no union bound. Proof: the confidence set ``{m : no test of "R = m" has rejected}`` with
    the certify e-process as the test of every ``m >= alpha`` (it bets that losses fall below
    ``alpha``, a supermartingale whenever ``R >= alpha``) and the sequence's tests for ``m <
    alpha`` has coverage ``1 - delta``, because at the *true* ``R`` only one of the two families
    is used: ``R >= alpha`` is excluded only by a false certification (probability ``<= delta``,
    Ville), ``R < alpha`` only by a miss of the sequence (probability ``<= delta``). ``U_t`` is
    the supremum of that set after certification. The violated side is symmetric. Mixing the
    two differently -- e.g. ``cs_upper`` before certification and ``min(alpha, cs_upper)`` after
    as one series -- would only hold at level ``1 - 2 delta``; so does reading the sequence's
    ends as one-sided bounds beside the verdict's.

    Examples
    --------
    >>> verdict_bound("violated", 0.1, cs_lower=0.25, cs_upper=0.4)
    ('lower', 0.25)
    >>> verdict_bound("certified", 0.1, cs_upper=0.05, cs_valid=False)
    ('upper', 0.1)
    """
    if status == "certified":
        use = cs_valid and math.isfinite(cs_upper)
        return "upper", min(alpha, cs_upper) if use else alpha
    if status == "violated":
        use = cs_valid and math.isfinite(cs_lower)
        return "lower", max(alpha, cs_lower) if use else alpha
    return None
