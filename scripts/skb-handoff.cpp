// skb-handoff.cpp — what handing an sk_buff-like object from one CPU to another costs on this
// machine, against the same work on one CPU. Not part of the build: a probe of the machine
// (docs/measure.md, "Where the receive path runs" and "An skb's hand-over between the CPUs").
//
//   g++ -O2 -std=c++20 -pthread scripts/skb-handoff.cpp -o /tmp/skb-handoff
//   /tmp/skb-handoff [PAYLOAD_BYTES [no-counter]]   (default 1448; 0 for the headers alone)
//
// With no-counter neither side touches the shared counter: what is left is the objects' own
// lines and the queue's, so the difference is what the socket's counter costs.
//
// CPU 0 builds objects shaped like a 6.x sk_buff (four cache lines, TCP's control block in the
// first two) with a one-line tail like skb_shared_info and a payload buffer, charges a counter
// shared with CPU 1 (sk_rmem_alloc), and queues them on a ring; CPU 1 takes each, reads it along
// the pointers the receive path follows (the control block, len, the tail through a pointer, the
// payload), writes two fields (destructor, sk), uncharges the counter and pushes the object on a
// lock-free list (skb_attempt_defer_free's), which CPU 0 empties by walking it and reuses. Each
// side's time is the work only (rdtsc around it, not the waits); the one-CPU run does the same
// steps in batches of 32. The difference is what the second CPU's cache misses and the shared
// lines' transfers cost, per object and side: each repetition prints it as "hand-over" (the two
// sides' mean less half the one-CPU time), and the last line the median over the repetitions.
// With the headers alone, that median is what a preset's cpu.skb_handover_ns takes (the payload's
// transfer is in the copy rate, fitted where the reader copies from the other CPU's cache).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <x86intrin.h>

namespace {

constexpr int kObjects = 4096;
constexpr int kRing = 256;
constexpr long kRounds = 2'000'000;
constexpr int kReps = 9;  // odd: the median is one of them

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

struct alignas(64) Tail {  // skb_shared_info's first line
  std::atomic<int> dataref;
  int nr_frags;
  std::uint64_t frag[6];
};

struct alignas(64) Obj {  // struct sk_buff, 256 bytes
  Obj* next;
  Obj* prev;
  void* sk;
  void* dev;
  std::uint32_t cb[8];  // line 0: TCP_SKB_CB's seq, end_seq, ...
  std::uint32_t len, data_len, mac_len, hdr_len;
  std::uint64_t misc[5];
  void* destructor;        // line 1
  std::uint64_t flags[8];  // line 2
  Tail* shinfo;
  char* head;
  char* data;
  std::uint32_t truesize;
  std::atomic<int> users;
  Obj* ll;               // the deferred-free list's link
  std::uint64_t pad[3];  // line 3
};
static_assert(sizeof(Obj) == 256);

struct alignas(64) Counter {
  std::atomic<long> v{0};
};
struct alignas(64) Index {
  std::atomic<long> v{0};
};
struct alignas(64) List {
  std::atomic<Obj*> head{nullptr};
};

struct Shared {
  std::vector<Obj> objs = std::vector<Obj>(kObjects);
  std::vector<Tail> tails = std::vector<Tail>(kObjects);
  std::vector<std::array<char, 1536>> payload = std::vector<std::array<char, 1536>>(kObjects);
  Obj* ring[kRing] = {};
  Index produced, consumed;
  Counter rmem;
  List deferred;
  std::vector<Obj*> free_objs;
  char user_src[1536] = {};
  char user_dst[1536] = {};
  int payload_bytes = 1448;
  bool counter = true;  // sk_rmem_alloc charged and uncharged
};

void build(Shared& sh, Obj* o, long i) {
  if (sh.payload_bytes > 0) {
    std::memcpy(o->data, sh.user_src, static_cast<std::size_t>(sh.payload_bytes));
  }
  o->next = o->prev = nullptr;
  o->sk = &sh.rmem;
  o->dev = nullptr;
  for (int k = 0; k < 8; ++k) {
    o->cb[k] = static_cast<std::uint32_t>(i + k);
  }
  o->len = 1448;
  o->data_len = 0;
  o->mac_len = 14;
  o->hdr_len = 0;
  for (auto& m : o->misc) {
    m = static_cast<std::uint64_t>(i);
  }
  o->destructor = reinterpret_cast<void*>(1);
  for (auto& f : o->flags) {
    f = static_cast<std::uint64_t>(i);
  }
  o->shinfo->dataref.store(1, std::memory_order_relaxed);
  o->shinfo->nr_frags = 0;
  o->truesize = 2304;
  o->users.store(1, std::memory_order_relaxed);
  o->ll = nullptr;
  if (sh.counter) {
    sh.rmem.v.fetch_add(o->truesize, std::memory_order_relaxed);  // skb_set_owner_r
  }
}

long consume(Shared& sh, Obj* o) {
  if (sh.payload_bytes > 0) {
    std::memcpy(sh.user_dst, o->data, static_cast<std::size_t>(sh.payload_bytes));
  }
  long s = o->cb[0] + o->len;
  const Tail* t = o->shinfo;
  s += t->nr_frags;
  o->destructor = nullptr;  // tcp_eat_recv_skb
  o->sk = nullptr;
  if (sh.counter) {
    sh.rmem.v.fetch_sub(o->truesize, std::memory_order_relaxed);  // sock_rfree
  }
  Obj* h = sh.deferred.head.load(std::memory_order_relaxed);
  do {
    o->ll = h;
  } while (!sh.deferred.head.compare_exchange_weak(h, o, std::memory_order_release,
                                                   std::memory_order_relaxed));
  return s;
}

int reclaim(Shared& sh) {  // skb_defer_free_flush
  Obj* h = sh.deferred.head.exchange(nullptr, std::memory_order_acquire);
  int n = 0;
  while (h != nullptr) {
    Obj* next = h->ll;
    h->shinfo->dataref.fetch_sub(1, std::memory_order_relaxed);
    sh.free_objs.push_back(h);
    h = next;
    ++n;
  }
  return n;
}

double tsc_ns_per_tick() {
  const auto t0 = std::chrono::steady_clock::now();
  const unsigned long long c0 = __rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const unsigned long long c1 = __rdtsc();
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  return ns / static_cast<double>(c1 - c0);
}

}  // namespace

int main(int argc, char** argv) {
  Shared sh;
  sh.payload_bytes = argc > 1 ? std::atoi(argv[1]) : 1448;
  if (sh.payload_bytes < 0 || sh.payload_bytes > 1536) {
    std::fprintf(stderr, "skb-handoff: expected a payload of 0 to 1536 bytes\n");
    return 2;
  }
  if (argc > 2) {
    if (std::strcmp(argv[2], "no-counter") != 0) {
      std::fprintf(stderr, "skb-handoff: expected no-counter after the payload, got %s\n", argv[2]);
      return 2;
    }
    sh.counter = false;
  }
  for (int i = 0; i < kObjects; ++i) {
    Obj& o = sh.objs[static_cast<std::size_t>(i)];
    o.shinfo = &sh.tails[static_cast<std::size_t>(i)];
    o.head = o.data = sh.payload[static_cast<std::size_t>(i)].data();
    sh.free_objs.push_back(&o);
  }
  const double ns_per_tick = tsc_ns_per_tick();
  long sink = 0;
  std::vector<double> handovers;
  for (int rep = 0; rep < kReps; ++rep) {
    sh.produced.v = 0;
    sh.consumed.v = 0;
    unsigned long long producer_ticks = 0;
    unsigned long long consumer_ticks = 0;
    std::thread consumer([&] {
      pin(1);
      for (long i = 0; i < kRounds; ++i) {
        while (sh.produced.v.load(std::memory_order_acquire) <= i) {
        }
        const unsigned long long t = __rdtsc();
        sink += consume(sh, sh.ring[i % kRing]);
        consumer_ticks += __rdtsc() - t;
        sh.consumed.v.store(i + 1, std::memory_order_release);
      }
    });
    pin(0);
    for (long i = 0; i < kRounds; ++i) {
      while (i - sh.consumed.v.load(std::memory_order_acquire) >= kRing - 1) {
      }
      const unsigned long long t = __rdtsc();
      while (sh.free_objs.empty()) {
        reclaim(sh);
      }
      if ((i & 31) == 0) {
        reclaim(sh);
      }
      Obj* o = sh.free_objs.back();
      sh.free_objs.pop_back();
      build(sh, o, i);
      sh.ring[i % kRing] = o;
      producer_ticks += __rdtsc() - t;
      sh.produced.v.store(i + 1, std::memory_order_release);
    }
    consumer.join();
    while (reclaim(sh) != 0) {
    }
    // one CPU: 32 built, then the same 32 consumed, freed at the next batch
    const unsigned long long t0 = __rdtsc();
    for (long i = 0; i < kRounds; i += 32) {
      reclaim(sh);
      Obj* batch[32];
      for (int k = 0; k < 32; ++k) {
        batch[k] = sh.free_objs.back();
        sh.free_objs.pop_back();
        build(sh, batch[k], i + k);
      }
      for (Obj* o : batch) {
        sink += consume(sh, o);
      }
    }
    const double one_cpu = static_cast<double>(__rdtsc() - t0) * ns_per_tick / kRounds;
    while (reclaim(sh) != 0) {
    }
    const double builder = static_cast<double>(producer_ticks) * ns_per_tick / kRounds;
    const double reader = static_cast<double>(consumer_ticks) * ns_per_tick / kRounds;
    handovers.push_back((builder + reader) / 2 - one_cpu / 2);
    std::printf(
        "payload %d B%s: two CPUs: builder %.1f ns, reader %.1f ns per object; "
        "one CPU: %.1f ns for both; hand-over %.1f ns per side\n",
        sh.payload_bytes, sh.counter ? "" : ", no counter", builder, reader, one_cpu,
        handovers.back());
  }
  std::sort(handovers.begin(), handovers.end());
  std::printf("hand-over, median of %d: %.1f ns per object and side (%.1f-%.1f)\n", kReps,
              handovers[handovers.size() / 2], handovers.front(), handovers.back());
  return sink == 42 ? 1 : 0;
}
