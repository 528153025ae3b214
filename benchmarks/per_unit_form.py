"""Issue 29 study: every judged unit a round (per-unit form) for uniform audits?

R-AutoEval+ Example 1 streams (``benchmarks/labels_vs_oracle.py``: human loss ``L ~
Bernoulli(risk)``, binary judge ``f = L`` with probability gamma, else ``1 - L``; ten unaudited
judge events per label, budget ``b = 1/11``), certify side. Two observations of the same stream:

- **per-label** (the default, the paper's): one round per label,
  ``q = L + rho (mean f of the 10 unaudited units since the previous label - f)``,
  range ``[-rho, 1 + rho]``;
- **per-unit** (the active-audit machinery at the uniform policy ``pi = b``): every judged unit
  a round, ``Y = rho f + (xi / b) (L - rho f)``, ``xi ~ Bernoulli(b)`` the audit coin,
  range ``[rho (1 - 1/b), 1/b] = [-10 rho, 11]``.

Part 1, exact clairvoyant growth per label ``g*`` (best fixed rho on a 0.01 grid and best fixed
bet, certify side) of each form, with each form's admissible bet range (``g* label, coin``:
the per-label form when the audit is a coin of probability ``b``, as certmon's salted hash,
instead of every 11th unit; whole range only): per-label
``lam < c / (1 + rho - alpha)``, per-unit ``lam < c / (1/b - alpha) = c / (11 - alpha)``;
``c = 1`` (the whole range: labels_vs_oracle's clairvoyant) and ``c = 0.95`` (the cap both
bettors use). Per-unit: ``g*`` per unit times ``1/b`` units per label. Labels to certify:
``log(1/delta) / g*``.

Part 2, simulated labels to certify (median over ``--reps`` runs, default 400): the default
uniform R-AutoEval+ (``plugin_up``, :func:`benchmarks.labels_vs_oracle.run_plugin` on
:func:`~benchmarks.labels_vs_oracle.example1_data`) and the per-unit form with the active
bettor at the uniform policy (:class:`~monitor.stats.betting.active.ActiveBatch` with
``policies = UNIFORM``, random coin: labels per unit 1/11 on average), each divided by the
per-label clairvoyant (whole range, as labels_vs_oracle.py). The last rows are an uninformative
judge: Example 1 with gamma 0.5, and ``benchmarks/active_audit.py``'s ``uninformative`` judge
(score 0.106, budget 0.1, alpha 0.13; its own :func:`~benchmarks.active_audit.ipw_labels` and
:func:`~benchmarks.active_audit.plugin_labels`).

Run: ``timeout 300 python benchmarks/per_unit_form.py`` (about 1.5 minutes on 2 busy cores);
``--reps 100`` for a faster look; ``--no-sim`` for part 1 only (10 s).

Measured (400 runs, seeds 29 / 7), median labels / per-label clairvoyant (whole range):

=====================  =====  ==================  ==================  ===================
stream                 delta  plugin_up           per-unit uniform    unit / plugin_up
=====================  =====  ==================  ==================  ===================
risk 0.1, gamma 0.99   0.01   1.23x / 1.22x       0.98x / 1.05x       0.80 / 0.86
risk 0.1, gamma 0.99   0.001  1.16x / 1.20x       0.95x / 0.97x       0.82 / 0.81
risk 0.1, gamma 0.9    0.01   1.08x / 1.17x       1.12x / 1.09x       1.03 / 0.93
risk 0.1, gamma 0.7    0.01   1.13x / 1.20x       1.14x / 1.12x       1.02 / 0.93
risk 0.05, gamma 0.99  0.01   1.40x / 1.40x       1.05x / 1.04x       0.75 / 0.74
risk 0.05, gamma 0.99  0.001  1.36x / 1.38x       0.94x / 0.96x       0.69 / 0.69
gamma 0.5 (uninf.)     0.1    1.04x / 1.00x       1.18x / 1.16x       1.14 / 1.16
gamma 0.5 (uninf.)     0.01   1.16x / 1.20x       1.24x / 1.28x       1.07 / 1.07
=====================  =====  ==================  ==================  ===================

The per-unit form's clairvoyant is 1.23x (gamma 0.99) and 1.41x (risk 0.05) the per-label
one's growth: its certify cap ``1/(11 - alpha)`` does not shrink with rho, so it relies on the
judge at rho 0.92-0.96 where the per-label form stops at 0.78 / 0.46. With an uninformative
judge its growth is 0.94x (the inverse-propensity noise), and the simulated cost is 1.07-1.16x.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from monitor.stats.betting.active import ActiveBatch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from benchmarks.active_audit import UNIFORM, ipw_labels, plugin_labels, quantile_final
from benchmarks.labels_vs_oracle import (
    RHOS,
    R,
    example1_data,
    example1_q,
    growth,
    ratio_interval,
    run_plugin,
)

B = 1.0 / (R + 1)  # labels per judged unit
DELTAS = (0.1, 0.01, 0.001)
STREAMS = ((0.1, 0.12, 0.99), (0.1, 0.12, 0.9), (0.1, 0.12, 0.7), (0.05, 0.1, 0.99),
           (0.1, 0.12, 0.5))  # risk, alpha, gamma (0.5: an uninformative judge)
SHARE = 0.7
"""Runs go on to this quantile, so that the bootstrap resamples' medians are exact."""
EXTRA_DELTA = 1e-4
"""``run_plugin`` stops once half its runs crossed every threshold: an extra threshold at this
delta (not reported) lets the delta = 0.001 runs go on past their median."""


# ---------------------------------------------------------------------- part 1: exact
def unit_y(gamma: float, rho: float, risk: float) -> tuple[np.ndarray, np.ndarray]:
    """Support and probabilities of the per-unit observation ``Y`` (uniform policy ``b``)."""
    vals, probs = [], []
    for l_, f_, p in ((1, 1, risk * gamma), (1, 0, risk * (1 - gamma)),
                      (0, 1, (1 - risk) * (1 - gamma)), (0, 0, (1 - risk) * gamma)):
        vals += [rho * f_, rho * f_ + (l_ - rho * f_) / B]  # not audited, audited
        probs += [p * (1 - B), p * B]
    return np.array(vals), np.array(probs)


def coin_q(gamma: float, rho: float, risk: float,
           n_max: int = 120) -> tuple[np.ndarray, np.ndarray]:
    """Per-label ``q`` when the audit is a coin of probability ``b`` (not every 11th unit).

    The block before a label has ``N ~ Geometric(b) - 1`` unaudited units (``N <= n_max``;
    the rest, ``(1 - b)^(n_max + 1)``, is dropped), its mean ``Binomial(N, p_f) / N``, and the
    shift is 0 when ``N = 0`` (as the engine's rounds and ``active_audit.plugin_round``).
    """
    pf = risk * gamma + (1 - risk) * (1 - gamma)
    shift, weight = [np.zeros(1)], [np.full(1, B)]
    for n in range(1, n_max + 1):
        k = np.arange(n + 1)
        logc = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                         for i in range(n + 1)])
        pk = np.exp(logc + k * math.log(pf) + (n - k) * math.log1p(-pf))
        shift.append(k / n)
        weight.append(B * (1 - B) ** n * pk)
    bm, pb = np.concatenate(shift), np.concatenate(weight)
    vals, probs = [], []
    for l_, f_, p in ((1, 1, risk * gamma), (1, 0, risk * (1 - gamma)),
                      (0, 1, (1 - risk) * (1 - gamma)), (0, 0, (1 - risk) * gamma)):
        d = np.where(np.arange(bm.size) == 0, 0.0, bm - f_)
        vals.append(l_ + rho * d)
        probs.append(p * pb)
    return np.concatenate(vals), np.concatenate(probs)


def best_growth(gamma: float, risk: float, alpha: float, form: str,
                c: float) -> tuple[float, float]:
    """``(g* per label, its rho)``: best fixed reliance (0.01 grid) and bet below the cap."""
    best = (0.0, 0.0)
    for rho in np.linspace(0.0, 1.0, 101):
        if form in ("label", "coin"):
            q = example1_q if form == "label" else coin_q
            v, p = q(gamma, float(rho), risk)
            g = growth(alpha - v, p, c / (1.0 + rho - alpha))
        else:
            v, p = unit_y(gamma, float(rho), risk)
            g = growth(alpha - v, p, c / (1.0 / B - alpha)) / B
        if g > best[0]:
            best = (g, float(rho))
    return best


def exact_table() -> dict[tuple[float, float, float], float]:
    """Print part 1; return the per-label whole-range ``g*`` of each stream."""
    print("### Part 1: exact clairvoyant growth per label g* (best fixed rho, bet), certify\n")
    print("caps: per-label lam < c/(1+rho-alpha); per-unit lam < c/(1/b-alpha) = c/(11-alpha)")
    print("| risk | alpha | gamma | c | g* label (rho) | g* unit (rho) | unit/label g* | "
          "g* label, coin (rho) | labels d=0.1 label / unit | d=0.01 | d=0.001 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ref = {}
    gc, rc = 0.0, 0.0
    for risk, alpha, gamma in STREAMS:
        for c in (1.0, 0.95):
            gl, rl = best_growth(gamma, risk, alpha, "label", c)
            gu, ru = best_growth(gamma, risk, alpha, "unit", c)
            gc, rc = best_growth(gamma, risk, alpha, "coin", c) if c == 1.0 else (gc, rc)
            if c == 1.0:
                ref[(risk, alpha, gamma)] = gl
            cells = [f"{math.log(1 / d) / gl:.0f} / {math.log(1 / d) / gu:.0f}" for d in DELTAS]
            print(f"| {risk} | {alpha} | {gamma} | {c} | {gl:.5f} ({rl:.2f}) | "
                  f"{gu:.5f} ({ru:.2f}) | {gu / gl:.2f} | "
                  f"{f'{gc:.5f} ({rc:.2f})' if c == 1.0 else '-'} | "
                  + " | ".join(cells) + " |")
    return ref


# ---------------------------------------------------------------------- part 2: simulated
def unit_labels(gamma: float, risk: float, alpha: float, deltas: Sequence[float], reps: int,
                units: int, seed: int, share: float = SHARE) -> np.ndarray:
    """Per-unit form, active bettor at the uniform policy: labels to certify, (D, reps).

    ``inf``: not crossed (runs stop once the quantiles up to ``share`` are final, as
    ``ipw_labels``).
    """
    rng = np.random.default_rng(seed)
    ab = ActiveBatch(B, [(alpha, "certify")] * len(deltas), list(deltas), reps=reps,
                     policies=UNIFORM)
    for _ in range(units):
        h = (rng.random(reps) < risk).astype(float)
        f = np.where(rng.random(reps) < gamma, h, 1.0 - h)
        ab.update(f, rng.random(reps), h)
        if ab.crossed.any(-1).all():
            got = np.where(ab.crossed, ab.crossed_labels, np.inf)
            if quantile_final(got, ab.labels, share):
                break
    return np.where(ab.crossed, ab.crossed_labels, np.inf)


def runs(x: np.ndarray) -> np.ndarray:
    """Labels per run; ``run_plugin``'s 0 (not crossed) becomes ``inf``."""
    return np.where((x > 0) & np.isfinite(x), x, np.inf).astype(float)


def med(x: np.ndarray) -> float:
    """Median labels (``inf`` when half the runs did not cross)."""
    return float(np.median(runs(x)))


def ratio(u: np.ndarray, p: np.ndarray, seed: int) -> str:
    """``median(u) / median(p)`` with its 90% bootstrap interval."""
    lo, hi = ratio_interval(runs(u), runs(p), seed)
    return f"{med(u) / med(p):.2f} ({lo:.2f}-{hi:.2f})"


def sim_table(ref: dict[tuple[float, float, float], float], reps: int, seed: int) -> None:
    print(f"\n### Part 2: simulated median labels to certify, {reps} runs "
          "(/ per-label clairvoyant, whole range)\n")
    print("| risk | alpha | gamma | delta | clairvoyant | R-AutoEval+ plugin_up | "
          "per-unit uniform | unit / plugin_up (90% bootstrap) | "
          "per-unit / its own clairvoyant (c 0.95) |")
    print("|---|---|---|---|---|---|---|---|---|")
    thrs = [math.log(1 / d) for d in DELTAS]
    for i, (risk, alpha, gamma) in enumerate(STREAMS):
        g = ref[(risk, alpha, gamma)]
        g_unit, _ = best_growth(gamma, risk, alpha, "unit", 0.95)
        horizon = int(4.0 * thrs[-1] / g) + 200  # labels (rounds) of the plugin_up runs
        plug = run_plugin(example1_data(gamma, reps, int(horizon * 1.4), seed + i, risk),
                          RHOS.tolist(), [*thrs, math.log(1 / EXTRA_DELTA)], alpha)
        unit = unit_labels(gamma, risk, alpha, DELTAS, reps, horizon * (R + 1), seed + 50 + i)
        for k, d in enumerate(DELTAS):
            o, p, u = thrs[k] / g, med(plug[k]), med(unit[k])
            print(f"| {risk} | {alpha} | {gamma} | {d} | {o:.0f} | {p:.0f} ({p / o:.2f}x) | "
                  f"{u:.0f} ({u / o:.2f}x) | {ratio(unit[k], plug[k], seed + k)} | "
                  f"{u * g_unit / thrs[k]:.2f}x |", flush=True)
    print("\nactive_audit.py's uninformative judge (score 0.106, budget 0.1, alpha 0.13):")
    print("| delta | plugin_up | per-unit uniform (ipw_labels) | "
          "unit / plugin_up (90% bootstrap) |")
    print("|---|---|---|---|")
    uni = ipw_labels("uninformative", 0.13, DELTAS, reps, 60_000, seed + 90, UNIFORM, SHARE)
    plug2 = plugin_labels("uninformative", 0.13, DELTAS, reps, 6_000, seed + 91, SHARE)
    for k, d in enumerate(DELTAS):
        u, p = med(uni[k]), med(plug2[k])
        print(f"| {d} | {p:.0f} | {u:.0f} | {ratio(uni[k], plug2[k], seed + k)} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--no-sim", action="store_true", help="part 1 only")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    ref = exact_table()
    if not a.no_sim:
        sim_table(ref, a.reps, a.seed)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
