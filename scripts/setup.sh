#!/usr/bin/env bash
# Installs what skbsim needs on a Debian 12 machine, as root, and does nothing when all of it is
# already there. Called by scripts/run.sh and scripts/test.sh; safe to run by hand. The last line
# of packages is for `skbsim measure` (docs/measure.md) and its smoke test (ctest -L measure),
# which skips, saying why, where they are missing.
set -euo pipefail

packages=(
  g++ cmake ninja-build git
  libboost-dev libboost-program-options-dev
  nlohmann-json3-dev
  googletest libgtest-dev libgmock-dev
  libbenchmark-dev
  gnuplot-nox jq
  iproute2 procps ethtool iperf3 bpftrace
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "setup: missing packages: ${missing[*]}; run as root (or install them) first" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
