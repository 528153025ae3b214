"""Fail unless a JUnit XML report shows tests under a directory ran and none of them skipped."""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("report")
    parser.add_argument("--require-dir", required=True, help="e.g. tests/kafka")
    parser.add_argument("--min", type=int, default=1, help="minimum number of tests that passed")
    args = parser.parse_args()
    prefix = args.require_dir.strip("/").replace("/", ".") + "."
    passed = skipped = failed = 0
    for case in ET.parse(args.report).getroot().iter("testcase"):
        if not case.get("classname", "").startswith(prefix):
            continue
        if case.find("skipped") is not None:
            skipped += 1
        elif case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        else:
            passed += 1
    print(f"{args.require_dir}: {passed} passed, {failed} failed, {skipped} skipped")
    if skipped or failed or passed < args.min:
        print(f"error: {args.require_dir} must run (>= {args.min} passed, none skipped)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
