#!/usr/bin/env python3
"""Checks what no tool here can run: compose, Kubernetes manifests, the Dockerfile and the
Grafana dashboards — parsed, cross-referenced, and held to the project's conventions."""
import glob
import json
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICES = {"scorer": 9101, "aggregator": 9102, "alerter": 9103, "lake-writer": 9104, "profiler": 9105, "ingest": 9106, "web": 9107}
PARTITIONS = 4
errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def path(*p):
    return os.path.join(ROOT, *p)


# --- compose ---
compose = yaml.safe_load(open(path("deploy", "compose.yaml")))
svcs = compose["services"]
kafka = svcs["kafka"]["environment"]
check("broker,controller" in str(kafka.get("KAFKA_PROCESS_ROLES")), "compose: Kafka runs in KRaft mode")
check("KAFKA_ZOOKEEPER_CONNECT" not in kafka, "compose: no ZooKeeper")
for name, port in SERVICES.items():
    s = svcs.get(name)
    check(s is not None, f"compose: service {name}")
    if s:
        env = s.get("environment", {})
        prefix = "OCTANT_" + name.upper().replace("-", "_")
        check(env.get(f"{prefix}__KAFKA__BROKERS") == "kafka:9092", f"compose: {name} talks to kafka:9092")
        check(env.get(f"{prefix}__ADMIN_ADDR") == f"0.0.0.0:{port}", f"compose: {name} admin on {port}")
        check(s.get("command", [None])[0] == f"octant-{name}", f"compose: {name} runs octant-{name}")
for name in ("prometheus", "alertmanager", "grafana", "fleet"):
    check(name in svcs, f"compose: service {name}")
for name, s in svcs.items():
    for v in s.get("volumes", []):
        src = v.split(":")[0]
        if src.startswith("."):
            check(os.path.exists(path("deploy", src)), f"compose: {name} mounts {src}, which exists")
prom = yaml.safe_load(open(path("deploy", "prometheus", "prometheus.yml")))
targets = {t for job in prom["scrape_configs"] for sc in job.get("static_configs", []) for t in sc["targets"]}
for name, port in SERVICES.items():
    check(f"{name}:{port}" in targets, f"prometheus.yml scrapes {name}:{port}")

# --- Kubernetes ---
kdir = path("deploy", "kubernetes")
kust = yaml.safe_load(open(os.path.join(kdir, "kustomization.yaml")))
docs = []
for r in kust["resources"]:
    check(os.path.exists(os.path.join(kdir, r)), f"kustomization: {r} exists")
    for d in yaml.safe_load_all(open(os.path.join(kdir, r))):
        if d:
            check(all(k in d for k in ("apiVersion", "kind", "metadata")), f"{r}: apiVersion, kind, metadata")
            docs.append((r, d))
for f in glob.glob(os.path.join(kdir, "*.yaml")):
    check(os.path.basename(f) in kust["resources"] or f.endswith("kustomization.yaml"), f"kustomization lists {os.path.basename(f)}")
deployments = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Deployment"}
k8s_services = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Service"}
for name, port in SERVICES.items():
    dep = deployments.get(name)
    check(dep is not None, f"kubernetes: Deployment {name}")
    if not dep:
        continue
    spec = dep["spec"]
    check(1 <= spec["replicas"] <= PARTITIONS, f"kubernetes: {name} replicas ≤ {PARTITIONS} partitions")
    tmpl = spec["template"]
    check(spec["selector"]["matchLabels"].items() <= tmpl["metadata"]["labels"].items(), f"kubernetes: {name} selector matches its pods")
    check(tmpl["metadata"]["annotations"].get("prometheus.io/port") == str(port), f"kubernetes: {name} scrape annotation on {port}")
    c = tmpl["spec"]["containers"][0]
    check(c["command"] == [f"octant-{name}"], f"kubernetes: {name} runs octant-{name}")
    check(any(p["containerPort"] == port for p in c["ports"]), f"kubernetes: {name} exposes {port}")
    check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", f"kubernetes: {name} readiness on /readyz")
    svc = k8s_services.get(name)
    check(svc is not None and svc["spec"]["ports"][0]["port"] == port, f"kubernetes: Service {name} on {port}")
check(deployments.get("profiler", {}).get("spec", {}).get("replicas") == 1, "kubernetes: one profiler")
check(any(d["kind"] == "PodMonitor" for _, d in docs), "kubernetes: a PodMonitor")
# Lake maintenance: a daily CronJob running `octant lake maintain` on the lake writers' volume.
jobs = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "CronJob"}
maintain = jobs.get("lake-maintain", {}).get("spec", {})
mjob = maintain.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec", {})
mcmd = (mjob.get("containers") or [{}])[0].get("command", [])
check(mcmd[:3] == ["octant", "lake", "maintain"] and "--lake" in mcmd, "kubernetes: a CronJob runs octant lake maintain")
check(maintain.get("concurrencyPolicy") == "Forbid", "kubernetes: one lake maintenance at a time")
check(len(maintain.get("schedule", "").split()) == 5, "kubernetes: lake maintenance has a cron schedule")
writer_claims = {v["persistentVolumeClaim"]["claimName"] for v in deployments.get("lake-writer", {}).get("spec", {}).get("template", {}).get("spec", {}).get("volumes", []) if "persistentVolumeClaim" in v}
check({v.get("persistentVolumeClaim", {}).get("claimName") for v in mjob.get("volumes", [])} == writer_claims, "kubernetes: lake maintenance mounts the lake writers' volume")
# The web view only reads: the lake and the evidence packages mounted read-only, a token.
web = deployments.get("web", {}).get("spec", {}).get("template", {}).get("spec", {})
mounts = {m["name"]: m for m in (web.get("containers") or [{}])[0].get("volumeMounts", [])}
check(all(m.get("readOnly") for m in mounts.values()) and {"lake", "evidence"} <= set(mounts), "kubernetes: web mounts the lake and evidence read-only")
env_names = {e["name"] for e in (web.get("containers") or [{}])[0].get("env", [])}
check("OCTANT_WEB__API_TOKEN" in env_names, "kubernetes: web takes a token")
check(svcs.get("web", {}).get("environment", {}).get("OCTANT_WEB__API_TOKEN") is not None, "compose: web takes a token")
check(all(v.endswith(":ro") for v in svcs.get("web", {}).get("volumes", [])), "compose: web mounts read-only")

# --- Dockerfile ---
docker = open(path("deploy", "Dockerfile")).read()
for name in SERVICES:
    check(f"target/release/octant-{name}" in docker, f"Dockerfile: copies octant-{name}")
    check(os.path.exists(path("services", name, "src", "main.rs")), f"services/{name} has a binary")
check(re.search(r"^FROM rust:\S+ AS build", docker, re.M) is not None, "Dockerfile: a Rust build stage")

# --- dashboards ---
dashboards = sorted(glob.glob(path("dashboards", "*.json")))
expected = ["agents-families.json", "drafting-review.json", "evaluation.json", "fleet-profile.json", "pipeline-health.json", "safety-oversight.json"]
check([os.path.basename(f) for f in dashboards] == expected, f"the dashboards {expected}")
uids = set()
for f in dashboards:
    d = json.load(open(f))
    name = os.path.basename(f)
    check(d.get("schemaVersion", 0) >= 39, f"{name}: schemaVersion ≥ 39")
    check(d["uid"] not in uids, f"{name}: unique uid")
    uids.add(d["uid"])
    vars_ = {v["name"]: v for v in d["templating"]["list"]}
    check(vars_.get("datasource", {}).get("type") == "datasource", f"{name}: datasource variable")
    ids = set()
    for p in d["panels"]:
        check(p["id"] not in ids, f"{name}: unique panel id {p['id']}")
        ids.add(p["id"])
        check(p["datasource"]["uid"] == "${datasource}", f"{name}/{p['title']}: panel datasource is the variable")
        check(p["targets"], f"{name}/{p['title']}: has queries")
        for t in p["targets"]:
            check(t.get("expr") and t.get("refId"), f"{name}/{p['title']}: target with expr and refId")
            check(t["datasource"]["uid"] == "${datasource}", f"{name}/{p['title']}: target datasource is the variable")
        g = p["gridPos"]
        check(0 <= g["x"] and g["x"] + g["w"] <= 24, f"{name}/{p['title']}: fits the 24-column grid")

if errors:
    print("deploy/check_manifests: FAILED", *errors, sep="\n  ", file=sys.stderr)
    sys.exit(1)
print(f"deploy/check_manifests: compose ({len(svcs)} services), kubernetes ({len(docs)} objects), Dockerfile, {len(dashboards)} dashboards: ok")
