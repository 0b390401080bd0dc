#!/usr/bin/env bash
# The regression baseline under results/ (docs/results.md, "Regression baselines"):
#   bash scripts/baseline.sh check    every scenario's predictions against the committed ones;
#                                     a table of what moved beyond 0.5 %, exit 1 if anything did
#   bash scripts/baseline.sh update   writes them as the new baseline, with runtime.json and the
#                                     plots; commit results/ together with the change that moved it
# Installs what is missing and builds the release skbsim first; extra arguments go to
# `skbsim baseline`.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  check | update) ;;
  *)
    echo "usage: bash scripts/baseline.sh check|update [skbsim baseline options]" >&2
    exit 2
    ;;
esac
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target skbsim >/dev/null
exec build/release/sim/skbsim baseline "--$1" "${@:2}"
