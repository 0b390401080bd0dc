#!/usr/bin/env bash
# The whole test suite: installs what is missing, configures, builds and runs every test of the
# `dev` preset (Debug, AddressSanitizer + UndefinedBehaviorSanitizer) in one CMake workflow.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --workflow --preset dev
