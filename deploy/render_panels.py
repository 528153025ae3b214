"""Render PNG previews of the model drill-down panels from a simulated stream (no Grafana needed).

    python deploy/render_panels.py [OUT_DIR]      # default: deploy/img

Runs the engine in-process on ``monitor.simulate`` output (a good and a bad model, judge
accuracy 0.9, 20% audited), samples ``Engine.state_view()`` as Prometheus would at each scrape,
and draws what the Grafana panels show: the risk estimate with its confidence band per method
against alpha, the log e-values against the threshold, and the R-AutoEval+ rho weights.
Requires matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl

CONFIG = """
[[suites]]
name = "*"
models = ["*"]

[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
primary = "r_autoeval_plus"
"""
METHODS = ("r_eval", "r_autoeval", "r_autoeval_plus")


def sample_states(every: int = 100) -> list[dict[str, Any]]:
    """Run the engine on a simulated stream; return the state every ``every`` events."""
    spec = SimulationSpec(suite="demo",
                          models=(SimModel("good", 0.05, 0.9), SimModel("bad", 0.16, 0.9)),
                          examples=6000, audit_rate=0.2)
    engine = Engine(parse_config(CONFIG))
    states = []
    for i, line in enumerate(iter_jsonl(spec, np.random.default_rng(3))):
        engine.process(line)
        if i % every == 0:
            states.append(engine.state_view())
    return states


def series(states: list[dict[str, Any]], model: str, method: str, key: str) -> np.ndarray:
    """One field of one method over the sampled states (NaN where absent)."""
    out = []
    for st in states:
        view = st["suites"].get("demo", {}).get("models", {}).get(model)
        value = None if view is None else view["certificates"]["risk"]["methods"][method][key]
        out.append(np.nan if value is None else value)
    return np.asarray(out, dtype=float)


def main(argv: list[str]) -> int:
    """Write risk_band.png, log_e_values.png and rho_weights.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out = Path(argv[0]) if argv else Path(__file__).resolve().parent / "img"
    out.mkdir(parents=True, exist_ok=True)
    states = sample_states()
    x = np.arange(len(states)) * 100
    for name, draw in (("risk_band", _risk), ("log_e_values", _evalues)):
        fig, axes = plt.subplots(2, 3, figsize=(13, 6), sharex=True)
        for row, model in enumerate(("good", "bad")):
            for col, method in enumerate(METHODS):
                draw(axes[row][col], states, x, model, method)
                axes[row][col].xaxis.set_major_locator(MaxNLocator(4))
                axes[row][col].set_title(f"{model}: {method}", fontsize=10)
        fig.supxlabel("events")
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=90)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    weights = np.asarray([
        st["suites"]["demo"]["models"]["good"]["certificates"]["risk"]["methods"]
        ["r_autoeval_plus"]["rho_weights"] for st in states[1:]])
    rhos = states[-1]["suites"]["demo"]["models"]["good"]["certificates"]["risk"]["methods"][
        "r_autoeval_plus"]["rhos"]
    ax.stackplot(x[1:], weights.T, labels=[f"rho={r:.2g}" for r in rhos])
    ax.set_ylim(0, 1)
    ax.set_title("good: rho weights (R-AutoEval+, certify side)", fontsize=10)
    ax.legend(fontsize=6, ncol=2, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "rho_weights.png", dpi=90)
    plt.close(fig)
    print(f"wrote {out}/risk_band.png, log_e_values.png, rho_weights.png")
    return 0


def _risk(ax: Any, states: list[dict[str, Any]], x: np.ndarray, model: str, method: str) -> None:
    lo, hi = series(states, model, method, "cs_lower"), series(states, model, method, "cs_upper")
    ax.fill_between(x, lo, hi, alpha=0.25, label="confidence sequence")
    ax.plot(x, series(states, model, method, "risk_estimate"), lw=1, label="estimate")
    ax.axhline(0.1, color="red", ls="--", lw=1, label="alpha")
    ax.set_ylim(0, 0.4)
    ax.legend(fontsize=6)


def _evalues(ax: Any, states: list[dict[str, Any]], x: np.ndarray, model: str,
             method: str) -> None:
    ax.plot(x, series(states, model, method, "log_e_certify"), color="green", lw=1,
            label="certify")
    ax.plot(x, series(states, model, method, "log_e_violate"), color="orange", lw=1,
            label="violate")
    ax.plot(x, series(states, model, method, "log_threshold"), color="red", ls="--", lw=1,
            label="threshold")
    ax.legend(fontsize=6)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
