#pragma once
// bug.hpp — what happens when the model meets a condition the kernel would BUG on, or one of the
// model's own invariants breaks.
//
// Both stop the operation with a SkbBug naming the condition (in the kernel's words where the
// kernel has them: "skb_over_panic", "skb_under_panic", "BUG_ON(skb_shared(skb))"), the operation
// and the skb. skbsim never continues past one: `skbsim ops` prints its JSON with the error and
// exits 1, the simulator stops the run. Refusals the kernel makes without a BUG (an skb_pull
// beyond len, an allocation failure) are return values, never exceptions.
//
// Bad input (an op the kernel version does not have) is an UnsupportedOp, which the command line
// turns into exit code 2.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "skbsim/symbols.hpp"

namespace skbsim {

class SkbBug : public std::logic_error {
 public:
  SkbBug(std::string condition, Sym op, std::uint64_t skb_id, const std::string& detail);
  const std::string& condition() const noexcept { return condition_; }
  Sym op() const noexcept { return op_; }
  std::uint64_t skb_id() const noexcept { return skb_id_; }

 private:
  std::string condition_;
  Sym op_;
  std::uint64_t skb_id_;
};

class UnsupportedOp : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

[[noreturn]] void raise_bug(std::string_view condition, Sym op, std::uint64_t skb_id,
                            std::string_view detail = {});

}  // namespace skbsim
