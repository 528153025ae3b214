"""The configuration snippets in README.md must stay valid configurations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitor.config import load_config

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```toml\n(.*?)```", README.read_text(), re.S)


def test_readme_has_config_snippets() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_config_snippet_loads(index: int, tmp_path: Path) -> None:
    text = BLOCKS[index]
    # Snippets may name data files a reader brings (a historical score matrix): drop those keys.
    text = re.sub(r'(?m)^history = ".*"\s*(#.*)?$', "", text)
    path = tmp_path / "snippet.toml"
    path.write_text(text)
    config = load_config(path, [])
    assert config.suites, "a snippet must configure at least one suite"
