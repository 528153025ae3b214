"""The command line's argparse pieces.

One-line usage errors, defaults in the help, a ``--version`` that looks the version up only
when asked (not at every start).

Examples
--------
>>> p = OneLineErrorParser(prog="certmon", formatter_class=HelpFormatter)
>>> _ = p.add_argument("--version", action=VersionAction, help="print the version")
>>> p.prog
'certmon'
"""

from __future__ import annotations

import argparse
from typing import NoReturn

__all__ = ["HelpFormatter", "OneLineErrorParser", "VersionAction"]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help showing ``(default: X)`` for options whose default is a value.

    Options without a default (``None``), flags (``False``) and helps that already say
    their default are left as written.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


class VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (not at every start)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        """Print ``certmon VERSION`` on stdout and exit 0."""
        from monitor.metrics.operational import package_version

        print(f"certmon {package_version()}")  # on stdout, as argparse's "version" action
        parser.exit()


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage errors as one line (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        """Exit 2 with one line: the message and where to find help."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
