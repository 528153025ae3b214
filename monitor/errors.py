"""Exception tree of certmon.

Every error certmon raises on purpose derives from :class:`CertmonError`, so a
caller (and the CLI) can tell "certmon refused this" from "certmon crashed".
Bad *input events* are not exceptions: they are data, rejected with a reason
code to the dead-letter sink (see :mod:`monitor.events`).

Examples
--------
>>> from monitor.errors import CertmonError, ConfigError
>>> issubclass(ConfigError, CertmonError)
True
>>> str(ConfigError("suites.0.audit_rate: must be <= 1"))
'suites.0.audit_rate: must be <= 1'
"""

from __future__ import annotations


class CertmonError(Exception):
    """Root of all errors certmon raises deliberately."""


class ConfigError(CertmonError):
    """The configuration file or an override is invalid (one-line message)."""


class CheckpointError(CertmonError):
    """A checkpoint is corrupt, of an unknown version, or does not fit the config."""


class SourceError(CertmonError):
    """An input source cannot be opened, read or positioned."""


class SinkError(CertmonError):
    """An output sink specification is invalid or the sink cannot be opened."""
