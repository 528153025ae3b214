"""The state families rendered as text (monitor/metrics/render.py, collector.py, exposition.py).

With ``detail = "full"`` the exposition must be byte for byte the one of the collector before
the renderer (``tests/support/metrics_reference.py``), in both formats; ``"shown"`` must be
exactly the primary-method subset of it; the per-model series counts must match
deploy/README.md.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import re
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.parser import text_string_to_metric_families

from consumers.evaluation_worker.cli import demo_config, run_embedded, synthetic_worker
from monitor.config import parse_config
from monitor.engine import Engine
from monitor.errors import ConfigError
from monitor.metrics import OperationalMetrics, StateCollector, serve_metrics, stop_metrics
from monitor.metrics.exposition import encode
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl
from tests.support import metrics_reference
from tests.test_metrics import make_state
from tests.test_strata_metrics import CONFIG as STRATA_CONFIG

README = Path(__file__).resolve().parents[1] / "deploy" / "README.md"
DEFAULT_CERT = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.5

[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
cs_grid = 50
"""
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def simulated_engine(config: str = DEFAULT_CERT, events: int = 600) -> Engine:
    """Two suites of two models with the default certificate (three methods, 10 rhos)."""
    eng = Engine(parse_config(config))
    for suite in ("qa", "chat"):
        spec = SimulationSpec(suite=suite, models=(SimModel("good", risk=0.02),
                                                   SimModel("bad", risk=0.4)),
                              examples=events, audit_rate=0.5)
        for line in iter_jsonl(spec, np.random.default_rng(len(suite))):
            eng.process(line.rstrip(b"\n"))
    return eng


def strata_engine() -> Engine:
    eng = Engine(parse_config(STRATA_CONFIG))
    for i in range(300):
        ev = {"type": "judge", "event_id": f"j{i}", "suite": "s", "model": "m",
              "example_id": f"x{i}", "loss": float(i % 7 == 0), "ts": i,
              "stratum": "a" if i % 3 else "b"}
        for _ in eng.process(json.dumps(ev).encode()).requests:
            ev.update(type="label", event_id=f"l{i}")
            eng.process(json.dumps(ev).encode())
    return eng


def odd_state() -> dict[str, Any]:
    """Label values to escape, values at every formatting edge, malformed parts."""
    method = {
        "risk_estimate": float("nan"), "cs_lower": -math.inf, "cs_upper": math.inf,
        "log_e_certify": 1234567.5, "log_e_violate": -2e6, "log_threshold": np.float64(2.5),
        "status": "certified", "certified_at_round": 10**7, "violated_at_round": True,
        "status_changed_ts": 1_795_248_000.5, "primary": True,
        "rhos": [0.5, 0.5, 1 / 3, "x", None], "rho_weights": [0.1, 0.2, 1e-7, 5e20, 0.3],
        "risk_upper_bound": 0.0625, "risk_lower_bound": None,
    }
    other = {"risk_estimate": 0.25, "status": "weird", "cs_valid": False, "cs_lower": 0.1,
             "cs_upper": 0.2, "rhos": [0.0, 1.0], "rho_weights": [1.0], "primary": False}
    return {"suites": {
        'q"a\\b\nc': {"refused_models": {"events": 4}, "models": {
            "μ-model": {
                "counts": {"rounds": 3, "labels": "7", "judge": None, "label_requests": 999999,
                           "unsolicited_labels": 1_000_000, "expired_pending": -3,
                           "expired_orphans": 2.5},
                "judge_bias": None, "pending_units": 0,
                "judge_drift": {"alarms": 2, "bias": {"statistic": 1.5, "threshold": 9e5},
                                "odd": "not a mapping"},
                "strata": {"certificate": 'c"1', "half_width": 0.125, "precision_goal": None,
                           "strata": {"s\n1": {"traffic_share": 0.5, "labels": 3}}},
                "certificates": {
                    'c"1': {"alpha": 0.1, "delta": "0.05", "methods": {
                        "m\\a": method, "m_b": other, "m_c": "not a mapping",
                        # the same rhos as r_* of another model, as bools and ints
                        "m_d": {"rhos": [1.0, 0.5], "rho_weights": [0.25, 0.75]},
                        "m_e": {"rhos": [True, 0.5], "rho_weights": [0.25, 0.75]},
                        "m_f": {"rhos": [1, 0.5, 1.0], "rho_weights": [0.2, 0.3, 0.5]}},
                        "epoch": {"epoch": 2, "regressions": 1, "started_round": 40,
                                  "regression_detector": {"statistic": 0.5, "threshold": 100,
                                                          "armed": False}}},
                    "c2": {"methods": {"r_eval": {"status": "pending"}}, "epoch": {
                        "regression_detector": {"statistic": 1.0, "armed": "yes"},
                        "improvement_detector": {"statistic": 3.0}}},
                    "c3": "not a mapping"},
            },
            "empty": {},
            "odd": "not a mapping"}},
        "sel": {"models": {}, "selection": {"leader": "b", "budget_used": 0.5, "models": {
            "a": {"pulls": 3, "estimate": 0.5, "lower": 0.1, "upper": 0.9, "rank": 1},
            "b": {"pulls": 4, "estimate": 0.7, "rank": 0}}}},
    }}


def documents() -> dict[str, dict[str, Any]]:
    run = run_embedded(demo_config(4, 80, gap=0.2, seed=2, out_dir=None),
                       synthetic_worker(demo_config(4, 80, gap=0.2, seed=2, out_dir=None),
                                        seed=2, gap=0.2), max_events=100)
    return {"contract": make_state(), "engine": simulated_engine().state_view(),
            "strata": strata_engine().state_view(), "selection": run.engine.state_view(),
            "odd": odd_state(), "empty": {}, "comparisons": comparisons_engine().state_view()}


def comparisons_engine() -> Engine:
    from tests.test_comparisons_engine import CONFIG, _run, _stream

    eng = Engine(parse_config(CONFIG))
    _run(eng, _stream(0, 0.3, examples=600))
    return eng


DOCUMENTS = documents()


def registry_of(collector: Any) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_full_detail_is_byte_identical_to_the_reference_collector(name: str) -> None:
    doc = DOCUMENTS[name]
    before = copy.deepcopy(doc)
    ref = registry_of(metrics_reference.StateCollector(lambda: doc))
    new = registry_of(StateCollector(lambda: doc, "full"))
    text = generate_latest(ref)
    assert len(text) > 2000  # the headers at least
    # the library's encoders through RenderedFamily.samples, and encode() through the text
    assert generate_latest(new) == text
    assert encode(new, "")[0] == text
    assert openmetrics_latest(new) == openmetrics_latest(ref)
    assert encode(new, OPENMETRICS)[0] == openmetrics_latest(ref)
    assert doc == before  # never changed


def test_the_reference_comparison_can_fail() -> None:
    doc = copy.deepcopy(DOCUMENTS["engine"])
    ref = generate_latest(registry_of(metrics_reference.StateCollector(lambda: doc)))
    model = doc["suites"]["qa"]["models"]["good"]
    model["certificates"]["risk"]["methods"]["r_eval"]["risk_estimate"] += 1e-12
    assert encode(registry_of(StateCollector(lambda: doc, "full")), "")[0] != ref


@pytest.mark.parametrize("accept", ["", "text/plain; version=0.0.4", OPENMETRICS,
                                    "application/openmetrics-text", "*/*"])
def test_encode_equals_the_library_with_operational_metrics(accept: str) -> None:
    from prometheus_client.exposition import choose_encoder

    registry = CollectorRegistry()
    ops = OperationalMetrics(registry, version="test")
    ops.set_up(True)
    registry.register(StateCollector(lambda: DOCUMENTS["engine"], "shown"))
    encoder, content_type = choose_encoder(accept)
    assert encode(registry, accept) == (encoder(registry), content_type)


def test_http_scrape_serves_the_same_bytes_gzip_or_not() -> None:
    registry = registry_of(StateCollector(lambda: DOCUMENTS["engine"], "full"))
    server, thread = serve_metrics(registry, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    try:
        plain = urllib.request.urlopen(url, timeout=10).read()
        req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip",
                                                   "Accept": OPENMETRICS})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.headers["Content-Encoding"] == "gzip"
            zipped = gzip.decompress(resp.read())
        filtered = urllib.request.urlopen(url + "?name[]=certmon_rounds_total", timeout=10).read()
    finally:
        stop_metrics(server, thread)
    assert plain == generate_latest(registry)
    assert zipped == openmetrics_latest(registry)
    assert b"certmon_rounds_total{" in filtered and b"certmon_labels_total" not in filtered


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text.decode()) for s in f.samples}


@pytest.mark.parametrize("name", ["contract", "engine", "strata", "odd"])
def test_shown_detail_is_the_primary_method_subset_of_full(name: str) -> None:
    doc = DOCUMENTS[name]
    full = samples(encode(registry_of(StateCollector(lambda: doc, "full")), "")[0])
    shown = samples(encode(registry_of(StateCollector(lambda: doc, "shown")), "")[0])
    primary = set()  # the marked primary method, or every method of an unmarked certificate
    for s, sv in doc["suites"].items():
        for m, mv in sv["models"].items():
            for c, cv in (mv.get("certificates", {}) if isinstance(mv, dict) else {}).items():
                methods = cv.get("methods", {}) if isinstance(cv, dict) else {}
                marked = {k for k, kv in methods.items()
                          if isinstance(kv, dict) and kv.get("primary") is True}
                primary |= {(s, m, c, k) for k in marked or methods}

    def kept(key: tuple[str, tuple[tuple[str, str], ...]]) -> bool:
        labels = dict(key[1])
        if key[0] == "certmon_rho_weight_ratio":
            return False
        if "method" not in labels:
            return True
        return (labels["suite"], labels["model"], labels["certificate"],
                labels["method"]) in primary

    assert shown == {k: v for k, v in full.items() if kept(k)}
    assert len(shown) < len(full)


def test_shown_keeps_every_method_of_a_certificate_without_a_primary_mark() -> None:
    doc = copy.deepcopy(DOCUMENTS["engine"])
    for sv in doc["suites"].values():
        for mv in sv["models"].values():
            for mk in mv["certificates"]["risk"]["methods"].values():
                del mk["primary"]
    text = encode(registry_of(StateCollector(lambda: doc, "shown")), "")[0]
    methods = {dict(k[1]).get("method") for k in samples(text)}
    assert methods == {None, "r_eval", "r_autoeval", "r_autoeval_plus"}
    assert b"certmon_rho_weight_ratio{" not in text


def test_a_view_of_primary_methods_only_gives_the_same_shown_exposition() -> None:
    eng = simulated_engine()
    lean = eng.state_view(shown_only=True)
    assert {k for c in lean["suites"]["qa"]["models"]["bad"]["certificates"].values()
            for k in c["methods"]} == {"r_autoeval_plus"}
    assert eng.state_view()["suites"]["qa"]["models"]["bad"]["certificates"]["risk"][
        "methods"].keys() == {"r_eval", "r_autoeval", "r_autoeval_plus"}
    shown = encode(registry_of(StateCollector(eng.state_view, "shown")), "")[0]
    assert encode(registry_of(StateCollector(lambda: lean, "shown")), "")[0] == shown


def test_detail_setting() -> None:
    base = "[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\n"
    assert parse_config(base).metrics.detail == "shown"
    assert parse_config("[metrics]\ndetail = 'full'\n" + base).metrics.detail == "full"
    with pytest.raises(ConfigError):
        parse_config("[metrics]\ndetail = 'some'\n" + base)
    with pytest.raises(ValueError, match="detail"):
        StateCollector(dict, "some")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- documented counts
def documented_counts() -> dict[str, tuple[str, str]]:
    """The rows of deploy/README.md's "Series per model" table: scope -> (full, shown)."""
    text = README.read_text()
    section = text[text.index("### Series per model"):]
    section = section[:section.index("\n### ", 5)]
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \| ([^|]+?) \|", section, re.M)
    return {scope: (full, shown) for scope, full, shown in rows[1:]}


def count_by_scope(text: bytes) -> Counter[str]:
    out: Counter[str] = Counter()
    for (name, labels), _ in samples(text).items():
        keys = dict(labels)
        if name == "certmon_rho_weight_ratio":
            out[f"per rho of {keys['method']}"] += 1
        elif "method" in keys:
            out[f"per method {keys['method']}"] += 1
        elif "certificate" in keys:
            out["per certificate"] += 1
        else:
            out["per model"] += 1
    return out


def test_series_per_model_are_the_documented_counts() -> None:
    """One model, the default certificate, every method past its first state change."""
    eng = Engine(parse_config(DEFAULT_CERT))
    spec = SimulationSpec(suite="qa", models=(SimModel("m", risk=0.02),), examples=1500,
                          audit_rate=0.5)
    for line in iter_jsonl(spec, np.random.default_rng(3)):
        eng.process(line.rstrip(b"\n"))
    methods = eng.state_view()["suites"]["qa"]["models"]["m"]["certificates"]["risk"]["methods"]
    assert {m["status"] for m in methods.values()} == {"certified"}  # every series present
    doc = documented_counts()
    got = {}
    for detail in ("full", "shown"):
        text = encode(registry_of(StateCollector(eng.state_view, detail)), "")[0]
        by_scope = count_by_scope(text)
        rhos = sum(v for k, v in by_scope.items() if k.startswith("per rho"))
        got[detail] = {
            "per model": by_scope["per model"],
            "per certificate": by_scope["per certificate"],
            "per method": {v for k, v in by_scope.items() if k.startswith("per method")},
            "per rho": rhos,
            "total": sum(by_scope.values()),
            "methods": sum(1 for k in by_scope if k.startswith("per method")),
        }
    full, shown = got["full"], got["shown"]
    assert (full["methods"], shown["methods"]) == (3, 1)
    assert full["per rho"] == 1 + 1 + 10 and shown["per rho"] == 0  # r_eval, r_autoeval, 10
    assert doc["per model"] == (str(full["per model"]), str(shown["per model"]))
    assert doc["per certificate"] == (str(full["per certificate"]),
                                      str(shown["per certificate"]))
    (per_method,) = full["per method"]
    assert shown["per method"] == {per_method}
    assert doc["per method (3 in full, the primary in shown)"] == (str(per_method),
                                                                  str(per_method))
    assert doc["per rho (r_eval 1, r_autoeval 1, r_autoeval_plus `rhos`)"] == ("1", "0")
    assert doc["**default certificate, one model**"] == (f"**{full['total']}**",
                                                         f"**{shown['total']}**")


def test_the_garbage_collector_is_paused_during_a_scrape_and_restored() -> None:
    import gc

    seen: list[bool] = []

    def view() -> dict[str, Any]:
        seen.append(gc.isenabled())
        return DOCUMENTS["contract"]

    def failing() -> dict[str, Any]:
        raise KeyError("broken view")

    assert gc.isenabled()
    list(StateCollector(view).collect())
    assert seen == [False] and gc.isenabled()
    with pytest.raises(KeyError):
        list(StateCollector(failing).collect())
    assert gc.isenabled()
    gc.disable()
    try:
        list(StateCollector(view).collect())
        assert not gc.isenabled()  # left as it was
    finally:
        gc.enable()
