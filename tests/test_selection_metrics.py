"""Prometheus families of selection-mode suites (monitor/metrics/collector.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from consumers.evaluation_worker.cli import demo_config, run_embedded, synthetic_worker
from monitor.engine import Engine
from monitor.metrics import StateCollector

NAMES = (
    "certmon_selection_pulls_total",
    "certmon_selection_estimate",
    "certmon_selection_lower_bound",
    "certmon_selection_upper_bound",
    "certmon_selection_rank",
    "certmon_selection_leader",
    "certmon_selection_budget_used_ratio",
)


def test_selection_metrics_follow_the_state() -> None:
    config = demo_config(4, 80, gap=0.2, seed=2, out_dir=None)
    run = run_embedded(config, synthetic_worker(config, seed=2, gap=0.2), max_events=100)
    registry = CollectorRegistry()
    registry.register(StateCollector(run.engine.state_view))
    text = generate_latest(registry).decode()
    for name in NAMES:
        assert f"{name}{{" in text, name
    sel = run.engine.state_view()["suites"]["bench"]["selection"]
    for model, mv in sel["models"].items():
        labels = {"suite": "bench", "model": model}
        assert registry.get_sample_value("certmon_selection_pulls_total", labels) == mv["pulls"]
        assert registry.get_sample_value("certmon_selection_lower_bound", labels) == mv["lower"]
        assert registry.get_sample_value("certmon_selection_upper_bound", labels) == mv["upper"]
        assert registry.get_sample_value("certmon_selection_estimate", labels) == mv["estimate"]
        assert registry.get_sample_value("certmon_selection_rank", labels) == mv["rank"]
        leader = registry.get_sample_value("certmon_selection_leader", labels)
        assert leader == (1.0 if model == sel["leader"] else 0.0)
    used = registry.get_sample_value("certmon_selection_budget_used_ratio", {"suite": "bench"})
    assert used is not None and used == sel["budget_used"] and 0.0 < used < 1.0


def test_selection_metrics_before_the_first_pull_and_without_selection() -> None:
    config = demo_config(3, 40, out_dir=None)
    eng = Engine(config)
    eng.start(0.0)
    registry = CollectorRegistry()
    registry.register(StateCollector(eng.state_view))
    labels = {"suite": "bench", "model": "m0"}
    assert registry.get_sample_value("certmon_selection_pulls_total", labels) == 0.0
    assert registry.get_sample_value("certmon_selection_estimate", labels) is None  # no data
    assert registry.get_sample_value("certmon_selection_rank", labels) is None
    assert registry.get_sample_value("certmon_selection_leader", labels) is None
    assert registry.get_sample_value("certmon_selection_lower_bound", labels) == 0.0
    empty = CollectorRegistry()
    empty.register(StateCollector(lambda: {"suites": {"qa": {"models": {}}}}))
    assert "certmon_selection_pulls_total{" not in generate_latest(empty).decode()
