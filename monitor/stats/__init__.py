"""Pure statistics for certmon: numpy only, no I/O, JSON-serializable state."""
