"""Alertmanager URLs: the path prefix and query survive the API path; credentials never logged."""

from __future__ import annotations

import logging
import urllib.error

import pytest

from consumers.alertmanager import AlertmanagerSink
from consumers.alertmanager.urls import api_url, redact_url

ALERT = {"kind": "violated", "suite": "s", "model": "m", "certificate": "risk",
         "method": "r_eval", "round": 40, "ts": 990.0, "evidence": {}}


def test_path_prefix_and_query_kept() -> None:
    posted: list[str] = []
    sink = AlertmanagerSink("https://proxy:8443/am/?token=s3cret", clock=lambda: 1000.0,
                            transport=lambda url, body, t: posted.append(url) or 200)
    sink.emit(ALERT)
    sink.flush()
    assert posted == ["https://proxy:8443/am/api/v2/alerts?token=s3cret"]


@pytest.mark.parametrize("status", [0, 400])
def test_token_never_logged(status: int, caplog: pytest.LogCaptureFixture) -> None:
    url = "https://proxy:8443/am?token=s3cret"

    def transport(u: str, body: bytes, timeout: float) -> int:
        if status == 0:
            raise urllib.error.URLError(f"cannot reach {u}")
        return status

    sink = AlertmanagerSink(url, clock=lambda: 1000.0, sleep=lambda s: None, max_attempts=1,
                            transport=transport)
    with caplog.at_level(logging.DEBUG):
        sink.emit(ALERT)
        sink.flush()
    assert caplog.records, "the failure is logged"
    assert "s3cret" not in caplog.text
    assert "proxy:8443/am/api/v2/alerts?token=***" in caplog.text


def test_redact_url_userinfo_and_query() -> None:
    url = "https://user:pass@proxy/am/api/v2/alerts?token=s3cret&a=b"
    red = redact_url(url)
    assert "pass" not in red and "user" not in red and "s3cret" not in red
    assert red == "https://***@proxy/am/api/v2/alerts?token=***&a=***"
    assert api_url("http://am:9093") == "http://am:9093/api/v2/alerts"


@pytest.mark.parametrize("spec", [
    "alertmanager:http://u:pw-s3cret@[::1/?token=t0ken",  # unclosed IPv6 bracket
    "alertmanger:https://u:pw-s3cret@am:9093/?token=t0ken",  # a misspelt sink kind
])
def test_bad_sink_specs_are_clear_errors_without_credentials(spec: str) -> None:
    """A sink specification that cannot be used is one clear error that
    never echoes the URL's credentials (before: an internal ValueError, or the spec in full)."""
    from consumers.alertmanager.wiring import alertmanager_urls
    from monitor.errors import SinkError
    from monitor.sinks import open_sink

    with pytest.raises(SinkError) as err:
        (alertmanager_urls if spec.startswith("alertmanager:") else open_sink)(spec)
    assert "s3cret" not in str(err.value) and "t0ken" not in str(err.value), err.value
