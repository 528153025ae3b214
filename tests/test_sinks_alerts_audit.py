from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from monitor.alerts import alert_id, label_request, make_alert
from monitor.audit import audit_uniform, is_audited
from monitor.errors import SinkError
from monitor.sinks import JsonlFileSink, MemorySink, NullSink, StdoutSink, open_sink


def test_alert_id_is_canonical_hash() -> None:
    import hashlib

    expected = hashlib.sha256(b'["s","m","c","certified",3]').hexdigest()[:32]
    assert alert_id("s", "m", "c", "certified", 3) == expected
    with pytest.raises(ValueError):
        make_alert("nope", "s", "m", "c", "r_eval", 1, 0.0, {})
    assert label_request("s", "m", "x", "e", 1.0)["kind"] == "label"


def test_audit_uniform_properties() -> None:
    us = [audit_uniform("salt", "s", "m", str(i)) for i in range(20000)]
    assert all(0.0 <= u < 1.0 for u in us)
    assert abs(sum(us) / len(us) - 0.5) < 0.01
    assert audit_uniform("a", "s", "m", "x") != audit_uniform("b", "s", "m", "x")
    assert is_audited("salt", "s", "m", "0", 1.0) and not is_audited("salt", "s", "m", "0", 0.0)


def test_sinks(tmp_path: Path) -> None:
    p = tmp_path / "out" / "a.jsonl"
    s = JsonlFileSink(p)
    s.emit({"a": 1})
    s.flush()
    s.close()
    s = JsonlFileSink(p, append=True)
    s.emit({"b": "é"})
    s.close()
    assert [json.loads(x) for x in p.read_text().splitlines()] == [{"a": 1}, {"b": "é"}]
    buf = io.StringIO()
    StdoutSink(buf).emit({"c": 2})
    assert buf.getvalue() == '{"c":2}\n'
    assert isinstance(open_sink("none"), NullSink)
    assert isinstance(open_sink("memory"), MemorySink)
    assert isinstance(open_sink(f"file:{tmp_path}/x.jsonl"), JsonlFileSink)
    with pytest.raises(SinkError):
        open_sink("file:")
    with pytest.raises(SinkError, match="cannot open"):
        open_sink(f"file:{tmp_path}")
