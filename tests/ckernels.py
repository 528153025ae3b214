"""Loading the optional compiled kernels in tests.

``CERTMON_REQUIRE_CKERNELS=1`` (set by ``.ci/run``) turns a missing kernel into a failure
instead of a skip: CI must show the compiled path was built and compared with the Python one.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def load(name: str) -> ModuleType:
    """Import the compiled module ``name`` or skip (fail under ``CERTMON_REQUIRE_CKERNELS=1``)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if os.environ.get("CERTMON_REQUIRE_CKERNELS") == "1":
            pytest.fail(f"CERTMON_REQUIRE_CKERNELS=1 but {name} is not built: {exc}",
                        pytrace=False)
        pytest.skip(f"{name} not built (no C compiler at install): {exc}")
