r"""``certmon config``: print the effective configuration, every default filled in.

Reads ``--config FILE`` (or, without it, the built-in demo configuration that ``certmon demo``
runs), applies the ``--set`` overrides, validates, and prints every key with its value as
TOML (``--json`` for JSON). Secrets are masked. The key reference is ``docs/configuration.md``.

Examples
--------
>>> import argparse, contextlib, io
>>> sub = argparse.ArgumentParser().add_subparsers()
>>> register(sub, '[[suites]]\n[[suites.certificates]]\nname = "r"\nalpha = 0.1\n'
...               'delta = 0.1\n')
>>> args = sub.choices["config"].parse_args(["--json", "--set", "metrics.port=9200"])
>>> out = io.StringIO()
>>> with contextlib.redirect_stdout(out):
...     rc = args.func(args)
>>> rc, '"port": 9200' in out.getvalue()
(0, True)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from monitor.config import load_config, parse_config
from monitor.config.effective import effective_json, effective_toml

__all__ = ["register"]

_DESCRIPTION = """\
Print the effective configuration: every key with its value, defaults filled in, after the
--set overrides, as TOML (or JSON with --json). Keys without a value are shown as comments
(TOML) or null (JSON); secrets are masked. Without --config, the built-in configuration of
`certmon demo` is shown. Every key is described in docs/configuration.md.
"""


def register(sub: Any, default_toml: str) -> None:
    """Add ``certmon config`` to ``certmon``'s subparsers (``default_toml``: without --config)."""
    c = sub.add_parser("config", help="print the effective configuration (defaults filled in)",
                       description=_DESCRIPTION)
    c.add_argument("--config", help="TOML configuration file (default: the built-in demo "
                                     "configuration)")
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (dotted path; TOML value)")
    c.add_argument("--json", action="store_true", help="print JSON instead of TOML")
    c.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show tracebacks on errors")

    def cmd_config(args: argparse.Namespace) -> int:
        if args.config:
            config, source = load_config(args.config, args.overrides), args.config
        else:
            source = "<built-in demo config>"
            config = parse_config(default_toml, args.overrides, source=source)
        if args.json:
            sys.stdout.write(effective_json(config))
        else:
            header = (f"certmon effective configuration of {source}, defaults filled in\n"
                      "keys marked (unset) have no value; reference: docs/configuration.md")
            sys.stdout.write(effective_toml(config, header=header))
        return 0

    c.set_defaults(func=cmd_config)
