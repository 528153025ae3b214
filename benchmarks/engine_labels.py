"""Issue 29 end to end: labels the real engine uses to certify, against the clairvoyant.

Builds a JSONL event stream of ``--models`` independent models in one suite (each model one
run of R-AutoEval+ Example 1: human loss ``L ~ Bernoulli(risk)``, judge loss ``f = L`` with
probability gamma, else ``1 - L``; every model answers examples ``ex-0, ex-1, ...`` in turn, an
audited unit's label right after its judge event), replays it with ``python -m consumers.cli
replay`` and reads, per model and certificate, the ``labels`` of the first ``certified`` alert
(its evidence: the human labels used, one per round). Two audit modes on the same losses:

- ``hash coin``: no ``audit`` flag; certmon's salted hash audits a unit with probability
  ``audit_rate = 1/11`` (the stream builder computes the same hash to emit the labels of the
  audited units only): the block before a round holds ``Geometric(1/11) - 1`` unaudited units;
- ``every 11th``: the judge events carry ``audit: true`` on examples 10, 21, 32, ... and
  ``false`` otherwise: the paper's fixed blocks of 10.

One certificate ``alpha = 0.12`` at two levels (two ``[[suites.certificates]]``, delta 0.01
and 0.001), ``methods = ["r_autoeval_plus"]`` (the primary of the default methods, and the
default ``betting = "plugin_up"``, ``rhos = 10``: R-Eval and R-AutoEval are left out only to
save time, they do not change the primary's rounds), ``multiplicity = "none"`` (the default:
each model and certificate is tested at its full delta; every alert's evidence states
``threshold_delta``, checked equal to ``delta`` here). Change detectors and judge drift run as
configured by default.

Columns: ``engine`` the median labels over the models (``inf`` when half or more did not
certify within the stream: ``--horizon`` times the clairvoyant labels at the smallest delta);
``/ clairv.`` that median over Example 1's per-label clairvoyant ``log(1/delta) / g*``
(:func:`benchmarks.per_unit_form.best_growth` with ``form = "label"``, ``c = 1``: fixed blocks,
the whole bet range, the reference of ``labels_vs_oracle.py``); ``same data`` the median of
:class:`~tests.support.plugin_batch.PlugInBatch` (the harness) on the very rounds the engine saw
(human loss, block mean minus judge loss, shift 0 for an empty block) and ``agree`` the share of
models whose harness count equals the engine's; ``harness`` the independent harness figure on
the same parameters: :func:`benchmarks.uniform_coin.simulate`'s ``plugin_up`` for the hash coin,
:class:`~tests.support.plugin_batch.PlugInBatch` on
:func:`benchmarks.labels_vs_oracle.example1_data` (as ``labels_vs_oracle.run_plugin``, run to
the horizon) for every 11th (``--harness-reps`` runs).

``--policy hedged`` (hash coin only) replays the same stream under ``audit_policy =
"hedged"`` (``same data`` and ``agree`` then compare with the uniform per-label process). Measured
2026-11-27, gamma 0.99, 60 models, seed 29 (``--models 60 --modes hash --harness-reps 0``):
uniform 799 [630, 991] 1.56x (95% certified) / 1211 [948, 1507] 1.58x (80%) at delta 0.01 /
0.001; hedged 554 [451, 652] 1.08x / 759 [676, 893] 0.99x (100% / 100%), replay 112 s against
16 s.

Run: ``timeout 300 python benchmarks/engine_labels.py`` (gamma 0.99, 60 models, both modes,
1.4M events each: under a minute on 2 busy cores); ``--models 200 --harness-reps 400`` (4
minutes); ``--gammas 0.9,0.7 --horizon 2`` (60 models, 3-4.7M events per stream: 7 minutes).

Measured 2026-11-27 (seed 29; median labels [~95% interval], / Example 1's clairvoyant):

===========  =====  =====  =====  ===========================  ===========================
mode         gamma  delta  clv.   engine (models)              independent harness (runs)
===========  =====  =====  =====  ===========================  ===========================
hash coin    0.99   0.01   512    869 [784, 971] 1.70x (200)   872 [836, 919] 1.70x (1000)
hash coin    0.99   0.001  768    1328 [1226, 1500] 1.73x      1289 [1257, 1342] 1.68x
every 11th   0.99   0.01   512    698 [634, 732] 1.36x (200)   631 [612, 648] 1.23x (1000)
every 11th   0.99   0.001  768    982 [932, 1023] 1.28x        915 [893, 935] 1.19x
hash coin    0.9    0.01   1412   1682 [1341, 2115] 1.19x (60)  1837 [1625, 2156] 1.30x (200)
every 11th   0.9    0.01   1412   1908 [1480, 2730] 1.35x (60)  1592 [1405, 1925] 1.13x (200)
hash coin    0.7    0.01   2161   2382 [1767, 2901] 1.10x (60)  2600 [2369, 3074] 1.20x (200)
every 11th   0.7    0.01   2161   2796 [2490, 3473] 1.29x (60)  2592 [2184, 2877] 1.20x (200)
===========  =====  =====  =====  ===========================  ===========================

In every replayed stream (8: gamma 0.99 at 60 and 200 models, 0.9 and 0.7 at 60, both modes) the
engine's count equals the harness's on the same rounds for every model (``agree`` 100%), no
event was dead-lettered, and every alert was tested at its certificate's full delta: the engine
runs the harness's process exactly, so any gap to the independent harness is sampling. Hash
coin, gamma 0.99: 1.70x / 1.73x the clairvoyant, as the harness pooled over 5 seeds (1000 runs;
``uniform_coin.py``'s 1.64x is its seed 13). Every 11th, gamma 0.99: the 200-model stream's
median (698) is the highest of 16 streams of that size (``same data`` on seeds 36-51: 616-698,
mean 642, 1.25x), within the 1.22-1.36x that ``labels_vs_oracle.py`` and ``per_unit_form.py``
report on fixed blocks. The coin costs 1.25-1.4x the fixed blocks' labels at gamma 0.99; at
gamma 0.9 and 0.7 the 60-model intervals are too wide (+-25%) to order the modes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monitor.audit import audit_prefix, audit_uniform_prefixed
from monitor.stats.betting.bets import BetConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from benchmarks.labels_vs_oracle import example1_data
from benchmarks.per_unit_form import best_growth
from benchmarks.uniform_coin import simulate
from tests.support.plugin_batch import PlugInBatch

SUITE = "bench"
RATE = 1.0 / 11
RISK, ALPHA = 0.1, 0.12
DELTAS = (0.01, 0.001)
MODES = ("hash", "every11")
MODE_NAMES = {"hash": "hash coin", "every11": "every 11th"}
RHOS = [float(r) for r in np.linspace(0.0, 1.0, 10)]


def cert_name(delta: float) -> str:
    """Certificate name of level ``delta`` (``risk-d0.01``)."""
    return f"risk-d{delta:g}"


def config_text(deltas: tuple[float, ...] = DELTAS, alpha: float = ALPHA,
                salt: str = "", policy: str = "uniform") -> str:
    """TOML configuration: one suite, audit rate 1/11, one certificate per delta.

    ``policy``: the suite's ``audit_policy`` (``"hedged"``: the same hash coin, the average of
    the per-label and per-unit e-processes; absent from the file for ``"uniform"``).
    """
    pol = "" if policy == "uniform" else f'audit_policy = "{policy}"\n'
    certs = "".join(
        f'\n[[suites.certificates]]\nname = "{cert_name(d)}"\nalpha = {alpha!r}\n'
        f'delta = {d!r}\nmethods = ["r_autoeval_plus"]\nprimary = "r_autoeval_plus"\n'
        f'betting = "plugin_up"\nrhos = 10\n' for d in deltas)
    return (f'[[suites]]\nname = "{SUITE}"\nmodels = ["*"]\naudit_rate = {RATE!r}\n'
            f'audit_salt = "{salt}"\nmultiplicity = "none"\n{pol}{certs}\n'
            '[metrics]\nenabled = false\n')


def draw_losses(models: int, units: int, risk: float, gamma: float,
                seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Human and judge losses ``(units, models)`` of Example 1 (0/1)."""
    rng = np.random.default_rng(seed)
    h = rng.random((units, models)) < risk
    f = np.where(rng.random((units, models)) < gamma, h, ~h)
    return h.astype(np.int8), f.astype(np.int8)


def audit_mask(mode: str, models: int, units: int, salt: str = "") -> np.ndarray:
    """Audited units ``(units, models)``: certmon's hash (``hash``) or every 11th example."""
    if mode == "every11":
        col = (np.arange(units) % 11) == 10
        return np.repeat(col[:, None], models, axis=1)
    if mode != "hash":
        raise ValueError(f"unknown mode {mode!r}")
    out = np.zeros((units, models), dtype=bool)
    for j in range(models):
        pre = audit_prefix(salt, SUITE, model_name(j))
        out[:, j] = [audit_uniform_prefixed(pre, f"ex-{e}") < RATE for e in range(units)]
    return out


def model_name(j: int) -> str:
    """The name of model ``j``."""
    return f"m{j:04d}"


def stream_lines(h: np.ndarray, f: np.ndarray, audited: np.ndarray, flags: bool,
                 start_ts: float = 1_700_000_000.0) -> Iterator[str]:
    """JSONL lines: per example, every model's judge event, an audited unit's label after it.

    ``flags``: judge events carry ``audit`` (true on audited units); else certmon decides.
    """
    units, models = h.shape
    names = [model_name(j) for j in range(models)]
    for e in range(units):
        ts = round(start_ts + 0.01 * e, 3)
        for j, name in enumerate(names):
            head = (f'"suite":"{SUITE}","model":"{name}","example_id":"ex-{e}",'
                    f'"ts":{ts}')
            a = bool(audited[e, j])
            flag = (',"audit":true' if a else ',"audit":false') if flags else ""
            yield (f'{{"type":"judge","event_id":"j-{e}-{j}",{head},'
                   f'"loss":{float(f[e, j])}{flag}}}\n')
            if a:
                yield f'{{"type":"label","event_id":"l-{e}-{j}",{head},"loss":{float(h[e, j])}}}\n'


def engine_rounds(h: np.ndarray, f: np.ndarray, audited: np.ndarray,
                  labels: int) -> tuple[np.ndarray, np.ndarray]:
    """The rounds the engine forms: human loss and shift ``(labels, models)`` (NaN: none).

    Shift: the mean judge loss of the unaudited units since the previous audited one minus the
    audited unit's judge loss; 0 for an empty block.

    Examples
    --------
    >>> f = np.array([[1], [0], [1], [0], [0]], dtype=np.int8)
    >>> aud = np.array([[False], [True], [True], [False], [True]])
    >>> hum, shift = engine_rounds(np.zeros_like(f), f, aud, 3)
    >>> shift[:, 0].tolist()  # block {1} vs 0; empty block; block {0} vs 0
    [1.0, 0.0, 0.0]
    """
    models = h.shape[1]
    hum = np.full((labels, models), np.nan)
    shift = np.full((labels, models), np.nan)
    for j in range(models):
        idx = np.flatnonzero(audited[:, j])[:labels]
        cs = np.concatenate([[0], np.cumsum(f[:, j], dtype=np.int64)])
        prev = np.concatenate([[-1], idx[:-1]])
        n = idx - prev - 1
        s = cs[idx] - cs[prev + 1]
        fj = f[idx, j].astype(float)
        hum[:len(idx), j] = h[idx, j]
        shift[:len(idx), j] = np.where(n > 0, s / np.maximum(n, 1) - fj, 0.0)
    return hum, shift


def harness_labels(hum: np.ndarray, shift: np.ndarray, alpha: float,
                   deltas: tuple[float, ...]) -> list[np.ndarray]:
    """Per model, PlugInBatch's labels to cross ``log(1/delta)`` on these rounds (inf: never)."""
    labels, models = hum.shape
    pb = PlugInBatch(alpha, "certify", RHOS, BetConfig(), models)
    out = [np.full(models, np.inf) for _ in deltas]
    for t in range(labels):
        ok = ~np.isnan(hum[t])
        if not ok.all():  # a model out of rounds: the later rounds do not count
            hum[t, ~ok], shift[t, ~ok] = 0.0, 0.0
        pb.advance(hum[t], shift[t])
        for o, d in zip(out, deltas, strict=True):
            hit = ok & np.isinf(o) & (pb.log_wealth >= math.log(1.0 / d))
            o[hit] = t + 1
    return out


def replay(lines: Iterator[str], config: str, workdir: Path,
           timeout: float) -> tuple[list[dict[str, object]], int, float]:
    """Write the stream, replay it with the CLI; ``(alerts, dead letters, seconds)``."""
    events, cfg = workdir / "events.jsonl", workdir / "certmon.toml"
    with events.open("w") as fh:
        fh.writelines(lines)
    cfg.write_text(config)
    alerts, dead = workdir / "alerts.jsonl", workdir / "dead.jsonl"
    root = str(Path(__file__).resolve().parents[1])  # this checkout's code, not an install's
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "consumers.cli", "replay", "--config", str(cfg), "--input",
         str(events), "--state-out", str(workdir / "STATE.json"), "--alerts-out", str(alerts),
         "--requests-out", str(workdir / "requests.jsonl"), "--dead-letters-out", str(dead),
         "--quiet"], check=True, timeout=timeout, cwd=root, env=env)
    secs = time.perf_counter() - t0
    dead_n = sum(1 for _ in dead.open()) if dead.exists() else 0
    out = [json.loads(x) for x in alerts.open()] if alerts.exists() else []
    return out, dead_n, secs


def certified_labels(alerts: list[dict[str, object]], models: int,
                     deltas: tuple[float, ...]) -> list[np.ndarray]:
    """Per delta, per model: ``labels`` of the first ``certified`` alert (inf: none).

    Raises ``ValueError`` if an alert was made at a level other than its certificate's delta.
    """
    out = [np.full(models, np.inf) for _ in deltas]
    names = {cert_name(d): i for i, d in enumerate(deltas)}
    for a in alerts:
        ev = a.get("evidence")
        if a.get("kind") != "certified" or not isinstance(ev, dict):
            continue
        i = names[str(a["certificate"])]
        if not math.isclose(float(ev["threshold_delta"]), deltas[i]):
            raise ValueError(f"alert at threshold_delta {ev['threshold_delta']}, not "
                             f"{deltas[i]}: multiplicity split delta")
        j = int(str(a["model"])[1:])
        if math.isinf(out[i][j]):
            out[i][j] = float(ev["labels"])
    return out


@dataclass(frozen=True)
class ModeResult:
    """One replayed stream: labels per delta (engine, same-data harness) and its size."""

    engine: list[np.ndarray]
    same: list[np.ndarray]
    dead: int
    seconds: float
    events: int


def run_mode(mode: str, gamma: float, models: int, horizon_labels: int, seed: int,
             workdir: Path, timeout: float, policy: str = "uniform") -> ModeResult:
    """Build, replay and read one mode; labels per delta (engine and same-data harness)."""
    units = math.ceil(horizon_labels / RATE)
    h, f = draw_losses(models, units, RISK, gamma, seed)
    audited = audit_mask(mode, models, units)
    alerts, dead, secs = replay(stream_lines(h, f, audited, flags=mode == "every11"),
                                config_text(policy=policy), workdir, timeout)
    hum, shift = engine_rounds(h, f, audited, int(audited.sum(0).max()))
    return ModeResult(certified_labels(alerts, models, DELTAS),
                      harness_labels(hum, shift, ALPHA, DELTAS), dead, secs,
                      int(units * models + audited.sum()))


def harness_runs(mode: str, gamma: float, reps: int, horizon_labels: int,
                 seed: int) -> list[np.ndarray]:
    """Independent harness runs' labels per delta (inf: not crossed within the horizon):
    uniform_coin's ``plugin_up`` for the hash coin, labels_vs_oracle's fixed blocks else."""
    thrs = [math.log(1.0 / d) for d in DELTAS]
    if mode == "hash":
        w = simulate("ex1", RISK, ALPHA, gamma, reps, horizon_labels, seed)["plugin_up"]
        out = []
        for t in thrs:
            c = w >= t
            out.append(np.where(c.any(0), c.argmax(0) + 1.0, np.inf))
        return out
    h, d = example1_data(gamma, reps, horizon_labels, seed, risk=RISK)
    return harness_labels(h, d, ALPHA, DELTAS)


def median_ci(x: np.ndarray) -> tuple[float, float, float]:
    """Median and its distribution-free ~95% interval (order statistics ``n/2 -+ sqrt(n)``)."""
    v, n = np.sort(x), len(x)
    lo = max(0, math.floor(n / 2 - 0.98 * math.sqrt(n)) - 1)
    hi = min(n - 1, math.ceil(n / 2 + 0.98 * math.sqrt(n)))
    return float(np.median(v)), float(v[lo]), float(v[hi])


def cell(x: np.ndarray, clair: float) -> str:
    """``median [lo, hi] (ratio x)``."""
    m, lo, hi = median_ci(x)
    return f"{m:.0f} [{lo:.0f}, {hi:.0f}] | {m / clair:.2f}x"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--models", type=int, default=60, help="models (runs) per stream")
    ap.add_argument("--gammas", default="0.99", help="judge agreements, comma-separated")
    ap.add_argument("--modes", default="hash,every11", help="hash and/or every11")
    ap.add_argument("--horizon", type=float, default=2.5,
                    help="stream length in clairvoyant labels at the smallest delta")
    ap.add_argument("--harness-reps", type=int, default=200,
                    help="runs of the independent harness (0: skip)")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--policy", default="uniform", choices=("uniform", "hedged"),
                    help="audit_policy of the replayed suite (hash mode only for hedged: "
                    "'same data' is then the uniform per-label process on the same rounds)")
    ap.add_argument("--timeout", type=float, default=900.0, help="per replay, seconds")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    print(f"{a.models} models per stream, seed {a.seed}; risk {RISK}, alpha {ALPHA}, audit "
          "rate 1/11; labels: median [~95% interval] over models (inf: not certified)\n")
    print("| mode | gamma | delta | clairv. | engine | / clairv. | certified | same data | "
          "agree | harness | / clairv. |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for gamma in (float(g) for g in a.gammas.split(",")):
        g_star = best_growth(gamma, RISK, ALPHA, "label", 1.0)[0]
        clair = {d: math.log(1.0 / d) / g_star for d in DELTAS}
        horizon = math.ceil(a.horizon * clair[min(DELTAS)])
        for k, mode in enumerate(a.modes.split(",")):
            with tempfile.TemporaryDirectory(prefix="engine-labels-") as tmp:
                r = run_mode(mode, gamma, a.models, horizon, a.seed + 7 * k, Path(tmp),
                             a.timeout, a.policy)
            hr = (harness_runs(mode, gamma, a.harness_reps, horizon, a.seed + 100)
                  if a.harness_reps else [np.full(1, np.nan)] * len(DELTAS))
            for i, d in enumerate(DELTAS):
                agree = float(np.mean(r.engine[i] == r.same[i]))
                print(f"| {MODE_NAMES[mode]} | {gamma} | {d} | {clair[d]:.0f} | "
                      f"{cell(r.engine[i], clair[d])} | {np.isfinite(r.engine[i]).mean():.0%} | "
                      f"{float(np.median(r.same[i])):.0f} | {agree:.0%} | "
                      f"{cell(hr[i], clair[d])} |", flush=True)
            print(f"<!-- {mode}, gamma {gamma}: {r.events} events, replay {r.seconds:.0f} s, "
                  f"{r.dead} dead letters -->", flush=True)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
