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
import time
from pathlib import Path
from typing import Any

from consumers.progress import printable, summary_lines
from monitor.checkpoint import (
    KEY_ENV,
    AuthenticatedStore,
    CheckpointStore,
    LocalDirectoryStore,
    decode_checkpoint,
    verify_checkpoint,
)
from monitor.errors import CertmonError, CheckpointError
from monitor.incremental import MANIFEST_VERSION, PART_FORMAT, load_checkpoint
from monitor.state.model import ModelState

__all__ = ["inspect_lines", "view_from_snapshot"]

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
    return [printable(line) for line in (*head, "", *summary_lines(view))]


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
            models[m.name] = {"counts": dict(m.counts), "certificates": certs}
        suites[str(sd.get("name"))] = {"models": models}
    return {"suites": suites, "counters": snapshot.get("counters", {})}
