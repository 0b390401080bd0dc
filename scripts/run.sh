#!/usr/bin/env bash
# The main job, end to end: installs what is missing, builds the release `skbsim`, and runs the
# example under scenarios/: the 2.6.20 TCP transmit clone and the skb_cow that copies it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target skbsim >/dev/null
exec build/release/sim/skbsim ops scenarios/ops/tcp_clone_cow_2620.json "$@"
