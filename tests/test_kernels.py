"""One differential test over the registry of compiled kernels (:mod:`monitor.kernels`).

For every registered kernel: it is built (or skipped; ``CERTMON_REQUIRE_CKERNELS=1`` fails
instead), every site that should run it does, each ``"bits"`` function returns the same
bits as its Python reference on random inputs (in-place arguments included), and a whole
run (an engine over a simulated stream with hash audits, labels, a regression; a paired
comparison) writes the same state with the kernel replaced by its reference at every site.
The per-kernel suites (``tests/stats/changepoint/test_ckernel.py``,
``tests/stats/betting/test_ckernel.py``, ``tests/stats/betting/test_cedges.py``,
``tests/test_caudit.py``) hold the edge cases.
"""

from __future__ import annotations

import importlib
import json
import math
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.kernels import KERNELS, Binding, Kernel
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.plugin import PlugInEProcess
from monitor.stats.comparison.paired import PairedComparison
from tests.ckernels import load

ROOT = Path(__file__).resolve().parents[1]


def _resolve(spec: str) -> Any:
    mod, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_compiled_module_is_registered() -> None:
    sources = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "monitor").rglob("*.c"))
    assert sources == sorted(k.source for k in KERNELS), "a .c file is not in monitor.kernels"
    built = re.findall(r'Extension\(\s*"([\w.]+)",\s*\["([\w/.]+)"\]',
                       (ROOT / "setup.py").read_text())
    assert sorted(built) == sorted((k.module, k.source) for k in KERNELS)
    for k in KERNELS:
        for b in k.bindings:
            assert callable(_resolve(b.reference)), b.reference


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.module)
def test_every_site_runs_the_compiled_function(kernel: Kernel) -> None:
    mod = load(kernel.module)
    for b in kernel.bindings:
        for site in b.sites:
            assert _resolve(site) is getattr(mod, b.compiled), site


# ---------------------------------------------------------------- random inputs, bit for bit
def _advance_args(rng: random.Random) -> tuple[Any, ...]:
    views, frs = rng.randint(1, 3), tuple(rng.uniform(1e-3, 0.999) for _ in range(
        rng.randint(1, 6)))
    j = views * len(frs)
    alpha = rng.choice([0.0, 0.1, rng.uniform(-1, 1)])
    los = [alpha - rng.uniform(1e-6, 3) for _ in range(views)]
    xs = [rng.choice([lo, alpha, lo + rng.uniform(0, 4)]) for lo in los]
    sr = [rng.choice([-math.inf, rng.uniform(-5, 30)]) for _ in range(j)]
    cu = [min(rng.uniform(-5, 30), s) for s in sr]
    return (sr, cu, [rng.randint(1, 10**6) for _ in range(j)],
            [rng.uniform(-50, 50) for _ in range(j)],
            [rng.uniform(-500, 500) for _ in range(views)],
            xs, los, frs, alpha, rng.choice([1, 7, 257, 10**9]), rng.random() < 0.5)


def _step_args(rng: random.Random) -> tuple[Any, ...]:
    k = rng.randint(1, 12)
    scale = rng.choice([1.0, 1e-149, 1e149])
    return ([rng.uniform(0, 2) * scale for _ in range(k)], [rng.uniform(0, 0.9) for _ in range(k)],
            rng.uniform(-1, 1), rng.uniform(-50, 50))


def _reliance_args(rng: random.Random) -> tuple[Any, ...]:
    t = rng.choice([0, 1, 2, 3, 10, 1000])
    sums = [rng.uniform(-1, 1) * t for _ in range(5)]
    sums[2], sums[4] = abs(sums[2]), abs(sums[4])
    rhos = rng.choice([[0.0], [1.0], [i / 10 for i in range(11)]])
    return (sums, rng.choice([0.0, 1.0, rng.random()]), rng.uniform(-1, 1), t,
            rng.uniform(0.01, 0.99), rng.choice([0.5, 0.95]), rng.random() < 0.5, rhos,
            rng.random() < 0.3)


def _worst_args(rng: random.Random) -> tuple[Any, ...]:
    n = rng.randint(0, 30)
    lam = [rng.choice([rng.uniform(0.01, 30.0), rng.uniform(0.01, 2.0), 1.0]) for _ in range(n)]
    return (rng.choice([0.05, 0.1, rng.uniform(0.01, 0.99)]),
            rng.choice(["certify", "violate"]), lam, rng.choice([0.5, 0.95, rng.random()]),
            rng.choice([None, 0.0, 1.0, rng.random()]),
            rng.choice([None, 0.0, 1.0, rng.random()]), rng.uniform(-1, 1))


def _add_worst_args(rng: random.Random) -> tuple[Any, ...]:
    alpha, side, lam, c, human, rho, shift = _worst_args(rng)
    s = rng.choice([None, [rng.uniform(-50, 50) for _ in lam]])
    return (s, rng.choice([1.0, -1.0]), alpha, side, lam, c, human, rho, shift)


def _uniform_args(rng: random.Random) -> tuple[Any, ...]:
    alphabet = "ab09-_/é字😀\x00\n\"\\"
    ex = "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 55, 56, 64, 200])))
    return (f"salt|suite|m{rng.randint(0, 9)}|".encode(), ex)


# every "bits" function of the registry needs a generator here (the test fails without one)
INPUTS: dict[str, Callable[[random.Random], tuple[Any, ...]]] = {
    "monitor.stats.changepoint.ckernel.advance": _advance_args,
    "monitor.stats.betting.ckernel.step": _step_args,
    "monitor.stats.betting.ckernel.reliance": _reliance_args,
    "monitor.stats.betting.ckernel.worst_log_factors": _worst_args,
    "monitor.stats.betting.ckernel.add_worst_log_factors": _add_worst_args,
    "monitor.caudit.uniform": _uniform_args,
}


def _bits(x: Any) -> Any:
    if isinstance(x, float):
        return x.hex()
    if isinstance(x, list | tuple):
        return [_bits(v) for v in x]
    return repr(x)


BITS = [pytest.param(k, b, id=f"{k.module}.{b.compiled}")
        for k in KERNELS if k.compare == "bits" for b in k.bindings]


@pytest.mark.parametrize(("kernel", "binding"), BITS)
def test_compiled_matches_reference_bit_for_bit(kernel: Kernel, binding: Binding) -> None:
    fn = getattr(load(kernel.module), binding.compiled)
    ref = _resolve(binding.reference)
    name = f"{kernel.module}.{binding.compiled}"
    assert name in INPUTS, f"no random inputs for {name}: add a generator to INPUTS"
    rng = random.Random(20261127)
    for case in range(3000):
        args = INPUTS[name](rng)
        a = [list(v) if isinstance(v, list) else v for v in args]
        b = [list(v) if isinstance(v, list) else v for v in args]
        assert _bits(fn(*a)) == _bits(ref(*b)), (name, case)
        assert _bits(a) == _bits(b), (name, case)  # the same in-place updates


# ---------------------------------------------------------------- whole runs, kernel replaced
_CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.2
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
primary = "r_autoeval_plus"
rhos = 10
"""


def _workload() -> str:
    eng = Engine(parse_config(_CONFIG))
    spec = SimulationSpec(examples=1500, audit_mode="hash", audit_rate=0.2, drift_at=700,
                          models=(SimModel("up", 0.05, 0.9, 0.4), SimModel("same", 0.1, 0.7)))
    for line in iter_jsonl(spec, np.random.default_rng(5)):
        eng.process(line)
    cmp = PairedComparison(0.02, 0.1)
    rng = np.random.default_rng(6)
    for _ in range(400):
        h = (rng.random(2) < [0.1, 0.2]).astype(float).tolist()
        cmp.update(h[0], h[1], float(rng.random()), float(rng.random()))
    ep = PlugInEProcess(0.2, 0.1, "certify", [0.0, 0.5, 1.0], BetConfig())
    bounds = []
    for _ in range(50):  # a pending label's bounds (the claim path of audit order)
        h, j = float(rng.random() < 0.1), float(rng.random())
        bounds.append(ep.bound_terms(None, float(rng.random()) - j))
        ep.advance(h, j)
    return json.dumps([eng.snapshot(), cmp.to_state(), ep.to_state(), bounds], sort_keys=True)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.module)
def test_whole_runs_match_with_the_reference(kernel: Kernel,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    mod = load(kernel.module)
    calls: dict[str, int] = {}
    for b in kernel.bindings:  # count the compiled calls: the workload must exercise them
        fn = getattr(mod, b.compiled)

        def counted(*args: Any, _fn: Any = fn, _name: str = b.compiled) -> Any:
            calls[_name] = calls.get(_name, 0) + 1
            return _fn(*args)

        for site in b.sites:
            m, _, attr = site.partition(":")
            monkeypatch.setattr(importlib.import_module(m), attr, counted)
    compiled = _workload()
    assert sorted(calls) == sorted(b.compiled for b in kernel.bindings), calls
    for b in kernel.bindings:
        fallback = None if b.fallback == "none" else _resolve(b.reference)
        for site in b.sites:
            m, _, attr = site.partition(":")
            monkeypatch.setattr(importlib.import_module(m), attr, fallback)
    assert _workload() == compiled
