"""A read-only view of some rows of a shared e-process.

A :class:`~monitor.stats.betting.risk_group.CertificateGroup` advances one e-process per side over
the union of its methods' rhos; each method's
:class:`~monitor.stats.betting.autoeval_mixture.MixtureTest` reads its own rows through a
:class:`RowsView`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from monitor.stats.betting.bets import BetConfig, Side
from monitor.stats.betting.eprocess import BettingEProcess

__all__ = ["RowsView"]


class RowsView(BettingEProcess):
    """Read-only view of some rows of a :class:`BettingEProcess` (what a member test reads).

    Parameters
    ----------
    parent : BettingEProcess
        The shared e-process (over the union of a certificate's rhos).
    rows : list of int
        The rows of one method, in its rhos' order.

    Examples
    --------
    >>> ep = BettingEProcess(0.2, 0.1, "certify", [0.0, -0.5, -1.0], [1.0, 1.5, 2.0],
    ...                      BetConfig("wsr"))
    >>> ep.advance([0.0, 0.1, 0.2])
    >>> v = RowsView(ep, [2])
    >>> v.log_wealth.tolist() == [ep.log_wealth_list()[2]], v.hi.tolist(), v.rounds
    (True, [2.0], 1)

    Notes
    -----
    Guarantee: none of its own; every value is the parent's (the owner advances the parent,
    the view refuses to).
    """

    def __init__(self, parent: BettingEProcess, rows: list[int]) -> None:  # no super(): a view
        self._parent = parent
        self._idx = rows
        self._full = rows == list(range(len(parent.lo_list)))
        self._i = rows[0]
        self._one = len(rows) == 1

    def _pick(self, v: list[float]) -> list[float]:
        return list(v) if self._full else [v[i] for i in self._idx]

    @property
    def alpha(self) -> float:
        """The parent's risk level."""
        return self._parent.alpha

    @property
    def delta(self) -> float:
        """The parent's error level."""
        return self._parent.delta

    @property
    def side(self) -> Side:
        """The parent's side."""
        return self._parent.side

    @property
    def bet(self) -> BetConfig:
        """The parent's bet rule."""
        return self._parent.bet

    @property
    def lo(self) -> np.ndarray:
        """Lower ends of the rows' observations."""
        return np.array(self._pick(self._parent.lo_list))

    @property
    def hi(self) -> np.ndarray:
        """Upper ends of the rows' observations."""
        return np.array(self._pick(self._parent.hi_list))

    @property
    def rounds(self) -> int:
        """Rounds the parent has processed."""
        return self._parent.rounds

    @property
    def next_bets(self) -> np.ndarray:
        """The rows' next bets."""
        return np.array(self._pick(self._parent.next_bets_list))

    @property
    def log_wealth(self) -> np.ndarray:
        """The rows' log wealth."""
        return np.array(self.log_wealth_list())

    def log_wealth_list(self) -> list[float]:
        """Return the rows' log wealth as a list."""
        lw = self._parent.log_wealth_list()
        if self._full:
            return lw
        if self._one:
            return [lw[self._i]]
        return [lw[i] for i in self._idx]

    def update(self, q: Any) -> None:
        """Refuse: the owning group advances the parent."""
        raise TypeError("a grouped e-process is advanced by its CertificateGroup")

    def advance(self, q: list[float]) -> None:
        """Refuse: the owning group advances the parent."""
        raise TypeError("a grouped e-process is advanced by its CertificateGroup")

    def is_twin_of(self, other: BettingEProcess) -> bool:
        """Return False: a view is advanced by its owner, never as a twin."""
        return False

    def to_state(self) -> dict[str, Any]:
        """Return the parent's state restricted to the rows."""
        d = self._parent.to_state()
        if self._full:
            return d
        for key in ("lo", "hi", "log_wealth", "next_bets"):
            d[key] = [d[key][i] for i in self._idx]
        if "wsr" in d:
            d["wsr"] = {k: [v[i] for i in self._idx] for k, v in d["wsr"].items()}
        else:
            grid = d["up"]["log_wealth_grid"]
            d["up"] = {"log_wealth_grid": [grid[i] for i in self._idx]}
        return d
