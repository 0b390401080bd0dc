#include "skbsim/symbols.hpp"

namespace skbsim {
namespace {

struct SymInfo {
  std::string_view name;
  SymGroup group;
};

constexpr std::array<SymInfo, kSymCount> kSymInfo = {{
#define SKBSIM_SYM_INFO(e, name, group) {name, SymGroup::group},
    SKBSIM_SYMBOLS(SKBSIM_SYM_INFO)
#undef SKBSIM_SYM_INFO
}};

}  // namespace

std::string_view symbol_name(Sym s) noexcept { return kSymInfo[index(s)].name; }

SymGroup symbol_group(Sym s) noexcept { return kSymInfo[index(s)].group; }

std::string_view group_name(SymGroup g) noexcept {
  switch (g) {
    case SymGroup::kCopy:
      return "copy";
    case SymGroup::kChecksum:
      return "checksum";
    case SymGroup::kSkb:
      return "skb";
    case SymGroup::kProtocol:
      return "protocol";
    case SymGroup::kDevice:
      return "device";
    case SymGroup::kMemory:
      return "memory";
    case SymGroup::kOther:
      return "other";
  }
  return "other";
}

std::optional<Sym> symbol_from_name(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kSymCount; ++i) {
    if (kSymInfo[i].name == name) {
      return static_cast<Sym>(i);
    }
  }
  return std::nullopt;
}

}  // namespace skbsim
