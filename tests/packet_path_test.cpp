// packet_path_test.cpp — acceptance tests of the packet-path simulation through the C++ API:
// the 2007 thread's configurations A/B/C on 2.6.20, the 6.x veth container path, conservation
// and determinism, emergent throughput, and hazards (kernel-skb-facts.md §10-§12).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/examples.hpp"
#include "sim/features.hpp"
#include "sim/run.hpp"
#include "sim/scenario.hpp"
#include "skbsim/ledger.hpp"
#include "skbsim/symbols.hpp"

namespace skbsim::sim {
namespace {

// ---- helpers -------------------------------------------------------------------------------------

constexpr std::uint32_t kMss = 1448;
// §12.3: pskb_expand_head in ip_forward copies tail - head = H (192) + 1448, plus the 164-byte
// shared info of 2.6.20 i386.
constexpr double kExpandBytes2007 = 192 + 1448 + 164;  // 1804

// A CPU fast enough that the 1 GbE link, not the CPU, limits every configuration.
const CostModel& fast_cost() {
  static const CostModel m = uniform_cost(2.0, 100, 2.0, 2.0, 1.5);
  return m;
}

ScenarioSpec shortened(ScenarioSpec s, double duration_s = 0.03) {
  s.duration_s = duration_s;
  s.warmup_s = 0.01;
  return s;
}

ScenarioSpec config(Thread2007 c) { return shortened(thread2007(c, fast_cost())); }
ScenarioSpec veth6x(bool offloads) { return shortened(container_veth_6x(fast_cost(), offloads)); }

// Default runs, computed once per process (the spec is deterministic; the determinism test runs
// its own pairs).
const RunResult& cached(Thread2007 c) {
  static std::map<Thread2007, RunResult> runs;
  auto it = runs.find(c);
  if (it == runs.end()) {
    it = runs.emplace(c, run_scenario(config(c))).first;
  }
  return it->second;
}
const RunResult& cached_veth6x(bool offloads) {
  static std::map<bool, RunResult> runs;
  auto it = runs.find(offloads);
  if (it == runs.end()) {
    it = runs.emplace(offloads, run_scenario(veth6x(offloads))).first;
  }
  return it->second;
}

// The container-behind-veth spec with both veth ends given `f` (an `ethtool -K` variant).
ScenarioSpec veth6x_features(Features f) {
  ScenarioSpec s = veth6x(false);
  for (DeviceSpec& d : s.devices) {
    if (d.kind == DevKind::kVeth) {
      d.features = f;
    }
  }
  return s;
}

const HostResult& host(const RunResult& r, std::string_view name) {
  for (const HostResult& h : r.hosts) {
    if (h.name == name) {
      return h;
    }
  }
  throw std::runtime_error("no host " + std::string(name) + " in the result");
}

const LedgerCell& cell(const HostResult& h, Sym s) { return h.cells[index(s)]; }

// What was sent through device `name` of host `h` in the window.
const DevCounters::Side& xmit_of(const HostResult& h, std::string_view name) {
  for (const auto& [dev, c] : h.devices) {
    if (dev == name) {
      return c.xmit;
    }
  }
  throw std::runtime_error("no device " + std::string(name) + " on host " + h.name);
}

// Software-checksummed bytes of all symbols on a host (fused copy-and-sum counts, §12.1).
std::uint64_t checksummed(const HostResult& h) {
  std::uint64_t n = 0;
  for (const LedgerCell& c : h.cells) {
    n += c.bytes_checksummed();
  }
  return n;
}

double per_segment(const RunResult& r, std::uint64_t v) {
  return static_cast<double>(v) / static_cast<double>(r.segments);
}

// One line per symbol with calls, for failure messages.
std::string profile(const RunResult& r, std::string_view host_name) {
  std::ostringstream o;
  const HostResult& h = host(r, host_name);
  o << "host " << h.name << ": segments " << r.segments << ", throughput " << r.throughput_mbps
    << " Mbit/s, util " << h.cpu_util_pct << "%\n";
  for (std::size_t i = 0; i < kSymCount; ++i) {
    const LedgerCell& c = h.cells[i];
    if (c.calls == 0) {
      continue;
    }
    o << "  " << symbol_name(static_cast<Sym>(i)) << ": calls " << c.calls << " copied "
      << c.copied << " summed " << c.summed << " fused " << c.fused << "\n";
  }
  return o.str();
}

std::string trace_text(const std::vector<TraceEntry>& t) {
  std::ostringstream o;
  for (std::size_t i = 0; i < t.size(); ++i) {
    o << i << " t=" << t[i].time << " " << t[i].host << " " << t[i].ctx << " " << t[i].what
      << " skb=" << t[i].skb_id << " bytes=" << t[i].bytes << "\n";
  }
  return o.str();
}

// Index of the first entry at or after `from` whose `what` equals (or, with prefix, starts with)
// `what`, optionally for one skb.
std::optional<std::size_t> find_entry(const std::vector<TraceEntry>& t, std::string_view what,
                                      std::size_t from = 0, bool prefix = false,
                                      std::optional<std::uint64_t> skb = std::nullopt) {
  for (std::size_t i = from; i < t.size(); ++i) {
    const bool match = prefix ? std::string_view(t[i].what).substr(0, what.size()) == what
                              : t[i].what == what;
    if (match && (!skb || t[i].skb_id == *skb)) {
      return i;
    }
  }
  return std::nullopt;
}

std::size_t count_entries(const std::vector<TraceEntry>& t, std::string_view what) {
  std::size_t n = 0;
  for (const TraceEntry& e : t) {
    n += e.what == what ? 1U : 0U;
  }
  return n;
}

bool has_hazard(const RunResult& r, std::string_view kind) {
  for (const Hazard& h : r.hazards) {
    if (h.kind == kind) {
      return true;
    }
  }
  return false;
}

std::uint64_t drops(const RunResult& r, const std::string& reason) {
  auto it = r.drops.find(reason);
  return it == r.drops.end() ? 0 : it->second;
}

std::string hazards_text(const RunResult& r) {
  std::string s;
  for (const Hazard& h : r.hazards) {
    s += h.kind + " @ " + h.where + "; ";
  }
  for (const auto& [k, v] : r.drops) {
    s += "drop " + k + "=" + std::to_string(v) + "; ";
  }
  return s;
}

bool same_cell(const LedgerCell& a, const LedgerCell& b) {
  return a.calls == b.calls && a.copied == b.copied && a.summed == b.summed &&
         a.fused == b.fused && a.page_refs == b.page_refs && a.allocs == b.allocs &&
         a.alloc_bytes == b.alloc_bytes && a.frees == b.frees && a.free_bytes == b.free_bytes &&
         a.cost_ps == b.cost_ps;
}

// ---- 1. the thread's three configurations, per data segment on host A (§12.2-§12.4) -------------

TEST(Thread2007, EverySegmentCountsAndTheLinkCarriesData) {
  for (Thread2007 c : {Thread2007::kNoContainer, Thread2007::kContainer,
                       Thread2007::kContainerPatch}) {
    const RunResult& r = cached(c);
    SCOPED_TRACE(static_cast<int>(c));
    // 0.03 s at ~80k segments/s: thousands of segments, so per-segment ratios are meaningful.
    EXPECT_GT(r.segments, 1000U);
    EXPECT_GT(r.bytes_received, 1000U * kMss);
  }
}

TEST(Thread2007, ExpandHeadCopiesHeadroomPayloadAndShinfoOnlyInConfigB) {
  const RunResult& b = cached(Thread2007::kContainer);
  const LedgerCell& xb = cell(host(b, "A"), Sym::kPskbExpandHead);
  EXPECT_NEAR(per_segment(b, xb.copied), kExpandBytes2007, 0.02 * kExpandBytes2007)
      << profile(b, "A");
  EXPECT_NEAR(per_segment(b, xb.calls), 1.0, 0.02) << profile(b, "A");
  EXPECT_NEAR(static_cast<double>(xb.copied) / static_cast<double>(xb.calls), kExpandBytes2007,
              0.02 * kExpandBytes2007);
  EXPECT_EQ(xb.summed + xb.fused, 0U);  // a copy, not a checksum

  for (Thread2007 c : {Thread2007::kNoContainer, Thread2007::kContainerPatch}) {
    const RunResult& r = cached(c);
    const LedgerCell& x = cell(host(r, "A"), Sym::kPskbExpandHead);
    EXPECT_EQ(x.calls, 0U) << profile(r, "A");
    EXPECT_EQ(x.copied, 0U);
  }
}

TEST(Thread2007, SoftwareChecksumPerSegmentOnHostA) {
  // §12.3/§12.4: ~1556 B per segment (the fused 1448 plus headers and ACKs) in B and C;
  // §12.2: ~10 B in A (checksum offloaded to the e1000).
  for (Thread2007 c : {Thread2007::kContainer, Thread2007::kContainerPatch}) {
    const RunResult& r = cached(c);
    const double sum = per_segment(r, checksummed(host(r, "A")));
    EXPECT_GE(sum, kMss) << profile(r, "A");
    EXPECT_LE(sum, 1.05 * 1556) << profile(r, "A");  // nothing summed twice
  }
  const RunResult& a = cached(Thread2007::kNoContainer);
  EXPECT_LT(per_segment(a, checksummed(host(a, "A"))), 50.0) << profile(a, "A");
}

TEST(Thread2007, FusedCopyChecksumCarriesThePayloadInContainerConfigsOnly) {
  for (Thread2007 c : {Thread2007::kContainer, Thread2007::kContainerPatch}) {
    const RunResult& r = cached(c);
    const LedgerCell& f = cell(host(r, "A"), Sym::kCsumPartialCopyGeneric);
    EXPECT_NEAR(per_segment(r, f.fused), kMss, 0.02 * kMss) << profile(r, "A");
    EXPECT_EQ(f.copied + f.summed, 0U);  // one fused pass, not a copy plus a sum
  }
  const RunResult& a = cached(Thread2007::kNoContainer);
  const LedgerCell& fa = cell(host(a, "A"), Sym::kCsumPartialCopyGeneric);
  EXPECT_EQ(fa.calls, 0U) << profile(a, "A");
  EXPECT_EQ(fa.fused, 0U);
  // A copies the payload plainly instead (SG | HW_CSUM route: PARTIAL, copy_from_user).
  EXPECT_NEAR(per_segment(a, cell(host(a, "A"), Sym::kCopyFromUser).copied), kMss, 0.02 * kMss)
      << profile(a, "A");
}

TEST(Thread2007, ConfigBCowsOncePerDataSegmentAndTheCowCopies) {
  const RunResult& r = cached(Thread2007::kContainer);
  const HostResult& a = host(r, "A");
  const HostResult& b = host(r, "B");
  const LedgerCell& cow = cell(a, Sym::kSkbCow);
  const LedgerCell& fwd = cell(a, Sym::kIpForward);
  // Unpatched: every ip_forward (data out, ACKs in) calls skb_cow exactly once.
  EXPECT_EQ(cow.calls, fwd.calls);
  // The ACKs host B sent are the non-data share of the forwards (window edges: one in flight).
  const std::uint64_t acks = cell(b, Sym::kTcpSendAck).calls;
  ASSERT_GT(cow.calls, acks);
  EXPECT_NEAR(per_segment(r, cow.calls - acks), 1.0, 0.02) << profile(r, "A");
  // ... and the data segment's cow is the one that copies (ACKs are private with headroom).
  EXPECT_NEAR(per_segment(r, cell(a, Sym::kPskbExpandHead).calls), 1.0, 0.02);

  // One traced segment: one skb_cow, and pskb_expand_head copying ~1804 B right under it.
  ScenarioSpec s = config(Thread2007::kContainer);
  s.trace_segment = 1000;
  const RunResult t = run_scenario(s);
  EXPECT_EQ(count_entries(t.trace, "skb_cow"), 1U) << trace_text(t.trace);
  EXPECT_EQ(count_entries(t.trace, "pskb_expand_head"), 1U) << trace_text(t.trace);
  const auto i_cow = find_entry(t.trace, "skb_cow");
  ASSERT_TRUE(i_cow.has_value());
  ASSERT_LT(*i_cow + 1, t.trace.size());
  const TraceEntry& ex = t.trace[*i_cow + 1];
  EXPECT_EQ(ex.what, "pskb_expand_head") << trace_text(t.trace);
  EXPECT_EQ(ex.skb_id, t.trace[*i_cow].skb_id);
  EXPECT_NEAR(ex.bytes, kExpandBytes2007, 0.02 * kExpandBytes2007);
}

TEST(Thread2007, BytesCopiedPerSegmentMatchTheWorkedAccounting) {
  // §12.2-§12.4 totals (fused copy-and-checksum counts as copied): A ~1482, B ~3326, C ~1522.
  const std::pair<Thread2007, double> expected[] = {{Thread2007::kNoContainer, 1482},
                                                    {Thread2007::kContainer, 3326},
                                                    {Thread2007::kContainerPatch, 1522}};
  for (const auto& [c, bytes] : expected) {
    const RunResult& r = cached(c);
    EXPECT_NEAR(per_segment(r, host(r, "A").total.bytes_copied()), bytes, 0.03 * bytes)
        << profile(r, "A");
  }
}

// ---- 2. the trace of one segment in configuration B ---------------------------------------------

TEST(Thread2007, TraceOfOneSegmentInConfigB) {
  ScenarioSpec s = config(Thread2007::kContainer);
  s.trace_segment = 1000;  // ~12 ms in at ~81k segments/s: after the 10 ms warm-up
  const RunResult r = run_scenario(s);
  const std::vector<TraceEntry>& t = r.trace;
  ASSERT_FALSE(t.empty());
  const std::string text = trace_text(t);

  // The engine's clock only moves forward: the trace is in time order.
  for (std::size_t i = 1; i < t.size(); ++i) {
    ASSERT_LE(t[i - 1].time, t[i].time) << "entry " << i << "\n" << text;
  }

  const auto i_clone = find_entry(t, "skb_clone");
  ASSERT_TRUE(i_clone.has_value()) << text;
  const std::uint64_t original = t[*i_clone].skb_id;
  // The traced segment was built (fused copy-and-checksum) in the original before the clone.
  const auto i_build = find_entry(t, "csum_partial_copy_generic", 0, false, original);
  ASSERT_TRUE(i_build.has_value()) << text;
  EXPECT_LT(*i_build, *i_clone);
  EXPECT_EQ(t[*i_build].bytes, kMss);

  const auto i_etun = find_entry(t, "etun_xmit", *i_clone);
  const auto i_etun_hop = find_entry(t, "hop: xmit A/etun1", *i_clone, true);
  ASSERT_TRUE(i_etun.has_value()) << text;
  ASSERT_TRUE(i_etun_hop.has_value()) << text;
  const std::uint64_t clone = t[*i_etun].skb_id;
  EXPECT_NE(clone, original) << "the clone, not the write-queue original, crosses etun\n" << text;
  EXPECT_EQ(t[*i_etun_hop].skb_id, clone);

  const auto i_expand = find_entry(t, "pskb_expand_head", *i_etun_hop);
  ASSERT_TRUE(i_expand.has_value()) << text;
  EXPECT_EQ(t[*i_expand].skb_id, clone);
  EXPECT_NEAR(t[*i_expand].bytes, kExpandBytes2007, 0.02 * kExpandBytes2007);
  // The copy happens in the host's ip_forward, after the packet arrived from etun0.
  const auto i_fwd = find_entry(t, "ip_forward", *i_etun_hop, false, clone);
  ASSERT_TRUE(i_fwd.has_value()) << text;
  EXPECT_LT(*i_fwd, *i_expand);

  const auto i_e1000 = find_entry(t, "e1000_xmit_frame", *i_expand);
  ASSERT_TRUE(i_e1000.has_value()) << text;
  EXPECT_EQ(t[*i_e1000].skb_id, clone);
  EXPECT_EQ(t[*i_e1000].host, "A");

  // The receiver gets it, then the ACK frees the original, last of all: tcp_clean_rtx_queue ->
  // sk_stream_free_skb -> __kfree_skb (TCP owns it alone; no kfree_skb, so no drop tracepoint).
  std::optional<std::size_t> i_free;
  for (std::size_t i = t.size(); i-- > 0;) {
    if (t[i].what == "__kfree_skb" && t[i].skb_id == original) {
      i_free = i;
      break;
    }
  }
  ASSERT_TRUE(i_free.has_value()) << text;
  const auto i_rcv = find_entry(t, "tcp_rcv_established", *i_e1000);
  ASSERT_TRUE(i_rcv.has_value()) << text;
  EXPECT_EQ(t[*i_rcv].host, "B");

  EXPECT_LT(*i_clone, *i_etun);
  EXPECT_LT(*i_etun, *i_etun_hop);
  EXPECT_LT(*i_etun_hop, *i_expand);
  EXPECT_LT(*i_expand, *i_e1000);
  EXPECT_LT(*i_e1000, *i_rcv);
  EXPECT_LT(*i_rcv, *i_free);
  for (std::size_t i = *i_e1000 + 1; i < t.size(); ++i) {
    EXPECT_FALSE(t[i].what == "kfree_skb" && t[i].skb_id == original && i != *i_free)
        << "the original is freed once\n" << text;
  }
  // Times: the clone, the etun hop, the copy and the e1000 transmit are one softirq task's work
  // and can share a timestamp; the free after the ACK is at least a round trip later: the data
  // frame's serialization (1538 B at 1 Gbit/s = 12.304 us) plus the two 5 us wire delays.
  EXPECT_LE(t[*i_clone].time, t[*i_etun].time);
  EXPECT_LE(t[*i_etun].time, t[*i_expand].time);
  EXPECT_LE(t[*i_expand].time, t[*i_e1000].time);
  EXPECT_GE(t[*i_rcv].time - t[*i_e1000].time, 12'304'000 + 5'000'000);
  EXPECT_GE(t[*i_free].time - t[*i_e1000].time, 12'304'000 + 2 * 5'000'000);
  EXPECT_GT(t[*i_free].time, t[*i_rcv].time);
}

// ---- 3. the container path on 6.x (§12.5) ------------------------------------------------------

TEST(Veth6x, DefaultOffloadsCowOncePerGsoPacketCopyingHeadersOnly) {
  const RunResult& r = cached_veth6x(true);
  const HostResult& a = host(r, "A");
  ASSERT_GT(r.segments, 1000U) << profile(r, "A");
  const LedgerCell& x = cell(a, Sym::kPskbExpandHead);
  const LedgerCell& cow = cell(a, Sym::kSkbCow);
  ASSERT_GT(x.calls, 0U) << profile(r, "A");
  // The copy is headers only: tail - head (MAX_TCP_HEADER, 320) plus the shinfo prefix.
  const double per_call = static_cast<double>(x.copied) / static_cast<double>(x.calls);
  EXPECT_LT(per_call, 1000.0) << profile(r, "A");
  EXPECT_GE(per_call, 320.0) << profile(r, "A");
  // One copy per GSO packet: GSO packets are what TCP transmitted (host A sends only data).
  const std::uint64_t gso_packets = cell(a, Sym::kTcpTransmitSkb).calls;
  const double segs_per_gso = static_cast<double>(r.segments) / static_cast<double>(gso_packets);
  EXPECT_GT(segs_per_gso, 2.0) << "GSO packets carry many segments";
  EXPECT_NEAR(per_segment(r, x.calls), 1.0 / segs_per_gso, 0.05 / segs_per_gso)
      << profile(r, "A");
  // skb_cow runs once per forward (data and ACKs); only the cloned data skbs copy.
  EXPECT_EQ(cow.calls, cell(a, Sym::kIpForward).calls);
  EXPECT_LE(x.calls, cow.calls);
  // The NIC's TSO needs no software segmentation on 6.x defaults.
  EXPECT_EQ(cell(a, Sym::kSkbSegment).calls, 0U);
  EXPECT_EQ(cell(a, Sym::kSkbGsoSegment).calls, 0U);
}

TEST(Veth6x, DefaultOffloadsChecksumNoPayloadInSoftware) {
  const RunResult& r = cached_veth6x(true);
  const HostResult& a = host(r, "A");
  EXPECT_LT(per_segment(r, checksummed(a)), 50.0) << profile(r, "A");
  EXPECT_EQ(cell(a, Sym::kCsumPartialCopyGeneric).calls, 0U);
  EXPECT_EQ(cell(a, Sym::kSkbChecksumHelp).calls, 0U);
  // The payload is copied plainly once, from user space.
  EXPECT_NEAR(per_segment(r, a.total.bytes_copied()), kMss, 0.1 * kMss) << profile(r, "A");
}

TEST(Veth6x, OffloadsOffSegmentAndChecksumInTheContainer) {
  const RunResult& r = cached_veth6x(false);
  const HostResult& a = host(r, "A");
  ASSERT_GT(r.segments, 1000U) << profile(r, "A");
  // skb_segment makes one skb per segment on the wire; the GSO skbs are segmented in software.
  EXPECT_NEAR(per_segment(r, cell(a, Sym::kSkbSegment).calls), 1.0, 0.01) << profile(r, "A");
  EXPECT_GT(cell(a, Sym::kSkbGsoSegment).calls, 0U);
  // Without SG on veth the payload is copied and summed in one pass per segment: every payload
  // byte sent is summed at least once.
  const std::uint64_t sent_in_window = cell(a, Sym::kCopyFromUser).copied;
  EXPECT_GE(checksummed(a), cell(a, Sym::kCsumPartialCopyGeneric).fused);
  EXPECT_NEAR(static_cast<double>(cell(a, Sym::kCsumPartialCopyGeneric).fused),
              static_cast<double>(sent_in_window), 0.02 * static_cast<double>(sent_in_window))
      << profile(r, "A");

  // Where: in the container, at A/veth1's dev_queue_xmit, before the skb crosses to the host.
  ScenarioSpec s = veth6x(false);
  s.trace_segment = 1000;
  const RunResult tr = run_scenario(s);
  const std::vector<TraceEntry>& t = tr.trace;
  const std::string text = trace_text(t);
  const auto i_gso = find_entry(t, "skb_gso_segment");
  ASSERT_TRUE(i_gso.has_value()) << text;
  std::optional<std::size_t> i_dq;
  for (std::size_t i = *i_gso; i-- > 0;) {
    if (t[i].what.rfind("hop: dev_queue_xmit ", 0) == 0) {
      i_dq = i;
      break;
    }
  }
  ASSERT_TRUE(i_dq.has_value()) << text;
  EXPECT_EQ(t[*i_dq].what, "hop: dev_queue_xmit A/veth1") << text;
  EXPECT_EQ(t[*i_dq].skb_id, t[*i_gso].skb_id);
  const auto i_seg = find_entry(t, "skb_segment", *i_gso);
  ASSERT_TRUE(i_seg.has_value()) << text;
  const std::uint64_t seg = t[*i_seg].skb_id;
  EXPECT_NE(seg, t[*i_gso].skb_id) << "a new skb per segment";
  const auto i_sum = find_entry(t, "csum_partial_copy_generic", *i_seg, false, seg);
  const auto i_veth = find_entry(t, "hop: xmit A/veth1 -> A/veth0", *i_seg, false, seg);
  const auto i_fwd = find_entry(t, "ip_forward", *i_seg, false, seg);
  ASSERT_TRUE(i_sum.has_value()) << text;
  ASSERT_TRUE(i_veth.has_value()) << text;
  ASSERT_TRUE(i_fwd.has_value()) << text;
  EXPECT_LT(*i_sum, *i_veth);
  EXPECT_LT(*i_veth, *i_fwd);
  EXPECT_LE(t[*i_sum].bytes, kMss);
  EXPECT_GT(t[*i_sum].bytes, 0U);
}

// A committed measured scenario (scenarios/measured/vm-2core), shortened, its MAX_HEADER as given.
RunResult run_measured(const std::string& name, std::uint32_t max_header) {
  Scenario sc = load_scenario(std::string(SKBSIM_SOURCE_DIR) + "/scenarios/measured/vm-2core/" +
                              name + ".json");
  sc.spec.duration_s = 0.02;
  sc.spec.warmup_s = 0.005;
  sc.spec.max_header = max_header;
  return run_scenario(sc.spec);
}

// 6.x tcp_queue_rcv -> tcp_try_coalesce: what a veth with SG delivers (skb_segment's segments,
// payload in page frags) is merged into the receive queue's tail, so the reader copies and frees
// far fewer skbs than segments (the kernel's trace: one skb_copy_datagram_iovec per 14.6
// segments). Linear segments (SG off) merge only by copy into the tail's tailroom, which depends
// on the build's MAX_HEADER: with the measured VM's (32) skb_segment's heads come from 2 KB
// kmalloc objects with 88 bytes to spare, and nothing merges (the kernel's trace: one copy per
// segment); with a distribution's (176) they come from 4 KB ones and every other segment fits.
TEST(TcpTryCoalesce, SgSegmentsMergeAndLinearOnesOnlyWhereTheTailroomTakesThem) {
  const auto copies = [](const RunResult& r) {
    return per_segment(r, cell(host(r, "M"), Sym::kSkbCopyDatagramIovec).calls);
  };
  const RunResult sg = run_measured("direct-csum-off-unlimited", 32);
  ASSERT_GT(sg.segments, 1000U);
  EXPECT_LT(copies(sg), 0.25) << profile(sg, "M");
  EXPECT_GT(cell(host(sg, "M"), Sym::kSkbTryCoalesce).calls, sg.segments / 2) << profile(sg, "M");

  const RunResult linear = run_measured("direct-off-unlimited", 32);
  ASSERT_GT(linear.segments, 1000U);
  EXPECT_GT(copies(linear), 0.95) << profile(linear, "M");

  const RunResult roomy = run_measured("direct-off-unlimited", 176);
  ASSERT_GT(roomy.segments, 1000U);
  EXPECT_LT(copies(roomy), 0.75) << profile(roomy, "M");
  // The merged payload was copied into the tails: an MSS for each skb the reader did not see.
  const double copied_bits =
      static_cast<double>(cell(host(roomy, "M"), Sym::kSkbCopyBits).copied) -
      static_cast<double>(cell(host(linear, "M"), Sym::kSkbCopyBits).copied);
  EXPECT_GT(copied_bits, 0.5 * kMss * (1.0 - copies(roomy)) * static_cast<double>(roomy.segments));
}

// Which frees a 6.x kernel traces as consume_skb: the GSO skb validate_xmit_skb consumes once
// segmented, and the NIC's completed transmits (dev_kfree_skb_any). TCP frees what it owns with
// __kfree_skb: the ACKed originals (tcp_wmem_free_skb), the read skbs (tcp_eat_recv_skb), the pure
// ACKs (tcp_rcv_established). The kernel's trace of a veth stream agrees (skbsim measure:
// consume_skb from validate_xmit_skb only).
TEST(Veth6x, ConsumeSkbIsTheSegmentedGsoSkbsAndTheNicsCompletionsOnly) {
  for (const bool offloads : {true, false}) {
    const RunResult& r = cached_veth6x(offloads);
    for (const HostResult& h : r.hosts) {
      double nic_xmits = 0;
      for (const auto& [name, c] : h.devices) {
        if (name.find("/eth") != std::string::npos) {  // the NICs, not the veths
          nic_xmits += static_cast<double>(c.xmit.skbs);
        }
      }
      const double expected = nic_xmits + static_cast<double>(cell(h, Sym::kSkbGsoSegment).calls);
      ASSERT_GT(expected, 100.0) << h.name;
      EXPECT_NEAR(static_cast<double>(cell(h, Sym::kConsumeSkb).calls), expected, 0.02 * expected)
          << "offloads " << offloads << "\n" << profile(r, h.name);
      EXPECT_GT(cell(h, Sym::kKfreeSkbFree).calls, cell(h, Sym::kConsumeSkb).calls) << h.name;
    }
  }
}

// 6.x skb_segment without SG, for a device that sums (`ethtool -K sg off`, tx checksumming on):
// each segment's payload is copied into its head with skb_copy_bits and stays CHECKSUM_PARTIAL
// for the device. Nothing is summed in software (the kernel's trace of such a veth: every segment
// PARTIAL).
TEST(Veth6x, SgOffWithChecksumOffloadCopiesSegmentsAndLeavesTheSumToTheDevice) {
  const RunResult r = run_scenario(veth6x_features(feat::kHwCsum | feat::kHighDma | feat::kLltx));
  const HostResult& a = host(r, "A");
  ASSERT_GT(r.segments, 1000U) << profile(r, "A");
  EXPECT_NEAR(per_segment(r, cell(a, Sym::kSkbSegment).calls), 1.0, 0.01) << profile(r, "A");
  EXPECT_EQ(cell(a, Sym::kCsumPartialCopyGeneric).fused, 0U) << profile(r, "A");
  EXPECT_GT(per_segment(r, cell(a, Sym::kSkbCopyBits).copied), kMss * 0.9) << profile(r, "A");
  const DevCounters::Side& xmit = xmit_of(a, "A/veth1");
  EXPECT_GT(xmit.skbs, 1000U);
  EXPECT_EQ(xmit.ip_summed[static_cast<std::size_t>(IpSummed::kPartial)], xmit.skbs)
      << "every segment leaves CHECKSUM_PARTIAL";
}

// 6.x netdev_fix_features keeps SG on a device without any checksum feature (only 2.6.20's
// register_netdevice dropped it), so `ethtool -K tx off` on a veth leaves software GSO making
// segments whose payload stays in page frags: summed in place by csum_partial, not copied into a
// linear head, and no pskb_expand_head to pull it there. The kernel's own trace of such a veth
// shows 66-byte linear parts (skbsim measure, csum-off).
TEST(Veth6x, SgWithoutChecksumOffloadKeepsThePayloadInFrags) {
  const RunResult r = run_scenario(veth6x_features(feat::kSg | feat::kHighDma | feat::kLltx));
  const HostResult& a = host(r, "A");
  ASSERT_GT(r.segments, 1000U) << profile(r, "A");
  EXPECT_EQ(cell(a, Sym::kPskbExpandHead).calls, 0U) << profile(r, "A");
  EXPECT_EQ(cell(a, Sym::kCsumPartialCopyGeneric).fused, 0U) << profile(r, "A");
  EXPECT_NEAR(per_segment(r, cell(a, Sym::kSkbSegment).calls), 1.0, 0.01) << profile(r, "A");
  const DevCounters::Side& xmit = xmit_of(a, "A/veth1");
  ASSERT_GT(xmit.skbs, 1000U);
  EXPECT_GT(static_cast<double>(xmit.data_len) / static_cast<double>(xmit.skbs), kMss * 0.9)
      << "the payload crosses the veth in frags";
}

// Every payload byte is summed in software (skb_segment's copy-and-sum), headers besides: at least
// the payload per segment (an MSS, less the sub-MSS tails Nagle lets through).
TEST(Veth6x, OffloadsOffChecksumsEveryPayloadByte) {
  const RunResult& r = cached_veth6x(false);
  const double payload = static_cast<double>(r.bytes_received) / static_cast<double>(r.segments);
  EXPECT_GT(payload, kMss * 0.9);
  EXPECT_GE(per_segment(r, checksummed(host(r, "A"))), payload) << profile(r, "A");
}

TEST(Veth6x, TraceFollowsOneSegmentToTheReceiver) {
  ScenarioSpec s = veth6x(true);
  s.trace_segment = 1000;
  const RunResult r = run_scenario(s);
  const std::string text = trace_text(r.trace);
  std::vector<std::uint64_t> sent;
  for (const TraceEntry& e : r.trace) {
    if (e.what == "tcp_transmit_skb" &&
        std::find(sent.begin(), sent.end(), e.skb_id) == sent.end()) {
      sent.push_back(e.skb_id);
    }
  }
  EXPECT_EQ(sent.size(), 1U) << "one GSO skb holds the traced segment\n" << text;
  const auto i_rcv = find_entry(r.trace, "tcp_rcv_established");
  ASSERT_TRUE(i_rcv.has_value()) << text;
  EXPECT_EQ(r.trace[*i_rcv].host, "B");
}

// ---- 4. conservation and determinism, every configuration ---------------------------------------

ScenarioSpec make_case(const std::string& name) {
  if (name == "A") {
    return config(Thread2007::kNoContainer);
  }
  if (name == "B") {
    return config(Thread2007::kContainer);
  }
  if (name == "C") {
    return config(Thread2007::kContainerPatch);
  }
  if (name == "veth6x") {
    return veth6x(true);
  }
  if (name == "veth6x_offloads_off") {
    return veth6x(false);
  }
  throw std::invalid_argument(name);
}

class Conservation : public ::testing::TestWithParam<std::string> {};

TEST_P(Conservation, BytesPoolAndCpuTimeBalance) {
  ScenarioSpec s = make_case(GetParam());
  ASSERT_EQ(s.flows.size(), 1U);
  ASSERT_EQ(s.flows[0].type, TrafficType::kTcpStream);
  const RunResult r = run_scenario(s);
  EXPECT_GT(r.total_bytes_sent, 0U);
  EXPECT_GT(r.bytes_received, 0U);
  EXPECT_EQ(r.total_bytes_sent, r.total_bytes_received + r.total_bytes_dropped)
      << "sent " << r.total_bytes_sent << " received " << r.total_bytes_received << " dropped "
      << r.total_bytes_dropped << "; " << hazards_text(r);
  EXPECT_TRUE(r.pool_empty_at_end) << r.leak_report;
  EXPECT_GT(r.total_busy_ps, 0);
  EXPECT_EQ(r.total_busy_ps, r.total_ledger_ps);
  // The measured window balances too, up to the tasks that straddle its edges: busy time counts
  // a task as its time passes (as /proc/stat does), the ledger when the task runs. Each host
  // has at most one straddling task per CPU at each edge, far below 1% of a window.
  for (const HostResult& h : r.hosts) {
    EXPECT_NEAR(static_cast<double>(h.busy_ps), static_cast<double>(h.total.cost_ps),
                0.01 * static_cast<double>(h.total.cost_ps))
        << h.name;
  }
}

TEST_P(Conservation, SameSpecGivesBitIdenticalResults) {
  ScenarioSpec s = make_case(GetParam());
  s.trace_segment = 1000;
  const RunResult r1 = run_scenario(s);
  const RunResult r2 = run_scenario(s);
  EXPECT_EQ(r1.throughput_mbps, r2.throughput_mbps);  // bit-identical, not merely close
  EXPECT_EQ(r1.segments, r2.segments);
  EXPECT_EQ(r1.bytes_received, r2.bytes_received);
  EXPECT_EQ(r1.total_bytes_sent, r2.total_bytes_sent);
  EXPECT_EQ(r1.total_busy_ps, r2.total_busy_ps);
  EXPECT_EQ(r1.events, r2.events);
  EXPECT_EQ(r1.hops, r2.hops);
  EXPECT_EQ(r1.drops, r2.drops);
  ASSERT_EQ(r1.hosts.size(), r2.hosts.size());
  for (std::size_t i = 0; i < r1.hosts.size(); ++i) {
    const HostResult& a = r1.hosts[i];
    const HostResult& b = r2.hosts[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.busy_ps, b.busy_ps) << a.name;
    EXPECT_EQ(a.cpu_util_pct, b.cpu_util_pct) << a.name;
    EXPECT_TRUE(same_cell(a.total, b.total)) << a.name;
    for (std::size_t c = 0; c < kSymCount; ++c) {
      EXPECT_TRUE(same_cell(a.cells[c], b.cells[c]))
          << a.name << " " << symbol_name(static_cast<Sym>(c));
    }
  }
  ASSERT_FALSE(r1.trace.empty());
  ASSERT_EQ(r1.trace.size(), r2.trace.size());
  for (std::size_t i = 0; i < r1.trace.size(); ++i) {
    const TraceEntry& a = r1.trace[i];
    const TraceEntry& b = r2.trace[i];
    EXPECT_TRUE(a.time == b.time && a.host == b.host && a.ctx == b.ctx && a.what == b.what &&
                a.skb_id == b.skb_id && a.bytes == b.bytes && a.cost_ps == b.cost_ps)
        << "trace entry " << i << ": " << a.what << " vs " << b.what;
  }
}

INSTANTIATE_TEST_SUITE_P(AllConfigurations, Conservation,
                         ::testing::Values("A", "B", "C", "veth6x", "veth6x_offloads_off"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ---- 5. throughput emerges from the link or the CPU ----------------------------------------------

TEST(Throughput, IdleGigabitLinkGivesThePayloadRate) {
  ScenarioSpec s = shortened(thread2007(Thread2007::kNoContainer, fast_cost()), 0.05);
  ASSERT_EQ(s.flows[0].mss, kMss);
  const RunResult r = run_scenario(s);
  // 1538 B on the wire (1448 payload + 32 TCP + 20 IP + 14 Ethernet + 4 FCS + 8 preamble + 12
  // gap) per 1448 B of payload.
  const double payload_rate = 1000.0 * 1448.0 / 1538.0;
  EXPECT_NEAR(r.throughput_mbps, payload_rate, 0.01 * payload_rate) << profile(r, "A");
  // The CPUs are far from saturated: the link is the limit.
  EXPECT_LT(host(r, "A").cpu_util_pct, 50.0);
}

// A CPU so slow at moving bytes (50 MB/s copies and checksums, 10 cycles a call at 1 GHz) that
// it, not the 1 GbE link, limits the stream.
CostModel slow_cost(double bytes_per_ns) {
  return uniform_cost(1.0, 10, bytes_per_ns, bytes_per_ns, bytes_per_ns);
}

TEST(Throughput, SlowCpuMakesTheSenderCpuBound) {
  const double payload_rate = 1000.0 * 1448.0 / 1538.0;
  for (Thread2007 c : {Thread2007::kNoContainer, Thread2007::kContainer}) {
    SCOPED_TRACE(static_cast<int>(c));
    ScenarioSpec s = shortened(thread2007(c, slow_cost(0.05)), 0.05);
    // netserver on B's other CPU, so the receiver (which copies every byte as slowly, and whose
    // reader sends the ACKs, __tcp_ack_snd_check deferring them to tcp_cleanup_rbuf) is never
    // the limit: the question is whether the sender's CPU saturates.
    s.flows[0].receiver_cpu = 1;
    const RunResult r = run_scenario(s);
    EXPECT_GT(r.throughput_mbps, 0.0);
    EXPECT_LT(r.throughput_mbps, 0.5 * payload_rate) << profile(r, "A");
    // netperf, its softirq and the NIC interrupt all run on host A's CPU 0 (CPU 1 is idle), so
    // host A's busy time over the window is CPU 0's: busy all the time.
    const HostResult& a = host(r, "A");
    const double cpu0_busy = a.cpu_util_pct * a.cpus_counted / 100.0;
    EXPECT_GE(cpu0_busy, 0.97) << profile(r, "A");
    if (c == Thread2007::kContainer) {
      // The container path costs the sender far more per segment (fused copy-and-checksum,
      // the 1804-byte cow, a second IP traversal) than the receiver: the sender is the limit.
      const HostResult& b = host(r, "B");
      EXPECT_LT(b.cpu_util_pct * b.cpus_counted / 100.0, 0.6) << profile(r, "B");
    }
  }
}

TEST(Throughput, OneCpuIsNeverMoreThanFullyBusy) {
  const RunResult r =
      run_scenario(shortened(thread2007(Thread2007::kNoContainer, slow_cost(0.01)), 0.05));
  const HostResult& a = host(r, "A");
  const double cpu0_busy = a.cpu_util_pct * a.cpus_counted / 100.0;
  EXPECT_GE(cpu0_busy, 0.97) << profile(r, "A");
  EXPECT_LE(cpu0_busy, 1.0) << profile(r, "A");
}

// ---- 6. hazards ------------------------------------------------------------------------------------

TEST(Hazards, SkipCowPatchWithAnOrdinaryForwardReportsNone) {
  const RunResult& r = cached(Thread2007::kContainerPatch);
  EXPECT_TRUE(r.hazards.empty()) << hazards_text(r);
  EXPECT_TRUE(r.drops.empty()) << hazards_text(r);
}

TEST(Hazards, EtunWithHwCsumAndSgForwardsPartialChecksums) {
  ScenarioSpec s = config(Thread2007::kContainer);
  int set = 0;
  for (DeviceSpec& d : s.devices) {
    if (d.kind == DevKind::kEtun) {
      d.features = feat::kFraglist | feat::kHighDma | feat::kLltx | feat::kHwCsum | feat::kSg;
      ++set;
    }
  }
  ASSERT_EQ(set, 2);
  const RunResult r = run_scenario(s);
  ASSERT_TRUE(has_hazard(r, "partial_checksum_forwarded")) << hazards_text(r);
  for (const Hazard& h : r.hazards) {
    if (h.kind == "partial_checksum_forwarded") {
      EXPECT_NE(h.where.find("A/root"), std::string::npos) << h.where;
      EXPECT_FALSE(h.message.empty());
    }
  }
  // With the checksum offloaded to etun, the container no longer sums the payload.
  EXPECT_EQ(cell(host(r, "A"), Sym::kCsumPartialCopyGeneric).calls, 0U) << profile(r, "A");
}

// Host A routes the receiver's address back into the container; the container (forwarding on)
// sends everything out again by its default route: a loop between A/root and A/ct.
ScenarioSpec routing_loop(bool skip_cow_patch) {
  ScenarioSpec s = config(skip_cow_patch ? Thread2007::kContainerPatch : Thread2007::kContainer);
  const std::uint32_t receiver = ipv4(10, 0, 0, 2);
  for (NamespaceSpec& n : s.namespaces) {
    if (n.name == "A/root") {
      n.ip_forward = true;
      n.routes.push_back({receiver, 32, "A/etun0"});
    } else if (n.name == "A/ct") {
      n.ip_forward = true;
      EXPECT_EQ(n.routes.size(), 1U);
      EXPECT_EQ(n.routes[0].prefix_len, 0);
      EXPECT_EQ(n.routes[0].dev, "A/etun1");
    }
  }
  return s;
}

TEST(Hazards, RoutingLoopUnderSkipCowPatchIsReportedAndDropped) {
  const RunResult r = run_scenario(routing_loop(true));  // returns: the loop does not run forever
  EXPECT_TRUE(has_hazard(r, "routing_loop")) << hazards_text(r);
  EXPECT_GT(drops(r, "routing_loop"), 0U) << hazards_text(r);
  EXPECT_EQ(drops(r, "ttl_exceeded"), 0U) << "the patch skips the TTL decrement";
  EXPECT_EQ(r.total_bytes_received, 0U);
  EXPECT_GT(r.total_bytes_dropped, 0U);
  EXPECT_TRUE(r.pool_empty_at_end) << r.leak_report;
  EXPECT_EQ(r.total_busy_ps, r.total_ledger_ps);
}

TEST(Hazards, RoutingLoopWithoutThePatchEndsByTtl) {
  const RunResult r = run_scenario(routing_loop(false));
  EXPECT_GT(drops(r, "ttl_exceeded"), 0U) << hazards_text(r);
  EXPECT_EQ(drops(r, "routing_loop"), 0U) << hazards_text(r);
  EXPECT_FALSE(has_hazard(r, "routing_loop")) << hazards_text(r);
  EXPECT_EQ(r.total_bytes_received, 0U);
  EXPECT_TRUE(r.pool_empty_at_end) << r.leak_report;
  EXPECT_EQ(r.total_busy_ps, r.total_ledger_ps);
}

}  // namespace
}  // namespace skbsim::sim
