// skb_property_test.cpp — randomized property tests of the skb core (skb_ops.hpp) against a small
// shadow model, for both kernel versions.
//
// What runs:
//   SkbOpsProperty.RandomSequencesMatchShadow/<kernel>_seed_<n>
//       100 seeds x 1,000 random LEGAL steps per kernel version. After every step: check_pool(),
//       and every observable field of every live skb, data buffer and page, the pool's live
//       counts, the sockets' wmem_alloc, the pending failure injection and the ledger's per-step
//       bytes copied / checksummed, page references and allocs / frees, all compared with the
//       shadow. At the end everything the test holds is freed and SkbPool::empty() must hold.
//   SkbOpsIllegal.ThrowsThePredictedBug/<kernel>_<op>
//       generates ILLEGAL operations on purpose: the shadow predicts the BUG condition, the core
//       must throw SkbBug with exactly that condition, op and skb, and leave everything untouched.
//   SkbOpsCoverage.EveryOpKindIsExercised
//       replays the same op streams on the shadow alone (the generator reads only the shadow, so
//       the streams are the ones the checked runs execute; a full-binary run compares the two
//       tables), prints the coverage table and requires every op kind kMinOps times.
//
// The shadow is written from the kernel rules (kernel-skb-facts.md §1.3, §2, §3, §4 and
// docs/kernel-notes.md §3-§12), never by calling the library: per skb it keeps its own buffer
// index, data/tail/end offsets, len, data_len, truesize, users, flags, fclone state and owner; per
// buffer lo16/hi16 of dataref and the frags; per page the refcount; per fclone pair fclone_ref.
// It restates the kernel constants itself (one test checks them against KernelModel, so a change
// there is a conscious one). Where the core models more than the kernel checks (which bytes a
// cloned skb may write, DataBuf::payload_start), the shadow follows the core's documented rule.
//
// SKBSIM_PROPERTY_SEEDS=<n> runs seeds 1..n only (tests/mutation/ runs the mutant with 5). A
// mismatch prints "SHADOW MISMATCH" with kernel, seed, step, the op and the ops before it.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "skbsim/bug.hpp"
#include "skbsim/kernel.hpp"
#include "skbsim/ledger.hpp"
#include "skbsim/skb.hpp"
#include "skbsim/skb_check.hpp"
#include "skbsim/skb_ops.hpp"
#include "skbsim/skb_pool.hpp"

namespace skbsim {
namespace {

constexpr int kStepsPerSeed = 1000;
constexpr std::uint64_t kSeeds = 100;
constexpr std::uint64_t kMinOps = 500;     // per op kind and version over all seeds
constexpr std::uint64_t kMinEvents = 20;   // per interesting outcome and version
constexpr std::uint16_t kUnset = 0xFFFFU;  // a header offset not set

std::uint64_t seeds_to_run() {
  if (const char* e = std::getenv("SKBSIM_PROPERTY_SEEDS"); e != nullptr && *e != '\0') {
    return std::min<std::uint64_t>(std::strtoull(e, nullptr, 10), kSeeds);
  }
  return kSeeds;
}

// ---- the two kernels, restated from kernel-notes.md §1-§3 (not read from KernelModel) ----------

struct Kern {
  bool v2620;
  std::uint32_t sk_buff;     // sizeof(struct sk_buff): 168 (2.6.20 i386), 232 (6.x x86_64)
  std::uint32_t shinfo;      // sizeof(struct skb_shared_info): 164, 320
  std::uint32_t frags_off;   // offsetof(struct skb_shared_info, frags): 20, 48
  std::uint32_t frag_desc;   // sizeof(skb_frag_t): 8, 16
  std::uint32_t max_frags;   // MAX_SKB_FRAGS: 18, 17
  std::uint32_t pad;         // NET_SKB_PAD: 16, 64
  std::uint32_t small_head;  // SKB_SMALL_HEAD_CACHE_SIZE (6.x distro config): 704
  std::uint32_t fclone_obj;  // the fclone cache object: 2 sk_buffs + the refcount
};
constexpr Kern kKern2620{true, 168, 164, 20, 8, 18, 16, 0, 2 * 168 + 4};
constexpr Kern kKern6x{false, 232, 320, 48, 16, 17, 64, 704, 2 * 232 + 8};
constexpr std::uint32_t kLine = 64;  // SMP_CACHE_BYTES / L1_CACHE_BYTES
constexpr std::uint32_t kPageBytes = 4096;

const Kern& kern_for(KernelVersion v) {
  return v == KernelVersion::k2_6_20 ? kKern2620 : kKern6x;
}
int vidx(KernelVersion v) {
  return v == KernelVersion::k2_6_20 ? 0 : 1;
}
const char* vname(KernelVersion v) {
  return v == KernelVersion::k2_6_20 ? "2.6.20" : "6.x";
}

// SKB_DATA_ALIGN.
std::uint32_t line_align(std::uint32_t x) {
  return (x + kLine - 1) / kLine * kLine;
}
std::uint32_t round_up(std::uint32_t x, std::uint32_t a) {
  return (x + a - 1) / a * a;
}

// The slab object kmalloc(bytes) gets: 2.6.20 general caches with 64-byte lines (no 96, a 192);
// 6.x SLUB caches up to 8 KiB, then whole pages in power-of-two orders (kernel-notes §2).
std::uint32_t kmalloc_object(const Kern& k, std::uint32_t bytes) {
  static constexpr std::array<std::uint32_t, 14> k2620 = {
      32, 64, 128, 192, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
  static constexpr std::array<std::uint32_t, 13> k6 = {8,   16,  32,   64,   96,   128, 192,
                                                       256, 512, 1024, 2048, 4096, 8192};
  if (k.v2620) {
    for (std::uint32_t c : k2620) {
      if (bytes <= c) {
        return c;
      }
    }
    return 0;  // beyond the largest cache: the harness never asks for that much
  }
  for (std::uint32_t c : k6) {
    if (bytes <= c) {
      return c;
    }
  }
  std::uint32_t pages = 2 * kPageBytes;
  while (pages < bytes) {
    pages *= 2;
  }
  return pages;
}

// A data head for __alloc_skb(size) / pskb_expand_head: its usable end and the slab object.
// 2.6.20: end = SKB_DATA_ALIGN(size), kmalloc(end + shinfo). 6.x: SKB_HEAD_ALIGN(size) from the
// small-head cache when it fits, else kmalloc_size_roundup; end = object - aligned shinfo.
struct Head {
  std::uint32_t end;
  std::uint32_t object;
  bool small;
};
Head head_for(const Kern& k, std::uint32_t size) {
  if (k.v2620) {
    const std::uint32_t end = line_align(size);
    return {end, kmalloc_object(k, end + k.shinfo), false};
  }
  const std::uint32_t shinfo = line_align(k.shinfo);
  const std::uint32_t obj = line_align(size) + shinfo;
  if (obj <= k.small_head) {
    return {k.small_head - shinfo, k.small_head, true};
  }
  const std::uint32_t a = kmalloc_object(k, obj);
  return {a - shinfo, a, false};
}
// 2.6.20: end + sizeof(sk_buff). 6.x SKB_TRUESIZE(end): plus the aligned sk_buff and shinfo.
std::uint32_t truesize_of(const Kern& k, std::uint32_t end) {
  return k.v2620 ? end + k.sk_buff : end + line_align(k.sk_buff) + line_align(k.shinfo);
}

// ---- operations and outcomes the suite counts ---------------------------------------------------

#define SKBSIM_PROP_OPS(X)                \
  X(kAllocSkb, "alloc_skb")               \
  X(kAllocSkbFclone, "alloc_skb_fclone")  \
  X(kNetdevAllocSkb, "netdev_alloc_skb")  \
  X(kReserve, "skb_reserve")              \
  X(kPut, "skb_put")                      \
  X(kPush, "skb_push")                    \
  X(kPull, "skb_pull")                    \
  X(kTrim, "skb_trim")                    \
  X(kClone, "skb_clone")                  \
  X(kCopy, "skb_copy")                    \
  X(kPskbCopy, "pskb_copy")               \
  X(kExpandHead, "pskb_expand_head")      \
  X(kCow, "skb_cow")                      \
  X(kCowHead, "skb_cow_head")             \
  X(kHeaderRelease, "skb_header_release") \
  X(kGet, "skb_get")                      \
  X(kKfreeSkb, "kfree_skb")               \
  X(kConsumeSkb, "consume_skb")           \
  X(kUnshare, "skb_unshare")              \
  X(kShareCheck, "skb_share_check")       \
  X(kAllocPage, "alloc_page")             \
  X(kGetPage, "get_page")                 \
  X(kPutPage, "put_page")                 \
  X(kAddRxFrag, "skb_add_rx_frag")        \
  X(kLinearize, "skb_linearize")          \
  X(kSetOwnerW, "skb_set_owner_w")        \
  X(kOrphan, "skb_orphan")                \
  X(kChecksumHelp, "skb_checksum_help")

enum class Op : std::uint8_t {
#define SKBSIM_PROP_ENUM(e, n) e,
  SKBSIM_PROP_OPS(SKBSIM_PROP_ENUM)
#undef SKBSIM_PROP_ENUM
      kCount
};
constexpr std::size_t kOpCount = static_cast<std::size_t>(Op::kCount);
constexpr std::array<const char*, kOpCount> kOpNames = {
#define SKBSIM_PROP_NAME(e, n) n,
    SKBSIM_PROP_OPS(SKBSIM_PROP_NAME)
#undef SKBSIM_PROP_NAME
};
std::size_t oi(Op op) {
  return static_cast<std::size_t>(op);
}

// Outcomes worth knowing were reached, not only attempted.
#define SKBSIM_PROP_EVENTS(X)                                                        \
  X(kInjectedFailure, "  injected allocation failure consumed")                      \
  X(kCloneCompanion, "  skb_clone from the fclone companion")                        \
  X(kCloneSlab, "  skb_clone from the slab")                                         \
  X(kExpandOfClone, "  pskb_expand_head of a cloned skb")                            \
  X(kExpandOfNohdr, "  pskb_expand_head of a nohdr skb")                             \
  X(kExpandWithFrags, "  pskb_expand_head with frags")                               \
  X(kCowCopied, "  skb_cow copied")                                                  \
  X(kCowNoCopy, "  skb_cow did not copy")                                            \
  X(kCowHeadCopied, "  skb_cow_head copied")                                         \
  X(kCowHeadNoCopy, "  skb_cow_head did not copy (cloned, header private)")          \
  X(kUnshareCopied, "  skb_unshare copied")                                          \
  X(kShareCheckCloned, "  skb_share_check cloned")                                   \
  X(kLinearizeExpanded, "  skb_linearize expanded first")                            \
  X(kLinearizeInPlace, "  skb_linearize in place")                                   \
  X(kChecksumExpanded, "  skb_checksum_help copied the head")                        \
  X(kChecksumSummed, "  skb_checksum_help summed without a copy")                    \
  X(kChecksumRefused, "  skb_checksum_help -EINVAL (6.x: start/field past headlen)") \
  X(kPullRefused, "  skb_pull refused (beyond len)")                                 \
  X(kTrimRefused, "  skb_trim refused (nonlinear)")                                  \
  X(kPutIntoHeaderArea, "  skb_put by a clone into its private header area")         \
  X(kBufferFreed, "  data buffer freed")                                             \
  X(kPairFreed, "  fclone pair freed")                                               \
  X(kPageFreedByRelease, "  page freed by skb_release_data / pull")                  \
  X(kWfreeOnFree, "  sock_wfree run by kfree_skb")

enum class Ev : std::uint8_t {
#define SKBSIM_PROP_ENUM(e, n) e,
  SKBSIM_PROP_EVENTS(SKBSIM_PROP_ENUM)
#undef SKBSIM_PROP_ENUM
      kCount
};
constexpr std::size_t kEvCount = static_cast<std::size_t>(Ev::kCount);
constexpr std::array<const char*, kEvCount> kEvNames = {
#define SKBSIM_PROP_NAME(e, n) n,
    SKBSIM_PROP_EVENTS(SKBSIM_PROP_NAME)
#undef SKBSIM_PROP_NAME
};

struct Counts {
  std::array<std::uint64_t, kOpCount> ops{};
  std::array<std::uint64_t, kEvCount> ev{};
  std::uint64_t runs = 0;
  void add(const Counts& o) {
    for (std::size_t i = 0; i < kOpCount; ++i) {
      ops[i] += o.ops[i];
    }
    for (std::size_t i = 0; i < kEvCount; ++i) {
      ev[i] += o.ev[i];
    }
    runs += o.runs;
  }
};
// Filled by the checked runs and by the shadow-only replay; compared at the end of a full run.
std::array<Counts, 2> g_checked;
std::array<Counts, 2> g_replay;

bool op_exists(Op op, KernelVersion v) {
  return v == KernelVersion::k6x || (op != Op::kCowHead && op != Op::kConsumeSkb);
}

// ---- the shadow model ---------------------------------------------------------------------------

struct ShFrag {
  int page;
  std::uint32_t off;
  std::uint32_t size;
};
struct ShPage {
  bool live = false;
  std::uint32_t ref = 0;
  Page* lib = nullptr;
  std::uint64_t lib_id = 0;
};
struct ShBuf {
  bool live = false;
  std::uint32_t lo = 1;  // lo16 of dataref: every skb on the buffer
  std::uint32_t hi = 0;  // hi16: the payload-only (nohdr) ones
  std::uint32_t end = 0;
  std::uint32_t object = 0;
  bool small = false;
  std::uint32_t payload_start = 0;  // where skb_header_release put the header/payload split
  std::vector<ShFrag> frags;
  int creator = -1;  // the skb that got it (to bind the library's DataBuf after the step)
  const DataBuf* lib = nullptr;
  std::uint64_t lib_id = 0;
};
struct ShPair {
  bool live = false;
  std::uint32_t ref = 0;  // fclone_ref
  int companion = -1;     // the live CLONE, or -1 when the slot is free
};
struct ShSkb {
  bool live = false;
  int buf = -1;
  int pair = -1;
  Fclone fclone = Fclone::kUnavailable;
  std::uint32_t data = 0, tail = 0, end = 0, len = 0, data_len = 0, truesize = 0;
  std::uint32_t users = 1, hdr_len = 0;
  bool cloned = false, nohdr = false;
  int sk = -1;  // owning socket index, -1 none (destructor sock_wfree when set)
  IpSummed ip_summed = IpSummed::kNone;
  std::uint16_t csum_start = 0, csum_offset = 0, transport_header = kUnset;
  Skb* lib = nullptr;
  std::uint64_t lib_id = 0;
};

// What the ledger should show for one step.
struct Cost {
  std::uint64_t copied = 0, summed = 0, page_refs = 0;
  std::uint64_t allocs = 0, alloc_bytes = 0, frees = 0, free_bytes = 0;
  std::uint64_t expand_copied = 0, copy_bits_copied = 0, pskb_copy_copied = 0;
  void alloc(std::uint32_t b) {
    ++allocs;
    alloc_bytes += b;
  }
  void free(std::uint32_t b) {
    ++frees;
    free_bytes += b;
  }
  bool operator==(const Cost&) const = default;
};
std::string to_string(const Cost& c) {
  std::ostringstream o;
  o << "{copied " << c.copied << " (expand " << c.expand_copied << ", copy_bits "
    << c.copy_bits_copied << ", pskb_copy " << c.pskb_copy_copied << "), summed " << c.summed
    << ", page_refs " << c.page_refs << ", allocs " << c.allocs << "/" << c.alloc_bytes
    << " B, frees " << c.frees << "/" << c.free_bytes << " B}";
  return o.str();
}
Cost ledger_now(const Ledger& l) {
  const LedgerCell t = l.total();
  Cost c;
  c.copied = t.bytes_copied();
  c.summed = t.bytes_checksummed();
  c.page_refs = t.page_refs;
  c.allocs = t.allocs;
  c.alloc_bytes = t.alloc_bytes;
  c.frees = t.frees;
  c.free_bytes = t.free_bytes;
  c.expand_copied = l.cell(Sym::kPskbExpandHead).bytes_copied();
  c.copy_bits_copied = l.cell(Sym::kSkbCopyBits).bytes_copied();
  c.pskb_copy_copied = l.cell(Sym::kPskbCopy).bytes_copied();
  return c;
}
Cost operator-(const Cost& a, const Cost& b) {
  Cost c;
  c.copied = a.copied - b.copied;
  c.summed = a.summed - b.summed;
  c.page_refs = a.page_refs - b.page_refs;
  c.allocs = a.allocs - b.allocs;
  c.alloc_bytes = a.alloc_bytes - b.alloc_bytes;
  c.frees = a.frees - b.frees;
  c.free_bytes = a.free_bytes - b.free_bytes;
  c.expand_copied = a.expand_copied - b.expand_copied;
  c.copy_bits_copied = a.copy_bits_copied - b.copy_bits_copied;
  c.pskb_copy_copied = a.pskb_copy_copied - b.pskb_copy_copied;
  return c;
}

// A BUG the shadow expects: the condition, in the core's words, and the op it is raised in.
struct Predicted {
  std::string condition;
  Sym op;
};

// Slots are recycled through free lists so every per-step sweep stays proportional to what is live.
template <typename T>
int take_slot(std::vector<T>& v, std::vector<int>& free_list) {
  if (!free_list.empty()) {
    const int i = free_list.back();
    free_list.pop_back();
    v[static_cast<std::size_t>(i)] = T{};
    return i;
  }
  v.emplace_back();
  return static_cast<int>(v.size() - 1);
}

class Shadow {
 public:
  Shadow(const Kern& k, Counts& counts) : k_(k), counts_(counts) {}

  const Kern& k() const { return k_; }
  ShSkb& skb(int i) { return skbs_[static_cast<std::size_t>(i)]; }
  const ShSkb& skb(int i) const { return skbs_[static_cast<std::size_t>(i)]; }
  ShBuf& buf(int i) { return bufs_[static_cast<std::size_t>(i)]; }
  const ShBuf& buf(int i) const { return bufs_[static_cast<std::size_t>(i)]; }
  ShPage& page(int i) { return pages_[static_cast<std::size_t>(i)]; }
  const ShPage& page(int i) const { return pages_[static_cast<std::size_t>(i)]; }
  const ShPair& pair(int i) const { return pairs_[static_cast<std::size_t>(i)]; }
  const std::vector<ShSkb>& skbs() const { return skbs_; }
  std::vector<ShSkb>& skbs() { return skbs_; }
  const std::vector<ShBuf>& bufs() const { return bufs_; }
  std::vector<ShBuf>& bufs() { return bufs_; }
  const std::vector<ShPage>& pages() const { return pages_; }
  const std::vector<ShPair>& pairs() const { return pairs_; }

  bool fail = false;  // the pending failure injection (OpCtx::fail_next_alloc)
  Cost cost;          // what the current step should have recorded
  std::array<std::int64_t, 2> wmem{};

  // ---- geometry and the three predicates (kernel-skb-facts.md §1.3) ----
  static std::uint32_t headlen(const ShSkb& s) { return s.tail - s.data; }
  static std::uint32_t headroom(const ShSkb& s) { return s.data; }
  static std::uint32_t tailroom(const ShSkb& s) { return s.data_len != 0 ? 0 : s.end - s.tail; }
  bool cloned(const ShSkb& s) const { return s.cloned && buf(s.buf).lo != 1; }
  bool header_cloned(const ShSkb& s) const {
    const ShBuf& b = buf(s.buf);
    return s.cloned && static_cast<std::int64_t>(b.lo) - static_cast<std::int64_t>(b.hi) != 1;
  }
  static bool shared(const ShSkb& s) { return s.users != 1; }

  std::size_t live_skbs() const { return count_live(skbs_); }
  std::size_t live_bufs() const { return count_live(bufs_); }
  std::size_t live_pages() const { return count_live(pages_); }
  std::size_t live_pairs() const { return count_live(pairs_); }

  void event(Ev e) { ++counts_.ev[static_cast<std::size_t>(e)]; }

  // ---- allocation: __alloc_skb, alloc_skb_fclone, __netdev_alloc_skb (facts §2.1) ----
  int alloc(std::uint32_t size, bool fclone, bool netdev) {
    if (consume_failure()) {
      return -1;
    }
    const Head h = head_for(k_, netdev ? size + k_.pad : size);
    cost.alloc(fclone ? k_.fclone_obj : k_.sk_buff);
    const int b = new_buf(h);
    const int n = new_skb();
    ShSkb& s = skb(n);
    s.buf = b;
    buf(b).creator = n;
    s.end = h.end;
    s.truesize = truesize_of(k_, h.end);
    if (netdev) {  // skb_reserve(NET_SKB_PAD)
      s.data = s.tail = k_.pad;
    }
    if (fclone) {
      const int p = take_slot(pairs_, free_pairs_);
      pairs_[static_cast<std::size_t>(p)] = ShPair{true, 1, -1};
      s.pair = p;
      s.fclone = Fclone::kOrig;
    }
    return n;
  }

  // ---- pointer operations (facts §2.2) ----
  void reserve(int i, std::uint32_t n) {
    skb(i).data += n;
    skb(i).tail += n;
  }
  std::uint32_t put(int i, std::uint32_t n) {
    ShSkb& s = skb(i);
    if (cloned(s)) {
      event(Ev::kPutIntoHeaderArea);
    }
    const std::uint32_t old = s.tail;
    s.tail += n;
    s.len += n;
    return old;
  }
  void push(int i, std::uint32_t n) {
    skb(i).data -= n;
    skb(i).len += n;
  }
  bool pull(int i, std::uint32_t n) {
    ShSkb& s = skb(i);
    if (n > s.len) {
      event(Ev::kPullRefused);
      return false;
    }
    s.data += n;
    s.len -= n;
    return true;
  }
  bool trim(int i, std::uint32_t n) {
    ShSkb& s = skb(i);
    if (s.len <= n) {
      return true;
    }
    if (s.data_len != 0) {  // __skb_trim WARNs on a nonlinear skb and does nothing
      event(Ev::kTrimRefused);
      return false;
    }
    s.len = n;
    s.tail = s.data + n;
    return true;
  }

  // ---- skb_clone (kernel-notes §11) ----
  int clone(int i) {
    int n = -1;
    const int p = skb(i).pair;
    if (skb(i).fclone == Fclone::kOrig && pairs_[static_cast<std::size_t>(p)].companion < 0) {
      n = new_skb();
      ShPair& pr = pairs_[static_cast<std::size_t>(p)];
      pr.companion = n;
      ++pr.ref;
      skb(n).pair = p;
      skb(n).fclone = Fclone::kClone;
      event(Ev::kCloneCompanion);
    } else {
      if (consume_failure()) {
        return -1;
      }
      cost.alloc(k_.sk_buff);
      n = new_skb();
      event(Ev::kCloneSlab);
    }
    ShSkb& o = skb(i);
    ShSkb& c = skb(n);
    c.buf = o.buf;
    c.data = o.data;
    c.tail = o.tail;
    c.end = o.end;
    c.len = o.len;
    c.data_len = o.data_len;
    c.truesize = o.truesize;
    copy_meta(c, o);
    c.users = 1;
    c.cloned = true;
    c.nohdr = false;
    c.sk = -1;
    c.hdr_len = k_.v2620 ? 0 : (o.nohdr ? headroom(o) : o.hdr_len);
    ++buf(o.buf).lo;
    o.cloned = true;
    return n;
  }

  // ---- skb_copy: a private linear copy of headroom + len (facts §3.1, notes §4) ----
  int copy(int i) {
    const ShSkb& o = skb(i);
    const int n = alloc_plain(o.end + o.data_len);
    if (n < 0) {
      return -1;
    }
    const ShSkb& src = skb(i);  // alloc_plain may have grown the vector
    ShSkb& c = skb(n);
    c.data = headroom(src);
    c.tail = headroom(src) + src.len;
    c.len = src.len;
    copy_meta(c, src);
    cost.copied += headroom(src) + src.len;
    cost.copy_bits_copied += headroom(src) + src.len;
    return n;
  }

  // ---- pskb_copy: private head, headlen copied, frags shared by page reference ----
  int pskb_copy(int i) {
    const ShSkb& o = skb(i);
    const std::uint32_t size = k_.v2620 ? o.end : headroom(o) + headlen(o);
    const int n = alloc_plain(size);
    if (n < 0) {
      return -1;
    }
    const ShSkb& src = skb(i);
    ShSkb& c = skb(n);
    c.data = headroom(src);
    c.tail = headroom(src) + headlen(src);
    c.len = src.len;
    c.data_len = src.data_len;
    c.truesize += src.data_len;
    const std::vector<ShFrag> frags = buf(src.buf).frags;
    buf(c.buf).frags = frags;
    for (const ShFrag& f : frags) {
      ++page(f.page).ref;
    }
    copy_meta(c, src);
    cost.copied += headlen(src);
    cost.pskb_copy_copied += headlen(src);
    cost.page_refs += frags.size();
    return n;
  }

  // ---- pskb_expand_head (facts §3.1, §3.2; notes §5). The caller checked !skb_shared. ----
  int expand(int i, std::uint32_t nhead, std::uint32_t ntail) {
    if (consume_failure()) {
      return kENOMEM;
    }
    const int old_b = skb(i).buf;
    const bool was_cloned = cloned(skb(i));
    const bool take_refs = k_.v2620 || was_cloned;
    const std::vector<ShFrag> frags = buf(old_b).frags;
    const std::uint32_t nr = static_cast<std::uint32_t>(frags.size());
    const std::uint32_t shinfo_bytes = k_.v2620 ? k_.shinfo : k_.frags_off + k_.frag_desc * nr;
    const std::uint32_t copied = skb(i).tail + shinfo_bytes;  // tail - head + shared info
    cost.copied += copied;
    cost.expand_copied += copied;
    if (was_cloned) {
      event(Ev::kExpandOfClone);
    }
    if (skb(i).nohdr) {
      event(Ev::kExpandOfNohdr);
    }
    if (nr > 0) {
      event(Ev::kExpandWithFrags);
    }
    const Head h = head_for(k_, line_align(nhead + skb(i).end + ntail));
    const int nb = new_buf(h);
    buf(nb).creator = i;
    buf(nb).frags = frags;
    if (take_refs) {
      for (const ShFrag& f : frags) {
        ++page(f.page).ref;
      }
      cost.page_refs += nr;
      release_data(i);
    } else {
      // 6.x, not cloned: the frag references move with the shared info; only the head is freed.
      buf(old_b).frags.clear();
      free_head(old_b);
    }
    ShSkb& s = skb(i);
    const std::uint32_t old_end = s.end;
    s.buf = nb;
    s.data += nhead;
    s.tail += nhead;
    s.end = h.end;
    if (s.transport_header != kUnset) {
      s.transport_header = static_cast<std::uint16_t>(s.transport_header + nhead);
    }
    if (!k_.v2620 && s.ip_summed == IpSummed::kPartial) {
      s.csum_start = static_cast<std::uint16_t>(s.csum_start + nhead);
    }
    s.cloned = false;
    s.nohdr = false;
    s.hdr_len = 0;
    if (!k_.v2620 && s.sk < 0) {
      s.truesize += h.end - old_end;
    }
    return 0;
  }

  // ---- skb_cow / skb_cow_head (facts §4.1, notes §6) ----
  bool cow_copies(const ShSkb& s, std::uint32_t headroom_wanted, bool head_only,
                  std::uint32_t* delta_out) const {
    const std::uint32_t need = k_.v2620 ? std::max(headroom_wanted, k_.pad) : headroom_wanted;
    const std::uint32_t delta = need > headroom(s) ? need - headroom(s) : 0;
    if (delta_out != nullptr) {
      *delta_out = round_up(delta, k_.pad);
    }
    return delta > 0 || (head_only ? header_cloned(s) : cloned(s));
  }
  int cow(int i, std::uint32_t headroom_wanted, bool head_only) {
    std::uint32_t delta = 0;
    if (!cow_copies(skb(i), headroom_wanted, head_only, &delta)) {
      event(head_only ? Ev::kCowHeadNoCopy : Ev::kCowNoCopy);
      return 0;
    }
    const int r = expand(i, delta, 0);
    if (r == 0) {
      event(head_only ? Ev::kCowHeadCopied : Ev::kCowCopied);
    }
    return r;
  }

  // ---- skb_header_release / __skb_header_release (facts §1.3) ----
  void header_release(int i) {
    ShSkb& s = skb(i);
    ShBuf& b = buf(s.buf);
    if (k_.v2620) {
      ++b.hi;
    } else {
      b.lo = 1;
      b.hi = 1;
    }
    s.nohdr = true;
    b.payload_start = s.data;
  }

  void get(int i) { ++skb(i).users; }

  // ---- kfree_skb / consume_skb (facts §3.5, notes §9) ----
  void kfree(int i) {
    ShSkb& s = skb(i);
    if (s.users > 1) {
      --s.users;
      return;
    }
    if (s.sk >= 0) {  // sock_wfree
      wmem[static_cast<std::size_t>(s.sk)] -= s.truesize;
      s.sk = -1;
      event(Ev::kWfreeOnFree);
    }
    release_data(i);
    skbmem(i);
  }

  // skb_unshare: skb_copy when skb_cloned, then free the original (even when the copy failed).
  int unshare(int i) {
    if (!cloned(skb(i))) {
      return i;
    }
    const int n = copy(i);
    if (n >= 0) {
      event(Ev::kUnshareCopied);
    }
    kfree(i);
    return n;
  }
  // skb_share_check: skb_clone when skb_shared, then drop one user of the original.
  int share_check(int i) {
    if (!shared(skb(i))) {
      return i;
    }
    const int n = clone(i);
    if (n >= 0) {
      event(Ev::kShareCheckCloned);
    }
    kfree(i);
    return n;
  }

  // ---- pages ----
  int alloc_page() {
    if (consume_failure()) {
      return -1;
    }
    const int p = take_slot(pages_, free_pages_);
    page(p).live = true;
    page(p).ref = 1;
    cost.alloc(kPageBytes);
    return p;
  }
  void get_page(int p) {
    ++page(p).ref;
    ++cost.page_refs;
  }
  void put_page(int p, bool by_release) {
    ShPage& pg = page(p);
    --pg.ref;
    ++cost.page_refs;
    if (pg.ref == 0) {
      pg.live = false;
      cost.free(kPageBytes);
      free_pages_.push_back(p);
      if (by_release) {
        event(Ev::kPageFreedByRelease);
      }
    }
  }
  // skb_add_rx_frag(i = nr_frags, page, off, size, truesize): takes over the caller's reference.
  void add_rx_frag(int i, int p, std::uint32_t off, std::uint32_t size, std::uint32_t truesize) {
    ShSkb& s = skb(i);
    buf(s.buf).frags.push_back({p, off, size});
    s.len += size;
    s.data_len += size;
    s.truesize += truesize;
  }

  // ---- skb_linearize = __pskb_pull_tail(data_len) (facts §3.6, notes §8) ----
  bool linearize_expands(const ShSkb& s) const {
    const std::int64_t eat = static_cast<std::int64_t>(s.tail) + s.data_len - s.end;
    return eat > 0 || cloned(s);
  }
  int linearize(int i) {
    if (skb(i).data_len == 0) {
      return 0;
    }
    const std::uint32_t delta = skb(i).data_len;
    if (linearize_expands(skb(i))) {
      const std::int64_t eat = static_cast<std::int64_t>(skb(i).tail) + delta - skb(i).end;
      const std::uint32_t ntail = eat > 0 ? static_cast<std::uint32_t>(eat) + 128 : 0;
      if (expand(i, 0, ntail) != 0) {
        return kENOMEM;
      }
      event(Ev::kLinearizeExpanded);
    } else {
      event(Ev::kLinearizeInPlace);
    }
    ShSkb& s = skb(i);
    ShBuf& b = buf(s.buf);
    for (const ShFrag& f : b.frags) {  // every frag is eaten whole: put_page
      put_page(f.page, true);
    }
    b.frags.clear();
    s.tail += delta;
    s.data_len = 0;
    cost.copied += delta;
    cost.copy_bits_copied += delta;
    return 0;
  }

  // ---- ownership (notes §9) ----
  void set_owner_w(int i, int sock) {
    ShSkb& s = skb(i);
    if (s.sk >= 0) {  // 6.x skb_orphan first; 2.6.20 callers never get here (a BUG)
      wmem[static_cast<std::size_t>(s.sk)] -= s.truesize;
    }
    s.sk = sock;
    wmem[static_cast<std::size_t>(sock)] += s.truesize;
  }
  void orphan(int i) {
    ShSkb& s = skb(i);
    if (s.sk >= 0) {
      wmem[static_cast<std::size_t>(s.sk)] -= s.truesize;
      s.sk = -1;
    }
  }

  // ---- skb_checksum_help (facts §4.2, notes §7) ----
  bool checksum_help_expands(const ShSkb& s) const {
    if (k_.v2620) {
      return s.ip_summed != IpSummed::kComplete && cloned(s);
    }
    if (s.ip_summed != IpSummed::kPartial || csum_refused(s) != 0) {
      return false;
    }
    // skb_ensure_writable(offset + csum_offset + 2): skb_clone_writable is
    // !skb_header_cloned && headroom + len <= hdr_len.
    const std::uint32_t write_len = s.csum_start - headroom(s) + s.csum_offset + 2U;
    const bool clone_writable = !header_cloned(s) && headroom(s) + write_len <= s.hdr_len;
    return cloned(s) && !clone_writable;
  }
  // 6.x: 1 when the checksum start is outside the linear data (-EINVAL before summing), 2 when
  // the 2-byte field crosses headlen (-EINVAL after summing), 0 when it is fine.
  static int csum_refused(const ShSkb& s) {
    if (s.csum_start < s.data || s.csum_start - s.data >= headlen(s)) {
      return 1;
    }
    return s.csum_start - s.data + s.csum_offset + 2U > headlen(s) ? 2 : 0;
  }
  int checksum_help(int i) {
    ShSkb& s0 = skb(i);
    if (s0.ip_summed == IpSummed::kComplete) {  // both versions: out_set_summed
      s0.ip_summed = IpSummed::kNone;
      return 0;
    }
    if (k_.v2620) {
      if (cloned(s0)) {
        if (const int r = expand(i, 0, 0); r != 0) {
          return r;
        }
        event(Ev::kChecksumExpanded);
      } else {
        event(Ev::kChecksumSummed);
      }
      ShSkb& s = skb(i);
      cost.summed += s.len - (s.transport_header - s.data);
      s.ip_summed = IpSummed::kNone;
      return 0;
    }
    if (s0.ip_summed != IpSummed::kPartial) {
      return 0;
    }
    const int refused = csum_refused(s0);
    if (refused == 1) {
      event(Ev::kChecksumRefused);
      return kEINVAL;
    }
    cost.summed += s0.len - (s0.csum_start - s0.data);
    if (refused == 2) {
      event(Ev::kChecksumRefused);
      return kEINVAL;
    }
    if (checksum_help_expands(s0)) {
      if (const int r = expand(i, 0, 0); r != 0) {
        return r;
      }
      event(Ev::kChecksumExpanded);
    } else {
      event(Ev::kChecksumSummed);
    }
    skb(i).ip_summed = IpSummed::kNone;
    return 0;
  }

 private:
  template <typename T>
  static std::size_t count_live(const std::vector<T>& v) {
    return static_cast<std::size_t>(
        std::count_if(v.begin(), v.end(), [](const T& t) { return t.live; }));
  }
  bool consume_failure() {
    if (fail) {
      fail = false;
      event(Ev::kInjectedFailure);
      return true;
    }
    return false;
  }
  int new_skb() {
    const int n = take_slot(skbs_, free_skbs_);
    skb(n).live = true;
    return n;
  }
  int new_buf(const Head& h) {
    const int b = take_slot(bufs_, free_bufs_);
    ShBuf& nb = buf(b);
    nb.live = true;
    nb.end = h.end;
    nb.object = h.object;
    nb.small = h.small;
    cost.alloc(h.object);
    return b;
  }
  // A plain (slab, not fclone) skb for skb_copy / pskb_copy.
  int alloc_plain(std::uint32_t size) { return alloc(size, false, false); }
  static void copy_meta(ShSkb& to, const ShSkb& from) {
    to.ip_summed = from.ip_summed;
    to.csum_start = from.csum_start;
    to.csum_offset = from.csum_offset;
    to.transport_header = from.transport_header;
  }
  void free_head(int b) {
    cost.free(buf(b).object);
    buf(b).live = false;
    free_bufs_.push_back(b);
    event(Ev::kBufferFreed);
  }
  // skb_release_data: the cloned flag decides; the bias is 1, or 1 + (1 << 16) for nohdr.
  void release_data(int i) {
    const ShSkb& s = skb(i);
    ShBuf& b = buf(s.buf);
    if (s.cloned) {
      --b.lo;
      if (s.nohdr) {
        --b.hi;
      }
      if (b.lo != 0 || b.hi != 0) {
        return;
      }
    }
    for (const ShFrag& f : b.frags) {
      put_page(f.page, true);
    }
    b.frags.clear();
    free_head(s.buf);
  }
  // kfree_skbmem: the slab, or the fclone pair when fclone_ref reaches zero.
  void skbmem(int i) {
    ShSkb& s = skb(i);
    if (s.fclone == Fclone::kUnavailable) {
      cost.free(k_.sk_buff);
    } else {
      ShPair& p = pairs_[static_cast<std::size_t>(s.pair)];
      if (s.fclone == Fclone::kClone) {
        p.companion = -1;
      }
      if (--p.ref == 0) {
        cost.free(k_.fclone_obj);
        p.live = false;
        free_pairs_.push_back(s.pair);
        event(Ev::kPairFreed);
      }
    }
    s.live = false;
    free_skbs_.push_back(i);
  }

  const Kern& k_;
  Counts& counts_;
  std::vector<ShSkb> skbs_;
  std::vector<ShBuf> bufs_;
  std::vector<ShPage> pages_;
  std::vector<ShPair> pairs_;
  std::vector<int> free_skbs_, free_bufs_, free_pages_, free_pairs_;
};

// ---- one step ---------------------------------------------------------------------------------

struct Step {
  Op op = Op::kCount;  // kCount: no step
  int slot = -1;       // index into the harness's skb references (one per user it holds)
  int page_slot = -1;  // index into its page references
  std::uint32_t a = 0, b = 0, c = 0, frag_index = 0;
  int sock = 0;
  IpSummed summed = IpSummed::kNone;
  std::uint16_t csum_offset = 0;
  bool set_csum_meta = false;
  bool inject = false;
};

bool allocates(Op op) {
  switch (op) {
    case Op::kAllocSkb:
    case Op::kAllocSkbFclone:
    case Op::kNetdevAllocSkb:
    case Op::kClone:
    case Op::kCopy:
    case Op::kPskbCopy:
    case Op::kExpandHead:
    case Op::kCow:
    case Op::kCowHead:
    case Op::kUnshare:
    case Op::kShareCheck:
    case Op::kAllocPage:
    case Op::kLinearize:
    case Op::kChecksumHelp:
      return true;
    default:
      return false;
  }
}

bool needs_skb(Op op) {
  switch (op) {
    case Op::kAllocSkb:
    case Op::kAllocSkbFclone:
    case Op::kNetdevAllocSkb:
    case Op::kAllocPage:
    case Op::kGetPage:
    case Op::kPutPage:
      return false;
    default:
      return true;
  }
}

template <typename T>
std::string show(const T& v) {
  if constexpr (std::is_enum_v<T>) {
    return std::to_string(static_cast<long long>(v));
  } else if constexpr (std::is_pointer_v<T>) {
    std::ostringstream o;
    o << static_cast<const void*>(v);
    return o.str();
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else {
    return std::to_string(v);
  }
}

// ---- the harness: the core and the shadow side by side -----------------------------------------

class Harness {
 public:
  Harness(KernelVersion v, std::uint64_t seed, bool with_lib, Counts& counts)
      : v_(v),
        km_(KernelModel::get(v)),
        k_(kern_for(v)),
        seed_(seed),
        rng_(seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(vidx(v))),
        lib_(with_lib),
        ctx_(km_, pool_, ledger_),
        counts_(counts),
        sh_(k_, counts) {
    socks_[0].id = 1;
    socks_[1].id = 2;
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  std::uint32_t uni(std::uint32_t lo, std::uint32_t hi) {
    return std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng_);
  }
  bool chance(std::uint32_t percent) { return uni(0, 99) < percent; }

  // One random legal step, applied and checked. False after reporting a failure.
  bool legal_step() {
    const Step st = pick_legal();
    ++step_;
    return apply(st);
  }

  // Frees everything held (each a checked step), then: all dead, pool empty, no net bytes.
  bool free_all() {
    while (!refs_.empty()) {
      Step st;
      st.op = (v_ == KernelVersion::k6x && chance(50)) ? Op::kConsumeSkb : Op::kKfreeSkb;
      st.slot = static_cast<int>(refs_.size() - 1);
      ++step_;
      if (!apply(st)) {
        return false;
      }
    }
    while (!held_pages_.empty()) {
      Step st;
      st.op = Op::kPutPage;
      st.page_slot = static_cast<int>(held_pages_.size() - 1);
      ++step_;
      if (!apply(st)) {
        return false;
      }
    }
    if (sh_.live_skbs() + sh_.live_bufs() + sh_.live_pages() + sh_.live_pairs() != 0 ||
        sh_.wmem[0] != 0 || sh_.wmem[1] != 0) {
      return report("HARNESS: the shadow still holds objects after freeing everything", {});
    }
    if (!lib_) {
      return true;
    }
    std::vector<std::string> bad;
    if (!pool_.empty()) {
      bad.push_back("leak: SkbPool not empty: " + std::to_string(pool_.live_skbs()) + " skbs, " +
                    std::to_string(pool_.live_bufs()) + " bufs, " +
                    std::to_string(pool_.live_pages()) + " pages, " +
                    std::to_string(pool_.live_pairs()) + " pairs");
    }
    const LedgerCell t = ledger_.total();
    if (t.allocs != t.frees || t.alloc_bytes != t.free_bytes) {
      bad.push_back("ledger: " + std::to_string(t.allocs) + " allocs of " +
                    std::to_string(t.alloc_bytes) + " B but " + std::to_string(t.frees) +
                    " frees of " + std::to_string(t.free_bytes) + " B");
    }
    if (socks_[0].wmem_alloc != 0 || socks_[1].wmem_alloc != 0) {
      bad.push_back("sk_wmem_alloc not back to 0");
    }
    return bad.empty() || report("LEAK at the end", bad);
  }

  bool run(int steps) {
    for (int i = 0; i < steps; ++i) {
      if (!legal_step()) {
        return false;
      }
    }
    return free_all();
  }

  // Tries to make one illegal `op` on purpose. Returns the condition thrown (and predicted), ""
  // when no illegal variant was found this time, nullopt after reporting a failure.
  std::optional<std::string> fire_illegal(Op op) {
    if (op == Op::kKfreeSkb || op == Op::kConsumeSkb) {
      return double_free(op);
    }
    if (op == Op::kPutPage) {
      return page_use_after_free();
    }
    for (int attempt = 0; attempt < 16; ++attempt) {
      Step st = propose(op, /*illegal=*/true);
      if (st.op == Op::kCount || !sane(st)) {
        continue;
      }
      const std::optional<Predicted> p = predict(st);
      if (!p || p->condition.front() == '(') {
        continue;
      }
      ++step_;
      if (!expect_bug(st, *p)) {
        return std::nullopt;
      }
      return p->condition;
    }
    return std::string();
  }

  const SkbPool& pool() const { return pool_; }

 private:
  // ---- generation ----

  Op pick_op() {
    const bool v6 = v_ == KernelVersion::k6x;
    const std::size_t held = refs_.size();
    std::array<std::uint32_t, kOpCount> w{};
    auto set = [&w](Op op, std::uint32_t weight) { w[oi(op)] = weight; };
    set(Op::kAllocSkb, 6);
    set(Op::kAllocSkbFclone, 5);
    set(Op::kNetdevAllocSkb, 2);
    set(Op::kReserve, 3);
    set(Op::kPut, 9);
    set(Op::kPush, 6);
    set(Op::kPull, 5);
    set(Op::kTrim, 3);
    set(Op::kClone, 8);
    set(Op::kCopy, 3);
    set(Op::kPskbCopy, 3);
    set(Op::kExpandHead, 4);
    set(Op::kCow, 5);
    set(Op::kCowHead, v6 ? 4 : 0);
    set(Op::kHeaderRelease, 5);
    set(Op::kGet, 4);
    set(Op::kKfreeSkb, held > 28 ? 40 : 7);
    set(Op::kConsumeSkb, v6 ? (held > 28 ? 20 : 3) : 0);
    set(Op::kUnshare, 3);
    set(Op::kShareCheck, 3);
    set(Op::kAllocPage, held_pages_.size() > 12 ? 0 : 4);
    set(Op::kGetPage, held_pages_.size() > 12 ? 0 : 2);
    set(Op::kPutPage, held_pages_.size() > 12 ? 12 : 2);
    set(Op::kAddRxFrag, 7);
    set(Op::kLinearize, 3);
    set(Op::kSetOwnerW, 3);
    set(Op::kOrphan, 2);
    set(Op::kChecksumHelp, 4);
    std::uint32_t total = 0;
    for (std::uint32_t x : w) {
      total += x;
    }
    std::uint32_t r = uni(0, total - 1);
    for (std::size_t i = 0; i < kOpCount; ++i) {
      if (r < w[i]) {
        return static_cast<Op>(i);
      }
      r -= w[i];
    }
    return Op::kAllocSkb;
  }

  std::uint32_t pick_size() {
    switch (uni(0, 9)) {
      case 0:
        return uni(2048, 9000);
      case 1:
      case 2:
      case 3:
        return uni(256, 2048);
      default:
        return uni(0, 256);
    }
  }

  // A step of `op` with random arguments: aimed at legal ones unless `illegal`, where limits are
  // overshot half of the time. predict() decides what it really is.
  Step propose(Op op, bool illegal) {
    Step st;
    st.op = op;
    st.inject = !illegal && allocates(op) && chance(10);
    if (needs_skb(op)) {
      if (refs_.empty()) {
        return Step{};
      }
      st.slot = static_cast<int>(uni(0, static_cast<std::uint32_t>(refs_.size() - 1)));
    }
    const ShSkb* s = st.slot >= 0 ? &sh_.skb(refs_[static_cast<std::size_t>(st.slot)]) : nullptr;
    switch (op) {
      case Op::kAllocSkb:
      case Op::kAllocSkbFclone:
        st.a = pick_size();
        break;
      case Op::kNetdevAllocSkb:
        st.a = uni(0, 1600);
        break;
      case Op::kReserve: {
        if (!illegal && s->len != 0) {
          return Step{};
        }
        const std::uint32_t room = s->end - s->tail;
        st.a = illegal && chance(50) ? room + uni(1, 64) : uni(0, std::min(room, 256U));
        break;
      }
      case Op::kPut: {
        const std::uint32_t room = Shadow::tailroom(*s);
        std::uint32_t bound = std::min(room, 400U);
        const ShBuf& b = sh_.buf(s->buf);
        if (!illegal && sh_.cloned(*s) && b.payload_start >= s->tail) {
          bound = std::min(bound, b.payload_start - s->tail);
        }
        st.a = illegal && chance(50) ? room + uni(1, 64) : uni(0, bound);
        break;
      }
      case Op::kPush: {
        const std::uint32_t hr = Shadow::headroom(*s);
        st.a = illegal && chance(50) ? hr + uni(1, 32) : uni(0, std::min(hr, 128U));
        break;
      }
      case Op::kPull:
        if (illegal) {
          if (s->data_len == 0) {
            return Step{};
          }
          st.a = uni(Shadow::headlen(*s) + 1, s->len);
        } else {
          st.a = chance(85) ? uni(0, Shadow::headlen(*s)) : s->len + uni(1, 64);
        }
        break;
      case Op::kTrim:
        st.a = uni(0, s->len + 32);
        break;
      case Op::kExpandHead:
        st.a = chance(50) ? 0 : uni(0, 128);
        st.b = uni(0, 256);
        break;
      case Op::kCow:
      case Op::kCowHead:
        st.a = uni(0, 192);
        break;
      case Op::kGetPage:
      case Op::kPutPage:
        if (held_pages_.empty()) {
          return Step{};
        }
        st.page_slot = static_cast<int>(uni(0, static_cast<std::uint32_t>(held_pages_.size() - 1)));
        break;
      case Op::kAddRxFrag: {
        if (held_pages_.empty()) {
          return Step{};
        }
        st.page_slot = static_cast<int>(uni(0, static_cast<std::uint32_t>(held_pages_.size() - 1)));
        const auto nr = static_cast<std::uint32_t>(sh_.buf(s->buf).frags.size());
        st.frag_index = illegal && chance(50) ? nr + uni(1, 3) : nr;
        st.a = uni(0, 2048);                                               // off
        st.b = uni(1, 1500);                                               // size
        st.c = std::array<std::uint32_t, 3>{st.b, 2048, 4096}[uni(0, 2)];  // truesize
        break;
      }
      case Op::kSetOwnerW:
        st.sock = static_cast<int>(uni(0, 1));
        break;
      case Op::kChecksumHelp: {
        const std::uint32_t r = uni(0, 9);
        st.summed = r < 7 ? IpSummed::kPartial
                          : (r < 9 || k_.v2620 ? IpSummed::kComplete : IpSummed::kNone);
        st.csum_offset = chance(50) ? 16 : 6;  // TCP / UDP check field
        const std::uint32_t hl = Shadow::headlen(*s);
        if (!k_.v2620 && st.summed == IpSummed::kPartial && hl > 0 && chance(10)) {
          // 6.x refuses (-EINVAL) a checksum start at or past headlen, or a field crossing it.
          st.set_csum_meta = true;
          st.a = uni(hl > st.csum_offset + 1U ? hl - st.csum_offset - 1U : 0, hl);
        } else if (hl >= st.csum_offset + 2U) {
          st.set_csum_meta = true;
          st.a = uni(0, hl - st.csum_offset - 2U);  // transport header, from data
        } else if (st.summed == IpSummed::kPartial) {
          st.summed = IpSummed::kComplete;  // no room for a header: nothing to finish
        }
        break;
      }
      default:
        break;
    }
    return st;
  }

  // Limits that keep sizes bounded and the sockets' accounting conserved; not kernel rules.
  bool sane(const Step& st) const {
    if (st.slot < 0) {
      return true;
    }
    const ShSkb& s = sh_.skb(refs_[static_cast<std::size_t>(st.slot)]);
    switch (st.op) {
      case Op::kAddRxFrag:  // RX frags go on before an owner charges the truesize
        return s.sk < 0 && s.end + s.data_len + st.b < 32768;
      case Op::kExpandHead:
        return s.end <= 8192;
      case Op::kCow:
      case Op::kCowHead:
      case Op::kLinearize:
      case Op::kChecksumHelp:
        return s.end <= 16384;
      case Op::kCopy:
        return s.end + s.data_len < 65536;
      case Op::kGet:
        return s.users < 8;
      default:
        return true;
    }
  }

  Step pick_legal() {
    for (int attempt = 0; attempt < 40; ++attempt) {
      const Op op = pick_op();
      Step st = propose(op, false);
      if (st.op == Op::kCount || !sane(st) || predict(st)) {
        continue;
      }
      return st;
    }
    Step st;
    st.op = Op::kAllocSkb;
    st.a = pick_size();
    return st;
  }

  // ---- the shadow's prediction of a BUG, in the core's order of checks ----
  std::optional<Predicted> predict(const Step& st) const {
    if (st.slot < 0) {
      return std::nullopt;
    }
    const ShSkb& s = sh_.skb(refs_[static_cast<std::size_t>(st.slot)]);
    const bool v2620 = k_.v2620;
    const Predicted shared_bug{"BUG_ON(skb_shared(skb))", Sym::kPskbExpandHead};
    switch (st.op) {
      case Op::kReserve:
        if (s.len != 0) {
          return Predicted{"skb_reserve on a non-empty skb", Sym::kSkbReserve};
        }
        if (s.tail + st.a > s.end) {
          return Predicted{"skb_over_panic", Sym::kSkbReserve};
        }
        return std::nullopt;
      case Op::kPut: {
        if (s.data_len != 0) {
          return Predicted{"SKB_LINEAR_ASSERT", Sym::kSkbPut};
        }
        if (s.tail + st.a > s.end) {
          return Predicted{"skb_over_panic", Sym::kSkbPut};
        }
        // A put writes [tail, tail + len): the skb's own unless the buffer is cloned; a clone may
        // still write a header area that every other reference released (nohdr).
        if (!sh_.cloned(s)) {
          return std::nullopt;
        }
        if (s.nohdr) {
          return Predicted{"write to shared data", Sym::kSkbPut};
        }
        const bool hc = sh_.header_cloned(s);
        if (!hc && s.tail + st.a <= sh_.buf(s.buf).payload_start) {
          return std::nullopt;
        }
        return Predicted{hc ? "write to shared header" : "write to shared data", Sym::kSkbPut};
      }
      case Op::kPush:
        if (st.a > Shadow::headroom(s)) {
          return Predicted{"skb_under_panic", Sym::kSkbPush};
        }
        if (sh_.cloned(s) && (sh_.header_cloned(s) || s.nohdr)) {
          return Predicted{"write to shared header", Sym::kSkbPush};
        }
        return std::nullopt;
      case Op::kPull:
        if (st.a <= s.len && st.a > Shadow::headlen(s)) {
          return Predicted{"BUG_ON(skb->len < skb->data_len)", Sym::kSkbPull};
        }
        return std::nullopt;
      case Op::kExpandHead:
        return Shadow::shared(s) ? std::optional(shared_bug) : std::nullopt;
      case Op::kCow:
      case Op::kCowHead:
        return Shadow::shared(s) && sh_.cow_copies(s, st.a, st.op == Op::kCowHead, nullptr)
                   ? std::optional(shared_bug)
                   : std::nullopt;
      case Op::kLinearize:
        return s.data_len != 0 && Shadow::shared(s) && sh_.linearize_expands(s)
                   ? std::optional(shared_bug)
                   : std::nullopt;
      case Op::kChecksumHelp: {
        ShSkb after = s;  // the metadata the step sets first
        apply_csum_meta(after, st);
        return Shadow::shared(s) && sh_.checksum_help_expands(after) ? std::optional(shared_bug)
                                                                     : std::nullopt;
      }
      case Op::kHeaderRelease:
        if (v2620 && s.nohdr) {
          return Predicted{"BUG_ON(skb->nohdr)", Sym::kSkbHeaderRelease};
        }
        if (!v2620 && sh_.buf(s.buf).lo != 1) {
          return Predicted{"__skb_header_release on a cloned skb", Sym::kSkbHeaderRelease};
        }
        return std::nullopt;
      case Op::kAddRxFrag:
        if (st.frag_index >= k_.max_frags || st.frag_index > sh_.buf(s.buf).frags.size()) {
          return Predicted{"frag index out of range", Sym::kSkbAddRxFrag};
        }
        if (sh_.cloned(s)) {
          return Predicted{"write to shared data", Sym::kSkbAddRxFrag};
        }
        // Legal but not what the shadow models: replacing a frag drops its page reference.
        if (st.frag_index != sh_.buf(s.buf).frags.size()) {
          return Predicted{"(replacing a frag: not generated)", Sym::kSkbAddRxFrag};
        }
        return std::nullopt;
      case Op::kSetOwnerW:
        if (v2620 && s.sk >= 0) {
          return Predicted{"skb_set_owner_w on an owned skb", Sym::kSkbSetOwnerW};
        }
        return std::nullopt;
      default:
        return std::nullopt;
    }
  }

  void apply_csum_meta(ShSkb& s, const Step& st) const {
    s.ip_summed = st.summed;
    if (st.set_csum_meta) {
      s.csum_offset = st.csum_offset;
      s.transport_header = static_cast<std::uint16_t>(s.data + st.a);
      if (!k_.v2620) {
        s.csum_start = static_cast<std::uint16_t>(s.data + st.a);
      }
    }
  }

  // ---- applying a step to both sides ----

  int ref_skb(const Step& st) const { return refs_[static_cast<std::size_t>(st.slot)]; }
  int ref_page(const Step& st) const { return held_pages_[static_cast<std::size_t>(st.page_slot)]; }
  void drop_ref(int slot) {
    refs_[static_cast<std::size_t>(slot)] = refs_.back();
    refs_.pop_back();
  }
  void drop_page_ref(int slot) {
    held_pages_[static_cast<std::size_t>(slot)] = held_pages_.back();
    held_pages_.pop_back();
  }
  void bind_skb(int n, Skb* got) {
    if (n >= 0 && got != nullptr) {
      sh_.skb(n).lib = got;
      sh_.skb(n).lib_id = got->id();
    }
  }
  // An op that returns an skb: both sides must agree on success, and on identity when the
  // kernel returns the skb it was given.
  void agree_skb(const char* what, Skb* got, int n, int given) {
    if (!lib_) {
      return;
    }
    if ((got == nullptr) != (n < 0)) {
      mism_.push_back(std::string(what) + " returned " + (got == nullptr ? "NULL" : "an skb") +
                      ", the shadow predicted " + (n < 0 ? "NULL" : "an skb"));
      return;
    }
    if (n >= 0 && n == given && got != sh_.skb(given).lib) {
      mism_.push_back(std::string(what) + " returned another skb, the shadow the same one");
    } else if (n >= 0 && n != given && given >= 0 && got == sh_.skb(given).lib &&
               sh_.skb(given).live) {
      mism_.push_back(std::string(what) + " returned the same skb, the shadow a new one");
    }
  }
  template <typename A, typename B>
  void ret_eq(const char* what, const A& got, const B& want) {
    if (lib_ && got != want) {
      mism_.push_back(std::string(what) + " returned " + show(got) + ", the shadow predicted " +
                      show(want));
    }
  }

  bool apply(const Step& st) {
    counts_.ops[oi(st.op)] += 1;
    history_[hist_pos_++ % history_.size()] = describe(st);
    if (st.inject) {
      sh_.fail = true;
      ctx_.fail_next_alloc = true;
    }
    const Cost before = lib_ ? ledger_now(ledger_) : Cost{};
    sh_.cost = Cost{};
    mism_.clear();
    try {
      exec(st);
    } catch (const SkbBug& b) {
      return report("UNEXPECTED SkbBug (the shadow predicted a legal op)",
                    {b.condition() + " in " + std::string(symbol_name(b.op())) + ": " + b.what()});
    } catch (const std::exception& e) {
      return report("UNEXPECTED exception", {e.what()});
    }
    if (!lib_) {
      return true;
    }
    bind_new_bufs();
    compare(before);
    if (!mism_.empty()) {
      return report("SHADOW MISMATCH", mism_);
    }
    if (const std::optional<std::string> bad = check_pool(pool_, km_)) {
      return report("INVARIANT BROKEN (check_pool)", {*bad});
    }
    return true;
  }

  void exec(const Step& st) {
    const bool L = lib_;
    switch (st.op) {
      case Op::kAllocSkb:
      case Op::kAllocSkbFclone:
      case Op::kNetdevAllocSkb: {
        Skb* got = nullptr;
        if (L) {
          got = st.op == Op::kAllocSkb         ? ops::alloc_skb(ctx_, st.a)
                : st.op == Op::kAllocSkbFclone ? ops::alloc_skb_fclone(ctx_, st.a)
                                               : ops::netdev_alloc_skb(ctx_, st.a);
        }
        const int n = sh_.alloc(st.a, st.op == Op::kAllocSkbFclone, st.op == Op::kNetdevAllocSkb);
        agree_skb(kOpNames[oi(st.op)], got, n, -1);
        if (n >= 0) {
          refs_.push_back(n);
          bind_skb(n, got);
        }
        return;
      }
      case Op::kAllocPage: {
        Page* got = L ? ops::alloc_page(ctx_) : nullptr;
        const int p = sh_.alloc_page();
        if (L && (got == nullptr) != (p < 0)) {
          mism_.push_back("alloc_page success differs from the shadow's");
        }
        if (p >= 0) {
          held_pages_.push_back(p);
          if (got != nullptr) {
            sh_.page(p).lib = got;
            sh_.page(p).lib_id = got->id;
          }
        }
        return;
      }
      case Op::kGetPage: {
        const int p = ref_page(st);
        if (L) {
          ops::get_page(ctx_, *sh_.page(p).lib);
        }
        sh_.get_page(p);
        held_pages_.push_back(p);
        return;
      }
      case Op::kPutPage: {
        const int p = ref_page(st);
        if (L) {
          ops::put_page(ctx_, *sh_.page(p).lib);
        }
        sh_.put_page(p, false);
        drop_page_ref(st.page_slot);
        return;
      }
      default:
        break;
    }

    const int i = ref_skb(st);
    Skb* lib = sh_.skb(i).lib;
    switch (st.op) {
      case Op::kReserve:
        if (L) {
          ops::reserve(ctx_, *lib, st.a);
        }
        sh_.reserve(i, st.a);
        return;
      case Op::kPut: {
        const std::uint32_t got = L ? ops::put(ctx_, *lib, st.a) : 0;
        ret_eq("skb_put", got, sh_.put(i, st.a));
        return;
      }
      case Op::kPush:
        if (L) {
          ops::push(ctx_, *lib, st.a);
        }
        sh_.push(i, st.a);
        return;
      case Op::kPull: {
        const bool got = L ? ops::pull(ctx_, *lib, st.a) : false;
        ret_eq("skb_pull", got, sh_.pull(i, st.a));
        return;
      }
      case Op::kTrim: {
        const bool got = L ? ops::trim(ctx_, *lib, st.a) : false;
        ret_eq("skb_trim", got, sh_.trim(i, st.a));
        return;
      }
      case Op::kClone:
      case Op::kCopy:
      case Op::kPskbCopy: {
        Skb* got = nullptr;
        if (L) {
          got = st.op == Op::kClone  ? ops::clone(ctx_, *lib)
                : st.op == Op::kCopy ? ops::copy(ctx_, *lib)
                                     : ops::pskb_copy(ctx_, *lib);
        }
        const int n = st.op == Op::kClone  ? sh_.clone(i)
                      : st.op == Op::kCopy ? sh_.copy(i)
                                           : sh_.pskb_copy(i);
        agree_skb(kOpNames[oi(st.op)], got, n, i);
        if (n >= 0) {
          refs_.push_back(n);
          bind_skb(n, got);
        }
        return;
      }
      case Op::kExpandHead: {
        const int got = L ? ops::expand_head(ctx_, *lib, st.a, st.b) : 0;
        ret_eq("pskb_expand_head", got, sh_.expand(i, st.a, st.b));
        return;
      }
      case Op::kCow:
      case Op::kCowHead: {
        int got = 0;
        if (L) {
          got = st.op == Op::kCow ? ops::cow(ctx_, *lib, st.a) : ops::cow_head(ctx_, *lib, st.a);
        }
        ret_eq(kOpNames[oi(st.op)], got, sh_.cow(i, st.a, st.op == Op::kCowHead));
        return;
      }
      case Op::kHeaderRelease:
        if (L) {
          ops::header_release(ctx_, *lib);
        }
        sh_.header_release(i);
        return;
      case Op::kGet: {
        if (L && &ops::get(ctx_, *lib) != lib) {
          mism_.push_back("skb_get returned another skb");
        }
        sh_.get(i);
        refs_.push_back(i);
        return;
      }
      case Op::kKfreeSkb:
      case Op::kConsumeSkb:
        if (L) {
          if (st.op == Op::kKfreeSkb) {
            ops::kfree_skb(ctx_, *lib);
          } else {
            ops::consume_skb(ctx_, *lib);
          }
        }
        sh_.kfree(i);
        drop_ref(st.slot);
        return;
      case Op::kUnshare:
      case Op::kShareCheck: {
        Skb* got = nullptr;
        if (L) {
          got = st.op == Op::kUnshare ? ops::unshare(ctx_, *lib) : ops::share_check(ctx_, *lib);
        }
        const int n = st.op == Op::kUnshare ? sh_.unshare(i) : sh_.share_check(i);
        agree_skb(kOpNames[oi(st.op)], got, n, i);
        if (n < 0) {
          drop_ref(st.slot);
        } else {
          refs_[static_cast<std::size_t>(st.slot)] = n;
          if (n != i) {
            bind_skb(n, got);
          }
        }
        return;
      }
      case Op::kAddRxFrag: {
        const int p = ref_page(st);
        if (L) {
          ops::add_rx_frag(ctx_, *lib, st.frag_index, *sh_.page(p).lib, st.a, st.b, st.c);
        }
        sh_.add_rx_frag(i, p, st.a, st.b, st.c);
        drop_page_ref(st.page_slot);  // the frag holds that reference now
        return;
      }
      case Op::kLinearize: {
        const int got = L ? ops::linearize(ctx_, *lib) : 0;
        ret_eq("skb_linearize", got, sh_.linearize(i));
        return;
      }
      case Op::kSetOwnerW:
        if (L) {
          ops::set_owner_w(ctx_, *lib, socks_[static_cast<std::size_t>(st.sock)]);
        }
        sh_.set_owner_w(i, st.sock);
        return;
      case Op::kOrphan:
        if (L) {
          ops::orphan(ctx_, *lib);
        }
        sh_.orphan(i);
        return;
      case Op::kChecksumHelp: {
        apply_csum_meta(sh_.skb(i), st);
        int got = 0;
        if (L) {
          lib->ip_summed = st.summed;
          if (st.set_csum_meta) {
            lib->csum_offset = st.csum_offset;
            ops::set_transport_header(*lib, static_cast<std::int32_t>(st.a));
            if (!k_.v2620) {
              lib->csum_start = static_cast<std::uint16_t>(lib->data_offset() + st.a);
            }
          }
          got = ops::checksum_help(ctx_, *lib);
        }
        ret_eq("skb_checksum_help", got, sh_.checksum_help(i));
        return;
      }
      default:
        return;
    }
  }

  // A buffer the shadow created this step is bound to the core's DataBuf its skb now points at.
  void bind_new_bufs() {
    for (ShBuf& b : sh_.bufs()) {
      if (!b.live || b.lib != nullptr) {
        continue;
      }
      const ShSkb& s = sh_.skb(b.creator);
      if (s.lib == nullptr || !s.lib->live()) {
        mism_.push_back("a new data buffer whose skb is not live in the core");
        continue;
      }
      b.lib = &s.lib->buf();
      b.lib_id = b.lib->id;
      for (const ShBuf& o : sh_.bufs()) {
        if (&o != &b && o.live && o.lib_id == b.lib_id) {
          mism_.push_back("the core reused a live data buffer where the shadow has a new one");
        }
      }
    }
  }

  template <typename A, typename B>
  void eq(const char* what, std::uint64_t id, const A& lib, const B& shadow) {
    if (lib != shadow) {
      mism_.push_back(std::string(what) + " of #" + std::to_string(id) + ": core " + show(lib) +
                      ", shadow " + show(shadow));
    }
  }

  // Every observable field against the shadow.
  void compare(const Cost& before) {
    const Cost got = ledger_now(ledger_) - before;
    if (!(got == sh_.cost)) {
      mism_.push_back("ledger this step: core " + to_string(got) + ", shadow " +
                      to_string(sh_.cost));
    }
    eq("live skbs", 0, pool_.live_skbs(), sh_.live_skbs());
    eq("live data buffers", 0, pool_.live_bufs(), sh_.live_bufs());
    eq("live pages", 0, pool_.live_pages(), sh_.live_pages());
    eq("live fclone pairs", 0, pool_.live_pairs(), sh_.live_pairs());
    eq("pending fail_next_alloc", 0, ctx_.fail_next_alloc, sh_.fail);
    eq("sk_wmem_alloc", 1, socks_[0].wmem_alloc, sh_.wmem[0]);
    eq("sk_wmem_alloc", 2, socks_[1].wmem_alloc, sh_.wmem[1]);
    eq("sk_rmem_alloc", 1, socks_[0].rmem_alloc, 0);
    eq("sk_rmem_alloc", 2, socks_[1].rmem_alloc, 0);

    std::map<int, std::uint32_t> held;  // user references the test holds, per skb
    for (int r : refs_) {
      ++held[r];
    }
    for (std::size_t n = 0; n < sh_.skbs().size(); ++n) {
      const ShSkb& s = sh_.skbs()[n];
      if (!s.live) {
        continue;
      }
      if (s.lib == nullptr) {
        mism_.push_back("a shadow skb the core did not create");
        continue;
      }
      const Skb& l = *s.lib;
      const std::uint64_t id = s.lib_id;
      if (!l.live() || l.id() != id) {
        mism_.push_back("skb #" + std::to_string(id) + " is dead or replaced in the core");
        continue;
      }
      if (held[static_cast<int>(n)] != s.users) {
        mism_.push_back("HARNESS: holds " + std::to_string(held[static_cast<int>(n)]) +
                        " references to #" + std::to_string(id) + " with users " +
                        std::to_string(s.users));
      }
      const ShBuf& b = sh_.buf(s.buf);
      eq("data buffer", id, l.buf().id, b.lib_id);
      eq("data offset", id, l.data_offset(), s.data);
      eq("tail offset", id, l.tail_offset(), s.tail);
      eq("end offset", id, l.end_offset(), s.end);
      eq("len", id, l.len(), s.len);
      eq("data_len", id, l.data_len(), s.data_len);
      eq("headlen", id, l.headlen(), Shadow::headlen(s));
      eq("headroom", id, l.headroom(), Shadow::headroom(s));
      eq("tailroom", id, l.tailroom(), Shadow::tailroom(s));
      eq("is_nonlinear", id, l.is_nonlinear(), s.data_len != 0);
      eq("truesize", id, l.truesize(), s.truesize);
      eq("users", id, l.users(), s.users);
      eq("cloned flag", id, l.cloned_flag(), s.cloned);
      eq("nohdr", id, l.nohdr(), s.nohdr);
      eq("skb_cloned", id, l.cloned(), sh_.cloned(s));
      eq("skb_header_cloned", id, l.header_cloned(), sh_.header_cloned(s));
      eq("skb_shared", id, l.shared(), Shadow::shared(s));
      eq("fclone", id, l.fclone(), s.fclone);
      eq("hdr_len", id, l.hdr_len(), s.hdr_len);
      eq("sk", id, l.sk(), s.sk < 0 ? nullptr : &socks_[static_cast<std::size_t>(s.sk)]);
      eq("destructor", id, l.destructor(), s.sk < 0 ? Destructor::kNone : Destructor::kSockWfree);
      eq("ip_summed", id, l.ip_summed, s.ip_summed);
      eq("csum_start", id, l.csum_start, s.csum_start);
      eq("csum_offset", id, l.csum_offset, s.csum_offset);
      eq("transport_header", id, l.transport_header, s.transport_header);
      eq("network_header", id, l.network_header, kUnset);
      eq("mac_header", id, l.mac_header, kUnset);
      eq("frag_list", id, l.shinfo().frag_list, static_cast<const Skb*>(nullptr));
    }
    for (const ShBuf& b : sh_.bufs()) {
      if (!b.live || b.lib == nullptr) {
        continue;
      }
      const DataBuf& l = *b.lib;
      const std::uint64_t id = b.lib_id;
      if (!l.live || l.id != id) {
        mism_.push_back("data buffer #" + std::to_string(id) + " is dead or replaced in the core");
        continue;
      }
      eq("buffer end", id, l.end, b.end);
      eq("buffer slab object bytes", id, l.alloc_bytes, b.object);
      eq("buffer from the small-head cache", id, l.small_head, b.small);
      eq("dataref lo16", id, l.shinfo.dataref_all(), b.lo);
      eq("dataref hi16", id, l.shinfo.dataref_payload(), b.hi);
      eq("payload_start", id, l.payload_start, b.payload_start);
      eq("nr_frags", id, l.shinfo.nr_frags, b.frags.size());
      for (std::size_t f = 0; f < b.frags.size() && f < l.shinfo.nr_frags; ++f) {
        const Frag& lf = l.shinfo.frags[f];
        const ShFrag& sf = b.frags[f];
        eq("frag page", id, lf.page, sh_.page(sf.page).lib);
        eq("frag off", id, lf.off, sf.off);
        eq("frag size", id, lf.size, sf.size);
      }
    }
    for (const ShPage& p : sh_.pages()) {
      if (!p.live) {
        continue;
      }
      if (p.lib == nullptr || !p.lib->live || p.lib->id != p.lib_id) {
        mism_.push_back("page #" + std::to_string(p.lib_id) + " is dead or replaced in the core");
        continue;
      }
      eq("page refcount", p.lib_id, p.lib->refcount, p.ref);
    }
  }

  // ---- illegal operations ----

  // Executes `st`, which the shadow predicts to BUG with `p`: the core must throw exactly that and
  // change nothing (the shadow is not touched, so the comparison checks it).
  bool expect_bug(const Step& st, const Predicted& p) {
    history_[hist_pos_++ % history_.size()] = "ILLEGAL " + describe(st);
    const Cost before = ledger_now(ledger_);
    sh_.cost = Cost{};
    mism_.clear();
    const std::uint64_t id = sh_.skb(ref_skb(st)).lib_id;
    if (st.op == Op::kChecksumHelp && !k_.v2620) {
      // 6.x sums before skb_ensure_writable reaches pskb_expand_head and its BUG.
      ShSkb after = sh_.skb(ref_skb(st));
      apply_csum_meta(after, st);
      sh_.cost.summed = after.len - (after.csum_start - after.data);
    }
    try {
      // exec() calls the core before it touches the shadow, so a throw leaves the shadow as it
      // was (the checksum metadata it sets first is set on both sides).
      exec(st);
      return report("MISSING BUG: the shadow predicted " + p.condition + " in " +
                        std::string(symbol_name(p.op)) + ", the core did not throw",
                    {});
    } catch (const SkbBug& b) {
      if (b.condition() != p.condition || b.op() != p.op || b.skb_id() != id) {
        return report("WRONG BUG",
                      {"core: " + b.condition() + " in " + std::string(symbol_name(b.op())) +
                           " on #" + std::to_string(b.skb_id()),
                       "shadow: " + p.condition + " in " + std::string(symbol_name(p.op)) +
                           " on #" + std::to_string(id)});
      }
    } catch (const std::exception& e) {
      return report("WRONG EXCEPTION (expected SkbBug " + p.condition + ")", {e.what()});
    }
    compare(before);
    if (!mism_.empty()) {
      return report("SHADOW MISMATCH after an illegal op", mism_);
    }
    if (const std::optional<std::string> bad = check_pool(pool_, km_)) {
      return report("INVARIANT BROKEN (check_pool) after an illegal op", {*bad});
    }
    return true;
  }

  // Frees an skb's last user, then frees it again through the stale pointer: "double free".
  std::optional<std::string> double_free(Op op) {
    for (std::size_t r = 0; r < refs_.size(); ++r) {
      const int i = refs_[r];
      if (sh_.skb(i).users != 1) {
        continue;
      }
      Skb* stale = sh_.skb(i).lib;
      const std::uint64_t id = sh_.skb(i).lib_id;
      Step st;
      st.op = op;
      st.slot = static_cast<int>(r);
      ++step_;
      if (!apply(st)) {
        return std::nullopt;
      }
      if (sh_.skb(i).live) {  // the shadow must know it is gone
        report("HARNESS: freed skb still live in the shadow", {});
        return std::nullopt;
      }
      const Predicted p{"double free", op == Op::kKfreeSkb ? Sym::kKfreeSkb : Sym::kConsumeSkb};
      try {
        if (op == Op::kKfreeSkb) {
          ops::kfree_skb(ctx_, *stale);
        } else {
          ops::consume_skb(ctx_, *stale);
        }
        report("MISSING BUG: the second free of #" + std::to_string(id) + " did not throw", {});
        return std::nullopt;
      } catch (const SkbBug& b) {
        if (b.condition() != p.condition || b.op() != p.op || b.skb_id() != id) {
          report("WRONG BUG on a double free", {b.condition(), std::string(symbol_name(b.op()))});
          return std::nullopt;
        }
      }
      return p.condition;
    }
    return std::string();
  }

  // Drops the last reference of a page the test alone holds, then puts it again.
  std::optional<std::string> page_use_after_free() {
    for (std::size_t r = 0; r < held_pages_.size(); ++r) {
      const int p = held_pages_[r];
      if (sh_.page(p).ref != 1) {
        continue;
      }
      Page* stale = sh_.page(p).lib;
      const std::uint64_t id = sh_.page(p).lib_id;
      Step st;
      st.op = Op::kPutPage;
      st.page_slot = static_cast<int>(r);
      ++step_;
      if (!apply(st)) {
        return std::nullopt;
      }
      try {
        ops::put_page(ctx_, *stale);
        report("MISSING BUG: put_page on freed page #" + std::to_string(id) + " did not throw", {});
        return std::nullopt;
      } catch (const SkbBug& b) {
        if (b.condition() != "use after free" || b.op() != Sym::kPutPage || b.skb_id() != id) {
          report("WRONG BUG on a page use after free", {b.condition()});
          return std::nullopt;
        }
      }
      return std::string("use after free");
    }
    return std::string();
  }

  // ---- reporting ----

  std::string describe(const Step& st) const {
    std::ostringstream o;
    o << kOpNames[oi(st.op)];
    if (st.slot >= 0 && static_cast<std::size_t>(st.slot) < refs_.size()) {
      const ShSkb& s = sh_.skb(ref_skb(st));
      o << " on #" << s.lib_id << " (len " << s.len << " data_len " << s.data_len << " hr "
        << s.data << " tr " << Shadow::tailroom(s) << " users " << s.users << " cloned " << s.cloned
        << " nohdr " << s.nohdr << " lo/hi " << sh_.buf(s.buf).lo << "/" << sh_.buf(s.buf).hi
        << ")";
    }
    o << " a=" << st.a << " b=" << st.b << " c=" << st.c;
    if (st.op == Op::kAddRxFrag) {
      o << " i=" << st.frag_index;
    }
    if (st.op == Op::kChecksumHelp) {
      o << " ip_summed=" << ip_summed_name(st.summed) << " csum_offset=" << st.csum_offset;
    }
    if (st.inject) {
      o << " [fail_next_alloc]";
    }
    return o.str();
  }

  bool report(const std::string& what, const std::vector<std::string>& details) {
    std::ostringstream o;
    o << what << " (kernel " << vname(v_) << ", seed " << seed_ << ", step " << step_ << ")\n";
    for (std::size_t n = 0; n < details.size() && n < 12; ++n) {
      o << "    " << details[n] << "\n";
    }
    o << "  last ops, oldest first:\n";
    for (std::size_t n = 0; n < history_.size(); ++n) {
      const std::string& h = history_[(hist_pos_ + n) % history_.size()];
      if (!h.empty()) {
        o << "    " << h << "\n";
      }
    }
    ADD_FAILURE() << o.str();
    return false;
  }

  KernelVersion v_;
  const KernelModel& km_;
  const Kern& k_;
  std::uint64_t seed_;
  std::mt19937_64 rng_;
  bool lib_;
  SkbPool pool_;
  Ledger ledger_;
  OpCtx ctx_;
  std::array<Sock, 2> socks_{};
  Counts& counts_;
  Shadow sh_;
  std::vector<int> refs_;        // one entry per user reference held (a shadow skb index)
  std::vector<int> held_pages_;  // one entry per page reference held
  std::vector<std::string> mism_;
  std::array<std::string, 10> history_{};
  std::size_t hist_pos_ = 0;
  int step_ = 0;
};

// ---- coverage table ---------------------------------------------------------------------------

std::string coverage_table(const std::array<Counts, 2>& c, const char* title) {
  std::ostringstream o;
  char line[160];
  std::snprintf(line, sizeof line, "%s (%llu + %llu sequences)\n", title,
                static_cast<unsigned long long>(c[0].runs),
                static_cast<unsigned long long>(c[1].runs));
  o << line;
  std::snprintf(line, sizeof line, "  %-58s %10s %10s\n", "operation / outcome", "2.6.20", "6.x");
  o << line;
  std::uint64_t total0 = 0;
  std::uint64_t total1 = 0;
  for (std::size_t i = 0; i < kOpCount; ++i) {
    std::snprintf(line, sizeof line, "  %-58s %10llu %10llu\n", kOpNames[i],
                  static_cast<unsigned long long>(c[0].ops[i]),
                  static_cast<unsigned long long>(c[1].ops[i]));
    o << line;
    total0 += c[0].ops[i];
    total1 += c[1].ops[i];
  }
  std::snprintf(line, sizeof line, "  %-58s %10llu %10llu\n", "all steps",
                static_cast<unsigned long long>(total0), static_cast<unsigned long long>(total1));
  o << line;
  for (std::size_t i = 0; i < kEvCount; ++i) {
    std::snprintf(line, sizeof line, "  %-58s %10llu %10llu\n", kEvNames[i],
                  static_cast<unsigned long long>(c[0].ev[i]),
                  static_cast<unsigned long long>(c[1].ev[i]));
    o << line;
  }
  return o.str();
}

bool event_exists(std::size_t e, KernelVersion v) {
  return v == KernelVersion::k6x || (e != static_cast<std::size_t>(Ev::kCowHeadCopied) &&
                                     e != static_cast<std::size_t>(Ev::kCowHeadNoCopy) &&
                                     e != static_cast<std::size_t>(Ev::kChecksumRefused));
}

// At the end of a whole-binary run: the table of what the checked runs executed, and, when the
// replay ran in the same process, proof that it counted exactly the same operations.
class CoverageEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_checked[0].runs + g_checked[1].runs == 0) {
      return;
    }
    std::printf("%s", coverage_table(g_checked, "skb property coverage, checked runs").c_str());
    const std::uint64_t n = seeds_to_run();
    if (g_checked[0].runs == n && g_checked[1].runs == n && g_replay[0].runs == n &&
        g_replay[1].runs == n) {
      for (std::size_t v = 0; v < 2; ++v) {
        EXPECT_EQ(g_checked[v].ops, g_replay[v].ops) << "the replay diverged from the checked runs";
        EXPECT_EQ(g_checked[v].ev, g_replay[v].ev) << "the replay diverged from the checked runs";
      }
    }
  }
};
[[maybe_unused]] ::testing::Environment* const g_coverage_env =
    ::testing::AddGlobalTestEnvironment(new CoverageEnvironment);

// ---- the suites -------------------------------------------------------------------------------

using PropertyParam = std::tuple<KernelVersion, std::uint64_t>;

std::string version_tag(KernelVersion v) {
  return v == KernelVersion::k2_6_20 ? "v2_6_20" : "v6x";
}

class SkbOpsProperty : public ::testing::TestWithParam<PropertyParam> {};

// Random legal sequences keep every invariant and agree with the shadow on every field after every
// step; freeing everything leaves the pool empty and the ledger's allocs equal to its frees.
TEST_P(SkbOpsProperty, RandomSequencesMatchShadow) {
  const auto [v, seed] = GetParam();
  if (seed > seeds_to_run()) {
    GTEST_SKIP() << "SKBSIM_PROPERTY_SEEDS=" << seeds_to_run();
  }
  Counts local;
  {
    Harness h(v, seed, /*with_lib=*/true, local);
    ASSERT_TRUE(h.run(kStepsPerSeed));
    EXPECT_TRUE(h.pool().empty());
  }
  local.runs = 1;
  g_checked[static_cast<std::size_t>(vidx(v))].add(local);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SkbOpsProperty,
                         ::testing::Combine(::testing::Values(KernelVersion::k2_6_20,
                                                              KernelVersion::k6x),
                                            ::testing::Range<std::uint64_t>(1, kSeeds + 1)),
                         [](const ::testing::TestParamInfo<PropertyParam>& param_info) {
                           return version_tag(std::get<0>(param_info.param)) + "_seed_" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

// The op streams of every seed, replayed on the shadow alone: what the checked runs covered.
TEST(SkbOpsCoverage, EveryOpKindIsExercised) {
  const std::uint64_t n = seeds_to_run();
  std::array<Counts, 2> c{};
  for (KernelVersion v : {KernelVersion::k2_6_20, KernelVersion::k6x}) {
    Counts& cv = c[static_cast<std::size_t>(vidx(v))];
    for (std::uint64_t seed = 1; seed <= n; ++seed) {
      Harness h(v, seed, /*with_lib=*/false, cv);
      ASSERT_TRUE(h.run(kStepsPerSeed));
      ++cv.runs;
    }
  }
  g_replay = c;
  std::printf("%s",
              coverage_table(c, "skb property coverage (shadow replay of every seed)").c_str());
  if (n < kSeeds) {
    GTEST_SKIP() << "thresholds need all " << kSeeds << " seeds";
  }
  for (KernelVersion v : {KernelVersion::k2_6_20, KernelVersion::k6x}) {
    const Counts& cv = c[static_cast<std::size_t>(vidx(v))];
    EXPECT_GE(cv.runs * static_cast<std::uint64_t>(kStepsPerSeed), 100U * 1000U);
    for (std::size_t i = 0; i < kOpCount; ++i) {
      if (op_exists(static_cast<Op>(i), v)) {
        EXPECT_GE(cv.ops[i], kMinOps) << kOpNames[i] << " on " << vname(v);
      } else {
        EXPECT_EQ(cv.ops[i], 0U) << kOpNames[i] << " does not exist in " << vname(v);
      }
    }
    for (std::size_t e = 0; e < kEvCount; ++e) {
      if (event_exists(e, v)) {
        // A clone writing its private header area needs release -> clone -> push -> trim, and
        // 6.x releases headers only before any clone exists: a corner, held to a lower floor.
        const std::uint64_t floor =
            e == static_cast<std::size_t>(Ev::kPutIntoHeaderArea) ? kMinEvents / 2 : kMinEvents;
        EXPECT_GE(cv.ev[e], floor) << kEvNames[e] << " on " << vname(v);
      }
    }
  }
}

// ---- illegal operations on purpose ------------------------------------------------------------

struct IllegalCase {
  KernelVersion v;
  Op op;
  std::vector<std::string> conditions;  // each must be thrown (and predicted) kMinIllegal times
};
constexpr int kMinIllegal = 10;

std::vector<IllegalCase> illegal_cases() {
  std::vector<IllegalCase> out;
  for (KernelVersion v : {KernelVersion::k2_6_20, KernelVersion::k6x}) {
    const bool v6 = v == KernelVersion::k6x;
    out.push_back({v, Op::kReserve, {"skb_reserve on a non-empty skb", "skb_over_panic"}});
    out.push_back({v,
                   Op::kPut,
                   {"SKB_LINEAR_ASSERT", "skb_over_panic", "write to shared data",
                    "write to shared header"}});
    out.push_back({v, Op::kPush, {"skb_under_panic", "write to shared header"}});
    out.push_back({v, Op::kPull, {"BUG_ON(skb->len < skb->data_len)"}});
    out.push_back({v, Op::kExpandHead, {"BUG_ON(skb_shared(skb))"}});
    out.push_back({v, Op::kCow, {"BUG_ON(skb_shared(skb))"}});
    if (v6) {
      out.push_back({v, Op::kCowHead, {"BUG_ON(skb_shared(skb))"}});
    }
    out.push_back({v, Op::kLinearize, {"BUG_ON(skb_shared(skb))"}});
    out.push_back({v, Op::kChecksumHelp, {"BUG_ON(skb_shared(skb))"}});
    out.push_back({v,
                   Op::kHeaderRelease,
                   {v6 ? "__skb_header_release on a cloned skb" : "BUG_ON(skb->nohdr)"}});
    out.push_back({v, Op::kAddRxFrag, {"frag index out of range", "write to shared data"}});
    if (!v6) {
      out.push_back({v, Op::kSetOwnerW, {"skb_set_owner_w on an owned skb"}});
    }
    out.push_back({v, Op::kKfreeSkb, {"double free"}});
    if (v6) {
      out.push_back({v, Op::kConsumeSkb, {"double free"}});
    }
    out.push_back({v, Op::kPutPage, {"use after free"}});
  }
  return out;
}

class SkbOpsIllegal : public ::testing::TestWithParam<IllegalCase> {};

// Illegal operations, generated on purpose: SkbBug with the predicted condition, nothing changed.
TEST_P(SkbOpsIllegal, ThrowsThePredictedBug) {
  const IllegalCase& c = GetParam();
  std::map<std::string, int> fired;
  auto done = [&] {
    return std::all_of(c.conditions.begin(), c.conditions.end(),
                       [&](const std::string& s) { return fired[s] >= kMinIllegal; });
  };
  Counts scratch;
  for (std::uint64_t seed = 1; seed <= 80 && !done(); ++seed) {
    Harness h(c.v, 5000 + seed, /*with_lib=*/true, scratch);
    for (int step = 0; step < 300 && !done(); ++step) {
      ASSERT_TRUE(h.legal_step());
      if (h.chance(40)) {
        const std::optional<std::string> got = h.fire_illegal(c.op);
        ASSERT_TRUE(got.has_value());
        if (!got->empty()) {
          ++fired[*got];
        }
      }
    }
    ASSERT_TRUE(h.free_all());
  }
  for (const std::string& cond : c.conditions) {
    EXPECT_GE(fired[cond], kMinIllegal) << cond;
  }
  for (const auto& [cond, n] : fired) {
    EXPECT_NE(std::find(c.conditions.begin(), c.conditions.end(), cond), c.conditions.end())
        << "unexpected condition " << cond << " (" << n << " times)";
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, SkbOpsIllegal, ::testing::ValuesIn(illegal_cases()),
                         [](const ::testing::TestParamInfo<IllegalCase>& param_info) {
                           std::string name = version_tag(param_info.param.v) + "_" +
                                              kOpNames[oi(param_info.param.op)];
                           return name;
                         });

// ---- the restated constants and the version-only operations -----------------------------------

TEST(SkbOpsShadow, KernelConstantsMatchTheModel) {
  for (KernelVersion v : {KernelVersion::k2_6_20, KernelVersion::k6x}) {
    const KernelModel& m = KernelModel::get(v);
    const Kern& k = kern_for(v);
    EXPECT_EQ(m.sk_buff_bytes, k.sk_buff) << vname(v);
    EXPECT_EQ(m.shinfo_bytes, k.shinfo) << vname(v);
    EXPECT_EQ(m.shinfo_frags_offset, k.frags_off) << vname(v);
    EXPECT_EQ(m.frag_desc_bytes, k.frag_desc) << vname(v);
    EXPECT_EQ(m.max_skb_frags, k.max_frags) << vname(v);
    EXPECT_EQ(m.net_skb_pad, k.pad) << vname(v);
    EXPECT_EQ(m.small_head_cache_bytes, k.small_head) << vname(v);
    EXPECT_EQ(m.fclone_cache_bytes, k.fclone_obj) << vname(v);
    EXPECT_EQ(m.cache_line_bytes, kLine) << vname(v);
    EXPECT_EQ(m.page_bytes, kPageBytes) << vname(v);
  }
  // The worked examples of kernel-notes §3, through the shadow's own formulas.
  EXPECT_EQ(truesize_of(kKern2620, head_for(kKern2620, 1640).end), 1664U + 168U);
  EXPECT_EQ(head_for(kKern2620, 1640).object, 2048U);
  EXPECT_EQ(head_for(kKern6x, 320).object, 704U);
  EXPECT_EQ(truesize_of(kKern6x, head_for(kKern6x, 320).end), 960U);
  EXPECT_EQ(truesize_of(kKern6x, head_for(kKern6x, 1500).end), 2304U);
}

// Found by Seeds/SkbOpsProperty.RandomSequencesMatchShadow/v6x_seed_1 (step 95): 6.x
// skb_checksum_help left CHECKSUM_COMPLETE in place; dev.c goes to out_set_summed, which sets
// CHECKSUM_NONE, as 2.6.20 does (kernel-skb-facts.md §4.2, kernel-notes.md §7).
TEST(SkbOpsShadow, ChecksumHelpTurnsCompleteIntoNoneOn6x) {
  SkbPool pool;
  Ledger ledger;
  OpCtx ctx(KernelModel::get(KernelVersion::k6x), pool, ledger);
  Skb* skb = ops::alloc_skb(ctx, 0);
  ASSERT_NE(skb, nullptr);
  Skb* clone = ops::clone(ctx, *skb);
  ASSERT_NE(clone, nullptr);
  (void)ops::get(ctx, *clone);  // cloned and shared, as in the failing step
  clone->ip_summed = IpSummed::kComplete;
  EXPECT_EQ(ops::checksum_help(ctx, *clone), 0);
  EXPECT_EQ(clone->ip_summed, IpSummed::kNone);
  EXPECT_EQ(ledger.total().bytes_checksummed(), 0U);
  ops::kfree_skb(ctx, *clone);
  ops::kfree_skb(ctx, *clone);
  ops::kfree_skb(ctx, *skb);
  EXPECT_TRUE(pool.empty());
}

// skb_cow_head and consume_skb do not exist in 2.6.20 (facts §4.1, §3.5).
TEST(SkbOpsShadow, VersionOnlyOpsAreUnsupportedOn2620) {
  SkbPool pool;
  Ledger ledger;
  OpCtx ctx(KernelModel::get(KernelVersion::k2_6_20), pool, ledger);
  Skb* skb = ops::alloc_skb(ctx, 100);
  ASSERT_NE(skb, nullptr);
  EXPECT_THROW((void)ops::cow_head(ctx, *skb, 64), UnsupportedOp);
  EXPECT_THROW(ops::consume_skb(ctx, *skb), UnsupportedOp);
  ops::kfree_skb(ctx, *skb);
  EXPECT_TRUE(pool.empty());
}

}  // namespace
}  // namespace skbsim
