r"""Incremental checkpoints: one document per suite, double-buffered, and a manifest last.

A checkpoint under key ``K`` (any :class:`~monitor.checkpoint.CheckpointStore`: a directory,
the compacted Kafka topic) is a set of *part* documents, one per suite (plus one for the
selection-mode suites, if any), and a *manifest* under ``K`` itself::

    K#part#<id>#<slot>  {"format": "certmon.checkpoint-part", "version": 1, "key": K,
                         "part": <suite name>, "generation": g, "state": <suite snapshot>,
                         "sha256": ..., "hmac": <with a checkpoint key>}
    K                   {"format": "certmon.checkpoint", "version": 2, "key": K,
                         "position": {...}, "written_at": t,
                         "engine": <Engine.snapshot() without suites and selection>,
                         "parts": [[<suite name>, g, <sha256 of its document>], ...],
                         "sha256": ..., "hmac": <with a checkpoint key>}

``<id>`` is the first 32 hex digits of the SHA-256 of the part name (names of any length or
character fit a file name) and ``<slot>`` is ``g % 2``. Each part's generation ``g`` goes up
by one every time its document is rewritten, so a new document never lands in the slot the
current manifest references; the manifest is written only after every part document it
references is durable. A crash at any moment therefore leaves the previous manifest and
every document it references intact. Unchanged suites (:attr:`monitor.engine.Engine.changed`)
are not encoded again: the new manifest references their current documents. The sha256 and
sha256/HMAC of every document are the ones of :mod:`monitor.checkpoint` (canonical JSON of
every other key): :class:`~monitor.checkpoint.AuthenticatedStore` signs and verifies each
document, and the manifest binds each part to its generation and digest.

:func:`load_checkpoint` also reads the single-document checkpoints of older certmon versions
(``"version": 1``); the next save replaces them with this layout.

Examples
--------
>>> import tempfile
>>> from monitor.checkpoint import LocalDirectoryStore
>>> from monitor.config import parse_config
>>> from monitor.engine import Engine
>>> cfg = parse_config("[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1")
>>> eng = Engine(cfg)
>>> for s in ("a", "b"):
...     _ = eng.process(('{"type": "judge", "event_id": "%s", "suite": "%s", "model": "m",'
...                      ' "example_id": "x", "loss": 0, "ts": 1}' % (s, s)).encode())
>>> store = LocalDirectoryStore(tempfile.mkdtemp())
>>> writer = IncrementalCheckpointer(store, "replay")
>>> writer.save(eng, {"line": 2}).parts_written
2
>>> _ = eng.process(b'{"type": "label", "event_id": "l", "suite": "b", "model": "m",'
...                 b' "example_id": "x", "loss": 0, "ts": 2}')
>>> writer.save(eng, {"line": 3}).parts_written  # only suite "b" changed
1
>>> ckpt = IncrementalCheckpointer(store, "replay").load()
>>> ckpt.position, Engine.restore(cfg, ckpt.snapshot).state_view() == eng.state_view()
({'line': 3}, True)
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from hashlib import sha256
from typing import TYPE_CHECKING, Any, Final

from monitor.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointStore,
    Position,
    canonical_json,
    decode_checkpoint,
)
from monitor.errors import CheckpointError
from monitor.snapshot_schemas import Manifest, PartDocument, convert

if TYPE_CHECKING:
    from monitor.engine import Engine

__all__ = [
    "MANIFEST_VERSION",
    "PART_FORMAT",
    "Checkpoint",
    "IncrementalCheckpointer",
    "PartTooLargeError",
    "SaveStats",
    "load_checkpoint",
    "load_many",
    "part_key",
    "save_many",
]

MANIFEST_VERSION: Final = 2
PART_FORMAT: Final = "certmon.checkpoint-part"
_SELECTION: Final = ""  # monitor.engine.SELECTION_PART (never a suite name)
_HMAC_ROOM: Final = 80  # bytes AuthenticatedStore adds: ,"hmac":"<64 hex digits>"


class PartTooLargeError(CheckpointError):
    """One suite's document exceeds the per-suite limit of the checkpoint store."""


def part_key(key: str, part: str, generation: int) -> str:
    """Return the store key of ``part``'s document of ``generation`` (slot ``generation % 2``).

    Examples
    --------
    >>> part_key("events/0", "qa", 7)
    'events/0#part#3f3ef786b34d6dd716e1812c8b74a7a0#1'
    """
    return f"{key}#part#{sha256(part.encode()).hexdigest()[:32]}#{generation % 2}"


def _part_name(part: str) -> str:
    return "the selection suites" if part == _SELECTION else f"suite {part!r}"


def save_many(store: CheckpointStore, items: list[tuple[str, bytes]]) -> None:
    """Durably save every ``(key, data)`` (in one batch when the store has ``save_many``)."""
    batch = getattr(store, "save_many", None)
    if batch is not None:
        batch(items)
        return
    for key, data in items:
        store.save(key, data)


def load_many(store: CheckpointStore, keys: list[str]) -> list[bytes | None]:
    """Load every key (in one batch when the store has ``load_many``)."""
    batch = getattr(store, "load_many", None)
    if batch is not None:
        return list(batch(keys))
    return [store.load(key) for key in keys]


def _no_constant(name: str) -> Any:
    raise CheckpointError(f"checkpoint refused: non-finite number {name} (never written)")


def _verified(data: bytes, what: str) -> dict[str, Any]:
    """Parse a document and check its own sha256 (canonical JSON of every other key)."""
    try:
        doc = json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"{what} is corrupt: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"{what} is corrupt: not a JSON object")
    rest = {k: v for k, v in doc.items() if k not in ("sha256", "hmac")}
    if doc.get("sha256") != sha256(canonical_json(rest).encode("ascii")).hexdigest():
        raise CheckpointError(f"{what} is corrupt: sha256 mismatch (modified or truncated)")
    return doc


def _part_document(key: str, part: str, generation: int, state: Any) -> tuple[bytes, str]:
    """Encode one part document (canonical JSON, the state serialized once); return its digest."""
    try:
        state_json = json.dumps(state, sort_keys=True, separators=(",", ":"),
                                ensure_ascii=True, allow_nan=False)
    except ValueError as exc:  # a non-finite number would make a document that cannot load
        raise CheckpointError(f"cannot checkpoint {_part_name(part)}: {exc}") from None
    head = canonical_json({"format": PART_FORMAT, "generation": generation, "key": key,
                           "part": part})[:-1]  # keys sort: format generation key part
    tail = f',"state":{state_json},"version":1}}'  # ... sha256 state version
    digest = sha256(f"{head}{tail}".encode("ascii")).hexdigest()
    return f'{head},"sha256":"{digest}"{tail}'.encode("ascii"), digest


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back: the engine snapshot, the input position, the format version."""

    snapshot: dict[str, Any]
    position: Position
    version: int


@dataclass(frozen=True)
class SaveStats:
    """What one :meth:`IncrementalCheckpointer.save` wrote."""

    parts_written: int
    parts_total: int
    bytes_written: int  # part documents and manifest (before any HMAC)
    manifest_bytes: int


@dataclass
class _Pending:
    """A checkpoint prepared (encoded) under the engine's lock, written by ``commit``."""

    head: dict[str, Any]
    position: Position
    order: list[str]
    docs: dict[str, tuple[int, str, bytes]]  # part -> (generation, sha256, document)
    written_at: float = field(default_factory=time.time)


def _manifest_parts(doc: dict[str, Any], key: str) -> list[tuple[str, int, str]]:
    try:  # the declared schema: format, version, types and ranges, checked once
        out = convert(doc, Manifest, f"checkpoint {key!r} is corrupt: its manifest").parts
    except ValueError as exc:
        raise CheckpointError(str(exc)) from None
    if len({name for name, _, _ in out}) != len(out):
        raise CheckpointError(f"checkpoint {key!r} is corrupt: a part is listed twice")
    return out


def _read(store: CheckpointStore, key: str) -> tuple[Checkpoint, dict[str, tuple[int, str]],
                                                      dict[str, bytes]] | None:
    """Load and verify a checkpoint; also return its part references and documents."""
    data = store.load(key)
    if data is None:
        return None
    try:
        version = json.loads(data).get("version")
    except (ValueError, RecursionError, AttributeError):
        version = None
    if version != MANIFEST_VERSION:  # a single document of older certmon versions (or junk)
        snapshot, position = decode_checkpoint(data)
        return Checkpoint(snapshot, position, 1), {}, {}
    doc = _verified(data, f"checkpoint {key!r}")
    if doc.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {key!r} is not a certmon checkpoint manifest")
    if doc.get("key") != key:
        raise CheckpointError(f"checkpoint {key!r} refused: it is the manifest of key "
                              f"{doc.get('key')!r}")
    entries = _manifest_parts(doc, key)
    blobs = load_many(store, [part_key(key, n, g) for n, g, _ in entries])
    snapshot = dict(doc["engine"])
    snapshot["suites"] = []
    refs: dict[str, tuple[int, str]] = {}
    docs: dict[str, bytes] = {}
    for (name, gen, digest), blob in zip(entries, blobs, strict=True):
        what = f"checkpoint {key!r}: the document of {_part_name(name)} (generation {gen})"
        if blob is None:
            raise CheckpointError(f"{what} is missing")
        part = _verified(blob, what)
        if (part.get("format"), part.get("key"), part.get("part"), part.get("generation"),
                part.get("sha256")) != (PART_FORMAT, key, name, gen, digest):
            raise CheckpointError(
                f"{what} does not match the manifest (found generation "
                f"{part.get('generation')!r}, sha256 {str(part.get('sha256'))[:12]}, expected "
                f"{digest[:12]}): modified, or overwritten by another writer")
        try:
            convert(part, PartDocument, what)
        except ValueError as exc:
            raise CheckpointError(str(exc)) from None
        if name == _SELECTION:
            snapshot["selection"] = part.get("state")
        else:
            snapshot["suites"].append(part.get("state"))
        refs[name] = (gen, digest)
        docs[name] = blob
    return Checkpoint(snapshot, doc["position"], MANIFEST_VERSION), refs, docs


def _read_refs(store: CheckpointStore, key: str) -> dict[str, tuple[int, str]]:
    """Return the part references of the store's manifest (verified; parts not read)."""
    data = store.load(key)
    try:
        version = None if data is None else json.loads(data).get("version")
    except (ValueError, RecursionError, AttributeError):
        version = None
    if data is None or version != MANIFEST_VERSION:
        return {}
    return {n: (g, d) for n, g, d in _manifest_parts(_verified(data, f"checkpoint {key!r}"), key)}


def load_checkpoint(store: CheckpointStore, key: str) -> Checkpoint | None:
    """Load, verify and reassemble the checkpoint of ``key`` (None when there is none).

    Raises
    ------
    CheckpointError
        The manifest or a part document is corrupt, missing, unauthenticated (through
        :class:`~monitor.checkpoint.AuthenticatedStore`), of another key, or does not match
        the generation and digest the manifest references; an older single document is
        corrupt or of an unknown version.

    Notes
    -----
    Guarantee: the snapshot returned is exactly the one a completed save wrote (each part
    document is bound to the manifest by its generation and sha256; with a checkpoint key
    every document's HMAC is checked): ``Engine.restore`` on it continues bit-identically.
    """
    got = _read(store, key)
    return None if got is None else got[0]


class IncrementalCheckpointer:
    """Write an engine's checkpoints under one key, re-encoding only the changed suites.

    Parameters
    ----------
    store : CheckpointStore
        Where the documents go (batched through ``save_many``/``load_many`` when it has them).
    key : str
        The checkpoint key (``checkpoint.key``, or the Kafka partition's key).
    max_part_bytes : int, optional
        Per-suite document limit (the Kafka store's ``checkpoint_max_bytes``): a larger
        document is refused with :class:`PartTooLargeError` naming the suite and its size.
    keep_documents : bool
        Keep the durable documents in memory, so :meth:`durable` can rewind without the store.

    Notes
    -----
    Guarantee: after a crash at any moment, :func:`load_checkpoint` returns the last
    checkpoint whose :meth:`save` returned (or a later one), complete. A failed save leaves
    its parts pending (the next save writes them again) and makes the next save read the
    store's manifest first, so it never overwrites a slot that manifest references.
    Contract: every change of a suite's state is recorded in ``engine.changed`` (the engine
    does it for every event), and the engine given to :meth:`save` is the one restored from
    :meth:`load` (or a fresh one, or one rebuilt from :meth:`durable`).
    """

    def __init__(self, store: CheckpointStore, key: str, *, max_part_bytes: int | None = None,
                 keep_documents: bool = False) -> None:
        self.store = store
        self.key = key
        self.max_part_bytes = max_part_bytes
        self.keep_documents = keep_documents
        self.encoded_parts = 0  # part documents encoded so far (the cost of checkpoints)
        self._refs: dict[str, tuple[int, str]] = {}  # durable manifest: part -> (gen, sha256)
        self._clean: set[str] = set()  # parts whose durable document equals the engine's state
        self._dirty: set[str] = set()  # changed parts taken from the engine, not yet durable
        self._seeded = False  # _refs reflect the store's current manifest
        self._docs: dict[str, bytes] = {}  # durable part documents (keep_documents)
        self._head: tuple[dict[str, Any], Position] | None = None  # durable manifest's
        self._legacy: Checkpoint | None = None  # a loaded version-1 checkpoint (keep_documents)

    def load(self) -> Checkpoint | None:
        """Load the current checkpoint (see :func:`load_checkpoint`) and start from it."""
        got = _read(self.store, self.key)
        self._seeded, self._dirty, self._legacy, self._head = True, set(), None, None
        if got is None:
            self._refs, self._clean, self._docs = {}, set(), {}
            return None
        ckpt, self._refs, docs = got
        self._clean = set(self._refs)
        if self.keep_documents:
            self._docs = docs
            if ckpt.version == 1:
                self._legacy = ckpt
            else:
                head = {k: v for k, v in ckpt.snapshot.items() if k not in ("suites", "selection")}
                self._head = (head, ckpt.position)
        return ckpt

    def durable(self) -> Checkpoint | None:
        """Rebuild the last durable checkpoint from the kept documents (``keep_documents``)."""
        if not self.keep_documents:
            raise RuntimeError("durable() needs keep_documents=True")
        if self._head is None:
            return self._legacy
        snapshot: dict[str, Any] = {**self._head[0], "suites": []}
        for name in self._refs:
            state = json.loads(self._docs[name])["state"]
            if name == _SELECTION:
                snapshot["selection"] = state
            else:
                snapshot["suites"].append(state)
        return Checkpoint(snapshot, dict(self._head[1]), MANIFEST_VERSION)

    def prepare(self, engine: Engine, position: Position) -> _Pending:
        """Take the engine's changes and encode its changed parts (call under its lock).

        Parts are snapshot and encoded one at a time: the memory a checkpoint needs beyond
        the engine is its encoded documents, never a second copy of the whole state as objects.

        Raises
        ------
        PartTooLargeError
            A suite's document exceeds ``max_part_bytes`` (nothing is written).
        """
        if not self._seeded:  # never overwrite a slot the store's manifest references
            refs = _read_refs(self.store, self.key)
            self._clean = {n for n in self._clean if refs.get(n) == self._refs.get(n)}
            self._refs, self._seeded = refs, True
        self._dirty |= engine.changed
        engine.changed = set()
        order = engine.part_names()
        head = engine.snapshot(parts=())
        del head["suites"]
        docs: dict[str, tuple[int, str, bytes]] = {}
        engine.settle([n for n in order if n in self._dirty or n not in self._clean])
        for name in order:
            if name not in self._dirty and name in self._clean:
                continue
            state = (engine.snapshot(parts=(_SELECTION,))["selection"] if name == _SELECTION
                     else engine.suites[name].to_dict())
            gen = self._refs[name][0] + 1 if name in self._refs else 0
            data, digest = _part_document(self.key, name, gen, state)
            del state
            self.encoded_parts += 1
            if self.max_part_bytes is not None and len(data) + _HMAC_ROOM > self.max_part_bytes:
                raise PartTooLargeError(
                    f"cannot checkpoint {_part_name(name)}: its document is {len(data)} bytes, "
                    f"above the per-suite limit of {self.max_part_bytes - _HMAC_ROOM} bytes "
                    f"(kafka.checkpoint_max_bytes less {_HMAC_ROOM} for the HMAC): split the "
                    "suite, lower its dedupe/pending limits, or raise the limit")
            docs[name] = (gen, digest, data)
        return _Pending(head, dict(position), order, docs)

    def commit(self, pending: _Pending) -> SaveStats:
        """Write the prepared part documents, then the manifest (see the module docstring)."""
        if not set(pending.order) <= set(pending.docs) | self._clean or any(
                gen != (self._refs[n][0] + 1 if n in self._refs else 0)
                for n, (gen, _, _) in pending.docs.items()):
            raise CheckpointError("prepared before the writer was reset; prepare again")
        writes = [(part_key(self.key, n, gen), data) for n, (gen, _, data) in pending.docs.items()]
        new = {n: (gen, digest) for n, (gen, digest, _) in pending.docs.items()}
        refs = {n: new[n] if n in new else self._refs[n] for n in pending.order}
        manifest = {"format": CHECKPOINT_FORMAT, "version": MANIFEST_VERSION, "key": self.key,
                    "position": pending.position, "written_at": pending.written_at,
                    "engine": pending.head, "parts": [[n, *refs[n]] for n in pending.order]}
        manifest["sha256"] = sha256(canonical_json(manifest).encode("ascii")).hexdigest()
        blob = canonical_json(manifest).encode("ascii")
        try:
            if writes:
                save_many(self.store, writes)
            self.store.save(self.key, blob)  # the commit point
        except BaseException:
            self._seeded = False  # the manifest may have landed after all: read it next time
            raise
        self._refs, self._clean = refs, set(refs)
        self._dirty -= set(pending.docs)
        if self.keep_documents:
            self._docs = {n: pending.docs[n][2] if n in pending.docs else self._docs[n]
                          for n in refs}
            self._head, self._legacy = (pending.head, pending.position), None
        return SaveStats(len(writes), len(pending.order),
                         sum(len(d) for _, d in writes) + len(blob), len(blob))

    def save(self, engine: Engine, position: Position) -> SaveStats:
        """:meth:`prepare` then :meth:`commit` (when no other thread uses the engine)."""
        return self.commit(self.prepare(engine, position))
