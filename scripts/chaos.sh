#!/usr/bin/env bash
# `make chaos`: the two chaos runs of issue 12 at the same time (one NATS, and a 3-server
# JetStream cluster), each a pytest process of its own with its temporary files (engine logs,
# NATS stores) under .masa/test/, where they stay for a look after a failure.
# Usage: scripts/chaos.sh RUNNER (e.g. "uv run --frozen"), from the Makefile.
set -uo pipefail
cd "$(dirname "$0")/.."
runner="${1:?usage: scripts/chaos.sh RUNNER}"
logs=.masa/test
mkdir -p "$logs"
chaos=services/table_engine/tests/test_engine_chaos.py

pids=()
for name in one-nats nats-cluster; do
  # shellcheck disable=SC2086 # the runner is a command with its arguments
  $runner pytest -q -s -p no:cacheprovider -m chaos -k "$name" --basetemp="$logs/tmp-$name" \
    "$chaos" >"$logs/chaos-$name.log" 2>&1 &
  pids+=($!)
done
failed=0
for index in 0 1; do
  wait "${pids[$index]}" || failed=1
done
for name in one-nats nats-cluster; do
  echo "--- chaos, $name (.masa/test/chaos-$name.log)"
  tail -n 20 "$logs/chaos-$name.log"
done
exit "$failed"
