"""The low-rank predictions a selection bandit plans and ranks with, refit as pulls complete.

:class:`ScorePredictions` holds the logistic low-rank model of one suite's score matrix
(:class:`~monitor.stats.pulse.lowrank.LogisticLowRank`), its predicted matrix, the naive
(prediction-pooled) estimate of each model and the rows to refit; the bandit
(:class:`~monitor.stats.pulse.bandit.SelectionBandit`) decides when to refit and passes its
observations (:class:`~monitor.stats.pulse.aipw.AIPWEstimator`) in.

Examples
--------
>>> from monitor.stats.pulse.aipw import AIPWEstimator
>>> p = ScorePredictions(None, 2, "ucbe", True)
>>> p.refits, p.pred is None
(0, True)
>>> p.require_lr()
Traceback (most recent call last):
...
RuntimeError: selection method 'ucbe' has no low-rank model

Notes
-----
Guarantee: none statistical by itself. Predictions only change the AIPW sampling plan and
control variate, never the unbiasedness of the AIPW estimates (:mod:`monitor.stats.pulse.aipw`);
a refit affects only pulls planned after it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from monitor.stats.pulse.aipw import AIPWEstimator
from monitor.stats.pulse.lowrank import LogisticLowRank, RefitCost, sigmoid

__all__ = ["ScorePredictions"]

FloatArray = NDArray[np.float64]


class ScorePredictions:
    """Predicted scores of every (model, example) and the refits that produced them.

    Parameters
    ----------
    lr : LogisticLowRank or None
        The low-rank model (None for method ``"ucbe"``, which predicts nothing).
    n_models : int
        Number of models (rows of the prediction matrix).
    method : str
        The selection method (named in errors).
    freeze_examples : bool
        True: a refit re-predicts only the rows it refit; False: every row.

    Attributes
    ----------
    lr : LogisticLowRank or None
        The low-rank model.
    pred : ndarray or None
        Predicted scores, shape (n_models, n_examples); None before the first refit.
    naive : ndarray
        Naive (prediction-pooled) estimate per model, nan until predicted.
    dirty : set of int
        Models whose pulls completed since the last refit.
    refits : int
        Refits done.
    cost : RefitCost
        Total compute of all refits.
    """

    def __init__(self, lr: LogisticLowRank | None, n_models: int, method: str,
                 freeze_examples: bool) -> None:
        self.lr = lr
        self.pred: FloatArray | None = None  # set at the first refit (end of initialization)
        self.naive = np.full(n_models, np.nan)
        self.dirty: set[int] = set()
        self.refits = 0
        self.cost = RefitCost(0, 0, 0, 0)
        self._m = n_models
        self._method = method
        self._freeze = freeze_examples

    def require_lr(self) -> LogisticLowRank:
        """Return the low-rank model, or raise RuntimeError when the method has none."""
        if self.lr is None:
            raise RuntimeError(f"selection method {self._method!r} has no low-rank model")
        return self.lr

    def require_pred(self) -> FloatArray:
        """Return the predictions, or raise RuntimeError before the first refit."""
        if self.pred is None:
            raise RuntimeError("predictions are used before the first refit")
        return self.pred

    def naive_row(self, aipw: AIPWEstimator, i: int) -> None:
        """Recompute model ``i``'s naive estimate from its predictions."""
        pred = self.require_pred()
        self.naive[i] = aipw.naive_estimate(i, pred[i])

    def predict_rows(self, aipw: AIPWEstimator, rows: list[int]) -> None:
        """Predict the rows ``rows`` from the current factors (and their naive estimates)."""
        lr = self.require_lr()
        pred = self.require_pred()
        u = lr.model_factors
        v = lr.example_factors
        for i in rows:
            pred[i] = sigmoid(v @ u[i])
            self.naive_row(aipw, i)

    def initial_refit(self, aipw: AIPWEstimator, n_examples: int) -> None:
        """Do the first refit, at the end of initialization: predictions start here."""
        self.require_lr()
        self.pred = np.zeros((self._m, n_examples))
        self.refit(aipw)

    def refit(self, aipw: AIPWEstimator) -> None:
        """Refit the dirty rows on the observations and re-predict."""
        lr = self.require_lr()
        rows = sorted(self.dirty)
        cost = lr.refit(aipw.observed_scores, aipw.mask, rows=rows)
        self.cost = self.cost + cost
        self.refits += 1
        self.dirty.clear()
        self.predict_rows(aipw, rows if self._freeze else list(range(self._m)))
