from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from monitor.config import load_config, parse_config
from monitor.config.kafka import kafka_config_of

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
K8S = DEPLOY / "k8s"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_compose_services_ports_and_mounts() -> None:
    compose = load(COMPOSE)
    services = compose["services"]
    assert {"kafka", "kafka-init", "certmon", "simulator", "prometheus", "alertmanager",
            "grafana"} <= set(services)
    named_volumes = set(compose.get("volumes") or {})
    host_ports: list[str] = []
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, name
        if "build" in svc:
            assert (DEPLOY / svc["build"]["context"]).is_dir()
            assert (DEPLOY / svc["build"]["context"] / svc["build"]["dockerfile"]).is_file()
        for port in svc.get("ports", []):
            host_ports.append(str(port).split(":")[0])
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in named_volumes, f"{name}: undeclared volume {source}"
        for dep in svc.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown {dep}"
    assert len(host_ports) == len(set(host_ports)), "two services publish the same host port"
    # The certmon port published, scraped and configured is one and the same.
    cfg = load_config(DEPLOY / "certmon" / "certmon.toml")
    assert f"{cfg.metrics.port}:{cfg.metrics.port}" in services["certmon"]["ports"]
    prom = load(DEPLOY / "prometheus" / "prometheus.yml")
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "certmon")
    assert job["static_configs"][0]["targets"] == [f"certmon:{cfg.metrics.port}"]
    assert prom["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == [
        "alertmanager:9093"]


def test_compose_config_with_docker_if_available() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker CLI not installed (compose file parsed and checked above)")
    version = subprocess.run([docker, "compose", "version"], capture_output=True, text=True,
                             timeout=30, check=False)
    if version.returncode != 0:
        pytest.skip("docker compose plugin not installed (compose file parsed and checked)")
    proc = subprocess.run([docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


def test_dockerfile_copies_existing_paths() -> None:
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY") and "--from" not in line:
            for source in line.split()[1:-1]:
                if source != "README.md":  # written by the lead; required by pyproject
                    assert (REPO / source).exists(), source


def test_grafana_provisioning() -> None:
    ds = load(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml")
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    prov = load(DEPLOY / "grafana" / "provisioning" / "dashboards" / "certmon.yml")
    (provider,) = prov["providers"]
    compose = load(COMPOSE)
    mounts = dict(v.split(":")[:2] for v in compose["services"]["grafana"]["volumes"])
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"


def k8s_docs() -> dict[str, dict[str, Any]]:
    docs: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs[doc["kind"]] = doc
    return docs


def test_k8s_manifests_have_required_fields() -> None:
    docs = k8s_docs()
    for kind in ("Namespace", "ConfigMap", "StatefulSet", "Service", "ServiceMonitor",
                 "PrometheusRule", "Kustomization"):
        assert kind in docs, kind
    for kind, doc in docs.items():
        assert doc["apiVersion"], kind
        if kind != "Kustomization":
            assert doc["metadata"]["name"], kind
            if kind != "Namespace":
                assert doc["metadata"]["namespace"] == "certmon", kind
    kustomization = docs["Kustomization"]
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource

    sts, svc, sm = docs["StatefulSet"], docs["Service"], docs["ServiceMonitor"]
    # kube-prometheus-stack selects ServiceMonitors and PrometheusRules by `release` (its Helm
    # release name); without it nothing is scraped and no rule is loaded, silently.
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert docs[kind]["metadata"]["labels"].get("release") == "kube-prometheus-stack", kind
        patches = [p for p in kustomization["patches"] if p["target"]["kind"] == kind]
        assert patches and "/metadata/labels/release" in patches[0]["patch"], kind
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    port_names = {p["name"] for p in container["ports"]}
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= port_names
    assert {e["port"] for e in sm["spec"]["endpoints"]} <= {p["name"] for p in svc["spec"]["ports"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    config_arg = container["args"][container["args"].index("--config") + 1]
    assert config_arg.startswith(mounts["config"] + "/")

    # The ConfigMap's certmon.toml is a valid certmon config, serving on the container port.
    cfg = parse_config(docs["ConfigMap"]["data"]["certmon.toml"])
    assert cfg.metrics.port == next(p["containerPort"] for p in container["ports"])
    # Checkpoints in the compacted topic (checkpoint_store = "kafka"): no [checkpoint] dir,
    # which the Kafka source would ignore; the data volume serves "local" only.
    assert "data" in mounts and cfg.checkpoint.dir is None
    assert kafka_config_of(cfg).checkpoint_store == "kafka"


def test_compose_and_k8s_configs_agree_except_broker() -> None:
    compose_cfg = tomllib.loads((DEPLOY / "certmon" / "certmon.toml").read_text())
    k8s_cfg = tomllib.loads(k8s_docs()["ConfigMap"]["data"]["certmon.toml"])
    for cfg in (compose_cfg, k8s_cfg):
        cfg["kafka"].pop("bootstrap_servers")
        # Both push to an Alertmanager (and link a Grafana), at cluster-specific addresses.
        assert cfg["sinks"]["alerts"][0] == "kafka"
        assert cfg["sinks"]["alerts"][1].startswith("alertmanager:http://")
        cfg["sinks"]["alerts"][1] = "alertmanager:<url>"
        cfg["sinks"]["alertmanager"].pop("grafana_url")
    assert compose_cfg == k8s_cfg


def test_kafka_topics_script_matches_default_topic_names() -> None:
    from monitor.config.kafka import KafkaTopics

    script = (DEPLOY / "kafka" / "create-topics.sh").read_text()
    topics = KafkaTopics()
    for name in (topics.events, topics.alerts, topics.requests, topics.dead_letters,
                 topics.checkpoints):
        assert f"create {name} " in script, name


def _seconds(duration: str) -> float:
    """Compose durations such as ``30s``, ``1m30s``."""
    total, number = 0.0, ""
    for ch in duration:
        if ch.isdigit() or ch == ".":
            number += ch
        else:
            total += float(number) * {"h": 3600, "m": 60, "s": 1}[ch]
            number = ""
    return total + (float(number) if number else 0.0)


def test_grace_periods_cover_the_kafka_shutdown_budget() -> None:
    """SIGTERM ends with a final checkpoint within ``[kafka] shutdown_timeout_seconds``: the
    orchestrator must wait longer than that (with room for the metrics server and the process
    exit) before it sends SIGKILL. The lifecycle settings are spelled out, not defaulted."""

    k8s = k8s_docs()
    configs = {"compose": (DEPLOY / "certmon" / "certmon.toml").read_text(),
               "k8s": k8s["ConfigMap"]["data"]["certmon.toml"]}  # fmt: skip
    grace = {"compose": _seconds(load(COMPOSE)["services"]["certmon"]["stop_grace_period"]),
             "k8s": float(k8s["StatefulSet"]["spec"]["template"]["spec"]
                          ["terminationGracePeriodSeconds"])}  # fmt: skip
    for where, text in configs.items():
        kafka = kafka_config_of(parse_config(text))
        assert grace[where] >= 2 * kafka.shutdown_timeout_seconds + 5, where
        assert {"shutdown_timeout_seconds", "startup_timeout_seconds",
                "max_record_attempts"} <= set(tomllib.loads(text)["kafka"]), where
    assert _seconds("1m30s") == 90.0
