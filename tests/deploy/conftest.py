"""Fixtures for the deploy tests (helpers live in tests/deploy/deploy_support.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.deploy.deploy_support import CertmonEndpoint, find_tool, start_certmon


@pytest.fixture
def tool() -> Callable[[str], str]:
    """``tool(name)``: path of promtool/prometheus/alertmanager/amtool, else skip (or fail)."""
    return find_tool


@pytest.fixture(scope="session")
def certmon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CertmonEndpoint]:
    """A certmon serving metrics after a small simulated stream (see deploy_support)."""
    endpoint = start_certmon(tmp_path_factory.mktemp("certmon"))
    try:
        yield endpoint
    finally:
        endpoint.close()
