"""Panel building blocks of certmon's Grafana dashboards (used by build_dashboards.py).

Plain functions returning the JSON of Grafana panels, variables and dashboards; the dashboards
themselves (which panels, which queries) are in ``build_dashboards.py``.
"""

from __future__ import annotations

from typing import Any

DS = {"type": "prometheus", "uid": "${datasource}"}

# What a stat shows without data: certmon down or not scraped, never a made-up 0.
NO_VALUE = "no data"
# What an empty panel means, when its own description does not say more.
EMPTY_SERIES = (" Empty: no certmon target was scraped in the time range, or the selection has "
                "no such series yet (no event of that model).")
EMPTY_STAT = (' "no data": no certmon target is scraped, or the selection has no such series '
              "yet.")


def says_empty(description: str, default: str) -> str:
    """Return ``description`` plus ``default``, unless it already says what empty means."""
    lower = description.lower()
    return description if "empty" in lower or "no data" in lower else (
        description + default).strip()
class Layout:
    """Places panels on Grafana's 24-column grid, row after row."""

    def __init__(self) -> None:
        self.x = self.y = self.row_h = 0
        self.next_id = 1
        self.panels: list[dict[str, Any]] = []

    def row(self, title: str) -> None:
        """Start a new full-width row titled ``title``."""
        self.newline()
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def newline(self) -> None:
        """Move to the start of the next line of panels."""
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0

    def add(self, panel: dict[str, Any], w: int, h: int) -> None:
        """Place ``panel`` (w x h grid units) after the previous one."""
        if self.x + w > 24:
            self.newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False,
           fmt: str = "time_series") -> dict[str, Any]:
    """Return a Prometheus query target."""
    out: dict[str, Any] = {"datasource": DS, "expr": expr, "refId": ref,
                           "legendFormat": legend or "__auto", "format": fmt}
    if instant:
        out.update(instant=True, range=False)
    return out


def timeseries(title: str, targets: list[dict[str, Any]], unit: str = "short",
               description: str = "", overrides: list[dict[str, Any]] | None = None,
               stack: bool = False, fill: int = 0, minimum: float | None = None,
               maximum: float | None = None, log_scale: bool = False) -> dict[str, Any]:
    """Return a time-series panel.

    ``log_scale`` gives a log10 y axis, for statistics that span orders of magnitude.
    """
    custom: dict[str, Any] = {"fillOpacity": fill, "lineWidth": 1, "showPoints": "never",
                              "spanNulls": True}
    if log_scale:
        custom["scaleDistribution"] = {"type": "log", "log": 10}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    defaults: dict[str, Any] = {"unit": unit, "custom": custom}
    if minimum is not None:
        defaults["min"] = minimum
    if maximum is not None:
        defaults["max"] = maximum
    return {"type": "timeseries", "title": title,
            "description": says_empty(description, EMPTY_SERIES), "datasource": DS,
            "targets": targets, "fieldConfig": {"defaults": defaults,
                                                "overrides": overrides or []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom", "calcs": [],
                                   "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "none"}}}


def stat(title: str, expr: str, unit: str = "short", description: str = "",
         thresholds: list[tuple[float | None, str]] | None = None,
         mappings: list[dict[str, Any]] | None = None, legend: str = "",
         text_mode: str = "auto") -> dict[str, Any]:
    """Return a stat panel showing the last value of ``expr`` ("no data" when it has none)."""
    steps = [{"value": v, "color": c} for v, c in (thresholds or [(None, "text")])]
    return {"type": "stat", "title": title, "description": says_empty(description, EMPTY_STAT),
            "datasource": DS,
            "targets": [target(expr, legend=legend, instant=True)],
            "fieldConfig": {"defaults": {"unit": unit, "mappings": mappings or [],
                                         "noValue": NO_VALUE,
                                         "thresholds": {"mode": "absolute", "steps": steps}},
                            "overrides": []},
            "options": {"colorMode": "value", "graphMode": "none", "textMode": text_mode,
                        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                          "values": False}}}


def by_name(name: str, props: dict[str, Any]) -> dict[str, Any]:
    """Return a field override for the series or column named ``name``."""
    return {"matcher": {"id": "byName", "options": name},
            "properties": [{"id": k, "value": v} for k, v in props.items()]}


def variable(name: str, query: str, label: str, multi: bool = False) -> dict[str, Any]:
    """Return a query template variable."""
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": f"var-{name}"},
            "refresh": 2, "sort": 1, "multi": multi, "includeAll": multi,
            **({"allValue": ".*"} if multi else {}),
            "options": [], "hide": 0}


def link(title: str, url: str, include_vars: bool = False) -> dict[str, Any]:
    """Return a dashboard link (every field of Grafana's DashboardLink schema set)."""
    return {"title": title, "type": "link", "icon": "dashboard", "url": url, "tooltip": "",
            "tags": [], "asDropdown": False, "targetBlank": False, "keepTime": True,
            "includeVars": include_vars}


def datasource_variable() -> dict[str, Any]:
    """Return the Prometheus data-source template variable."""
    return {"name": "datasource", "label": "Data source", "type": "datasource",
            "query": "prometheus", "hide": 0, "options": [], "refresh": 1,
            "regex": ""}


def dashboard(uid: str, title: str, description: str, panels: list[dict[str, Any]],
              variables: list[dict[str, Any]], links: list[dict[str, Any]]) -> dict[str, Any]:
    """Return a dashboard document."""
    return {"uid": uid, "title": title, "description": description, "tags": ["certmon"],
            "editable": True, "graphTooltip": 1, "refresh": "30s", "schemaVersion": 39,
            "version": 1, "time": {"from": "now-6h", "to": "now"}, "timezone": "browser",
            "templating": {"list": variables}, "annotations": {"list": []}, "links": links,
            "panels": panels}
