"""Cardinality limits: no event creates state beyond ``[events]`` limits.

Every event is accounted for exactly once: ``events_in`` equals the accepted events (judge
plus label counts of the models) plus rejections, dropped duplicates and unrouted events.
"""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

from monitor.checkpoint import decode_checkpoint, encode_checkpoint
from monitor.config import CertmonConfig, parse_config
from monitor.engine import Engine
from monitor.events import REJECTION_REASONS, Event, Rejection, decode_event
from tests.test_engine import ev, make_config


def limited(**events: Any) -> CertmonConfig:
    base = make_config()
    return base.model_copy(update={"events": base.events.model_copy(update=events)})


def accounted(eng: Engine) -> None:
    c = eng.counters
    accepted = sum(m.counts["judge"] + m.counts["labels"]
                   for s in eng.suites.values() for m in s.models.values())
    total = (accepted + sum(c["rejected"].values()) + sum(c["duplicates"].values())
             + c["unrouted"])
    assert c["events_in"] == total, c


def n_models(eng: Engine) -> int:
    return sum(len(s.models) for s in eng.suites.values())


def test_junk_lines_naming_new_suites_create_nothing() -> None:
    eng = Engine(make_config())
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(2000):
        res = eng.process(json.dumps({"type": "judge", "event_id": f"e{i}", "suite": f"junk{i}",
                                      "model": "m", "example_id": "x", "loss": "bad",
                                      "ts": 0}).encode())
        assert res.dead_letter is not None and res.dead_letter["reason"] == "wrong_type"
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert eng.suites == {} and eng.state_view()["suites"] == {}
    assert eng.counters["rejected"]["wrong_type"] == 2000
    assert grown < 2_000_000  # was ~1.3 MB per junk line (2.67 GB for 2,000)
    snap = eng.snapshot()
    assert snap["suites"] == [] and len(json.dumps(snap)) < 2000
    accounted(eng)


def test_rejection_of_known_model_is_attributed_without_creating_others() -> None:
    eng = Engine(make_config())
    eng.process(ev("judge", "a", "x"))
    eng.process(ev("judge", "b", "x", loss=3.0))
    eng.process(ev("judge", "c", "x", loss=3.0, model="new"))
    assert set(eng.suites["qa"].models) == {"m"}
    assert eng.suites["qa"].models["m"].counts["rejected"] == 1
    accounted(eng)


def test_too_many_suites() -> None:
    eng = Engine(limited(max_suites=3))
    for i in range(5):
        res = eng.process(ev("judge", f"e{i}", "x", suite=f"s{i}"))
        if i < 3:
            assert res.rejection is None
        else:
            assert res.dead_letter is not None
            assert res.dead_letter["reason"] == "too_many_suites"
            assert "events.max_suites" in res.dead_letter["detail"]
    assert set(eng.suites) == {"s0", "s1", "s2"}
    assert eng.counters["rejected"]["too_many_suites"] == 2
    # known suites keep working at the limit
    assert eng.process(ev("judge", "f", "y", suite="s1")).rejection is None
    accounted(eng)


def test_too_many_models_per_suite_and_per_instance() -> None:
    eng = Engine(limited(max_models_per_suite=2, max_models=3))
    reasons = [eng.process(ev("judge", f"e{i}", "x", model=f"m{i}")).rejection
               for i in range(3)]
    assert reasons[:2] == [None, None]
    assert reasons[2] is not None and reasons[2].reason == "too_many_models"
    assert "events.max_models_per_suite" in reasons[2].detail
    # another suite: room for one more model in the instance, then the instance limit
    assert eng.process(ev("judge", "f0", "x", suite="b", model="m0")).rejection is None
    res = eng.process(ev("judge", "f1", "x", suite="b", model="m1"))
    assert res.dead_letter is not None and res.dead_letter["reason"] == "too_many_models"
    assert "events.max_models)" in res.dead_letter["detail"]
    # a new suite whose only model would exceed the instance limit is not created either
    res = eng.process(ev("judge", "g0", "x", suite="c", model="m0"))
    assert res.rejection is not None and res.rejection.reason == "too_many_models"
    assert set(eng.suites) == {"qa", "b"} and n_models(eng) == 3
    assert eng.counters["rejected"]["too_many_models"] == 3
    # known models keep working; a duplicate of a refused event is refused again, not lost
    assert eng.process(ev("label", "h", "x", model="m1")).rejection is None
    assert eng.process(ev("judge", "e2", "x", model="m2")).rejection is not None
    assert eng.counters["rejected"]["too_many_models"] == 4
    accounted(eng)


def test_listed_models_count_when_a_suite_is_created() -> None:
    cfg = parse_config("[[suites]]\nname = '*'\nmodels = ['a', 'b', 'c*']\n"
                       "[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\n"
                       "[events]\nmax_models = 3\n")
    eng = Engine(cfg)
    assert eng.process(ev("judge", "e0", "x", suite="s", model="c1")).rejection is None
    assert n_models(eng) == 3  # a, b (listed) and c1
    res = eng.process(ev("judge", "e1", "x", suite="t", model="a"))
    assert res.rejection is not None and res.rejection.reason == "too_many_models"
    assert set(eng.suites) == {"s"}
    accounted(eng)


def test_id_byte_limits() -> None:
    eng = Engine(limited(max_id_bytes=8))
    ok = {"event_id": "e" * 8, "example_id": "x" * 8, "suite": "s" * 8, "model": "m" * 8}
    assert eng.process(ev("judge", ok["event_id"], ok["example_id"], suite=ok["suite"],
                          model=ok["model"])).rejection is None
    for i, field in enumerate(ok):
        fields = {"event_id": f"e{i}", "example_id": "x", "suite": "qa", "model": "m"}
        fields[field] = "é" * 5  # 5 characters, 10 UTF-8 bytes
        res = eng.process(ev("judge", fields["event_id"], fields["example_id"],
                             suite=fields["suite"], model=fields["model"]))
        assert res.dead_letter is not None and res.dead_letter["reason"] == "id_too_long"
        assert res.dead_letter["detail"] == (f"{field} is 10 bytes, the limit is 8 "
                                             "(events.max_id_bytes)")
    assert eng.counters["rejected"]["id_too_long"] == 4
    assert set(eng.suites) == {"s" * 8}  # the rejected events created nothing
    accounted(eng)


def test_stratum_byte_limit() -> None:
    """A stratum is kept with every pending audited unit (and in its label request): 2,000
    audited judge events with 30 KB strata made a 60 MB checkpoint."""
    eng = Engine(make_config())
    for i in range(2000):
        res = eng.process(ev("judge", f"e{i}", f"x{i}", audit=True, stratum="S" * 30_000))
        assert res.dead_letter is not None and res.dead_letter["reason"] == "id_too_long"
        assert res.dead_letter["detail"] == ("stratum is 30000 bytes, the limit is 256 "
                                             "(events.max_id_bytes)")
    assert eng.suites == {} and len(json.dumps(eng.snapshot())) < 2000
    assert eng.process(ev("judge", "ok", "x", audit=True, stratum="s" * 256)).rejection is None
    assert eng.process(ev("judge", "ok2", "y", stratum=None)).rejection is None
    accounted(eng)


def test_default_id_limit_and_decode() -> None:
    def line(eid: str) -> bytes:
        return json.dumps({"type": "label", "event_id": eid, "suite": "s", "model": "m",
                           "example_id": "x", "loss": 0, "ts": 0}).encode()

    assert isinstance(decode_event(line("e" * 256)), Event)
    r = decode_event(line("e" * 257))
    assert isinstance(r, Rejection) and r.reason == "id_too_long"
    assert isinstance(decode_event(line("\U0001f600" * 64)), Event)  # 256 bytes
    assert isinstance(decode_event(line("\U0001f600" * 65)), Rejection)
    assert isinstance(decode_event(line("e" * 300), max_id_bytes=300), Event)


def test_limits_survive_restore_and_are_tunable() -> None:
    eng = Engine(limited(max_models=2))
    for i in range(3):
        eng.process(ev("judge", f"e{i}", "x", model=f"m{i}"))
    eng.process(ev("judge", "big", "x", model="m0", suite="q" * 300))
    blob = encode_checkpoint(eng.snapshot(), {"offset": 4})
    snap, _ = decode_checkpoint(blob)
    again = Engine.restore(limited(max_models=2), snap)
    assert again.state_view() == eng.state_view()
    res = again.process(ev("judge", "e9", "x", model="m9"))
    assert res.rejection is not None and res.rejection.reason == "too_many_models"
    # the limits are not part of the config fingerprint: raise one across a restart
    raised = Engine.restore(limited(max_models=3, max_id_bytes=512), snap)
    assert raised.process(ev("judge", "e9", "x", model="m9")).rejection is None
    accounted(again)
    accounted(raised)


def test_reasons_are_in_the_contract() -> None:
    assert {"id_too_long", "too_many_suites", "too_many_models"} <= set(REJECTION_REASONS)


def test_replay_dead_letters_junk_and_over_limit_events(tmp_path: Path) -> None:
    from consumers.cli import main

    lines = [json.dumps({"type": "judge", "event_id": f"e{i}", "suite": f"junk{i}",
                         "model": "m", "example_id": "x", "loss": "bad", "ts": 0})
             for i in range(2000)]
    lines += [ev("judge", f"v{i}", "x", suite=f"ok{i}").decode() for i in range(5)]
    lines.append(ev("judge", "w", "x", suite="ok0", model="m" * 300).decode())
    events = tmp_path / "in.jsonl"
    events.write_text("\n".join(lines) + "\n")
    state, dl = tmp_path / "state.json", tmp_path / "dl.jsonl"
    cfg = Path(__file__).resolve().parents[1] / "examples" / "minimal.toml"
    assert main(["replay", "--config", str(cfg), "--set", "events.max_suites=3", "--input",
                 str(events), "--state-out", str(state), "--dead-letters-out", str(dl),
                 "--quiet"]) == 0
    reasons = Counter(json.loads(line)["reason"] for line in dl.read_text().splitlines())
    assert reasons == {"wrong_type": 2000, "too_many_suites": 2, "id_too_long": 1}
    doc = json.loads(state.read_text())
    assert sorted(doc["suites"]) == ["ok0", "ok1", "ok2"]
    assert doc["counters"]["events_in"] == 2006 and state.stat().st_size < 100_000
