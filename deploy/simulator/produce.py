"""Produce JSONL events from stdin to a Kafka topic, keyed by suite, at a bounded rate.

Used by the ``simulator`` service of deploy/docker-compose.yml::

    certmon simulate ... | python produce.py --bootstrap kafka:9092 --rate 200

Each line must be one certmon event; the record key is its ``suite`` (one order per suite).
Lines that are not JSON objects are sent with an empty key (certmon rejects them to the
dead-letter topic, which is a useful thing to see on the dashboards too).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def suite_key(line: bytes) -> bytes | None:
    """Return the UTF-8 suite name of a JSON event line, or None if there is none.

    Examples
    --------
    >>> suite_key(b'{"suite": "qa", "model": "m"}'), suite_key(b"not json")
    (b'qa', None)
    """
    try:
        doc: Any = json.loads(line)
    except ValueError:
        return None
    suite = doc.get("suite") if isinstance(doc, dict) else None
    return suite.encode() if isinstance(suite, str) else None


def main(argv: list[str] | None = None) -> int:
    """Send stdin's lines to Kafka; return the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="kafka:9092")
    parser.add_argument("--topic", default="certmon.eval-events.v1")
    parser.add_argument("--rate", type=float, default=200.0, help="events per second (0: max)")
    args = parser.parse_args(argv)
    from kafka import KafkaProducer  # imported late: the doctest above needs no Kafka client

    producer = KafkaProducer(bootstrap_servers=args.bootstrap, linger_ms=20, acks="all")
    start, sent = time.monotonic(), 0
    for line in sys.stdin.buffer:
        line = line.rstrip(b"\r\n")
        if not line:
            continue
        producer.send(args.topic, key=suite_key(line), value=line)
        sent += 1
        if args.rate > 0:
            ahead = sent / args.rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
        if sent % 10_000 == 0:
            print(f"produced {sent} events", file=sys.stderr, flush=True)
    producer.flush()
    producer.close()
    print(f"produced {sent} events, done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
