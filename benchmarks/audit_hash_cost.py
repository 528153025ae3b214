"""What the compiled audit hash (``monitor/caudit.c``) saves on a whole `certmon replay`.

Runs the same replay in fresh processes, alternately with the compiled ``monitor.caudit`` and
with it hidden (``sys.modules["monitor.caudit"] = None`` before any import, so
:mod:`monitor.audit` falls back to hashlib: the switch is this script, not a setting), and
reports each mode's CPU time (user + system, from the children's ``rusage``: less sensitive
than wall time to other load on the machine), the number of hashed units, and the per-unit
cost of each form. Both modes must write the same STATE.json (checked).

Usage: python benchmarks/audit_hash_cost.py [--input FILE] [--config examples/minimal.toml]
       [--repeat 5]

Without ``--input`` it simulates the stream once into ``benchmarks/out``:
``certmon simulate --events 1000000 --audit-mode hash --audit-rate 0.05 --seed 1``.
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"

# one replay in a child process; argv: mode ("c" or "pure"), then the replay's arguments
_CHILD = """
import sys
mode = sys.argv.pop(1)
if mode == "pure":
    sys.modules["monitor.caudit"] = None  # import raises ImportError: hashlib path
from monitor import audit
assert (audit.audit_uniform_fast is audit.audit_uniform_prefixed) == (mode == "pure"), mode
from consumers.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _replay(mode: str, config: str, data: Path, state: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", _CHILD, mode, "replay", "--config", config,
                    "--input", str(data), "--state-out", str(state),
                    "--alerts-out", str(state.with_suffix(".alerts.jsonl")), "--quiet"],
                   check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _per_unit_us() -> dict[str, float]:
    from monitor.audit import audit_prefix, audit_uniform_fast, audit_uniform_prefixed
    prefix = audit_prefix("salt", "demo", "model-1")
    ids = [f"ex-{i}" for i in range(200_000)]
    out = {}
    for name, f in (("compiled", audit_uniform_fast), ("hashlib", audit_uniform_prefixed)):
        t = min(timeit.repeat(lambda f=f: [f(prefix, i) for i in ids], number=1, repeat=5))
        out[name] = t / len(ids) * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", type=Path, default=None)
    ap.add_argument("--config", default="examples/minimal.toml")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    data = args.input
    if data is None:
        data = OUT / "audit_hash_1m.jsonl"
        if not data.exists():
            subprocess.run([sys.executable, "-m", "consumers.cli", "simulate", "--out",
                            str(data), "--events", "1000000", "--audit-mode", "hash",
                            "--audit-rate", "0.05", "--seed", "1"], check=True, cwd=ROOT)
    times: dict[str, list[float]] = {"c": [], "pure": []}
    digests = set()
    for _ in range(args.repeat):
        for mode in ("c", "pure"):
            state = OUT / f"audit_hash_state_{mode}.json"
            times[mode].append(_replay(mode, args.config, data, state))
            digests.add(hashlib.sha256(state.read_bytes()).hexdigest())
    if len(digests) != 1:
        raise SystemExit(f"the two modes wrote different states: {digests}")
    judge = sum(1 for line in data.open("rb") if b'"type":"judge"' in line)
    for mode, ts in times.items():
        print(f"{mode:>4}: CPU s min {min(ts):.2f} median {statistics.median(ts):.2f} "
              f"({', '.join(f'{t:.2f}' for t in ts)})")
    saved = statistics.median(times["pure"]) - statistics.median(times["c"])
    print(f"judge events: {judge}; median saving {saved:.2f} s "
          f"= {saved / judge * 1e6:.2f} us per judge event, "
          f"{saved / statistics.median(times['pure']):.1%} of the replay's CPU")
    print("per unit, in-process (us):",
          {k: round(v, 3) for k, v in _per_unit_us().items()})


if __name__ == "__main__":
    main()
