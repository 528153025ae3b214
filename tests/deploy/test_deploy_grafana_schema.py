"""The generated dashboards type-check against Grafana's published schema (``@grafana/schema``).

The npm package of the Grafana version in ``deploy/docker-compose.yml`` holds the TypeScript
types Grafana generates from its CUE schema: the dashboard, panels, and each panel plugin's
options and field config. The test installs it (and TypeScript) into ``.cache/grafana-schema``
once, writes every dashboard as a typed TypeScript constant and runs ``tsc --strict --noEmit``:
an unknown key (excess-property check), a wrong type or a value outside an enum fails.
``scripts/test.sh`` installs Node.js and npm when missing; without npm the test skips (fails
with ``CERTMON_REQUIRE_TOOLS=1``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.deploy_support import require_tools

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
CACHE = ROOT / ".cache" / "grafana-schema"
TYPESCRIPT = "5.5.2"
RAW = "@grafana/schema/dist/esm/raw/composable"
# panel type -> module of its options / field-config types
PANEL_TYPES = {
    "stat": f"{RAW}/stat/panelcfg/x/StatPanelCfg_types.gen",
    "timeseries": f"{RAW}/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen",
    "table": f"{RAW}/table/panelcfg/x/TablePanelCfg_types.gen",
    "state-timeline": f"{RAW}/statetimeline/panelcfg/x/StateTimelinePanelCfg_types.gen",
}
# Enums are TypeScript enums; JSON carries their values: accept `${Enum}` (the value union).
PRELUDE = """\
import type { Dashboard, Panel, RowPanel } from '@grafana/schema';
type Json<T> = T extends string ? `${T}` : T extends number | boolean ? T
  : T extends Array<infer U> ? Array<Json<U>> : T extends object ? { [K in keyof T]: Json<T[K]> }
  : T;
// The veneer's Panel<TOptions> does not use TOptions: check options against the plugin's type.
// Partial: Grafana fills the defaults of options a dashboard leaves out (nested ones are full).
type P<O, F> = Omit<Panel<Record<string, unknown>, F>, 'options'> & { options?: Partial<O> };
"""


def grafana_version() -> str:
    compose = (DEPLOY / "docker-compose.yml").read_text()
    match = re.search(r"image:\s*grafana/grafana(?:-oss)?:(\d+\.\d+\.\d+)", compose)
    assert match, "no pinned grafana/grafana image in deploy/docker-compose.yml"
    return match.group(1)


def npm_install(version: str) -> Path:
    """Install @grafana/schema@version and TypeScript into CACHE (once); return tsc's path."""
    npm = shutil.which("npm")
    if npm is None:
        message = "npm not found (apt-get install -y nodejs npm)"
        if require_tools():
            pytest.fail(message)
        pytest.skip(message)
    stamp = CACHE / f"installed-{version}-{TYPESCRIPT}"
    tsc = CACHE / "node_modules" / ".bin" / "tsc"
    if not (stamp.is_file() and tsc.is_file()):
        CACHE.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", "--no-save",
             f"@grafana/schema@{version}", f"typescript@{TYPESCRIPT}"],
            capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, f"npm install failed:\n{proc.stdout}\n{proc.stderr}"
        stamp.write_text("")
    installed = json.loads((CACHE / "node_modules" / "@grafana" / "schema" / "package.json")
                           .read_text())["version"]
    assert installed == version, (installed, version)
    return tsc


def typescript_for(name: str, doc: dict[str, Any]) -> str:
    """A TypeScript module declaring ``doc`` and each of its panels with Grafana's types."""
    lines = [PRELUDE]
    for i, (kind, module) in enumerate(PANEL_TYPES.items()):
        names = f"Options as O{i}" + ("" if kind == "stat" else f", FieldConfig as F{i}")
        lines.append(f"import type {{ {names} }} from '{module}';")
    kinds = list(PANEL_TYPES)
    ident = re.sub(r"\W", "_", name)
    lines.append(f"export const {ident}: Json<Dashboard> = {json.dumps(doc, indent=1)};")
    for panel in doc["panels"]:
        pid = f"{ident}_panel_{panel['id']}"
        if panel["type"] == "row":
            lines.append(f"export const {pid}: Json<RowPanel> = {json.dumps(panel)};")
            continue
        assert panel["type"] in PANEL_TYPES, f"add the types of panel {panel['type']!r}"
        i = kinds.index(panel["type"])
        fields = "Record<string, unknown>" if panel["type"] == "stat" else f"F{i}"
        lines.append(f"export const {pid}: Json<P<O{i}, {fields}>> = {json.dumps(panel)};")
    return "\n".join(lines) + "\n"


def typecheck(tsc: Path, workdir: Path,
              docs: dict[str, dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    files = []
    for name, doc in docs.items():
        path = workdir / f"{Path(name).stem}.ts"
        path.write_text(typescript_for(Path(name).stem, doc))
        files.append(str(path))
    tsconfig = {"compilerOptions": {"strict": True, "noEmit": True, "skipLibCheck": True,
                                    "module": "esnext", "moduleResolution": "bundler",
                                    "target": "es2020", "baseUrl": str(CACHE / "node_modules"),
                                    "typeRoots": [], "types": []},
                "files": files}
    (workdir / "tsconfig.json").write_text(json.dumps(tsconfig))
    return subprocess.run([str(tsc), "-p", str(workdir / "tsconfig.json")], cwd=workdir,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def tsc() -> Path:
    return npm_install(grafana_version())


def test_dashboards_typecheck_against_grafana_schema(tsc: Path, tmp_path: Path) -> None:
    docs = {p.name: json.loads(p.read_text()) for p in DASHBOARDS}
    proc = typecheck(tsc, tmp_path, docs)
    assert proc.returncode == 0, f"dashboards do not match @grafana/schema:\n{proc.stdout}"


@pytest.mark.parametrize("break_it", [
    lambda d: d["panels"][1]["options"].update(colorMode="rainbow"),      # not an enum value
    lambda d: d["panels"][1].update(gridPos={"h": 4, "w": "wide", "x": 0, "y": 0}),
    lambda d: d.update(refresh_every="30s"),                               # unknown key
])
def test_schema_check_can_fail(tsc: Path, tmp_path: Path, break_it: Any) -> None:
    doc = json.loads((DEPLOY / "grafana" / "dashboards" / "certmon-fleet.json").read_text())
    assert doc["panels"][1]["type"] == "stat"
    break_it(doc)
    proc = typecheck(tsc, tmp_path, {"certmon-fleet.json": doc})
    assert proc.returncode != 0
