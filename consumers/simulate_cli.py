"""``certmon simulate``: write a synthetic event stream (paper Example 1 and its variants) as JSONL.

Errors in ``--model`` / ``--strata`` specs or the spec itself are one-line ``ConfigError``s.

Examples
--------
>>> from consumers.cli import main
>>> main(["simulate", "--out", "/dev/null", "--examples", "3", "--model", "a:0.1:0.9"])
0
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from monitor.errors import CertmonError, ConfigError
from monitor.simulate import DEFAULT_MODELS, SimModel, SimStratum, SimulationSpec, iter_jsonl

__all__ = ["cmd_simulate"]

def _parse_model(text: str) -> SimModel:
    try:
        return SimModel.parse(text)
    except ValueError as exc:
        raise ConfigError(f"--model {text!r}: {exc}") from None


def _parse_stratum(text: str) -> SimStratum:
    try:
        return SimStratum.parse(text)
    except ValueError as exc:
        raise ConfigError(f"--strata {text!r}: {exc}") from None


def _spec(args: argparse.Namespace, examples: int, models: tuple[SimModel, ...]) -> SimulationSpec:
    strata = tuple(_parse_stratum(t) for t in getattr(args, "strata", None) or ())
    try:
        return SimulationSpec(
            suite=args.suite,
            models=models,
            examples=examples,
            audit_rate=args.audit_rate,
            audit_mode=args.audit_mode,
            audit_salt=args.audit_salt,
            label_delay_mean=args.label_delay,
            label_first_fraction=args.label_first,
            unsolicited_rate=args.unsolicited,
            drift_at=args.drift_at,
            ts_format=args.ts_format,
            max_events=args.events,
            strata=strata,
            label_all=bool(getattr(args, "label_all", False)),
        )
    except ValueError as exc:
        raise ConfigError(f"simulate: {exc}") from None


def cmd_simulate(args: argparse.Namespace) -> int:
    """Write a synthetic event stream as JSONL."""
    models = tuple(_parse_model(m) for m in args.model) if args.model else DEFAULT_MODELS
    examples = args.examples
    if examples is None:
        labelled = 1.0 if args.label_all else args.audit_rate + args.unsolicited
        per_example = len(models) * (1 + labelled)
        examples = int((args.events or 10_000 * per_example) / per_example * 1.05) + 10
    spec = _spec(args, examples, models)
    rng = np.random.default_rng(args.seed)
    n = 0
    try:
        to_stdout = args.out == "-"
        out = sys.stdout.buffer if to_stdout else open(args.out, "wb")  # noqa: SIM115
    except OSError as exc:
        raise CertmonError(f"cannot write {args.out}: {exc.strerror}") from None
    try:
        buf: list[bytes] = []
        for line in iter_jsonl(spec, rng):
            buf.append(line)
            n += 1
            if len(buf) >= 4096:
                out.write(b"".join(buf))
                buf.clear()
        out.write(b"".join(buf))
        out.flush()
    finally:
        if not to_stdout:
            out.close()
    if args.out != "-":
        print(f"certmon: wrote {n} events to {args.out}", file=sys.stderr)
    return 0
