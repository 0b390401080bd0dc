#pragma once
// skb_editor.hpp — private: the one friend of Skb through which SkbPool and skbsim::ops change
// geometry and reference counts. Nothing outside src/ includes it.

#include <new>

#include "skbsim/skb.hpp"

namespace skbsim::detail {

struct SkbEditor {
  static std::uint32_t& data(Skb& s) noexcept { return s.data_; }
  static std::uint32_t& tail(Skb& s) noexcept { return s.tail_; }
  static std::uint32_t& end(Skb& s) noexcept { return s.end_; }
  static std::uint32_t& len(Skb& s) noexcept { return s.len_; }
  static std::uint32_t& data_len(Skb& s) noexcept { return s.data_len_; }
  static std::uint32_t& truesize(Skb& s) noexcept { return s.truesize_; }
  static std::uint32_t& users(Skb& s) noexcept { return s.users_; }
  static std::uint32_t& hdr_len(Skb& s) noexcept { return s.hdr_len_; }
  static bool& cloned(Skb& s) noexcept { return s.cloned_; }
  static bool& nohdr(Skb& s) noexcept { return s.nohdr_; }
  static Fclone& fclone(Skb& s) noexcept { return s.fclone_; }
  static DataBuf*& buf(Skb& s) noexcept { return s.buf_; }
  static FclonePair* pair(const Skb& s) noexcept { return s.pair_; }
  static Sock*& sk(Skb& s) noexcept { return s.sk_; }
  static Destructor& destructor(Skb& s) noexcept { return s.destructor_; }
  static bool& traced(Skb& s) noexcept { return s.traced_; }
  static Skb*& free_link(Skb& s) noexcept { return s.next_free_; }

  // A fresh, live sk_buff with `id`, keeping its generation and free-list link.
  static void reset(Skb& s, std::uint64_t id) {
    const std::uint32_t gen = s.gen_;
    FclonePair* pair = s.pair_;
    s.~Skb();
    new (&s) Skb();
    s.gen_ = gen;
    s.pair_ = pair;
    s.id_ = id;
    s.users_ = 1;
    s.live_ = true;
  }
  static void kill(Skb& s) noexcept {
    s.live_ = false;
    ++s.gen_;
    s.buf_ = nullptr;
    s.users_ = 0;
  }
  static void set_pair(Skb& s, FclonePair* p, Fclone f) noexcept {
    s.pair_ = p;
    s.fclone_ = f;
  }
};

}  // namespace skbsim::detail
