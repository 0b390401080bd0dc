#pragma once
// examples.hpp — the 2007 thread's configurations and the modern container path, built with the
// C++ API (tests and benchmarks use these; scenario files describe the same networks in JSON).
//
//   host A (sender)                                            host B (receiver)
//   [ct: netperf, 10.0.1.2] -etun1/etun0- [root: ip_forward] -eth0 ==== eth0- [root: netserver]
//   (configuration A: netperf in host A's root namespace, no container)

#include "sim/run.hpp"

namespace skbsim::sim {

enum class Thread2007 : std::uint8_t {
  kNoContainer,     // A: netperf on the host straight to the e1000
  kContainer,       // B: netperf in a container, etun, ip_forward, e1000
  kContainerPatch,  // C: B with the OpenVZ skip-cow patch
};

// A uniform cost model for tests: every symbol `call_cycles`, the given per-byte rates.
CostModel uniform_cost(double clock_ghz, double call_cycles, double copy_bytes_per_ns,
                       double csum_bytes_per_ns, double fused_bytes_per_ns);

ScenarioSpec thread2007(Thread2007 config, const CostModel& cost);
// The container path on 6.x: container - veth - host ip_forward - NIC - receiver.
ScenarioSpec container_veth_6x(const CostModel& cost, bool veth_offloads);

// A container spec (thread2007 B/C or container_veth_6x) with its pair end bridged to the NIC in
// A's root namespace instead of routed: A/br0 with ports {A/etun0 or A/veth0, A/eth0}, the
// container on the NIC's subnet (10.0.0.3), ip_forward off.
ScenarioSpec bridged(ScenarioSpec container);
// The same network with every flow of type `t` (TCP_RR: 1-byte request and response).
ScenarioSpec with_traffic(ScenarioSpec s, TrafficType t);

std::uint32_t ipv4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) noexcept;

}  // namespace skbsim::sim
