"""Generate the metric and alert references of deploy/README.md from the code.

The tables between ``<!-- BEGIN GENERATED: NAME -->`` and ``<!-- END GENERATED: NAME -->``
come from the code that defines them: the state families (``monitor.metrics.families``), the
operational metrics (``monitor.metrics.OperationalMetrics`` with the Kafka source's reasons),
the Kafka metrics (``consumers.kafka.metrics.KafkaMetrics``), the recording rules
(``deploy/prometheus/rules/certmon-recording.yml``) and the pushed alert kinds
(``monitor.alerts.ALERT_KINDS`` with ``consumers.alertmanager.records.KINDS``). After changing
any of them run

    python deploy/build_reference.py

``tests/deploy/test_deploy_reference.py`` fails while the README and the code disagree.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "deploy" / "README.md"
_BLOCK = re.compile(r"(<!-- BEGIN GENERATED: (?P<name>[a-z-]+) -->\n)(.*?)"
                    r"(<!-- END GENERATED: (?P=name) -->)", re.S)


def _row(*cells: str) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = [_row(*header), "|" + "---|" * len(header)]
    lines += [_row(*r) for r in rows]
    return "\n".join(lines) + "\n"


def state_metrics() -> str:
    """Return the table of every state family of :mod:`monitor.metrics.families`, in order."""
    from monitor.metrics.families import COMPARISON, COUNTERS, GAUGES, SELECTION

    rows = [(f"`{n}`", "gauge", ", ".join(labels), doc) for n, doc, labels in GAUGES]
    rows += [(f"`{n}_total`", "counter", ", ".join(labels), doc) for n, doc, labels in COUNTERS]
    rows += [(f"`{n}_total`" if t == "counter" else f"`{n}`", t, ", ".join(labels), doc)
             for n, t, doc, labels in (*SELECTION, *COMPARISON)]
    return _table(("metric", "type", "labels", "meaning"), rows)


def _registry_rows(registry: CollectorRegistry) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for fam in registry.collect():
        labels: dict[str, list[str]] = {}
        for sample in fam.samples:
            for k, v in sample.labels.items():
                if k != "le" and v not in labels.setdefault(k, []):
                    labels[k].append(v)
        name = f"{fam.name}_total" if fam.type == "counter" else fam.name
        doc = fam.documentation
        for key in ("reason", "kind"):
            if key in labels:
                doc += (f" `{key}` (each starts at 0): "
                        + ", ".join(f"`{x}`" for x in labels[key]) + ".")
        rows.append((f"`{name}`", fam.type, ", ".join(labels), doc))
    return rows


def operational_metrics() -> str:
    """Return the table of :class:`monitor.metrics.OperationalMetrics`, Kafka reasons included."""
    from consumers.kafka.source import SOURCE_REJECTION_REASONS
    from monitor.metrics import OperationalMetrics

    registry = CollectorRegistry()
    OperationalMetrics(registry, version="VERSION", extra_reasons=SOURCE_REJECTION_REASONS)
    return _table(("metric", "type", "labels", "meaning"), _registry_rows(registry))


def kafka_metrics() -> str:
    """Return the table of the Kafka metrics and of the Kafka sinks' counters.

    :class:`consumers.kafka.metrics.KafkaMetrics` and :class:`consumers.kafka.sinks.
    KafkaOutputs`; the label names come from a sample of each family.
    """
    from consumers.kafka.metrics import KafkaMetrics
    from consumers.kafka.sinks import KafkaOutputs
    from monitor.config import parse_config
    from monitor.config.kafka import kafka_config_of

    registry = CollectorRegistry()
    config = parse_config("[source]\nkind = 'kafka'\n[kafka]\nbootstrap_servers = 'b:9092'\n"
                          "[[suites]]\n[[suites.certificates]]\nname = 'r'\nalpha = 0.1\n"
                          "delta = 0.1\n")
    outputs = KafkaOutputs(kafka_config_of(config), registry, producer=object())
    outputs.failures.labels(topic="TOPIC")
    outputs.undeliverable.labels(topic="TOPIC")
    m = KafkaMetrics(registry)
    m.consumed("TOPIC", 0, 0)
    m.lag("TOPIC", 0, 0)
    m.loop_failed("ERROR")
    m.record_failed("ERROR")
    m.suites_seen(["SUITE"])
    return _table(("metric", "type", "labels", "meaning"), _registry_rows(registry))


def recording_rules() -> str:
    """Return the table of every recording rule of certmon-recording.yml."""
    doc = yaml.safe_load((ROOT / "deploy/prometheus/rules/certmon-recording.yml").read_text())
    rows = [(f"`{r['record']}`", f"`{' '.join(r['expr'].split())}`")
            for g in doc["groups"] for r in g["rules"] if "record" in r]
    return _table(("series", "definition"), rows)


_PUSHED_WHEN = {
    "state": "resolved by the key's next state alert, by an `improvement`, or when `reconcile` "
             "sees the certificate pending or absent",
    "once": "one-shot: ends after `once_lifetime` (1 h)",
    "best": "another model of the suite becomes best",
    "comparison": "the candidate's verdict changes (inferior replaces non_inferior)",
}


def pushed_alerts() -> str:
    """Return one row per alert kind certmon emits: Alertmanager name, severity, lifetime."""
    from consumers.alertmanager.records import COMPARISON, KINDS, PER_MODEL, RUNBOOK
    from monitor.alerts import ALERT_KINDS

    rows = []
    for kind in ALERT_KINDS:
        name, severity, group = KINDS[kind]
        labels = "suite, model" if kind in PER_MODEL else "suite, model, certificate, method"
        if kind in COMPARISON:
            labels = "suite, comparison, baseline, candidate"
        rows.append((f"`{kind}`", f"`{name}`", severity, labels, _PUSHED_WHEN[group],
                     RUNBOOK[kind]))
    return _table(("kind", "alertname", "severity", "labels", "resolved", "runbook"), rows)


GENERATORS: dict[str, Callable[[], str]] = {
    "state-metrics": state_metrics,
    "operational-metrics": operational_metrics,
    "kafka-metrics": kafka_metrics,
    "recording-rules": recording_rules,
    "pushed-alerts": pushed_alerts,
}


def render(text: str) -> str:
    """Return ``text`` with every generated block rewritten from the code."""
    seen: set[str] = set()

    def block(m: re.Match[str]) -> str:
        name = m.group("name")
        seen.add(name)
        return m.group(1) + GENERATORS[name]() + m.group(4)

    out = _BLOCK.sub(block, text)
    missing = set(GENERATORS) - seen
    if missing:
        raise ValueError(f"deploy/README.md lacks the generated blocks {sorted(missing)}")
    return out


def main(argv: list[str]) -> int:
    """Rewrite the generated blocks of deploy/README.md."""
    README.write_text(render(README.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
