# shellcheck shell=bash
# trace-measure.sh — sourced, not run: runs a bpftrace program around one untraced
# `skbsim measure` (for the scripts/*.sh that source it: wake-latency.sh, rcv-cadence.sh,
# write-gaps.sh and others). Root; mounts tracefs for the run if it is not mounted (and unmounts
# it), and stops bpftrace however the measure ends.
#
#   trace_measure NAME OUT_DIR OUTPUT PROGRAM.bt ARG [skbsim measure options...]
#
# runs `bpftrace PROGRAM.bt ARG` into OUTPUT (its errors into OUT_DIR/bpftrace.err), waits for
# it to attach, then `skbsim measure --trace off --out OUT_DIR/measurement` with the options,
# and stops bpftrace, which prints its maps into OUTPUT. The caller has cd'ed to the repository;
# SKBSIM names another skbsim. Returns 1 (NAME: what is missing) when a tool is not installed.
#
#   trace_measure_scenario NAME OUT_DIR
#
# then sets trace_measure_scenario_file to the one scenario that measure wrote, for the model to
# run, and trace_measure_measurement_file to its measurement file beside it (measurements/, the
# same name); returns 1 (NAME: what is wrong) unless there is exactly one.
#
#   trace_measure_model NAME OUT_DIR
#
# after it runs the model on that scenario, `skbsim run --format json` into OUT_DIR/model.json
# and its sockets' timeline into OUT_DIR/model-timeline.tsv (its errors into OUT_DIR/model.err);
# returns 1 (NAME: the model did not run), with no model.json left, when the run fails.

trace_measure_bt=""
trace_measure_mounted=""

# Whether bpftrace, process $1 (a child of this shell), still runs: neither gone, nor a zombie not
# yet waited for, nor its number reused by another program since bash reaped it.
trace_measure_running() {
  local comm state
  read -r _ comm state _ 2>/dev/null <"/proc/$1/stat" || return 1
  [[ $comm == "(bpftrace)" && $state != [ZX] ]]
}

# Whether bpftrace, process $1, has stopped running within $2 waits of 0.2 s.
trace_measure_gone_within() {
  local i
  for ((i = 0; i < $2; i++)); do
    trace_measure_running "$1" || return 0
    sleep 0.2
  done
  ! trace_measure_running "$1"
}

# Stops bpftrace with SIGINT, on which it prints its maps and exits. Once (2026-12-07) it slept on
# after the first SIGINT and a second made it print and exit: so a second after 30 s, and SIGKILL
# (its maps lost) after 10 s more. One that outlives SIGKILL by 10 s (stuck in the kernel) is left
# unwaited, so that the stop returns.
trace_measure_stop() {
  if [[ -n "$trace_measure_bt" ]]; then
    local pid=$trace_measure_bt
    kill -INT "$pid" 2>/dev/null || true
    if ! trace_measure_gone_within "$pid" 150; then
      echo "bpftrace did not exit 30 s after SIGINT: sending another" >&2
      kill -INT "$pid" 2>/dev/null || true
      if ! trace_measure_gone_within "$pid" 50; then
        echo "bpftrace did not exit after a second SIGINT: killed, its maps lost" >&2
        kill -KILL "$pid" 2>/dev/null || true
      fi
    fi
    if trace_measure_gone_within "$pid" 50; then
      wait "$pid" 2>/dev/null || true
    else
      echo "bpftrace (pid $pid) outlived SIGKILL: left behind" >&2
    fi
    trace_measure_bt=""
  fi
  if [[ -n "$trace_measure_mounted" ]]; then
    umount /sys/kernel/tracing || true
    trace_measure_mounted=""
  fi
}

trace_measure() {
  local name=$1 out=$2 output=$3 program=$4 arg=$5
  shift 5
  local skbsim=${SKBSIM:-build/release/sim/skbsim}
  local tool
  for tool in bpftrace awk "$skbsim"; do
    if ! command -v "$tool" >/dev/null; then
      echo "$name: expected $tool (bash scripts/setup.sh; cmake --workflow --preset release)" >&2
      return 1
    fi
  done
  if ! mountpoint -q /sys/kernel/tracing; then
    mount -t tracefs nodev /sys/kernel/tracing
    trace_measure_mounted=yes
  fi
  mkdir -p "$out"
  trap trace_measure_stop EXIT
  bpftrace "$program" "$arg" >"$output" 2>"$out/bpftrace.err" &
  trace_measure_bt=$!
  # bpftrace prints "Attaching N probes..." once it is attached.
  for _ in $(seq 50); do
    grep -q "Attaching" "$output" "$out/bpftrace.err" 2>/dev/null && break
    kill -0 "$trace_measure_bt" 2>/dev/null || break
    sleep 0.2
  done
  if ! grep -q "Attaching" "$output" "$out/bpftrace.err" 2>/dev/null ||
    ! kill -0 "$trace_measure_bt" 2>/dev/null; then
    echo "$name: bpftrace did not attach $program (see $out/bpftrace.err)" >&2
    trace_measure_stop
    trap - EXIT
    return 1
  fi
  "$skbsim" measure --trace off --out "$out/measurement" "$@"
  trace_measure_stop
  trap - EXIT
}

# trace_measure for a program whose maps count one run, from the stream's start to its end: a run
# the speed probe sets aside would be redone, and the maps would hold the discarded one, so no redo
# unless the caller's options ask for some (--unsteady-retries). The summary is python3's.
trace_measure_once() {
  local name=$1 out=$2 output=$3 program=$4 arg=$5
  shift 5
  if ! command -v python3 >/dev/null; then
    echo "$name: expected python3, which prints the summary (apt-get install python3)" >&2
    return 1
  fi
  local retries=(--unsteady-retries 0) a
  for a in "$@"; do
    [[ $a == --unsteady-retries* ]] && retries=()
  done
  trace_measure "$name" "$out" "$output" "$program" "$arg" "${retries[@]}" "$@"
}

trace_measure_scenario() {
  local name=$1 out=$2
  local scenarios=("$out"/measurement/*.json)
  if [[ ${#scenarios[@]} -ne 1 || ! -f ${scenarios[0]} ]]; then
    echo "$name: expected one scenario in $out/measurement (name one configuration)" >&2
    return 1
  fi
  # shellcheck disable=SC2034  # read by the scripts that source this file
  trace_measure_scenario_file=${scenarios[0]}
  # shellcheck disable=SC2034
  trace_measure_measurement_file=$out/measurement/measurements/$(basename "${scenarios[0]}")
}

trace_measure_model() {
  local name=$1 out=$2
  if ! "${SKBSIM:-build/release/sim/skbsim}" run "$trace_measure_scenario_file" --format json \
    --timeline "$out/model-timeline.tsv" >"$out/model.json" 2>"$out/model.err"; then
    echo "$name: the model did not run (see $out/model.err)" >&2
    rm -f "$out/model.json"
    return 1
  fi
}
