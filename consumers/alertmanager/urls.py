"""Alertmanager URLs: the API endpoint of a base URL, and the form of a URL that may be logged.

A base URL may carry a path prefix (Alertmanager behind a reverse proxy, ``--web.route-prefix``)
and a query string (a proxy's token); neither may be lost when the API path is added, and no
credential in it (``user:password@`` or a query value) may reach a log line or an error message.
"""

from __future__ import annotations

import urllib.parse

__all__ = ["API_PATH", "api_url", "has_userinfo", "redact_text", "redact_url"]

API_PATH = "/api/v2/alerts"


def has_userinfo(url: str) -> bool:
    """Whether ``url`` carries ``user:password@`` credentials (refused: they would be logged).

    Examples
    --------
    >>> has_userinfo("http://u:p@am:9093"), has_userinfo("http://am:9093")
    (True, False)
    """
    return "@" in urllib.parse.urlsplit(url).netloc


def api_url(base: str) -> str:
    """Return the alerts endpoint of ``base``: its path extended, its query and fragment kept.

    Examples
    --------
    >>> api_url("http://am:9093/")
    'http://am:9093/api/v2/alerts'
    >>> api_url("https://proxy/am/?token=t0k")
    'https://proxy/am/api/v2/alerts?token=t0k'
    """
    p = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + API_PATH, p.query,
                                    p.fragment))


def redact_url(url: str) -> str:
    """Return ``url`` with its user information and every query value replaced by ``***``.

    Scheme, host, port, path and query keys are kept (they say which endpoint is meant);
    a URL that cannot be parsed is replaced as a whole.

    Examples
    --------
    >>> redact_url("https://user:pw@proxy:8443/am/api/v2/alerts?token=s3cret&x=1")
    'https://***@proxy:8443/am/api/v2/alerts?token=***&x=***'
    >>> redact_url("http://am:9093/api/v2/alerts")
    'http://am:9093/api/v2/alerts'
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        netloc = f"***@{host}" if "@" in parts.netloc else host
        query = "&".join(f"{pair.partition('=')[0]}=***" if pair else pair
                         for pair in parts.query.split("&")) if parts.query else ""
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return "<unparseable URL>"


def redact_text(text: str, urls: list[str]) -> str:
    """Return ``text`` with each of ``urls`` (and its query string) replaced by its redacted form.

    For exception messages, which may quote the URL they failed on.

    Examples
    --------
    >>> redact_text("bad URL http://am/?token=t", ["http://am/?token=t"])
    'bad URL http://am/?token=***'
    """
    for url in sorted(urls, key=len, reverse=True):
        text = text.replace(url, redact_url(url))
        query = urllib.parse.urlsplit(url).query
        if query:
            text = text.replace(query, "***")
    return text
