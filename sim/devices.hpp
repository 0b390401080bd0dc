#pragma once
// devices.hpp — the device types. Each implements only its driver's transmit behaviour (and, for
// a NIC, its wire and receive interrupt); one .cpp each (dev_nic.cpp, dev_pair.cpp, ...).

#include <deque>
#include <utility>
#include <vector>

#include "sim/net.hpp"

namespace skbsim::sim {

// A physical NIC (e1000 of 2007, or a modern 10/25G NIC): a TX ring, a wire with a rate and a
// delay to the NIC at the other end, and a coalesced interrupt that runs the NAPI poll (TX clean
// and RX) in the NET_RX softirq of its CPU. DMA costs the CPU nothing.
class NicDevice final : public Device {
 public:
  struct Params {
    double rate_mbps = 1000;        // raw link rate
    double delay_us = 5;            // propagation + the far NIC's DMA latency
    std::uint32_t tx_ring = 256;    // descriptors
    std::uint32_t copybreak = 256;  // e1000: frames under this are memcpy'd into a small skb
    std::uint32_t rx_buffer = 1522; // bytes of the RX buffer skbs (MAXIMUM_ETHERNET_VLAN_SIZE)
    double irq_delay_us = 20;       // interrupt moderation
    std::uint32_t irq_cpu = 0;
    bool modern = false;            // a 6.x-era NIC: page-fragment RX, GRO in the poll
  };
  NicDevice(std::string name, Params p) : Device(std::move(name), DevKind::kNic), p_(p) {}

  bool xmit(Net& net, ExecCtx& ctx, Skb& skb) override;
  Sym xmit_symbol() const noexcept override { return Sym::kE1000XmitFrame; }
  void connect(NicDevice& remote) noexcept { remote_ = &remote; }
  const Params& params() const noexcept { return p_; }
  std::uint64_t frames_sent() const noexcept { return frames_sent_; }

 private:
  struct Frame {
    std::uint32_t len;  // bytes from the Ethernet header on
    PacketMeta meta;
    bool traced;
  };
  void start_wire(Net& net, Skb* skb);
  void receive(Net& net, const Frame& f);
  void schedule_irq(Net& net);
  void irq(Net& net);
  void poll(Net& net, ExecCtx& ctx);

  Params p_;
  NicDevice* remote_ = nullptr;
  Time wire_free_at_ = 0;
  std::uint32_t ring_used_ = 0;
  SkbQueue tx_done_;            // completed descriptors, freed by the next poll
  std::deque<Frame> rx_ready_;  // frames DMA'd into the RX ring, not yet polled
  bool irq_pending_ = false;
  ExecCtx* irq_ctx_ = nullptr;
  std::uint64_t frames_sent_ = 0;
};

// One end of a pair device: etun (2007, 2.6.20) or veth (6.x). Transmit hands the skb to the
// peer's receive path (netif_rx) on the same CPU; no data is copied.
// etun's feature set is an assumption the scenario states (its source was never merged): by
// default none, so TCP above it sends CHECKSUM_NONE linear skbs (the thread's profile).
class PairDevice final : public Device {
 public:
  PairDevice(std::string name, DevKind kind) : Device(std::move(name), kind) {}
  bool xmit(Net& net, ExecCtx& ctx, Skb& skb) override;
  Sym xmit_symbol() const noexcept override {
    return kind() == DevKind::kVeth ? Sym::kVethXmit : Sym::kEtunXmit;
  }
};

// OpenVZ venet: point-to-point, no Ethernet header (hard_header_len 0).
class VenetDevice final : public Device {
 public:
  explicit VenetDevice(std::string name) : Device(std::move(name), DevKind::kVenet) {
    hard_header_len = 0;
  }
  bool xmit(Net& net, ExecCtx& ctx, Skb& skb) override;
  Sym xmit_symbol() const noexcept override { return Sym::kVenetXmit; }
};

// lo: hands the skb back to its own receive path.
class LoopbackDevice final : public Device {
 public:
  explicit LoopbackDevice(std::string name) : Device(std::move(name), DevKind::kLoopback) {
    tx_queue_len = 0;
    mtu = 16436;
  }
  bool xmit(Net& net, ExecCtx& ctx, Skb& skb) override;
  Sym xmit_symbol() const noexcept override { return Sym::kLoopbackXmit; }
};

// A Linux bridge (net/bridge): its ports are devices of its namespace whose received frames it
// forwards by a learning forwarding database (br_handle_frame -> br_forward -> dev_queue_xmit on
// the port, the Ethernet header reused: no copy, no TTL, no skb_cow), or passes up to its own
// namespace when they are for one of its addresses (br_pass_frame_up). Locally sent packets
// routed to the bridge go out of the port that the database names (br_dev_xmit -> br_deliver).
// The database is the converged one (bridge_fdb() in run.hpp), keyed by IPv4 address where the
// kernel keys MAC addresses; br_fdb_update still refreshes it from each frame's source. An
// address it does not hold is flooded to every other port (br_flood).
class BridgeDevice final : public Device {
 public:
  explicit BridgeDevice(std::string name) : Device(std::move(name), DevKind::kBridge) {
    tx_queue_len = 0;
  }
  bool xmit(Net& net, ExecCtx& ctx, Skb& skb) override;
  Sym xmit_symbol() const noexcept override { return Sym::kBrDevXmit; }
  bool handle_frame(Net& net, ExecCtx& ctx, Device& in, Skb& skb) override;
  void add_port(Device& port);
  void add_fdb(std::uint32_t addr, Device& port) { learn(addr, port); }
  const std::vector<Device*>& ports() const noexcept { return ports_; }

 private:
  Device* fdb_get(Net& net, ExecCtx& ctx, const Skb& skb, std::uint32_t addr) const;
  void learn(std::uint32_t addr, Device& port);
  // br_forward / br_deliver to one port, or br_flood to all but `except`.
  void forward(Net& net, ExecCtx& ctx, Device& to, Skb& skb, bool from_port);
  void flood(Net& net, ExecCtx& ctx, const Device* except, Skb& skb, bool from_port);

  std::vector<Device*> ports_;
  std::vector<std::pair<std::uint32_t, Device*>> fdb_;  // address -> port (few entries)
};

// Default features per device kind and kernel version (kernel-skb-facts.md §6.3).
Features default_features(DevKind kind, KernelVersion v, bool modern_nic);

}  // namespace skbsim::sim
