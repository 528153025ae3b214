r"""Webhook adapters: labelling tools' payloads -> certmon label events.

A labelling tool that calls a webhook when an annotation is done can close the label loop
with no code on certmon's side: store the request's ``request_id`` in the task (Label Studio:
a key of the task's ``data``; Argilla: a metadata property or the record's ``external_id``)
when the task is created from a label request, and turn each payload into a label event with
:func:`label_studio_label` or :func:`argilla_label` (or the command-line filter below).

**Label Studio**, ``ANNOTATION_CREATED`` (and ``ANNOTATION_UPDATED``)::

    {"action": "ANNOTATION_CREATED",
     "annotation": {"id": 17, "result": [{"from_name": "verdict", "to_name": "text",
                    "type": "choices", "value": {"choices": ["fail"]}}],
                    "was_cancelled": false, "created_at": "2026-11-21T08:00:00.5Z", ...},
     "task": {"id": 19, "data": {"text": "...", "request_id": "lbl1...."}, ...},
     "project": {...}}

The loss comes from the result whose ``from_name`` is the control named by
``LabelStudioMapping.loss_from``; its value (a choice, a label, a rating or a number) is
mapped through ``values`` (e.g. ``{"fail": 1.0, "pass": 0.0}``), or used as the loss when it
is a number in [0, 1]. A skipped task (``was_cancelled``) gives no label.

**Argilla**, ``response.created`` / ``response.updated`` (status ``submitted``) carry the
annotator's values and the record; ``record.completed`` says a record has all the responses
its distribution asks for, but Argilla's v1 payload carries no response values (its record
schema leaves them out), so it is accepted only with the record's responses merged in as
``data["responses"]`` (e.g. fetched with the Argilla SDK); their losses are averaged::

    {"type": "response.created", "version": 1, "timestamp": "...",
     "data": {"values": {"verdict": {"value": "fail"}}, "status": "submitted",
              "record": {"id": "...", "metadata": {"request_id": "lbl1...."},
                         "external_id": "...", ...}, "inserted_at": "...", ...}}

The label event answers by request id (no ``event_id``: certmon derives ``"label:" +
request_id``), so a redelivered webhook is an exact duplicate certmon counts and drops, and an
annotation changed after certmon used it is dead-lettered as ``event_id_conflict`` (a label
is never taken back). Its ``ts`` is the annotation's creation time.

Command line (one JSON payload after another on stdin, pretty-printed or not; label events
as JSONL on stdout; a payload that cannot be mapped is reported on stderr, never dropped
silently)::

    python -m consumers.labelling.webhooks --tool label-studio --loss-from verdict \
        --value fail=1 --value pass=0 < payloads.json > labels.jsonl

Examples
--------
>>> payload = {"action": "ANNOTATION_CREATED", "annotation": {"was_cancelled": False,
...     "created_at": "2026-11-21T08:00:00Z", "result": [{"from_name": "verdict",
...     "type": "choices", "value": {"choices": ["fail"]}}]},
...     "task": {"data": {"request_id": "lbl1.WyJxYSIsIm0xIiwieDEiXQ"}}}
>>> m = LabelStudioMapping(loss_from="verdict", values={"fail": 1.0, "pass": 0.0})
>>> label_studio_label(payload, m)
{'type': 'label', 'request_id': 'lbl1.WyJxYSIsIm0xIiwieDEiXQ', 'loss': 1.0, 'ts': 1795248000.0}
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

__all__ = ["ArgillaMapping", "LabelStudioMapping", "NoLabel", "WebhookError", "argilla_label",
           "label_studio_label", "main", "payloads"]

LABEL_STUDIO_ACTIONS = ("ANNOTATION_CREATED", "ANNOTATION_UPDATED")
ARGILLA_RESPONSE_EVENTS = ("response.created", "response.updated")


class WebhookError(ValueError):
    """A payload that should carry a label but cannot be mapped to one (the reason why)."""


class NoLabel(Exception):  # an outcome, not an error
    """A payload that carries no label (another action, a skipped task, a draft): why."""


@dataclass(frozen=True)
class LabelStudioMapping:
    """Where a Label Studio annotation keeps the loss and the request id.

    Attributes
    ----------
    loss_from : str
        ``from_name`` of the control holding the verdict (e.g. a ``<Choices name="verdict">``).
    values : dict
        Answer value (as text: a choice, a label, a rating) -> loss in [0, 1]. Numbers not in
        it are used as the loss when they are in [0, 1].
    request_id_path : str
        Dotted path of the request id inside the task (default ``"data.request_id"``).
    """

    loss_from: str
    values: dict[str, float] = field(default_factory=dict)
    request_id_path: str = "data.request_id"


@dataclass(frozen=True)
class ArgillaMapping:
    """Where an Argilla record keeps the request id and which question holds the loss.

    Attributes
    ----------
    question : str
        Name of the question whose answer is the verdict.
    values : dict
        Answer value (as text) -> loss in [0, 1]; numbers not in it are used when in [0, 1].
    request_id_path : str
        Dotted path of the request id inside the record (default ``"metadata.request_id"``;
        ``"external_id"`` when records are created with the request id as external id).
    """

    question: str
    values: dict[str, float] = field(default_factory=dict)
    request_id_path: str = "metadata.request_id"


def _at(obj: Any, path: str, what: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            raise WebhookError(f"{what} has no {path!r}")
        obj = obj[part]
    return obj


def _loss(value: Any, values: dict[str, float], where: str) -> float:
    if isinstance(value, list):
        if len(value) != 1:
            raise WebhookError(f"{where}: expected one answer, got {value!r}")
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise WebhookError(f"{where}: answer {value!r} is not a choice or a number")
    key = value if isinstance(value, str) else format(value, "g")
    if key in values:
        return values[key]
    if not isinstance(value, str) and math.isfinite(value) and 0.0 <= value <= 1.0:
        return float(value)
    raise WebhookError(f"{where}: answer {value!r} has no loss (map it: --value {key}=LOSS)")


def _epoch(text: Any, where: str) -> float:
    """Epoch seconds of an ISO 8601 time; without an offset it is UTC (as both tools write)."""
    if not isinstance(text, str):
        raise WebhookError(f"{where} is not a time: {text!r}")
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise WebhookError(f"{where} is not an ISO 8601 time: {text!r}") from None
    return (t if t.tzinfo is not None else t.replace(tzinfo=UTC)).timestamp()


def _request_id(container: Any, path: str, what: str) -> str:
    rid = _at(container, path, what)
    if not isinstance(rid, str) or not rid:
        raise WebhookError(f"{what} {path!r} is not a request id: {rid!r}")
    return rid


def label_studio_label(payload: dict[str, Any], mapping: LabelStudioMapping) -> dict[str, Any]:
    """Return the label event of a Label Studio annotation webhook.

    Raises
    ------
    NoLabel
        Not an annotation created/updated, or a skipped (cancelled) annotation.
    WebhookError
        An annotation that cannot be mapped (no task, no request id, no answer from
        ``mapping.loss_from``, an answer without a loss).
    """
    action = payload.get("action")
    if action not in LABEL_STUDIO_ACTIONS:
        raise NoLabel(f"action {action!r} carries no annotation")
    ann = payload.get("annotation")
    if not isinstance(ann, dict):
        raise WebhookError(f"{action}: no annotation object")
    if ann.get("was_cancelled"):
        raise NoLabel(f"{action}: annotation {ann.get('id')} skipped the task (was_cancelled)")
    task = payload.get("task")
    if not isinstance(task, dict):
        raise WebhookError(f"{action}: no task object (Label Studio sends it with the "
                           "annotation since 1.x webhooks; older servers need the task fetched)")
    rid = _request_id(task, mapping.request_id_path, "the task")
    results = [r for r in ann.get("result") or [] if isinstance(r, dict)
               and r.get("from_name") == mapping.loss_from]
    if len(results) != 1:
        raise WebhookError(f"{action}: {len(results)} results from {mapping.loss_from!r} in "
                           f"annotation {ann.get('id')} (expected one)")
    value = results[0].get("value")
    if not isinstance(value, dict):
        raise WebhookError(f"{action}: result of {mapping.loss_from!r} has no value")
    answer = next((value[k] for k in ("choices", "labels", "rating", "number", "text",
                                      "taxonomy") if k in value), None)
    loss = _loss(answer, mapping.values, f"{action} {mapping.loss_from!r}")
    ts = _epoch(ann.get("created_at"), f"{action} annotation.created_at")
    return {"type": "label", "request_id": rid, "loss": loss, "ts": ts}


def argilla_label(payload: dict[str, Any], mapping: ArgillaMapping) -> dict[str, Any]:
    """Return the label event of an Argilla webhook (``response.*`` or ``record.completed``).

    Raises
    ------
    NoLabel
        Another event, or a response that is not submitted (draft, discarded).
    WebhookError
        A payload that cannot be mapped; in particular ``record.completed`` without the
        record's responses merged in as ``data["responses"]`` (Argilla does not send them).
    """
    event = payload.get("type")
    data = payload.get("data")
    if not isinstance(data, dict):
        raise NoLabel(f"event {event!r} has no data")
    where = f"{event} {mapping.question!r}"
    if event in ARGILLA_RESPONSE_EVENTS:
        if data.get("status") != "submitted":
            raise NoLabel(f"{event}: response status {data.get('status')!r} is not submitted")
        rid = _request_id(data.get("record"), mapping.request_id_path, f"{event} record")
        answer = _at(data.get("values"), f"{mapping.question}.value", f"{event} values")
        return {"type": "label", "request_id": rid,
                "loss": _loss(answer, mapping.values, where),
                "ts": _epoch(data.get("inserted_at"), f"{event} data.inserted_at")}
    if event == "record.completed":
        rid = _request_id(data, mapping.request_id_path, "record.completed record")
        responses = data.get("responses")
        if not isinstance(responses, list):
            raise WebhookError("record.completed carries no response values in Argilla's v1 "
                               "payload: subscribe to response.created/response.updated, or "
                               "merge the record's responses into data['responses']")
        losses = [_loss(_at(r.get("values"), f"{mapping.question}.value", "a response"),
                        mapping.values, where)
                  for r in responses if isinstance(r, dict) and r.get("status") == "submitted"]
        if not losses:
            raise WebhookError("record.completed: no submitted response in data['responses']")
        return {"type": "label", "request_id": rid, "loss": sum(losses) / len(losses),
                "ts": _epoch(data.get("updated_at"), "record.completed data.updated_at")}
    raise NoLabel(f"event {event!r} carries no label")


def payloads(stream: IO[str]) -> Iterator[Any]:
    r"""Yield the JSON values of ``stream``, one after another (JSONL or pretty-printed).

    Raises
    ------
    WebhookError
        Text that is not JSON (where it starts).

    Examples
    --------
    >>> import io
    >>> list(payloads(io.StringIO('{"a": 1}\n{\n "b": 2\n}\n')))
    [{'a': 1}, {'b': 2}]
    """
    text = stream.read()
    decoder = json.JSONDecoder()
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return
        try:
            value, i = decoder.raw_decode(text, i)
        except ValueError as exc:
            raise WebhookError(f"not JSON at character {i}: {exc}") from None
        yield value


def _values(pairs: list[str]) -> dict[str, float]:
    out = {}
    for pair in pairs:
        key, sep, loss = pair.rpartition("=")
        if not sep:
            raise SystemExit(f"--value {pair!r}: expected ANSWER=LOSS")
        out[key] = float(loss)
    return out


def main(argv: list[str] | None = None, stdin: IO[str] | None = None,
         stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    """Filter webhook payloads (stdin) into label events (stdout); exit 1 if any failed."""
    p = argparse.ArgumentParser(prog="python -m consumers.labelling.webhooks",
                                description="Webhook payloads -> certmon label events (JSONL).")
    p.add_argument("--tool", choices=["label-studio", "argilla"], required=True)
    p.add_argument("--loss-from", required=True, metavar="NAME",
                   help="Label Studio: from_name of the verdict control; Argilla: question name")
    p.add_argument("--value", action="append", default=[], metavar="ANSWER=LOSS",
                   help="loss of an answer value (repeatable), e.g. --value fail=1")
    p.add_argument("--request-id-path", metavar="PATH",
                   help="dotted path of the request id in the task (Label Studio, default "
                        "data.request_id) or the record (Argilla, default metadata.request_id)")
    args = p.parse_args(argv)
    src = stdin if stdin is not None else sys.stdin
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    values = _values(args.value)
    ls = LabelStudioMapping(args.loss_from, values, args.request_id_path or "data.request_id")
    ar = ArgillaMapping(args.loss_from, values, args.request_id_path or "metadata.request_id")
    labels = skipped = failed = 0
    try:
        for n, payload in enumerate(payloads(src), 1):
            try:
                if not isinstance(payload, dict):
                    raise WebhookError(f"not a JSON object: {str(payload)[:80]}")
                label = (label_studio_label(payload, ls) if args.tool == "label-studio"
                         else argilla_label(payload, ar))
            except NoLabel as why:
                skipped += 1
                print(f"webhooks: payload {n}: no label: {why}", file=err)
                continue
            except WebhookError as exc:
                failed += 1
                print(f"webhooks: payload {n}: error: {exc}", file=err)
                continue
            labels += 1
            out.write(json.dumps(label, separators=(",", ":")) + "\n")
            out.flush()
    except WebhookError as exc:
        failed += 1
        print(f"webhooks: error: {exc}", file=err)
    print(f"webhooks: {labels} labels, {skipped} payloads without a label, {failed} errors",
          file=err)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
