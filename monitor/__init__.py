"""certmon core: statistics, state, checkpoints, metrics and alerts (no I/O wiring)."""
