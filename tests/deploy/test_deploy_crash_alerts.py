"""A violation pushed to a real Alertmanager just before ``kill -9`` stays there, and comes back.

What guarantees it: every push of an active alert carries
``endsAt = now + [sinks.alertmanager] lifetime_seconds`` (default 3600 s), so Alertmanager keeps
the alert active for an hour after the last push even if certmon never talks to it again; a
restarted ``certmon run`` re-pushes the alerts of its restored state at start-up
(``take_over``) and those of the input it reprocesses, with the same label set, so Alertmanager
merges them into the alert it already holds (same fingerprint, earliest ``startsAt``) instead
of showing a second one.

Three phases against one real Alertmanager (Debian's ``prometheus-alertmanager``) and real
``certmon run`` processes on a followed file:

A. the stream up to just past model ``bad``'s violation; no checkpoint is due, so the violation
   exists nowhere but in Alertmanager when certmon is killed with SIGKILL right after the push;
B. restart on the full stream: the violation is recomputed from the input and re-pushed, not
   duplicated; the run checkpoints its final state (``bad`` violated, ``good`` certified);
C. ``kill -9`` again, then restart with no new input: the alerts of the restored state are
   re-pushed at start-up (fresh ``updatedAt`` and ``endsAt``), still one per label set.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.deploy_support import (
    CONFIG,
    DEPLOY,
    expected_state,
    find_tool,
    scrape,
    simulated_events,
)
from tests.support.processes import free_port, kill9, start_daemon, start_logged, stop, wait_until

pytestmark = pytest.mark.integration

VIOLATED = ("CertmonCertificateViolated", "bad")
CERTIFIED = ("CertmonCertificateCertified", "good")
LIFETIME = 3600.0  # [sinks.alertmanager] lifetime_seconds default; the config leaves it unset


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    binary = find_tool("alertmanager")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_daemon(
        [binary, f"--config.file={DEPLOY / 'alertmanager' / 'alertmanager.yml'}",
         f"--storage.path={tmp_path / 'am'}", f"--web.listen-address=127.0.0.1:{port}",
         "--cluster.listen-address=", "--log.level=warn"],
        tmp_path / "am.log", base + "/-/ready")
    try:
        yield base
    finally:
        stop(proc)


def parse_time(stamp: str) -> float:
    """Alertmanager's RFC 3339 times (up to nanoseconds) as Unix seconds."""
    return datetime.fromisoformat(stamp).timestamp()


def certmon_alerts(am: str) -> list[dict[str, Any]]:
    """The alerts certmon pushed that Alertmanager holds as active."""
    with urllib.request.urlopen(am + "/api/v2/alerts", timeout=5) as resp:
        alerts: list[dict[str, Any]] = json.loads(resp.read())
    return [a for a in alerts if a["labels"].get("origin") == "certmon"
            and "comparison" not in a["labels"]]  # certificates only (see comparison_alerts)


def comparison_alerts(am: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The comparison alerts certmon pushed, by (alertname, candidate)."""
    with urllib.request.urlopen(am + "/api/v2/alerts", timeout=5) as resp:
        alerts: list[dict[str, Any]] = json.loads(resp.read())
    return {(a["labels"]["alertname"], a["labels"]["candidate"]): a for a in alerts
            if a["labels"].get("origin") == "certmon" and "comparison" in a["labels"]}


def by_key(alerts: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for alert in alerts:
        out.setdefault((alert["labels"]["alertname"], alert["labels"]["model"]), []).append(alert)
    return out


def write_config(workdir: Path, am: str, every_seconds: float, port: int | None = None) -> Path:
    config = workdir / "certmon.toml"
    metrics = f'host = "127.0.0.1"\nport = {port}' if port else "enabled = false"
    config.write_text(CONFIG + f"""
[metrics]
{metrics}

[checkpoint]
dir = "{workdir / 'ckpt'}"
every_seconds = {every_seconds}

[source]
kind = "file"
path = "{workdir / 'events.jsonl'}"
follow = true
poll_seconds = 0.05

[sinks]
alerts = ["file:{workdir / 'alerts.jsonl'}", "alertmanager:{am}"]
requests = "none"
dead_letters = "none"
""")
    return config


def start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    return start_logged(["certmon", "run", "--config", str(config)], log)


def checkpoint_line(workdir: Path) -> int:
    # the manifest (monitor.incremental): the part documents beside it carry no position
    manifests = [p for p in (workdir / "ckpt").glob("*.ckpt.json") if "%23part%23" not in p.name]
    if not manifests:
        return -1
    assert len(manifests) == 1, manifests
    line: int = json.loads(manifests[0].read_bytes())["position"]["line"]
    return line


def test_violation_survives_kill9_and_is_repushed_not_duplicated(
        alertmanager: str, tmp_path: Path) -> None:
    am = alertmanager
    events = simulated_events()
    state = expected_state(events)
    assert state["suites"]["deploy"]["models"]["bad"]["certificates"]["risk"]["methods"][
        "r_autoeval_plus"]["status"] == "violated"
    stream, log = tmp_path / "events.jsonl", tmp_path / "certmon.log"
    # the violation of "bad" (r_autoeval_plus, the primary) is reached at event 211 of 6023
    stream.write_bytes(b"\n".join(events[:300]) + b"\n")

    # A. push, then SIGKILL before any checkpoint: the alert lives only in Alertmanager
    proc = start(write_config(tmp_path, am, every_seconds=3600.0), log)
    try:
        wait_until(lambda: VIOLATED in by_key(certmon_alerts(am)), "the pushed violation")
    finally:
        assert kill9(proc) == -signal.SIGKILL
    killed_at = time.time()
    assert checkpoint_line(tmp_path) == -1, "phase A must crash before any checkpoint"
    time.sleep(2.0)  # certmon is down: nothing re-sends
    held = by_key(certmon_alerts(am))
    assert list(held) == [VIOLATED], held
    (first,) = held[VIOLATED]
    assert first["status"]["state"] == "active"
    assert first["labels"]["method"] == "r_autoeval_plus"
    ends_a = parse_time(first["endsAt"])
    # alive for the configured lifetime after the last push, not the 4 resend intervals of old
    assert ends_a >= killed_at + LIFETIME - 60, first["endsAt"]

    # B. restart on the whole stream: recomputed from the input, re-pushed onto the same alert
    with open(stream, "ab") as out:
        out.write(b"\n".join(events[300:]) + b"\n")
    restart_b = time.time()
    proc = start(write_config(tmp_path, am, every_seconds=0.2), log)
    try:
        wait_until(lambda: checkpoint_line(tmp_path) == len(events), "the final checkpoint")

        def both_pushed_after(t: float) -> bool:
            keys = by_key(certmon_alerts(am))
            return (CERTIFIED in keys and VIOLATED in keys
                    and parse_time(keys[VIOLATED][0]["updatedAt"]) >= t)

        wait_until(lambda: both_pushed_after(restart_b - 1), "re-push after restart")
        held = by_key(certmon_alerts(am))
        assert sorted(held) == sorted([VIOLATED, CERTIFIED]), held
        assert all(len(v) == 1 for v in held.values()), held  # one alert per label set
        (again,) = held[VIOLATED]
        assert again["fingerprint"] == first["fingerprint"]
        assert again["startsAt"] == first["startsAt"]  # merged into the alert already held
        assert parse_time(again["endsAt"]) >= ends_a
    finally:
        assert kill9(proc) == -signal.SIGKILL  # C. the checkpoint holds both certificates' states

    # C. restart with no new input: the restored state's alerts are pushed again at start-up
    before = by_key(certmon_alerts(am))
    compared = comparison_alerts(am)
    assert sorted(compared) == [("CertmonInferior", "bad"), ("CertmonNonInferior", "good")]
    time.sleep(1.1)  # Alertmanager's times have sub-second precision; make "later" visible
    restart_c = time.time()
    port = free_port()
    proc = start(write_config(tmp_path, am, every_seconds=0.2, port=port), log)
    try:
        def repushed() -> bool:
            keys = by_key(certmon_alerts(am))
            return all(k in keys and parse_time(keys[k][0]["updatedAt"]) >= restart_c
                       for k in (VIOLATED, CERTIFIED))

        wait_until(repushed, "the restored state's alerts re-pushed at start-up")
        held = by_key(certmon_alerts(am))
        assert sorted(held) == sorted([VIOLATED, CERTIFIED]), held
        for key, (alert,) in held.items():
            (old,) = before[key]
            assert alert["fingerprint"] == old["fingerprint"]
            assert alert["startsAt"] == old["startsAt"]
            assert parse_time(alert["endsAt"]) >= restart_c + LIFETIME - 60
        # the comparisons' verdicts too (from the restored state), merged into the same alerts
        wait_until(lambda: all(parse_time(a["updatedAt"]) >= restart_c
                               for a in comparison_alerts(am).values()), "comparisons re-pushed")
        for key, alert in comparison_alerts(am).items():
            assert alert["fingerprint"] == compared[key]["fingerprint"]
            assert alert["startsAt"] == compared[key]["startsAt"]
        assert checkpoint_line(tmp_path) == len(events)
        # restarted with no input: up, nothing awaits a checkpoint, so neither
        # CertmonCheckpointMissing nor CertmonCheckpointStale can fire for it
        def up() -> bool:
            try:
                return scrape(f"http://127.0.0.1:{port}/metrics").get(("certmon_up", ())) == 1
            except OSError:
                return False

        wait_until(up, "certmon_up 1")
        got = scrape(f"http://127.0.0.1:{port}/metrics")
        assert got[("certmon_checkpoint_pending_events", ())] == 0
        assert got[("certmon_checkpoint_last_success_timestamp_seconds", ())] == 0
    finally:
        stop(proc)
    assert "Traceback" not in log.read_text(errors="replace")
