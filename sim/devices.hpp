#pragma once
// devices.hpp — the device types. Each implements only its driver's transmit behaviour (and, for
// a NIC, its wire and receive interrupt); one .cpp each (dev_nic.cpp, dev_pair.cpp, ...).

#include <deque>

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

// Default features per device kind and kernel version (kernel-skb-facts.md §6.3).
Features default_features(DevKind kind, KernelVersion v, bool modern_nic);

}  // namespace skbsim::sim
