"""Configuration of the process around the suites: checkpoints, metrics, source, event limits.

The sections ``[checkpoint]``, ``[metrics]``, ``[source]`` and ``[events]``; the whole file is
:class:`monitor.config.root.CertmonConfig`. Import them from :mod:`monitor.config`.

Examples
--------
>>> MetricsConfig().host, SourceConfig(kind="file", path="events.jsonl").follow
('127.0.0.1', False)
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from monitor.config.certificates import Name as _Name
from monitor.config.certificates import PosFloat as _PosFloat
from monitor.config.certificates import PosInt as _PosInt
from monitor.config.certificates import Section as _Section
from monitor.events import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_ID_BYTES

__all__ = ["CheckpointConfig", "EventsConfig", "MetricsConfig", "SourceConfig"]


class CheckpointConfig(_Section):
    """Where and how often to checkpoint (``dir`` unset: no checkpoints)."""

    dir: str | None = Field(
        None,
        description="Directory of the local checkpoints of `certmon run` (file or stdin source, "
        "or Kafka with `kafka.checkpoint_store = \"local\"`). Unset: no local checkpoints.")
    key: _Name = Field(
        "certmon",
        description="Name of the checkpoint of a file or stdin run in `dir` (the file "
        "`<dir>/<key>.ckpt.json`): two runs sharing a directory need different keys.")
    every_events: _PosInt = Field(
        100_000,
        description="Checkpoint after this many events (also every `every_seconds` and when "
        "stopping). Integer >= 1.")
    every_seconds: _PosFloat = Field(
        30.0,
        description="Checkpoint at least this often, in seconds of wall time (> 0).")


class MetricsConfig(_Section):
    """Prometheus endpoint (``monitor.metrics.server``; see ``SECURITY.md``).

    ``host`` defaults to the loopback interface: containers set ``"0.0.0.0"`` explicitly.
    One reception thread reads every request (TLS handshake, request line, headers) without
    blocking and answers ``/healthz`` and ``/readyz`` itself, whatever the scrape load; at most
    ``max_connections`` connections are held (at the cap a new one evicts the oldest unfinished
    request, else the oldest waiting scrape); a connection idle for ``idle_timeout`` seconds,
    or without its whole request ``request_timeout`` seconds after it was accepted, is closed
    however it trickles (one request per connection); ``workers`` threads answer ``/metrics``,
    which is rendered at most once per ``min_scrape_interval`` seconds whatever the number of
    scrapers, and answered at most ``max_scrapes_per_second`` times per second on average
    (excess scrapers wait; 0 disables the pacing). TLS with ``tls_cert_file`` and
    ``tls_key_file``; basic auth with ``basic_auth_username`` and a password from
    ``basic_auth_password_file`` or the ``CERTMON_METRICS_PASSWORD`` environment variable
    (never from the config file).
    ``detail = "shown"`` (default) exports the per-method series of each certificate's primary
    method only and no ``certmon_rho_weight_ratio``; ``"full"`` every method and every rho
    (about twice the series per model: the counts are in ``deploy/README.md``).
    """

    enabled: bool = Field(True, description="Serve Prometheus metrics over HTTP.")
    host: str = Field(
        "127.0.0.1",
        description="Interface the metrics endpoint listens on. The default is the loopback "
        "interface; containers set `\"0.0.0.0\"` explicitly.")
    port: Annotated[int, Field(ge=0, le=65535)] = Field(
        9108, description="TCP port of the metrics endpoint (0: any free port).")
    workers: Annotated[int, Field(ge=1, le=64)] = Field(
        2, description="Threads answering metrics connections (1 to 64).")
    max_connections: Annotated[int, Field(ge=1, le=1024)] = Field(
        16,
        description="Connections held at once (1 to 1024); at the cap a new connection evicts "
        "the oldest unfinished request, else the oldest scrape waiting for its turn.")
    idle_timeout: _PosFloat = Field(
        5.0, description="Seconds a connection may stay idle before it is closed (> 0).")
    request_timeout: _PosFloat = Field(
        3.0,
        description="Seconds a connection has, once accepted, to deliver its whole "
        "request (TLS handshake, request line, headers) however it trickles; then it is "
        "closed (> 0).")
    min_scrape_interval: Annotated[float, Field(ge=0.0)] = Field(
        1.0,
        description="`/metrics` is rendered at most once per this many seconds, whatever the "
        "number of scrapers (later scrapes get the cached page); >= 0.")
    max_scrapes_per_second: Annotated[float, Field(ge=0.0)] = Field(
        10.0,
        description="Average `/metrics` answers per second, at most (excess scrapers wait); "
        "0 disables the pacing.")
    tls_cert_file: str | None = Field(
        None,
        description="PEM certificate file: serve HTTPS (with `tls_key_file`). Unset: plain "
        "HTTP.")
    tls_key_file: str | None = Field(
        None, description="PEM private key file of `tls_cert_file`.")
    basic_auth_username: str | None = Field(
        None,
        description="Require HTTP basic auth with this user name. Unset: no authentication.")
    basic_auth_password_file: str | None = Field(
        None,
        description="File holding the basic-auth password; unset: the "
        "`CERTMON_METRICS_PASSWORD` environment variable. The password itself is never "
        "written in the configuration.")
    detail: Literal["full", "shown"] = Field(
        "shown",
        description="Per-method detail of the state series: `shown` exports each "
        "certificate's primary method only and no `certmon_rho_weight_ratio`; `full` every "
        "method and every rho (about twice the series per model, see `deploy/README.md`).")


class SourceConfig(_Section):
    """Input for ``certmon run``: a JSONL file (optionally followed), stdin, or Kafka."""

    kind: Literal["file", "stdin", "kafka"] = Field(
        "stdin",
        description="Where `certmon run` reads events: `file` (a JSONL file, `path`), `stdin` "
        "(JSONL) or `kafka` (the `[kafka]` section).")
    path: str | None = Field(
        None, description="The JSONL file to read (required with `kind = \"file\"`).")
    follow: bool = Field(
        False,
        description="Keep reading the file as it grows (`tail -f`); a last line is used once "
        "its newline arrives. False: stop at the end of the file.")
    poll_seconds: _PosFloat = Field(
        0.2, description="Seconds between two looks at a followed file that has no new line.")
    max_events_per_second: _PosFloat | None = Field(
        None,
        description="Read at most this many events per second on average (> 0). Unset: as fast "
        "as they come.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.kind == "file" and not self.path:
            raise ValueError("path is required when kind = 'file'")
        return self


class EventsConfig(_Section):
    """Event validation limits.

    ``max_ts_jump_seconds``: an event stamped more than this ahead of both its suite's
    event time (the largest ``ts`` accepted) and the wall clock is dead-lettered as
    ``implausible_ts`` instead of moving the event time, so one bad clock or forged event
    cannot expire every pending join. Events that are not in the future (a suite silent for
    longer than the bound, a replay of past data) are never refused by it.

    Cardinality limits (state is created only by accepted events, and only within them):
    ``max_id_bytes`` bounds the UTF-8 length of ``event_id``, ``example_id``, ``suite``,
    ``model`` and ``stratum`` (a longer one is dead-lettered as ``id_too_long``: ids are kept
    for dedupe, names become state keys and metric labels, a stratum is kept with every
    pending audited unit); ``max_suites`` bounds the suites of one
    engine (a Kafka partition, or the file runner), ``max_models_per_suite`` and
    ``max_models`` the models of one suite and of the engine. An event that would create a
    suite or a model beyond them is dead-lettered as ``too_many_suites`` /
    ``too_many_models``.

    Memory budget of one engine (:mod:`monitor.state.budget`): ``max_waiting_units`` bounds
    pending units plus orphan labels and ``max_dedupe_entries`` event ids plus used units,
    over all suites (the ``[[suites]]`` bounds still hold per suite); beyond them the oldest
    entries of the largest suite are evicted and counted. None of them is part of the
    checkpoint fingerprint: they only decide what is dead-lettered or evicted next, so they
    can be tuned across a restart (a restored state above a lowered limit is kept; only new
    suites and models are refused; entries over a lowered budget go at the next event).
    """

    max_bytes: _PosInt = Field(
        DEFAULT_MAX_EVENT_BYTES,
        description="Largest event accepted, in bytes of the raw record or line; a larger one "
        "is dead-lettered as `oversized`.")
    max_ts_jump_seconds: _PosFloat = Field(
        30 * 86400.0,
        description="An event stamped more than this many seconds ahead of both its suite's "
        "event time and the wall clock is dead-lettered as `implausible_ts` (default: 30 "
        "days), so one bad clock cannot expire every pending join.")
    max_id_bytes: _PosInt = Field(
        DEFAULT_MAX_ID_BYTES,
        description="Longest `event_id`, `example_id`, `suite`, `model` or `stratum`, in UTF-8 "
        "bytes; a longer one is dead-lettered as `id_too_long`.")
    max_suites: _PosInt = Field(
        10_000,
        description="Suites of one engine (a Kafka partition, or the file runner); an event that "
        "would create one more is dead-lettered as `too_many_suites`.")
    max_models_per_suite: _PosInt = Field(
        100_000,
        description="Models of one suite; an event that would create one more is "
        "dead-lettered as `too_many_models`.")
    max_models: _PosInt = Field(
        10_000,
        description="Models of one engine, over all its suites; an event that would create one "
        "more is dead-lettered as `too_many_models` (default: 10,000, about 50 KB each with the "
        "default certificate: with the memory budget, within a 1 GiB container).")
    max_waiting_units: _PosInt = Field(
        200_000,
        description="Audited units waiting for their label plus labels waiting for their judge "
        "event, over all suites of one engine (about 600 bytes each). Beyond it the oldest "
        "entries of the suite holding the most are evicted (down to 1/64 below the bound), "
        "counted in `counters.budget_evictions`; an evicted unit's label is missing "
        "(`expired_pending`, applied at its worst value).")
    max_dedupe_entries: _PosInt = Field(
        500_000,
        description="Remembered event ids plus used (rounded or missing) units, over all suites "
        "of one engine (about 200 bytes each). Beyond it the oldest entries of the suite holding "
        "the most are forgotten (down to 1/64 below the bound), counted in "
        "`counters.budget_evictions`; a duplicate of a forgotten entry is not recognised.")
