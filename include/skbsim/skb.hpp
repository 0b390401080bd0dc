#pragma once
// skb.hpp — one `struct sk_buff` (include/linux/skbuff.h), its data buffer with the
// `struct skb_shared_info` at its end, and the pages its frags point at. Sizes, offsets and
// reference counts only: payload bytes are virtual.
//
//   head (0)     data_        tail_        end_
//   |  headroom  |  linear    |  tailroom  | skb_shared_info: dataref, frags[], frag_list |
//
// Invariant: data_ <= tail_ <= end_, len() == headlen() + data_len(), and data_len() equals the
// frag sizes plus the frag_list lengths. Offsets are from head, as 64-bit kernels keep tail and end.
//
// Sharing, in the kernel's words (kernel-skb-facts.md §1.3):
//   users      how many holders this sk_buff has          -> shared()        (skb_shared)
//   dataref    lo16: skbs referencing the data buffer;
//              hi16: those of them that reference only the payload (nohdr)
//   cloned()   the cloned flag AND lo16 != 1              -> skb_cloned
//   header_cloned()  the flag AND lo16 - hi16 != 1         -> skb_header_cloned
// Only skbsim::ops (through SkbPool) change geometry and reference counts; the metadata a stack
// sets directly (ip_summed, header offsets, protocol, cb) are public fields, as in the kernel.

#include <array>
#include <cstdint>

#include <boost/intrusive/list_hook.hpp>

#include "skbsim/kernel.hpp"

namespace skbsim {

class Skb;
class SkbPool;
struct OpCtx;
namespace detail {
struct SkbEditor;
}

inline constexpr std::uint32_t kDatarefShift = 16;      // SKB_DATAREF_SHIFT
inline constexpr std::uint32_t kDatarefMask = 0xFFFFU;  // SKB_DATAREF_MASK
inline constexpr std::uint32_t kMaxFragsAnyVersion = 18;
inline constexpr std::uint16_t kNoHeader = 0xFFFFU;  // header offset not set

// skb->fclone (SKB_FCLONE_UNAVAILABLE / _ORIG / _CLONE).
enum class Fclone : std::uint8_t { kUnavailable, kOrig, kClone };

// A struct page with its own reference count (get_page / put_page).
struct Page {
  std::uint64_t id = 0;
  std::uint32_t refcount = 0;
  std::uint32_t gen = 0;  // bumped on every free: a stale handle sees a different generation
  bool live = false;
  bool highmem = false;
  Page* next_free = nullptr;
};

// skb_frag_t: a page reference, an offset into it and a size.
struct Frag {
  Page* page = nullptr;
  std::uint32_t off = 0;
  std::uint32_t size = 0;
};

// struct skb_shared_info, the fields that decide sharing and sizes.
struct SharedInfo {
  std::uint32_t dataref = 1;  // lo16 all references, hi16 payload-only references
  std::uint32_t nr_frags = 0;
  std::uint32_t gso_size = 0;
  std::uint32_t gso_segs = 0;
  std::uint32_t gso_type = 0;
  Skb* frag_list = nullptr;  // chained through Skb::next
  std::array<Frag, kMaxFragsAnyVersion> frags{};

  std::uint32_t dataref_all() const noexcept { return dataref & kDatarefMask; }
  std::uint32_t dataref_payload() const noexcept { return dataref >> kDatarefShift; }
};

// The kmalloc'd data area: head .. end, then the shared info.
struct DataBuf {
  SharedInfo shinfo;
  std::uint64_t id = 0;
  std::uint32_t end = 0;          // skb_end_offset(): usable bytes before the shared info
  std::uint32_t alloc_bytes = 0;  // the slab object (data + shared info + slack)
  // Where the payload starts, set by skb_header_release: bytes before it belong to the header
  // area, which a clone may write while every other reference is payload-only (nohdr).
  std::uint32_t payload_start = 0;
  std::uint32_t gen = 0;
  bool live = false;
  bool small_head = false;  // 6.x skb_small_head_cache object rather than kmalloc
  DataBuf* next_free = nullptr;
};

// The owner socket accounting that skb_set_owner_w / sock_wfree touch.
struct Sock {
  std::uint64_t id = 0;
  std::int64_t wmem_alloc = 0;  // sk_wmem_alloc
  std::int64_t rmem_alloc = 0;  // sk_rmem_alloc
  // sk->sk_write_space: sock_wfree calls it once the charge is given back, in the context that
  // freed (or orphaned) the skb; the socket's owner wakes a writer waiting for buffer space
  // (sock_def_write_space). `owner` is the owner's own pointer; both null = nobody waits.
  void (*write_space)(OpCtx& ctx, Sock& sk) = nullptr;
  void* owner = nullptr;
};

enum class Destructor : std::uint8_t { kNone, kSockWfree, kSockRfree };

class Skb {
 public:
  using QueueHook =
      boost::intrusive::list_member_hook<boost::intrusive::link_mode<boost::intrusive::normal_link>>;

  // Geometry (all O(1), charge nothing).
  std::uint32_t len() const noexcept { return len_; }
  std::uint32_t data_len() const noexcept { return data_len_; }
  std::uint32_t headlen() const noexcept { return tail_ - data_; }  // skb_headlen
  std::uint32_t headroom() const noexcept { return data_; }         // skb_headroom
  // skb_tailroom: 0 for a nonlinear skb.
  std::uint32_t tailroom() const noexcept { return data_len_ != 0 ? 0 : end_ - tail_; }
  bool is_nonlinear() const noexcept { return data_len_ != 0; }
  std::uint32_t data_offset() const noexcept { return data_; }
  std::uint32_t tail_offset() const noexcept { return tail_; }
  std::uint32_t end_offset() const noexcept { return end_; }  // skb_end_offset
  std::uint32_t truesize() const noexcept { return truesize_; }

  // Sharing (kernel-skb-facts.md §1.3).
  std::uint32_t users() const noexcept { return users_; }
  bool shared() const noexcept { return users_ != 1; }  // skb_shared
  bool cloned_flag() const noexcept { return cloned_; }
  bool nohdr() const noexcept { return nohdr_; }
  bool cloned() const noexcept {  // skb_cloned
#if defined(SKBSIM_MUTANT)
    // Mutation-testing hook, never defined in a real build: tests/mutation/ compiles the core
    // with the classic mistake (the raw "dataref > 1", kernel-skb-facts.md §0) to prove that
    // tests/skb_property_test.cpp catches it.
    return buf_->shinfo.dataref > 1;
#else
    return cloned_ && buf_->shinfo.dataref_all() != 1;
#endif
  }
  bool header_cloned() const noexcept {  // skb_header_cloned
    if (!cloned_) {
      return false;
    }
    const std::uint32_t d = buf_->shinfo.dataref;
    return (d & kDatarefMask) - (d >> kDatarefShift) != 1;
  }
  Fclone fclone() const noexcept { return fclone_; }
  std::uint32_t hdr_len() const noexcept { return hdr_len_; }  // 6.x skb->hdr_len

  const SharedInfo& shinfo() const noexcept { return buf_->shinfo; }
  const DataBuf& buf() const noexcept { return *buf_; }
  Sock* sk() const noexcept { return sk_; }
  Destructor destructor() const noexcept { return destructor_; }

  // Identity: a number unique within the pool's lifetime, and a generation bumped on free.
  std::uint64_t id() const noexcept { return id_; }
  std::uint32_t gen() const noexcept { return gen_; }
  bool live() const noexcept { return live_; }
  // A traced skb forwards its ledger records to the trace sink; clones and copies inherit it.
  bool traced() const noexcept { return traced_; }
  void set_traced(bool t) noexcept { traced_ = t; }

  // Metadata a stack sets directly, as it does in the kernel.
  IpSummed ip_summed = IpSummed::kNone;
  std::uint32_t csum = 0;          // __wsum csum (RX COMPLETE, or TX partial sum on 2.6.20 NONE)
  std::uint16_t csum_start = 0;    // 6.x: from head; 2.6.20 uses the transport header
  std::uint16_t csum_offset = 0;   // where the checksum field is, from the checksum start
  std::uint16_t transport_header = kNoHeader;  // offsets from head
  std::uint16_t network_header = kNoHeader;
  std::uint16_t mac_header = kNoHeader;
  std::uint16_t protocol = 0;  // skb->protocol (host order)
  std::uint8_t pkt_type = 0;   // PACKET_HOST = 0
  std::uint32_t priority = 0;
  std::uint32_t dev = 0;                 // index of the device the skb is on (the stack's)
  // 6.x skb->alloc_cpu: the CPU whose context allocated the sk_buff (__finalize_skb_around); a
  // clone or copy takes the original's (__copy_skb_header: it is in the headers group), so do
  // skb_segment's outputs. skb_attempt_defer_free hands the skb back to this CPU to be freed.
  std::uint16_t alloc_cpu = 0;
  // The CPU whose context worked on this sk_buff last, where its lines are: set where it is
  // allocated or cloned, moved by each operation's own record on it (ops::record_skb_work, which
  // Net::charge uses too; the allocator's and page records under an operation follow that one).
  // Cache state, not the kernel's: mutable, so the record of a read-only step can move it.
  mutable std::uint16_t touch_cpu = 0;
  std::array<std::uint64_t, 6> cb{};     // skb->cb: protocol-private scratch (TCP seq etc.)
  Skb* next = nullptr;                   // frag_list chaining
  QueueHook queue_hook;                  // SkbQueue link

 private:
  friend class SkbPool;
  friend struct detail::SkbEditor;

  DataBuf* buf_ = nullptr;
  struct FclonePair* pair_ = nullptr;  // the fast-clone pair this sk_buff lives in, if any
  Sock* sk_ = nullptr;
  std::uint64_t id_ = 0;
  std::uint32_t data_ = 0;
  std::uint32_t tail_ = 0;
  std::uint32_t end_ = 0;
  std::uint32_t len_ = 0;
  std::uint32_t data_len_ = 0;
  std::uint32_t truesize_ = 0;
  std::uint32_t users_ = 0;
  std::uint32_t hdr_len_ = 0;
  std::uint32_t gen_ = 0;
  Destructor destructor_ = Destructor::kNone;
  Fclone fclone_ = Fclone::kUnavailable;
  bool cloned_ = false;
  bool nohdr_ = false;
  bool live_ = false;
  bool traced_ = false;
  Skb* next_free_ = nullptr;
};

// struct sk_buff_fclones: the original, its companion and fclone_ref, in one slab object.
struct FclonePair {
  Skb skb1;
  Skb skb2;
  std::uint32_t fclone_ref = 0;
  bool live = false;
  FclonePair* next_free = nullptr;
};

}  // namespace skbsim
