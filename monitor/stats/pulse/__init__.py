"""PULSE: valid best-model identification with low-rank predictions.

Paper: PULSE (Tolochinsky, Tenzer, Romano). What lives here: the run's parameters and UCB-E index
(:mod:`.config`), the logistic low-rank factorization that predicts unobserved scores
(:mod:`.lowrank`), the doubly robust (AIPW) estimates under sampling without replacement
(:mod:`.aipw`, :mod:`.aipw_plan`), the anytime-valid best-model certificate (:mod:`.bestarm`)
and the bandit that chooses which model to evaluate next (:mod:`.bandit`).

May import: numpy, the standard library, modules of this package and
:mod:`monitor.stats.betting` (the betting confidence sequences the certificate runs on).
"""
