// net.cpp — Net: building hosts, namespaces, devices and contexts; tracing; drops and hazards.
// The packet paths are in stack.cpp and tcp.cpp.

#include "sim/net.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

namespace skbsim::sim {

PacketMeta& meta(Skb& skb) noexcept {
  static_assert(alignof(PacketMeta) <= alignof(std::uint64_t));
  return *reinterpret_cast<PacketMeta*>(skb.cb.data());  // NOLINT: skb->cb is scratch space
}
const PacketMeta& meta(const Skb& skb) noexcept {
  return *reinterpret_cast<const PacketMeta*>(skb.cb.data());  // NOLINT
}

std::string_view dev_kind_name(DevKind k) noexcept {
  switch (k) {
    case DevKind::kNic:
      return "nic";
    case DevKind::kEtun:
      return "etun";
    case DevKind::kVeth:
      return "veth";
    case DevKind::kVenet:
      return "venet";
    case DevKind::kLoopback:
      return "loopback";
    case DevKind::kBridge:
      return "bridge";
  }
  return "nic";
}

std::string_view drop_reason_name(DropReason r) noexcept {
  switch (r) {
    case DropReason::kBacklogFull:
      return "backlog_full";
    case DropReason::kQdiscFull:
      return "qdisc_full";
    case DropReason::kNoRoute:
      return "no_route";
    case DropReason::kTtlExceeded:
      return "ttl_exceeded";
    case DropReason::kRoutingLoop:
      return "routing_loop";
    case DropReason::kForwardingOff:
      return "forwarding_off";
    case DropReason::kSkOwned:
      return "sk_owned";
    case DropReason::kNoSocket:
      return "no_socket";
    case DropReason::kSocketRcvbuf:
      return "socket_rcvbuf_full";
    case DropReason::kBridgeMtu:
      return "bridge_mtu";
    case DropReason::kCount:
      break;
  }
  return "unknown";
}

const Route* Namespace::lookup(std::uint32_t daddr) const noexcept {
  const Route* best = nullptr;
  for (const Route& r : routes) {
    const std::uint32_t mask = r.prefix_len == 0 ? 0 : ~0U << (32 - r.prefix_len);
    if ((daddr & mask) == (r.prefix & mask) && (best == nullptr || r.prefix_len > best->prefix_len)) {
      best = &r;
    }
  }
  return best;
}

bool Namespace::is_local(std::uint32_t addr) const noexcept {
  return std::find(addresses.begin(), addresses.end(), addr) != addresses.end();
}

namespace {

// Forwards a traced skb's ledger records, stamped with time, host and context.
class CtxTraceSink final : public TraceSink {
 public:
  CtxTraceSink(Net& net, const ExecCtx& ctx, std::string host)
      : net_(&net), ctx_(&ctx), host_(std::move(host)) {}
  void on_work(const Work& w, std::int64_t cost_ps, std::uint64_t skb_id) override {
    net_->record_trace({.time = net_->engine().now(),
                        .host = host_,
                        .ctx = ctx_->name(),
                        .what = std::string(symbol_name(w.sym)),
                        .skb_id = skb_id,
                        .bytes = w.copied + w.summed + w.fused,
                        .cost_ps = cost_ps});
  }

 private:
  Net* net_;
  const ExecCtx* ctx_;
  std::string host_;
};

}  // namespace

Net::Net(const KernelModel& kernel, const CostModel& model) : kernel_(kernel), model_(model) {}

Net::~Net() {
  // Free what the run still holds so the pool's leak accounting is about the model, not teardown.
  for (auto& d : devices_) {
    d->qdisc.clear();
  }
  for (auto& h : hosts_) {
    for (auto& sn : h->softnet) {
      sn.backlog.clear();
    }
  }
}

Host& Net::add_host(const std::string& name, std::uint32_t cpus, std::uint32_t cpus_counted) {
  auto h = std::make_unique<Host>();
  h->name = name;
  h->cpus_counted = cpus_counted;
  for (std::uint32_t i = 0; i < cpus; ++i) {
    h->cpus.push_back(std::make_unique<Cpu>(engine_, i));
    if (model_.idle_exit_blocked_ps > 0) {
      // Exits after halts the host no longer polls: KVM blocked the vCPU's thread
      // (kvm_vcpu_halt past halt_poll_ns), as idle_wake() has it.
      h->cpus.back()->charge_idle_exits_after(model_.halt_poll_max_ps);
      const double local = model_.idle_exit_local_slowdown >= 0 ? model_.idle_exit_local_slowdown
                                                                : model_.idle_exit_slowdown;
      h->cpus.back()->slow_after_idle_exits(model_.idle_exit_blocked_ps, model_.idle_exit_slowdown,
                                            local);
    }
    if (model_.idle_period_ps > 0) {
      h->cpus.back()->charge_idle_periods();
    }
  }
  h->softnet.resize(cpus);
  for (std::uint32_t i = 0; i < cpus; ++i) {
    h->softnet[i].ctx = std::make_unique<ExecCtx>("softirq/" + std::to_string(i), *h->cpus[i],
                                                  Level::kSoftIrq, &model_);
    attach_sink(*h->softnet[i].ctx, *h);
    h->sched.push_back(std::make_unique<ExecCtx>("sched/" + std::to_string(i), *h->cpus[i],
                                                 Level::kProcess, &model_));
    h->sched.back()->set_switches_in(true);
    attach_sink(*h->sched.back(), *h);
  }
  hosts_.push_back(std::move(h));
  return *hosts_.back();
}

Namespace& Net::add_namespace(Host& host, const std::string& name) {
  auto ns = std::make_unique<Namespace>();
  ns->name = name;
  ns->host = &host;
  host.namespaces.push_back(std::move(ns));
  return *host.namespaces.back();
}

void Net::attach(Namespace& ns, std::unique_ptr<Device> dev) {
  dev->ns = &ns;
  dev->index = static_cast<std::uint32_t>(devices_.size());
  ns.devices.push_back(dev.get());
  devices_.push_back(std::move(dev));
}

ExecCtx& Net::add_context(Host& host, const std::string& name, std::uint32_t cpu, Level level) {
  host.other_ctxs.push_back(
      std::make_unique<ExecCtx>(name, *host.cpus.at(cpu), level, &model_));
  attach_sink(*host.other_ctxs.back(), host);
  return *host.other_ctxs.back();
}

void Net::attach_sink(ExecCtx& ctx, Host& host) {
  ctx.set_owner(&host);
  sinks_.push_back(std::make_unique<CtxTraceSink>(*this, ctx, host.name));
  ctx.ledger().set_trace_sink(sinks_.back().get());
}

std::vector<Host*> Net::hosts() const {
  std::vector<Host*> out;
  for (const auto& h : hosts_) {
    out.push_back(h.get());
  }
  return out;
}

Host* Net::host(const std::string& name) const {
  for (const auto& h : hosts_) {
    if (h->name == name) {
      return h.get();
    }
  }
  return nullptr;
}

Host& Net::host_of(const ExecCtx& ctx) const { return *static_cast<Host*>(ctx.owner()); }

Softnet& Net::softnet(ExecCtx& ctx) { return host_of(ctx).softnet.at(ctx.cpu().index()); }

void Net::charge(ExecCtx& ctx, const Skb* skb, const Work& w) {
  if (skb != nullptr) {
    ops::record_skb_work(ctx.ledger(), static_cast<std::uint16_t>(ctx.cpu().index()), *skb, w);
  } else {
    ctx.ledger().record(w);
  }
}

void Net::record_hop(ExecCtx& ctx, const Skb& skb, const std::string& what) {
  record_trace({.time = engine_.now(),
                .host = host_of(ctx).name,
                .ctx = ctx.name(),
                .what = "hop: " + what,
                .skb_id = skb.id(),
                .bytes = skb.len(),
                .cost_ps = 0});
}

void Net::drop(ExecCtx& ctx, Skb& skb, DropReason why) {
  ++drops_[static_cast<std::size_t>(why)];
  const PacketMeta& m = meta(skb);
  dropped_payload_ += m.end_seq - m.seq;
  hop(ctx, skb, "drop: ", drop_reason_name(why));
  OpCtx o = op(ctx);
  ops::kfree_skb(o, skb);
}

void Net::free_skb(ExecCtx& ctx, Skb& skb) {
  OpCtx o = op(ctx);
  if (kernel_.has_consume_skb) {
    ops::consume_skb(o, skb);
  } else {
    ops::kfree_skb(o, skb);
  }
}

void Net::kfree_skb_now(ExecCtx& ctx, Skb& skb) {
  OpCtx o = op(ctx);
  ops::kfree_skb_now(o, skb);
}

void Net::run_deferred_frees() {
  for (auto& h : hosts_) {
    for (std::size_t i = 0; i < h->softnet.size(); ++i) {
      if (!h->softnet[i].defer_list.empty()) {
        raise_net_rx(*h->cpus[i], h->softnet[i]);
      }
    }
  }
}

// 6.x skb_attempt_defer_free (net/core/skbuff.c), as tcp_eat_recv_skb calls it once sock_rfree
// has run: "if (cpu == raw_smp_processor_id() || ...) goto nodefer" (kfree_skb_napi_cache: freed
// here, no tracepoint); "defer_count = atomic_long_inc_return(&sdn->defer_count); if
// (defer_count >= defer_max) goto nodefer;" else llist_add to the allocating CPU's list, and
// "kick = (defer_count - 1) == (defer_max >> 1)": one IPI at a time (kick_defer_list_purge,
// defer_ipi_scheduled) raises NET_RX there (trigger_rx_softirq). That CPU's net_rx_action frees
// the list (skb_defer_free_flush -> napi_consume_skb, which fires the consume_skb tracepoint).
void Net::skb_attempt_defer_free(ExecCtx& ctx, Skb& skb) {
  OpCtx o = op(ctx);
  if (v2620()) {
    ops::kfree_skb_now(o, skb);  // sk_eat_skb: __kfree_skb
    return;
  }
  charge(ctx, &skb, {.sym = Sym::kSkbAttemptDeferFree});
  Host& host = host_of(ctx);
  const std::uint32_t cpu = skb.alloc_cpu;
  if (cpu == ctx.cpu().index() || cpu >= host.softnet.size()) {
    ops::kfree_skb_now(o, skb);  // runs sock_rfree first, as tcp_eat_recv_skb does
    return;
  }
  // tcp_eat_recv_skb: sock_rfree, then skb->destructor = NULL (skb_orphan's inline test stands
  // for the check of the destructor).
  ops::orphan(o, skb);
  // The list is the other CPU's, whose NET_RX runs flush it while a read goes on over many skbs:
  // the skb joins it when the reader's time reaches this point, not when its task began. (It
  // waits on the reader's CPU meanwhile, so the hand-off needs no more than two pointers.)
  softnet(ctx).defer_pending.push_back(skb);
  engine().after_task([this, &ctx] { defer_free(ctx); });
}

void Net::defer_free(ExecCtx& ctx) {
  Host& host = host_of(ctx);
  SkbQueue& pending = softnet(ctx).defer_pending;
  Skb& skb = pending.front();
  pending.pop_front();
  Softnet& sn = host.softnet[skb.alloc_cpu];
  const std::uint64_t count = ++sn.defer_count;
  // What the reader's CPU does past this point (a free, a kick) runs right after the reader's
  // task, in a context of its own: a task of the reader's context would make its socket look
  // owned to what arrives meanwhile.
  ExecCtx& here = *host.sched.at(ctx.cpu().index());
  if (count >= host.skb_defer_max) {
    // nodefer: the reader's CPU frees it (kfree_skb_napi_cache).
    ctx.cpu().submit_next({&here, [this, &here, &skb] { kfree_skb_now(here, skb); }});
    return;
  }
  sn.defer_list.push_back(skb);
  if (count - 1 != host.skb_defer_max >> 1 || sn.defer_ipi_scheduled) {
    return;
  }
  sn.defer_ipi_scheduled = true;
  Cpu& to = *host.cpus[skb.alloc_cpu];
  ctx.cpu().submit_next({&here, [this, &here, &to, &sn] {
                           const Time kick = engine().task_clock();
                           charge(here, Sym::kKickDeferListPurge);
                           // smp_call_function_single_async: no IPI to a CPU still polling in
                           // its idle loop (set_nr_if_polling), which runs the call from there.
                           const bool polling = still_polling(to);
                           // A halted vCPU takes the IPI after the preset's wake-up latency; a
                           // polling one leaves its idle loop after idle_poll_wake_us.
                           const IdleWake wake = to.idle() ? idle_wake(to, polling) : IdleWake{};
                           if (!polling) {
                             charge_ipi(here, wake);
                           }
                           after_latency(kick, wake.latency, [this, &to, &sn, polling] {
                             to.submit({sn.ctx.get(),
                                        [this, &to, &sn, polling] {
                                          if (!polling) {
                                            charge(*sn.ctx, Sym::kIpiInterrupt);
                                          }
                                          sn.defer_ipi_scheduled = false;
                                          raise_net_rx(to, sn);
                                        },
                                        /*by_ipi=*/!polling});
                           });
                         }});
}

void DevCounters::Side::count(const Skb& skb) noexcept {
  ++skbs;
  const std::uint32_t gso = skb.shinfo().gso_size != 0 ? skb.shinfo().gso_segs : 0;
  segments += std::max<std::uint32_t>(gso, 1);
  gso_skbs += skb.shinfo().gso_size != 0 ? 1 : 0;
  len += skb.len();
  data_len += skb.data_len();
  const auto state = static_cast<std::size_t>(skb.ip_summed);
  if (state < ip_summed.size()) {
    ++ip_summed[state];
  }
}

DevCounters::Side DevCounters::Side::since(const Side& earlier) const noexcept {
  Side r;
  r.skbs = skbs - earlier.skbs;
  r.segments = segments - earlier.segments;
  r.gso_skbs = gso_skbs - earlier.gso_skbs;
  r.len = len - earlier.len;
  r.data_len = data_len - earlier.data_len;
  for (std::size_t k = 0; k < r.ip_summed.size(); ++k) {
    r.ip_summed[k] = ip_summed[k] - earlier.ip_summed[k];
  }
  return r;
}

void Net::wake_process(ExecCtx& from, ExecCtx& to, std::function<void()> fn) {
  const Time waking = engine().task_clock();  // sched_waking, where the latency starts
  charge(from, Sym::kScheduleWakeup);
  // ttwu_queue_wakelist -> send_call_function_single_ipi: no IPI to a CPU still polling in its
  // idle loop (set_nr_if_polling; sched:sched_wake_idle_without_ipi), which leaves the loop and
  // runs the task after the preset's idle_poll_wake_us.
  const bool remote_idle = &from.cpu() != &to.cpu() && to.cpu().idle();
  const bool polling = remote_idle && still_polling(to.cpu());
  const bool ipi = remote_idle && !polling;
  const IdleWake wake = remote_idle ? idle_wake(to.cpu(), polling) : IdleWake{};
  if (ipi) {
    charge_ipi(from, wake);
  }
  // The woken task's own code runs only once the IPI and __schedule are done: what arrives
  // meanwhile finds the socket free and is queued by the softirq, and the task sees it. A halted
  // virtual CPU starts on the IPI only after the preset's idle_wake_us, a polling one leaves its
  // idle loop after idle_poll_wake_us: time no CPU spends. (A second wake-up aimed at the CPU
  // meanwhile would find it idle still; in the unlimited runs checked none does.)
  ExecCtx& sched = *host_of(to).sched.at(to.cpu().index());
  auto switch_in = [this, &to, &sched, ipi, fn = std::move(fn)]() mutable {
    to.cpu().submit({&sched,
                     [this, &to, &sched, ipi, fn = std::move(fn)]() mutable {
                       if (ipi) {
                         charge(sched, Sym::kIpiInterrupt);
                       }
                       charge(sched, Sym::kSchedule);
                       charge(sched, Sym::kSchedule);
                       engine().after_task([&to, fn = std::move(fn)]() mutable {
                         to.cpu().submit_next({&to, std::move(fn)});
                       });
                     },
                     ipi});
  };
  after_latency(waking, wake.latency, std::move(switch_in));
}

void Net::after_latency(Time since, Time latency, std::function<void()> fn) {
  const Time spent = engine().task_clock() - since;
  if (latency <= spent) {
    engine().after_task(std::move(fn));
    return;
  }
  engine().after_task([this, rest = latency - spent, fn = std::move(fn)]() mutable {
    engine().at(engine().now() + rest, std::move(fn));
  });
}

// How long an idle vCPU takes to run what a remote CPU woke it for. One still polling in its idle
// loop (no IPI) leaves the loop after the preset's idle_poll_wake_us. A halted one woken by an
// IPI: at idle_wake_us within the host's polling window, else once the host runs its thread
// again. The window adapts as KVM's does after each halt (update_halt_poll_ns in
// virt/kvm/kvm_main.c, default parameters: grow x2 from 10 us, shrink /2, halt_poll_ns the
// maximum): kept after a halt it covered, shrunk after one longer than the maximum, grown after
// a shorter one it missed.
Net::IdleWake Net::idle_wake(Cpu& cpu, bool polling) {
  const CostModel& m = model_;
  if (polling) {
    return {spread_latency(m.idle_poll_wake_ps, m.idle_wake_spread), false};
  }
  const Time max = m.halt_poll_max_ps;
  if (max == 0) {
    return {spread_latency(m.idle_wake_ps, m.idle_wake_spread), false};
  }
  constexpr Time kGrowStart = 10 * kPsPerUs;
  const Time halted = engine().now() - cpu.idle_since();
  Time& poll = cpu.halt_poll_ps();
  const bool hit = poll != 0 && halted <= poll;
  if (hit) {
    // polling ended the halt: the window stays
  } else if (poll != 0 && halted > max) {
    poll = poll / 2 < kGrowStart ? 0 : poll / 2;
  } else if (poll < max && halted < max) {
    poll = std::min(max, std::max(kGrowStart, poll * 2));
  }
  if (hit) {
    return {spread_latency(m.idle_wake_ps, m.idle_wake_spread), false};
  }
  const double spread =
      m.idle_wake_blocked_spread >= 0 ? m.idle_wake_blocked_spread : m.idle_wake_spread;
  return {spread_latency(m.idle_wake_blocked_ps, spread), true};
}

// 6.x send_call_function_single_ipi, 2.6.20 smp_send_reschedule; on a KVM guest the ICR write
// exits, and when the target's thread is blocked on the host its sender waits while the host
// wakes it (kvm_vcpu_kick).
void Net::charge_ipi(ExecCtx& from, const IdleWake& wake) {
  charge(from, Sym::kSendIpi);
  if (wake.host_blocked && model_.ipi_send_blocked_ps > 0) {
    charge(from, Sym::kSendIpiBlocked);
  }
}

bool Net::still_polling(const Cpu& cpu) const {
  return cpu.idle() && engine_.now() - cpu.idle_since() < model_.idle_poll_ps;
}

namespace {

// splitmix64's output function: a bijection of 64-bit words that takes 0 to 0.
std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31U);
}

}  // namespace

void Net::seed_wake_draws(std::uint64_t seed) noexcept {
  // Seeds next to each other start far apart: mixed, not offset along one sequence (seed 2
  // would then draw seed 1's sequence one step on).
  wake_rng_ = kWakeDrawState ^ mix64(seed - 1);
}

Time Net::spread_latency(Time mean, double s) {
  if (s <= 0 || mean <= 0) {
    return mean;
  }
  // Log-normal with that mean: exp(sigma z - sigma^2 / 2) has mean 1 for z standard normal
  // (Box-Muller on two draws of a splitmix64 sequence, the same in every run of one seed).
  const auto uniform = [this] {
    const std::uint64_t z = mix64(wake_rng_ += 0x9e3779b97f4a7c15ULL);
    return (static_cast<double>(z >> 11U) + 0.5) * 0x1p-53;  // 53 random bits, in (0, 1)
  };
  const double u1 = uniform();
  const double u2 = uniform();
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
  return std::llround(static_cast<double>(mean) * std::exp(s * z - s * s / 2));
}

bool Net::rx_csum_known_good(const Skb& skb, std::string_view fn, const std::string& where) {
  switch (skb.ip_summed) {
    case IpSummed::kUnnecessary:
    case IpSummed::kComplete:
      return true;
    case IpSummed::kPartial:
      if (v2620()) {
        hazard("partial_checksum_delivered",
               "2.6.20 " + std::string(fn) +
                   " would verify a CHECKSUM_PARTIAL skb whose checksum field holds only the "
                   "pseudo-header sum: the real kernel drops it as corrupt",
               where);
      }
      return true;
    case IpSummed::kNone:
      break;
  }
  return false;
}

void Net::hazard(const std::string& kind, const std::string& message, const std::string& where) {
  for (const Hazard& h : hazards_) {
    if (h.kind == kind && h.where == where) {
      return;  // reported once per place
    }
  }
  hazards_.push_back({kind, message, where});
}

}  // namespace skbsim::sim
