"""Structured (one JSON object per line) logging for the Kafka runner.

Fields: ``ts`` (epoch seconds), ``level``, ``logger``, ``msg`` and every ``extra=`` field.
Secrets must never be passed as fields; pass :meth:`monitor.config.kafka.KafkaConfig.redacted`.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import IO, Any

__all__ = ["JsonFormatter", "configure_json_logging"]

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """Format a log record as one JSON line.

    Examples
    --------
    >>> rec = logging.makeLogRecord({"msg": "assigned", "levelname": "INFO", "name": "x",
    ...                              "created": 1.5, "partitions": [0, 1]})
    >>> JsonFormatter().format(rec)
    '{"ts":1.5,"level":"INFO","logger":"x","msg":"assigned","partitions":[0,1]}'
    """

    def format(self, record: logging.LogRecord) -> str:
        """Return the JSON line for ``record``."""
        doc: dict[str, Any] = {
            "ts": record.created,
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, separators=(",", ":"), default=str)


def configure_json_logging(
    logger_name: str = "certmon", level: int = logging.INFO, stream: IO[str] | None = None
) -> logging.Logger:
    """Attach a JSON handler to ``logger_name`` unless it (or the root logger) has handlers.

    Returns
    -------
    logging.Logger
        The configured logger.
    """
    logger = logging.getLogger(logger_name)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
        logger.setLevel(level)
    return logger
