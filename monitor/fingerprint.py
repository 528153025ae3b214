"""The configuration fingerprint a checkpoint carries: which settings shape the state.

A checkpoint restores only under a configuration with the same fingerprint
(:meth:`monitor.engine.Engine.restore`); settings that only decide what is dead-lettered or how
results are exported are left out, so they can be tuned across a restart.
"""

from __future__ import annotations

from hashlib import sha256
from typing import Any

from monitor.checkpoint import canonical_json
from monitor.config import CertmonConfig

__all__ = ["config_fingerprint", "fingerprint_hint"]

_GRID_HINT = (" (this checkpoint predates cs_kind: set cs_kind = \"grid\" in its certificates "
              "to resume it)")
_SWITCH_HINT = (" (this checkpoint predates cap_switch: set cap_switch = false in its "
                "certificates to resume it)")


def config_fingerprint(config: CertmonConfig) -> str:
    r"""Hash of the parts of the configuration that shape the state (suites, event limits).

    Examples
    --------
    >>> from monitor.config import parse_config
    >>> base = "[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\n"
    >>> a = config_fingerprint(parse_config(base))
    >>> a == config_fingerprint(parse_config(base, ["metrics.port=1"]))
    True
    >>> a == config_fingerprint(parse_config(base, ["suites.0.audit_rate=0.2"]))
    False
    """
    # the event-time bound and the cardinality limits only decide what is dead-lettered, the
    # memory budget what is evicted next: tunable across a restart
    doc = config.model_dump(mode="json", include={"suites", "events"},
                            exclude={"events": {"max_ts_jump_seconds", "max_id_bytes",
                                                "max_suites", "max_models_per_suite",
                                                "max_models", "max_waiting_units",
                                                "max_dedupe_entries"}})
    # configs from before cs_kind meant the grid, from before cap_switch no switch: same hash
    for suite in doc["suites"]:
        for cert in suite["certificates"]:
            if cert.get("cs_kind") == "grid":
                del cert["cs_kind"]
            if cert.get("cap_switch") is False:
                del cert["cap_switch"]
    return sha256(canonical_json(doc).encode("ascii")).hexdigest()



def fingerprint_hint(snapshot: dict[str, Any]) -> str:
    """Return a hint for a refused snapshot whose certificates predate a setting (or "").

    The settings: ``cs_kind`` (then the wealth grid) and ``cap_switch`` (then no switch cell).
    """
    configs = [g["config"] for s in snapshot.get("suites", [])
               for m in s.get("models", []) for _, g in m.get("groups", [])
               if isinstance(g, dict) and isinstance(g.get("config"), dict)]
    hint = _GRID_HINT if any("cs_kind" not in c for c in configs) else ""
    if any(isinstance(c.get("bet"), dict) and "cap_switch" not in c["bet"] for c in configs):
        hint += _SWITCH_HINT
    return hint
