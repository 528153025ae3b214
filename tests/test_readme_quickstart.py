"""README.md's Quickstart, run as written (the ``pip install`` line aside: this checkout is the
installed one), in a scratch directory; and its event example is valid JSONL, one event per line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from monitor.events import Rejection, decode_event

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def quickstart_commands() -> list[str]:
    (block,) = re.findall(r"```bash\n(.*?)```", section("Quickstart"), re.S)[:1]
    return [c.strip() for c in block.replace("\\\n", " ").splitlines() if c.strip()]


def test_readme_links_stay_inside_the_repository() -> None:
    assert "../shared" not in README
    for target in re.findall(r"\]\(([^)#:]+)\)", README):
        assert (ROOT / target).exists(), target


def test_paths_named_in_the_readmes_exist() -> None:
    """Every repository path a reader is pointed to (links and `code` paths) exists, in
    README.md and deploy/README.md; runtime outputs (ckpt-run/, the test cache
    .cache/grafana-schema) and formulas (1/delta) aside."""
    runtime = {"ckpt-run/", "1/delta", ".cache/grafana-schema"}
    for readme in (ROOT / "README.md", ROOT / "deploy" / "README.md"):
        text = readme.read_text()
        links = re.findall(r"\]\(([^)#:]+)\)", text)
        paths = re.findall(r"`([A-Za-z0-9_.-]+/[A-Za-z0-9_./-]*)`", text)
        for target in {*links, *paths} - runtime:
            assert (readme.parent / target).exists() or (ROOT / target).exists(), (
                f"{readme.relative_to(ROOT)} names {target}, which is not in the repository")


def test_first_screen_commands() -> None:
    """The two commands above the fold: `pip install -e . && certmon demo` (the Quickstart test
    runs `certmon demo`) and `bash scripts/test.sh` (what CI's .ci/run runs)."""
    first = re.findall(r"```bash\n(.*?)```", README, re.S)[0]
    commands = [line.split("#")[0].strip() for line in first.splitlines() if line.strip()]
    assert commands == ["pip install -e . && certmon demo", "bash scripts/test.sh"]
    assert "certmon demo" in [c.split("#")[0].strip() for c in quickstart_commands()]
    assert (ROOT / "scripts" / "test.sh").is_file()
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_event_example_is_one_valid_event_per_line() -> None:
    (block,) = re.findall(r"```json\n(.*?)```", README[README.index("### Events"):], re.S)[:1]
    lines = block.strip().splitlines()
    assert len(lines) == 2
    for line in lines:
        json.loads(line)
        assert not isinstance(decode_event(line.encode(), 65536), Rejection), line


def scrape_received(url: str) -> float:
    with urllib.request.urlopen(url, timeout=2) as resp:
        text = resp.read().decode()
    match = re.search(r"^certmon_events_received_total (\S+)$", text, re.M)
    return float(match.group(1)) if match else -1.0


def test_quickstart_runs_as_written(tmp_path: Path) -> None:
    if shutil.which("certmon") is None:
        pytest.fail("certmon is not on PATH: pip install -e . first (the README's first line)")
    commands = quickstart_commands()
    assert commands[0] == "pip install -e ."
    run_at = next(i for i, c in enumerate(commands) if c.startswith("certmon run "))
    assert run_at == len(commands) - 1
    where = tmp_path / "where"
    script = "\n".join(["set -euo pipefail", *commands[1:run_at], f'pwd > "{where}"'])
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    before = set(os.listdir(ROOT))
    proc = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=240, check=False)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert set(os.listdir(ROOT)) == before, "the Quickstart wrote into the repository"
    scratch = Path(where.read_text().strip())
    assert scratch.parent == tmp_path
    assert "summary (" in proc.stdout  # the demo ran to its summary
    assert "sha256 ok" not in proc.stdout and "demo/good" in proc.stdout  # inspect STATE.json
    state = json.loads((scratch / "STATE.json").read_text())
    assert state["counters"]["events_in"] == 200_000
    assert list((scratch / "ckpt").glob("*.ckpt.json"))
    assert (scratch / "alerts.jsonl").read_text().strip()

    # `certmon run` follows events.jsonl until stopped (Ctrl-C); no Kafka, no compose.
    run = subprocess.Popen(
        ["bash", "-c", f'REPO="{ROOT}"; cd "{scratch}"; exec {commands[run_at].split("#")[0]}'],
        env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert run.stderr is not None
        first = run.stderr.readline()
        match = re.search(r"metrics on (http://\S+)", first)
        assert match, first
        deadline = time.monotonic() + 60
        while scrape_received(match.group(1)) < 200_000:
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        with open(scratch / "events.jsonl", "ab") as fh:  # appended lines are followed
            fh.write(b'{"type": "judge", "event_id": "late", "suite": "demo", "model": "good", '
                     b'"example_id": "late", "loss": 0.0, "ts": 1795248000.5}\n')
        while scrape_received(match.group(1)) < 200_001:
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        run.send_signal(signal.SIGINT)
        rc = run.wait(30)
        rest = run.stderr.read()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(10)
    assert rc == 0, rest
    assert "stopped after 200001 events" in rest
    assert list((scratch / "ckpt-run").glob("*.ckpt.json"))
