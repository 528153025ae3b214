r"""``certmon inspect``: a readable summary of a checkpoint, a checkpoint directory or STATE.json.

Examples
--------
>>> import json, pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "STATE.json").write_text(json.dumps({"suites": {}, "counters": {"events_in": 3}}))
>>> print("\n".join(inspect_lines(str(d / "STATE.json"))))  # doctest: +NORMALIZE_WHITESPACE
state ...STATE.json
<BLANKLINE>
suite/model  cert  alpha  rounds  labels  judge  risk  CS
<BLANKLINE>
events 3, rejected 0, duplicates 0, unrouted 0, label requests 0, alerts 0
>>> inspect_lines(str(d))
Traceback (most recent call last):
...
monitor.errors.CertmonError: ... holds no checkpoint (*.ckpt.json)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from consumers.progress import iter_rows, printable, summary_lines
from monitor.checkpoint import (
    KEY_ENV,
    AuthenticatedStore,
    CheckpointStore,
    LocalDirectoryStore,
    decode_checkpoint,
    secured_store,
    verify_checkpoint,
)
from monitor.config import CertmonConfig
from monitor.config.kafka import KafkaConfig
from monitor.errors import CertmonError, CheckpointError
from monitor.incremental import MANIFEST_VERSION, PART_FORMAT, load_checkpoint
from monitor.state.model import ModelState

__all__ = ["detail_lines", "fleet_lines", "inspect_lines", "kafka_lines", "view_from_snapshot"]

CHECKPOINT_GLOB = "*.ckpt.json"  # what LocalDirectoryStore writes
_PART_MARK = "%23part%23"  # in the file names of per-suite documents ("#part#" escaped)


def inspect_lines(path: str, key: bytes | None = None) -> list[str]:
    """Readable summary of a checkpoint (verified), a checkpoint directory or a STATE.json.

    Parameters
    ----------
    path : str
        A checkpoint file, a ``checkpoint.dir`` / ``--checkpoint-dir`` directory (each of its
        ``*.ckpt.json`` files is shown) or a STATE.json file.
    key : bytes, optional
        The checkpoint HMAC key (``certmon inspect`` reads it from ``CERTMON_CHECKPOINT_KEY``
        or ``CERTMON_CHECKPOINT_KEY_FILE``, like ``certmon run``). With a key, a checkpoint
        without a valid ``hmac`` is refused, as ``certmon run`` would refuse it.

    Raises
    ------
    CertmonError
        Unreadable file, neither kind of document, a directory without checkpoints, a
        corrupt checkpoint, or (with ``key``) an unsigned or forged one.

    Notes
    -----
    Every line is :func:`consumers.progress.printable`: names or positions carrying terminal
    escape codes are shown escaped, never interpreted by the terminal. The header says what
    was verified: the sha256 only detects accidents; ``hmac ok`` means the checkpoint was
    signed with ``key``; without a key, a checkpoint is shown as ``unauthenticated`` (no
    hmac) or ``hmac not verified``.
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.glob(CHECKPOINT_GLOB) if _PART_MARK not in f.name)
        if not files:
            raise CertmonError(f"{path} is a directory and holds no checkpoint "
                               f"({CHECKPOINT_GLOB})")
        lines: list[str] = []
        for f in files:
            lines += [*([""] if lines else []), *_file_lines(str(f), key)]
        return lines
    return _file_lines(path, key)


def _authenticity(doc: dict[str, Any], data: bytes, key: bytes | None, shown: str) -> str:
    if key is not None:
        try:
            verify_checkpoint(data, key)
        except CheckpointError as exc:
            raise CheckpointError(f"{shown}: {exc}") from None
        return "hmac ok"
    if "hmac" in doc:
        return f"hmac not verified: {KEY_ENV}(_FILE) not set"
    return "unauthenticated: no hmac, anyone who can write the store can write this"


def _file_lines(path: str, key: bytes | None) -> list[str]:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CertmonError(f"cannot read {printable(path)}: {exc.strerror}") from None
    shown = printable(path)
    try:
        doc = json.loads(data)
    except ValueError:
        raise CertmonError(f"{shown} is neither a checkpoint nor a STATE.json (not JSON)") from None
    if isinstance(doc, dict) and doc.get("format") == PART_FORMAT:
        raise CertmonError(f"{shown} is one suite's document of a checkpoint: inspect the "
                           "checkpoint (its manifest, or the directory) instead")
    if isinstance(doc, dict) and doc.get("format") == "certmon.checkpoint":
        if doc.get("version") == MANIFEST_VERSION:  # a manifest: its suites are beside it
            auth = _authenticity(doc, data, key, shown)  # the manifest; then every document
            store: CheckpointStore = LocalDirectoryStore(Path(path).parent)
            if key is not None:
                store = AuthenticatedStore(store, key)
            try:
                ckpt = load_checkpoint(store, str(doc.get("key")))
            except CheckpointError as exc:
                raise CheckpointError(f"{shown}: {exc}") from None
            if ckpt is None:
                raise CertmonError(f"{shown}: no checkpoint under key {doc.get('key')!r}")
            snapshot, position = ckpt.snapshot, ckpt.position
        else:
            snapshot, position = decode_checkpoint(data)
            auth = _authenticity(doc, data, key, shown)
        try:
            view = view_from_snapshot(snapshot)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"checkpoint is corrupt: malformed engine state ({exc!r})"
            ) from None
        written = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(doc["written_at"])))
        head = [
            f"checkpoint {shown} (version {doc['version']}, written {written}, sha256 ok, "
            f"{auth})",
            printable(f"position: {json.dumps(position, sort_keys=True, ensure_ascii=False)}"),
        ]
    elif isinstance(doc, dict) and "suites" in doc:
        view, head = doc, [f"state {shown}"]
    else:
        raise CertmonError(f"{shown} is neither a checkpoint nor a STATE.json")
    return [printable(line) for line in (*head, "", *summary_lines(view), *detail_lines(view))]


def _num(x: Any) -> str:
    return "-" if x is None else f"{float(x):.4g}"


def detail_lines(view: dict[str, Any]) -> list[str]:
    r"""Per certificate, its epoch and earlier epochs; per model, its labels in flight.

    Examples
    --------
    >>> ep = {"epoch": 2, "started_round": 647, "reason": "regression",
    ...       "began_with_lost_certificate": True, "regressions": 1, "improvements": 0,
    ...       "regression_detector": {"armed": False, "statistic": 3.0, "threshold": 225000.0,
    ...                               "rounds": 5},
    ...       "history": [{"epoch": 1, "started_round": 0, "ended_round": 647,
    ...                    "started_by": "start", "ended_by": "regression",
    ...                    "status": "certified"}]}
    >>> mv = {"labels": {"audited": 9, "pending": 2, "waiting": 1, "missing": 0, "late": 0,
    ...                  "completion_ratio": 0.78}, "certificates": {"risk": {"epoch": ep}}}
    >>> print("\n".join(detail_lines({"suites": {"s": {"models": {"m": mv}}}})))
    ... # doctest: +ELLIPSIS
    <BLANKLINE>
    epochs (suite/model/certificate)
      s/m/risk: epoch 2 since round 647 (after a regression, certificate lost); 1 regression, ...
        regression detector: disarmed, statistic 3 / threshold 2.25e+05 after 5 rounds
        epoch 1: rounds 0-647, started by start, ended by regression, was certified
    <BLANKLINE>
    labels (suite/model)
      pending: awaiting a label; waiting: labelled, behind an earlier pending unit; missing: expired
      s/m: audited 9, pending 2, waiting 1, missing 0, late 0, completion 78.0%
    """
    epochs: list[str] = []
    labels: list[str] = []
    for suite, model, cert, mv, cv in iter_rows(view):
        ep = cv.get("epoch")
        if isinstance(ep, dict):
            why = {"start": "since the start", "regression": "after a regression",
                   "improvement": "after an improvement"}.get(str(ep.get("reason")),
                                                              str(ep.get("reason")))
            lost = ", certificate lost" if ep.get("began_with_lost_certificate") else ""
            n_reg, n_imp = ep.get("regressions", 0), ep.get("improvements", 0)
            epochs.append(
                f"  {suite}/{model}/{cert}: epoch {ep.get('epoch')} since round "
                f"{ep.get('started_round')} ({why}{lost}); {n_reg} regression"
                f"{'' if n_reg == 1 else 's'}, {n_imp} improvement{'' if n_imp == 1 else 's'}")
            for kind in ("regression", "improvement"):
                det = ep.get(f"{kind}_detector")
                if isinstance(det, dict):
                    state = "" if "armed" not in det else (
                        "armed, " if det["armed"] else "disarmed, ")
                    epochs.append(f"    {kind} detector: {state}statistic "
                                  f"{_num(det.get('statistic'))} / threshold "
                                  f"{_num(det.get('threshold'))} after {det.get('rounds')} rounds")
            for h in reversed(ep.get("history") or []):
                epochs.append(f"    epoch {h.get('epoch')}: rounds {h.get('started_round')}-"
                              f"{h.get('ended_round')}, started by {h.get('started_by')}, ended by "
                              f"{h.get('ended_by')}, was {h.get('status')}")
        lv = mv.get("labels")
        line = f"  {suite}/{model}: "
        if isinstance(lv, dict) and not any(x.startswith(line) for x in labels):
            ratio = lv.get("completion_ratio")
            labels.append(
                f"{line}audited {lv.get('audited')}, pending {lv.get('pending')}, waiting "
                f"{lv.get('waiting')}, missing {lv.get('missing')}, late {lv.get('late', 0)}"
                + ("" if ratio is None else f", completion {100 * float(ratio):.1f}%"))
    out: list[str] = []
    if epochs:
        out += ["", "epochs (suite/model/certificate)", *epochs]
    if labels:
        out += ["", "labels (suite/model)", "  pending: awaiting a label; waiting: labelled, "
                "behind an earlier pending unit; missing: expired", *labels]
    return out


def _add(total: dict[str, Any], more: dict[str, Any]) -> None:
    for k, v in more.items():
        if isinstance(v, dict):
            _add(total.setdefault(k, {}), v)
        elif isinstance(v, int | float) and not isinstance(v, bool):
            total[k] = total.get(k, 0) + v


def fleet_lines(store: CheckpointStore, keys: list[str], where: str) -> list[str]:
    """One summary of the checkpoints under ``keys`` (every partition of a consumer group).

    Each checkpoint is verified like ``certmon run`` would restore it (through ``store``, an
    :class:`~monitor.checkpoint.AuthenticatedStore` when a key is configured); the suites of
    all of them are shown in one table and their counters added.

    Raises
    ------
    CertmonError
        No checkpoint under any key, or a corrupt / forged one.

    Examples
    --------
    >>> import tempfile
    >>> fleet_lines(LocalDirectoryStore(tempfile.mkdtemp()), [], "nowhere")
    Traceback (most recent call last):
    ...
    monitor.errors.CertmonError: nowhere holds no checkpoint
    """
    suites: dict[str, Any] = {}
    counters: dict[str, Any] = {}
    head: list[str] = []
    found = 0
    for key in sorted(keys):
        try:
            ckpt = load_checkpoint(store, key)
        except CheckpointError as exc:
            raise CheckpointError(f"{where}: checkpoint {key!r}: {exc}") from None
        if ckpt is None:
            continue
        try:
            view = view_from_snapshot(ckpt.snapshot)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: checkpoint {key!r} is corrupt: malformed engine "
                                  f"state ({exc!r})") from None
        found += 1
        head.append(f"  {key}: {len(view['suites'])} suites, position "
                    f"{json.dumps(ckpt.position, sort_keys=True, ensure_ascii=False)}")
        for name, sv in view["suites"].items():
            if name in suites:
                head.append(f"  warning: suite {name!r} is in two checkpoints (the later key, "
                            f"{key}, is shown)")
            suites[name] = sv
        _add(counters, view.get("counters", {}))
    if not found:
        raise CertmonError(f"{where} holds no checkpoint")
    view = {"suites": suites, "counters": counters}
    lines = [f"checkpoints in {where}: {found} partitions", *head, "",
             *summary_lines(view), *detail_lines(view)]
    return [printable(line) for line in lines]


def view_from_snapshot(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Rebuild a STATE.json-like view from an engine snapshot without its configuration.

    Only what the snapshot holds is shown (statuses are the effective ones recorded in it).
    """
    suites: dict[str, Any] = {}
    for sd in snapshot.get("suites", []):
        models: dict[str, Any] = {}
        for md in sd.get("models", []):
            m = ModelState.from_dict(md)
            certs: dict[str, Any] = {}
            for (cert, meth), mon in m.monitors.items():
                eff = m.effective[(cert, meth)]
                cv = certs.setdefault(cert, {"alpha": mon.alpha, "delta": mon.delta, "methods": {}})
                cv["methods"][meth] = {
                    "rounds": mon.rounds,
                    "status": eff.status,
                    "certified_at_round": eff.certified_at_round,
                    "violated_at_round": eff.violated_at_round,
                    "cs_lower": mon.cs_lower,
                    "cs_upper": mon.cs_upper,
                    "risk_estimate": mon.risk_estimate if mon.rounds else None,
                }
                if cert in m.epochs:
                    cv["epoch"] = m.epochs[cert].view()
            audited = m.order.next_position
            missing = m.counts.get("expired_pending", 0)
            models[m.name] = {"counts": dict(m.counts), "certificates": certs, "labels": {
                "audited": audited, "pending": m.pending_units, "waiting": len(m.order.ready),
                "missing": missing, "late": m.counts.get("late_labels", 0),
                "completion_ratio": (1.0 - (m.pending_units + missing) / audited
                                     if audited else 1.0)}}
        suites[str(sd.get("name"))] = {"models": models}
    return {"suites": suites, "counters": snapshot.get("counters", {})}


def fleet_keys(stored: Iterable[str], kafka: KafkaConfig) -> list[str]:
    """Return the checkpoint keys of the partitions the engines read now.

    ``[kafka] repartition`` decides the topic the engines read (and so their checkpoint
    keys): the keys of another topic are a previous configuration's state, not the fleet's;
    the parts and chunks of a checkpoint are read through its manifest.

    Examples
    --------
    >>> from monitor.config.kafka import KafkaConfig
    >>> fleet_keys(["certmon.eval-events.v1/0", "certmon.eval-events-by-suite.v1/0",
    ...             "certmon.eval-events-by-suite.v1/0#part#ab#0"], KafkaConfig())
    ['certmon.eval-events-by-suite.v1/0']
    """
    prefix = f"{kafka.engine_topics()[0]}/"
    return [k for k in stored
            if k.startswith(prefix) and "#part#" not in k and "#chunk#" not in k]


def kafka_lines(config: CertmonConfig) -> list[str]:
    """Summarize every partition's checkpoint on ``config``'s Kafka checkpoint topic, combined.

    The keys of the topic that are checkpoints (not per-suite documents or chunks) are read
    with :func:`fleet_lines`, through the HMAC-verifying store when a key is configured.

    Raises
    ------
    CertmonError
        The brokers cannot be reached, or see :func:`fleet_lines`.
    """
    from kafka.errors import KafkaError

    from consumers.kafka.checkpoints import KafkaTopicStore

    kafka = config.kafka
    where = f"topic {kafka.topics.checkpoints} on {kafka.bootstrap_servers}"
    try:
        raw = KafkaTopicStore(kafka)
    except KafkaError as exc:
        raise CertmonError(f"inspect --kafka: cannot reach {where}: {exc}") from None
    try:
        stored = raw.keys()
        return fleet_lines(secured_store(raw, os.environ), fleet_keys(stored, kafka), where)
    except KafkaError as exc:
        raise CertmonError(f"inspect --kafka: cannot read {where}: {exc}") from None
    finally:
        raw.close()
