#!/usr/bin/env bash
# The main job, end to end: installs what is missing, builds the release `skbsim`, and runs the
# 2007 thread's container scenario: netperf's figures next to the measured ones (extra flags,
# e.g. --profile or --trace 100, are passed on).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target skbsim >/dev/null
exec build/release/sim/skbsim run scenarios/thread2007/container.json "$@"
