"""Labels to certify: active audits against uniform audits.

Streams: every judged unit has a judge score ``f`` (a failure probability) and a human loss
``L ~ Bernoulli(p(f))``. Judges:

- ``calibrated``: ``f`` is 0.01 (85% of units), 0.95 (5%) or 0.5 (10%), ``p(f) = f``
  (risk 0.106);
- ``uninformative``: every score 0.106, ``p = 0.106``.

Budget ``b = 0.1`` (``audit_rate``), certify side, delta 0.01 (``--delta``), alphas 0.13 and
0.15 (``--alphas``). Methods, median labels to certify over ``--reps`` runs (default 100):

- ``active``: :class:`~monitor.stats.betting.active.ActiveBatch`, the engine's
  ``audit_policy = "active"`` (policy and bets by estimated growth from earlier units);
- ``uniform IPW``: the same bettor with the policy fixed at ``pi = b`` (every unit a term);
- ``uniform plugin_up``: the engine's default uniform audit (R-AutoEval+, ``plugin_up``, one
  round per label with the block of unaudited judge scores since the previous audit);
- ``clairvoyant``: the drift approximation ``mean_pi log(1/delta) / g*`` of the best fixed
  (policy, reliance, bet) in hindsight, over the candidate policies (``active``) or the uniform
  one (``uniform``), ``g*`` the exact expected log growth per unit for the true distribution.

Ratios: ``active / uniform IPW`` and ``active / uniform plugin_up`` (targets:
calibrated at most 0.85, uninformative at most 1.05).

Run: ``python benchmarks/active_audit.py`` (about 1-2 minutes on 2 busy cores); ``--quick``:
40 runs, one alpha. Measured (100 runs; ``--delta 0.001`` / ``--delta 0.1`` with
``--alphas 0.13``), active / uniform IPW, active / uniform plugin_up:

==============  =====  =========  =========  =========
judge           alpha  delta      act/IPW    act/plug
==============  =====  =========  =========  =========
calibrated      0.13   0.01       0.77       0.65
calibrated      0.15   0.01       0.92       0.73
uninformative   0.13   0.01       0.98       0.78
uninformative   0.15   0.01       1.00       0.92
calibrated      0.13   0.001      0.78       0.61
uninformative   0.13   0.001      1.00       0.91
calibrated      0.13   0.1        0.88       0.73
uninformative   0.13   0.1        0.96       0.69
==============  =====  =========  =========  =========

Near the cap (alpha 0.15: the uniform bettor already bets at its cap) a lower floor shrinks the
cap as much as it cuts the variance, and the gain falls to 8%.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from monitor.stats.betting.active import ActiveBatch
from monitor.stats.betting.active_growth import (
    BINS,
    POLICIES,
    bin_of,
    expected_labels,
    growth_table,
)
from monitor.stats.betting.bets import BetConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
from tests.support.plugin_batch import PlugInBatch

BUDGET = 0.1
JUDGES = {
    "calibrated": (np.array([0.01, 0.95, 0.5]), np.array([0.85, 0.05, 0.10])),
    "uninformative": (np.array([0.106]), np.array([1.0])),
}
UNIFORM = ((1.0, 1.0),)


def _draw(judge: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    scores, share = JUDGES[judge]
    f = scores[rng.choice(len(scores), size=n, p=share)]
    p = f if judge == "calibrated" else np.full(n, 0.106)
    return f, (rng.random(n) < p).astype(float)


def quantile_final(got: np.ndarray, now: np.ndarray, share: float = 0.5) -> bool:
    """True once every row's quantiles up to ``share`` (the median for 1/2) are final.

    ``got`` (D, runs): labels at the crossing, ``inf`` for the runs not crossed yet; ``now``
    (runs,): each run's labels so far. A run not crossed yet ends with at least its labels so
    far, so the ranks up to ``int(runs share) + 1`` are final once that many runs crossed with
    at most the fewest labels of the runs not crossed yet.
    """
    rank = int(got.shape[-1] * share) + 1
    done = np.isfinite(got)
    if (done.sum(-1) < rank).any():
        return False
    for row, ok in zip(got, done, strict=True):
        if not ok.all() and np.sort(row)[rank - 1] > now[~ok].min():
            return False
    return True


def ipw_labels(judge: str, alpha: float, deltas: Sequence[float], reps: int, units: int,
               seed: int, policies: tuple[tuple[float, float], ...],
               share: float = 0.5) -> np.ndarray:
    """Labels at which each run's certify test crossed, one row per delta, shape (D, reps).

    ``inf``: not crossed within ``units`` or when more than ``share`` of every row had crossed
    (the quantiles up to ``share`` are exact). The policy and the bets do not depend on delta:
    one batch tests every delta.
    """
    rng = np.random.default_rng(seed)
    ab = ActiveBatch(BUDGET, [(alpha, "certify")] * len(deltas), list(deltas), reps=reps,
                     policies=policies)
    for _ in range(units):
        f, human = _draw(judge, rng, reps)
        ab.update(f, rng.random(reps), human)
        if ab.crossed.any(-1).all():
            got = np.where(ab.crossed, ab.crossed_labels, np.inf)
            if quantile_final(got, ab.labels, share):
                break
    return np.where(ab.crossed, ab.crossed_labels, np.inf)


def plugin_round(judge: str, rng: np.random.Generator, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """One uniform-audit round per run: the human loss and the shift ``block mean - f``.

    The block holds the unaudited judge scores since the previous audit (Geometric(b) - 1 of
    them; the shift is 0 when there are none), as the engine's R-AutoEval+ rounds.
    """
    scores, share = JUDGES[judge]
    n_block = rng.geometric(BUDGET, size=reps) - 1  # unaudited units before the audit
    counts = rng.multinomial(n_block, share)
    bmean = np.where(n_block > 0, (counts * scores).sum(-1) / np.maximum(n_block, 1), 0.0)
    f, human = _draw(judge, rng, reps)
    return human, np.where(n_block > 0, bmean - f, 0.0)


def plugin_labels(judge: str, alpha: float, deltas: Sequence[float], reps: int, rounds: int,
                  seed: int, share: float = 0.5) -> np.ndarray:
    """The engine's uniform ``plugin_up`` (R-AutoEval+): labels to certify, shape (D, reps).

    ``inf`` as in :func:`ipw_labels`.
    """
    rng = np.random.default_rng(seed)
    pb = PlugInBatch(alpha, "certify", list(np.linspace(0.0, 1.0, 10)), BetConfig(), reps)
    thr = np.log(1.0 / np.asarray(deltas, dtype=float))[:, None]
    out = np.full((len(deltas), reps), np.inf)
    for t in range(1, rounds + 1):
        pb.advance(*plugin_round(judge, rng, reps))
        out[(pb.log_wealth[None, :] >= thr) & ~np.isfinite(out)] = t
        if quantile_final(out, np.full(reps, t), share):
            break
    return out


def judge_bins(judge: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The judge's true per-bin share, mean score and failure rate, each of shape (1, BINS)."""
    scores, share = JUDGES[judge]
    w = np.zeros((1, BINS))
    fb = np.tile((np.arange(BINS) + 0.5) / BINS, (1, 1))
    pbin = fb.copy()
    for s, q in zip(scores, share, strict=True):
        k = int(bin_of(np.array([s]))[0])
        w[0, k] += q
        fb[0, k] = s
        pbin[0, k] = s if judge == "calibrated" else 0.106
    return w, fb, pbin


def clairvoyant(judge: str, alpha: float, delta: float,
                policies: tuple[tuple[float, float], ...]) -> float:
    """Drift approximation of the best fixed (policy, reliance, bet)'s labels to certify."""
    g, _, _ = growth_table(*judge_bins(judge), BUDGET, alpha, "certify", 0.95, policies)
    return expected_labels(float(g.max()), BUDGET, delta)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--delta", type=float, default=0.01)
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.13, 0.15])
    ap.add_argument("--units", type=int, default=40_000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=29)
    a = ap.parse_args()
    reps, alphas = (40, a.alphas[:1]) if a.quick else (a.reps, a.alphas)
    t0 = time.time()
    print(f"budget {BUDGET}, delta {a.delta}, {reps} runs, median labels to certify")
    head = (f"{'judge':<14}{'alpha':>6}{'active':>8}{'unif IPW':>9}{'unif plugin':>12}"
            f"{'act/IPW':>8}{'act/plug':>9}{'clair act':>10}{'clair unif':>11}")
    print(head)
    for judge in JUDGES:
        for alpha in alphas:
            d = [a.delta]
            act = np.median(ipw_labels(judge, alpha, d, reps, a.units, a.seed, POLICIES))
            uni = np.median(ipw_labels(judge, alpha, d, reps, a.units, a.seed, UNIFORM))
            plug = np.median(plugin_labels(judge, alpha, d, reps, a.units // 10, a.seed))
            ca = clairvoyant(judge, alpha, a.delta, POLICIES)
            cu = clairvoyant(judge, alpha, a.delta, UNIFORM)
            print(f"{judge:<14}{alpha:>6.2f}{act:>8.0f}{uni:>9.0f}{plug:>12.0f}"
                  f"{act / uni:>8.2f}{act / plug:>9.2f}{ca:>10.0f}{cu:>11.0f}", flush=True)
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
