"""End to end, embedded: selection suites through the engine with the in-process worker."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from consumers.cli import main
from consumers.evaluation_worker.cli import demo_config, run_embedded, synthetic_worker
from monitor.config import load_config
from monitor.selection_settings import KICKOFF_EXAMPLE_ID, synthetic_benchmark


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize(("method", "seed"), [("pulse", 0), ("pulse", 1), ("ucbe", 2),
                                              ("naive", 3)])
def test_embedded_loop_certifies_the_true_best_model(tmp_path: Path, method: str,
                                                     seed: int) -> None:
    # 8 models, 400 examples, a clear best (gap 0.08), PULSE warm-started by a history split.
    config = demo_config(8, 400, gap=0.08, seed=seed, out_dir=str(tmp_path),
                         overrides=[f"suites.0.selection.method='{method}'"])
    truth = synthetic_benchmark(8, 400, n_history=40, gap=0.08, seed=seed)
    run = run_embedded(config, synthetic_worker(config, seed=seed, gap=0.08))
    assert [a["kind"] for a in run.alerts] == ["best_model"]
    alert = run.alerts[0]
    assert alert["model"] == f"m{truth.best}" == run.truth["bench"]["best"]
    ev = alert["evidence"]
    assert ev["lower"] > ev["runner_up_upper"] and ev["method"] == method
    sel = run.engine.state_view()["suites"]["bench"]["selection"]
    assert sel["best_model"] == alert["model"] and sel["outstanding"] == 0
    assert sel["calls_completed"] < 8 * 400  # stopped at the certificate
    assert sel["counts"]["unrequested"] == sel["counts"]["duplicates"] == 0
    for m, mv in sel["models"].items():  # every interval covers the truth
        assert mv["lower"] - 1e-9 <= truth.means[int(m[1:])] <= mv["upper"] + 1e-9


def test_select_demo_cli_and_replay_give_the_same_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = tmp_path / "bench"
    assert main(["selection-benchmark", "--out-dir", str(bench), "--models", "6",
                 "--examples", "200", "--gap", "0.1", "--seed", "4"]) == 0
    truth = json.loads((bench / "truth.json").read_text())
    cfg = bench / "selection.toml"
    out = {n: tmp_path / n for n in ("state.json", "alerts.jsonl", "requests.jsonl",
                                     "events.jsonl")}
    assert main(["select-demo", "--config", str(cfg), "--matrix", str(bench / "scores.npy"),
                 "--state-out", str(out["state.json"]), "--alerts-out", str(out["alerts.jsonl"]),
                 "--requests-out", str(out["requests.jsonl"]),
                 "--events-out", str(out["events.jsonl"])]) == 0
    printed = capsys.readouterr().out
    assert f"certified best model: {truth['best']}" in printed
    assert f"true best: {truth['best']}" not in printed  # a given matrix: no truth known
    alerts = _lines(out["alerts.jsonl"])
    assert [a["model"] for a in alerts] == [truth["best"]]
    state = json.loads(out["state.json"].read_text())
    assert state["suites"]["bench"]["selection"]["best_model"] == truth["best"]
    requests = _lines(out["requests.jsonl"])
    assert all(r["kind"] == "evaluate" for r in requests)
    assert len({r["request_id"] for r in requests}) == len(requests)
    # The answers replayed through the ordinary replay command rebuild the same state.
    replayed = tmp_path / "replayed.json"
    assert main(["replay", "--config", str(cfg), "--input", str(out["events.jsonl"]),
                 "--state-out", str(replayed), "--alerts-out", str(tmp_path / "ra.jsonl"),
                 "--requests-out", str(tmp_path / "rr.jsonl"), "--quiet"]) == 0
    assert json.loads(replayed.read_text()) == state
    assert _lines(tmp_path / "ra.jsonl") == alerts
    # Same requests (ids, models, examples); only the first ones' ts differ (start vs 1st event).
    def key(r: dict[str, object]) -> tuple[object, ...]:
        return r["request_id"], r["model"], r["example_ids"]

    assert [key(r) for r in _lines(tmp_path / "rr.jsonl")] == [key(r) for r in requests]


def test_evaluate_worker_file_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "bench"
    assert main(["selection-benchmark", "--out-dir", str(bench), "--models", "3",
                 "--examples", "50", "--seed", "1"]) == 0
    cfg = bench / "selection.toml"
    config = load_config(cfg)
    run = run_embedded(config, synthetic_worker(config, matrix=str(bench / "scores.npy")),
                       max_events=40)
    reqs = tmp_path / "requests.jsonl"
    reqs.write_text("".join(json.dumps(r) + "\n" for r in run.requests)
                    + json.dumps(run.requests[0]) + "\n"  # a re-emitted request
                    + '{"kind": "label", "suite": "bench"}\nnot json\n')
    events = tmp_path / "events.jsonl"
    assert main(["evaluate-worker", "--config", str(cfg), "--matrix", str(bench / "scores.npy"),
                 "--requests", str(reqs), "--out", str(events), "--kickoff"]) == 0
    got = _lines(events)
    assert got[0]["example_id"] == KICKOFF_EXAMPLE_ID
    scores = np.load(bench / "scores.npy")
    names = list(config.suites[0].selection.models)  # type: ignore[union-attr]
    n_expected = sum(len(r["example_ids"]) for r in run.requests)
    assert len(got) == 1 + n_expected
    for e in got[1:]:
        assert e["type"] == "judge" and e["suite"] == "bench"
        assert e["loss"] == 1.0 - scores[names.index(str(e["model"])), int(str(e["example_id"]))]
    assert "answered" in capsys.readouterr().err


def test_evaluate_worker_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "bench"
    assert main(["selection-benchmark", "--out-dir", str(bench), "--models", "3",
                 "--examples", "50"]) == 0
    np.save(tmp_path / "wrong.npy", np.zeros((2, 50)))
    rc = main(["evaluate-worker", "--config", str(bench / "selection.toml"),
               "--matrix", str(tmp_path / "wrong.npy"), "--requests", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert rc == 2 and "shape (2, 50), expected (3, 50)" in err
    no_sel = tmp_path / "plain.toml"
    no_sel.write_text("[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\n")
    assert main(["evaluate-worker", "--config", str(no_sel)]) == 2
    assert "no selection suite" in capsys.readouterr().err


def test_select_demo_creates_its_out_dir(tmp_path: Path) -> None:
    """--out-dir that does not exist yet is created (as selection-benchmark does), not an
    internal FileNotFoundError."""
    out = tmp_path / "new" / "dir"
    assert main(["select-demo", "--out-dir", str(out), "--models", "4", "--examples", "60"]) == 0
    assert (out / "history.npy").is_file()
