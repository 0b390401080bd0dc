#include "skbsim/bug.hpp"

namespace skbsim {
namespace {

std::string describe(const std::string& condition, Sym op, std::uint64_t skb_id,
                     const std::string& detail) {
  std::string m = condition;
  m += " in ";
  m += symbol_name(op);
  m += " on skb #";
  m += std::to_string(skb_id);
  if (!detail.empty()) {
    m += ": ";
    m += detail;
  }
  return m;
}

}  // namespace

SkbBug::SkbBug(std::string condition, Sym op, std::uint64_t skb_id, const std::string& detail)
    : std::logic_error(describe(condition, op, skb_id, detail)),
      condition_(std::move(condition)),
      op_(op),
      skb_id_(skb_id) {}

void raise_bug(std::string_view condition, Sym op, std::uint64_t skb_id, std::string_view detail) {
  throw SkbBug(std::string(condition), op, skb_id, std::string(detail));
}

}  // namespace skbsim
