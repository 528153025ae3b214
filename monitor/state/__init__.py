"""Per-suite and per-model streaming state: dedupe, audit, join, rounds, multiplicity."""
