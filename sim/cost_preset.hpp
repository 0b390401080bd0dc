#pragma once
// cost_preset.hpp — a CPU cost preset (scenarios/models/*.json): the clock, the per-byte rates of
// the CPU's memory system, and the cycles of one call of each kernel symbol, each number with its
// source. The model never holds a number of its own; this file is where they come from.
//
// Named parameters (what `skbsim calibrate --free` fits):
//   call_scale          multiplies every symbol's cycles (how fast this CPU runs kernel code)
//   copy_bytes_per_ns   memcpy / copy_from_user rate
//   copy_to_user_bytes_per_ns  the reader's copy from an skb into its buffer (skb_copy_datagram_
//                       iter), where the preset has it apart; absent: copy_bytes_per_ns
//   csum_bytes_per_ns   csum_partial rate
//   fused_bytes_per_ns  csum_partial_copy_generic rate
//   page_ref_cycles     one inline get_page/put_page
//   idle_exit_blocked_us  leaving the idle loop after a halt the host stopped polling, as time
//   cycles:<symbol>     one symbol's cycles per call
//   group_scale:<group> multiplies the cycles of every symbol in one kernel-profile group
//                       (sim/kernel_groups.hpp: "ip", "device", ...), on top of call_scale; what a
//                       fit to a kernel profile's group shares frees (docs/measure.md)

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "skbsim/ledger.hpp"

namespace skbsim::sim {

struct ParamBounds {
  double lo;
  double hi;
};

class CostPreset {
 public:
  // Reads and validates a preset file; InputError naming the JSON pointer on any mistake.
  static CostPreset load(const std::string& path, const std::string& shown_as);

  const std::string& name() const noexcept { return name_; }
  double clock_ghz() const noexcept { return clock_ghz_; }
  CostModel model() const;

  double get(const std::string& param) const;
  void set(const std::string& param, double value);
  bool has_param(const std::string& param) const;
  // Physical bounds: no negative cost; byte rates between 0.05 and 50 bytes/ns (a few hundred
  // MB/s to what a 2020s core's L1 sustains); call_scale and group scales 0.05..20.
  ParamBounds bounds(const std::string& param) const;

  // The document as read, with every set() value written back in place (sources kept), plus the
  // "fit" record given.
  nlohmann::ordered_json to_json(const nlohmann::ordered_json& fit) const;

 private:
  std::string name_;
  double clock_ghz_ = 1;
  double call_scale_ = 1;
  double default_cycles_ = 100;
  std::map<Sym, double> cycles_;
  std::map<std::string, double> group_scales_;  // absent = 1
  double copy_ = 1;
  double copy_to_user_ = 0;  // 0: copy_
  double csum_ = 1;
  double fused_ = 1;
  double page_ref_cycles_ = 20;
  double idle_wake_us_ = 0;
  double idle_wake_blocked_us_ = 0;
  double halt_poll_max_us_ = 0;
  double idle_wake_spread_ = 0;
  double idle_wake_blocked_spread_ = -1;  // negative: idle_wake_spread_
  double idle_poll_us_ = 0;
  double idle_poll_wake_us_ = 0;
  double syscall_us_ = 0;
  double ipi_send_us_ = 0;  // 0: smp_send_reschedule's cycles
  double ipi_send_blocked_us_ = 0;  // 0: an IPI to a blocked vCPU costs no more
  double idle_exit_blocked_us_ = 0;
  double idle_exit_slowdown_ = 0;
  double idle_exit_local_slowdown_ = -1;    // negative: idle_exit_slowdown_
  double idle_exit_slowdown_decay_us_ = 0;  // 0: the slowdown holds until the exit is paid
  double idle_period_us_ = 0;
  double skb_handover_ns_ = 0;
  nlohmann::ordered_json doc_;
};

}  // namespace skbsim::sim
