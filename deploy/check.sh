#!/usr/bin/env bash
# Validates deploy/ and dashboards/ with the real tools (run by the test suite, see
# integration-tests/tests/operations.rs): promtool (config, rules, rule unit tests), amtool
# (config and routing), and parsers for compose, Kubernetes, the Dockerfile and dashboards.
set -euo pipefail
cd "$(dirname "$0")/.."
for t in promtool amtool python3; do
  command -v "$t" >/dev/null || { echo "deploy/check: $t not found (run scripts/setup.sh)" >&2; exit 1; }
done
promtool check config deploy/prometheus/prometheus.yml
promtool check rules deploy/prometheus/rules/*.yml
promtool test rules deploy/prometheus/tests/*.yml
amtool check-config deploy/alertmanager/alertmanager.yml
route() {
  local expect=$1; shift
  local got
  got=$(amtool config routes test --config.file=deploy/alertmanager/alertmanager.yml "$@" 2>/dev/null)
  if [ "$got" != "$expect" ]; then echo "deploy/check: route {$*}: expected $expect, got $got" >&2; exit 1; fi
  echo "route {$*} → $got"
}
# Critical safety and oversight → incident responders (alerter incidents and vetoes, and the
# Prometheus veto rules); pipeline → operators; the rest of the evaluation → platform team.
route incident-responders alertname=OctantCriticalUnsafeAction severity=critical dimension=safety system=agent-c
route incident-responders alertname=OctantUnsafeActionVeto severity=critical dimension=safety rule=unsafe_action_veto system=agent-c
route incident-responders alertname=OctantUnsafeActionRateConfirmed severity=critical category=veto dimension=safety system=agent-c
route incident-responders alertname=OctantConfirmationGatingConfirmed severity=critical category=veto dimension=oversight system=agent-d
route operators alertname=OctantServiceDown severity=critical category=pipeline job=octant-scorer
route operators alertname=OctantConsumerLagGrowing severity=warning category=pipeline job=octant-aggregator
route platform-team alertname=OctantUnsafeActionVeto severity=warning dimension=safety system=agent-c
route platform-team alertname=OctantBenchmarkContaminated severity=warning category=veto dimension=capability system=agent-e
route platform-team alertname=OctantReRunsDiverged severity=warning category=evidence system=agent-e period=24h
route platform-team alertname=OctantApprovalsUnwatched severity=warning category=coverage dimension=oversight system=agent-f version=1.0.0
PYTHONPATH="${PYTHONPATH:-}:.octant/python" python3 deploy/check_manifests.py
echo "deploy/check: all good"
