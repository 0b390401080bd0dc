// ops_runner.cpp — `skbsim ops`: validating an ops file into an OpsScript, and running it against
// one SkbPool and one Ledger. ops_runner.hpp has the format and the rules on names.

#include "sim/ops_runner.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "sim/input_error.hpp"
#include "sim/json_reader.hpp"
#include "skbsim/bug.hpp"
#include "skbsim/ledger.hpp"
#include "skbsim/skb.hpp"
#include "skbsim/skb_check.hpp"
#include "skbsim/skb_ops.hpp"
#include "skbsim/skb_pool.hpp"
#include "skbsim/symbols.hpp"

namespace skbsim::sim {
namespace {

using Json = nlohmann::ordered_json;

// ---- the operations ---------------------------------------------------------------------------

enum class Kind : std::uint8_t {
  kAllocSkb,
  kAllocSkbFclone,
  kNetdevAllocSkb,
  kReserve,
  kPut,
  kPush,
  kPull,
  kTrim,
  kClone,
  kCopy,
  kPskbCopy,
  kExpandHead,
  kCow,
  kCowHead,
  kHeaderRelease,
  kGet,
  kUnshare,
  kShareCheck,
  kPullTail,
  kLinearize,
  kAllocPage,
  kGetPage,
  kPutPage,
  kFillPageDesc,
  kAddRxFrag,
  kFragGrow,
  kSetOwnerW,
  kSetOwnerR,
  kOrphan,
  kKfreeSkb,
  kConsumeSkb,
  kKfreeSkbNow,
  kChecksum,
  kCopyAndCsumBits,
  kCsumPartial,
  kCsumPartialCopyGeneric,
  kAddData,
  kChecksumHelp,
  kIpDecreaseTtl,
  kIpFastCsum,
  kStoreBits,
  kSet,
};

// What "as" names.
enum class Makes : std::uint8_t { kNothing, kSkb, kPage };

struct OpSpec {
  std::string_view name;  // the kernel function
  Kind kind;
  bool takes_skb = false;
  bool takes_page = false;
  bool takes_sk = false;
  Makes makes = Makes::kNothing;
  std::array<std::string_view, 4> args{};  // unsigned arguments, by kernel parameter name
  bool allocates = false;                  // "fail_alloc" allowed
  bool only_6x = false;
};

// Every operation of skb_ops.hpp, in its order. Argument names are the kernel's parameters
// (skb_add_data's `copy` is "len", as the model names it). The step's "result" is the function's
// return value where the model has it (an int, or a bool for skb_pull / __pskb_pull_tail); a
// returned skb or page pointer shows as the name it got (null for NULL); void functions and those
// returning data pointers or checksum values give null.
// clang-format off
constexpr std::array kOps = {
    OpSpec{.name = "alloc_skb", .kind = Kind::kAllocSkb, .makes = Makes::kSkb, .args = {"size"},
           .allocates = true},
    OpSpec{.name = "alloc_skb_fclone", .kind = Kind::kAllocSkbFclone, .makes = Makes::kSkb,
           .args = {"size"}, .allocates = true},
    OpSpec{.name = "__netdev_alloc_skb", .kind = Kind::kNetdevAllocSkb, .makes = Makes::kSkb,
           .args = {"length"}, .allocates = true},
    OpSpec{.name = "skb_reserve", .kind = Kind::kReserve, .takes_skb = true, .args = {"len"}},
    OpSpec{.name = "skb_put", .kind = Kind::kPut, .takes_skb = true, .args = {"len"}},
    OpSpec{.name = "skb_push", .kind = Kind::kPush, .takes_skb = true, .args = {"len"}},
    OpSpec{.name = "skb_pull", .kind = Kind::kPull, .takes_skb = true, .args = {"len"}},
    OpSpec{.name = "skb_trim", .kind = Kind::kTrim, .takes_skb = true, .args = {"len"}},
    OpSpec{.name = "skb_clone", .kind = Kind::kClone, .takes_skb = true, .makes = Makes::kSkb,
           .allocates = true},
    OpSpec{.name = "skb_copy", .kind = Kind::kCopy, .takes_skb = true, .makes = Makes::kSkb,
           .allocates = true},
    OpSpec{.name = "pskb_copy", .kind = Kind::kPskbCopy, .takes_skb = true, .makes = Makes::kSkb,
           .allocates = true},
    OpSpec{.name = "pskb_expand_head", .kind = Kind::kExpandHead, .takes_skb = true,
           .args = {"nhead", "ntail"}, .allocates = true},
    OpSpec{.name = "skb_cow", .kind = Kind::kCow, .takes_skb = true, .args = {"headroom"},
           .allocates = true},
    OpSpec{.name = "skb_cow_head", .kind = Kind::kCowHead, .takes_skb = true,
           .args = {"headroom"}, .allocates = true, .only_6x = true},
    OpSpec{.name = "skb_header_release", .kind = Kind::kHeaderRelease, .takes_skb = true},
    OpSpec{.name = "skb_get", .kind = Kind::kGet, .takes_skb = true},
    OpSpec{.name = "skb_unshare", .kind = Kind::kUnshare, .takes_skb = true, .makes = Makes::kSkb,
           .allocates = true},
    OpSpec{.name = "skb_share_check", .kind = Kind::kShareCheck, .takes_skb = true,
           .makes = Makes::kSkb, .allocates = true},
    OpSpec{.name = "__pskb_pull_tail", .kind = Kind::kPullTail, .takes_skb = true,
           .args = {"delta"}, .allocates = true},
    OpSpec{.name = "skb_linearize", .kind = Kind::kLinearize, .takes_skb = true,
           .allocates = true},
    OpSpec{.name = "alloc_page", .kind = Kind::kAllocPage, .makes = Makes::kPage,
           .allocates = true},
    OpSpec{.name = "get_page", .kind = Kind::kGetPage, .takes_page = true},
    OpSpec{.name = "put_page", .kind = Kind::kPutPage, .takes_page = true},
    OpSpec{.name = "skb_fill_page_desc", .kind = Kind::kFillPageDesc, .takes_skb = true,
           .takes_page = true, .args = {"i", "off", "size"}},
    OpSpec{.name = "skb_add_rx_frag", .kind = Kind::kAddRxFrag, .takes_skb = true,
           .takes_page = true, .args = {"i", "off", "size", "truesize"}},
    // Pseudo-op: the growth of the last frag tcp_sendmsg open-codes when it appends to the same
    // page (skb_can_coalesce); the model's ops::frag_grow, no kernel function of its own.
    OpSpec{.name = "frag_grow", .kind = Kind::kFragGrow, .takes_skb = true,
           .args = {"size", "truesize"}},
    OpSpec{.name = "skb_set_owner_w", .kind = Kind::kSetOwnerW, .takes_skb = true,
           .takes_sk = true},
    OpSpec{.name = "skb_set_owner_r", .kind = Kind::kSetOwnerR, .takes_skb = true,
           .takes_sk = true},
    OpSpec{.name = "skb_orphan", .kind = Kind::kOrphan, .takes_skb = true},
    OpSpec{.name = "kfree_skb", .kind = Kind::kKfreeSkb, .takes_skb = true},
    OpSpec{.name = "consume_skb", .kind = Kind::kConsumeSkb, .takes_skb = true, .only_6x = true},
    OpSpec{.name = "__kfree_skb", .kind = Kind::kKfreeSkbNow, .takes_skb = true},
    OpSpec{.name = "skb_checksum", .kind = Kind::kChecksum, .takes_skb = true,
           .args = {"offset", "len"}},
    OpSpec{.name = "skb_copy_and_csum_bits", .kind = Kind::kCopyAndCsumBits, .takes_skb = true,
           .args = {"offset", "len"}},
    OpSpec{.name = "csum_partial", .kind = Kind::kCsumPartial, .args = {"len"}},
    OpSpec{.name = "csum_partial_copy_generic", .kind = Kind::kCsumPartialCopyGeneric,
           .args = {"len"}},
    OpSpec{.name = "skb_add_data", .kind = Kind::kAddData, .takes_skb = true, .args = {"len"}},
    OpSpec{.name = "skb_checksum_help", .kind = Kind::kChecksumHelp, .takes_skb = true,
           .allocates = true},
    OpSpec{.name = "ip_decrease_ttl", .kind = Kind::kIpDecreaseTtl, .takes_skb = true},
    OpSpec{.name = "ip_fast_csum", .kind = Kind::kIpFastCsum, .takes_skb = true},
    OpSpec{.name = "skb_store_bits", .kind = Kind::kStoreBits, .takes_skb = true,
           .args = {"offset", "len"}},
    OpSpec{.name = "set", .kind = Kind::kSet, .takes_skb = true},
};
// clang-format on

const OpSpec* find_op(std::string_view name) noexcept {
  const auto it =
      std::find_if(kOps.begin(), kOps.end(), [name](const OpSpec& s) { return s.name == name; });
  return it == kOps.end() ? nullptr : &*it;
}

const OpSpec& op_spec(std::string_view name) {
  const OpSpec* spec = find_op(name);
  if (spec == nullptr) {
    throw std::logic_error("ops_runner: unvalidated op " + std::string(name));
  }
  return *spec;
}

// The fields the pseudo-op "set" writes: skb metadata no kernel function sets by itself.
enum class FieldType : std::uint8_t { kIpSummed, kU16, kU32, kOffset };

struct SetField {
  std::string_view key;
  FieldType type;
  bool only_6x = false;
};

constexpr std::array kSetFields = {
    SetField{"ip_summed", FieldType::kIpSummed},
    SetField{"csum_start", FieldType::kU16, true},  // from data, as skb_partial_csum_set's start
    SetField{"csum_offset", FieldType::kU16},
    SetField{"gso_size", FieldType::kU16},
    SetField{"gso_segs", FieldType::kU16},
    SetField{"gso_type", FieldType::kU32},
    SetField{"network_header", FieldType::kOffset},    // offsets from data (skb_reset_*_header
    SetField{"transport_header", FieldType::kOffset},  // + skb_set_*_header)
    SetField{"mac_header", FieldType::kOffset},
    SetField{"protocol", FieldType::kU16},
};

constexpr std::int64_t kMaxU16 = 0xFFFF;
constexpr std::int64_t kMaxU32 = 0xFFFFFFFF;
constexpr std::int64_t kMaxFragTruesize = 1 << 20;

std::string join(const std::vector<std::string_view>& parts, std::string_view sep) {
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) {
      s += sep;
    }
    s += parts[i];
  }
  return s;
}

// The keys an op object may have, in the order the report echoes them.
std::vector<std::string_view> op_keys(const OpSpec& spec, const KernelModel& k) {
  std::vector<std::string_view> keys = {"op", "comment"};
  if (spec.takes_skb) {
    keys.emplace_back("skb");
  }
  if (spec.takes_page) {
    keys.emplace_back("page");
  }
  if (spec.takes_sk) {
    keys.emplace_back("sk");
  }
  if (spec.makes != Makes::kNothing) {
    keys.emplace_back("as");
  }
  for (std::string_view a : spec.args) {
    if (!a.empty()) {
      keys.push_back(a);
    }
  }
  if (spec.kind == Kind::kSet) {
    for (const SetField& f : kSetFields) {
      if (!f.only_6x || k.version != KernelVersion::k2_6_20) {
        keys.push_back(f.key);
      }
    }
  }
  if (spec.allocates) {
    keys.emplace_back("fail_alloc");
  }
  return keys;
}

// ---- validation -------------------------------------------------------------------------------

// RFC 6901: "~" -> "~0", "/" -> "~1".
std::string escape_key(std::string_view key) { return json_pointer_token(key); }

std::string json_quote(std::string_view s) {
  return Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// What was found, for "got ...": scalars as JSON (strings quoted), containers by kind.
std::string describe(const Json* v) {
  if (v == nullptr) {
    return "nothing";
  }
  if (v->is_object()) {
    return "an object";
  }
  if (v->is_array()) {
    return "an array";
  }
  constexpr std::size_t kMax = 48;
  if (v->is_string() && v->get_ref<const std::string&>().size() > kMax) {
    return json_quote(v->get_ref<const std::string&>().substr(0, kMax)) + "...";
  }
  return v->dump(-1, ' ', false, Json::error_handler_t::replace);
}

const Json* member(const Json& obj, std::string_view key) {
  const auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}

std::string kernel_label(const KernelModel& k) {
  return "kernel " + std::string(k.name);
}

// Where each skb or page name was defined, to check uses and redefinitions in op order.
struct NameDef {
  Makes what;
  std::string pointer;
};

class Validator {
 public:
  // `ops`: the "ops" array, scanned once for the names it gives, to tell "defined later" apart
  // from "never defined".
  Validator(const std::string& file, const KernelModel& kernel, const Json& ops)
      : file_(file), k_(kernel) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Json* as = ops[i].is_object() ? member(ops[i], "as") : nullptr;
      if (as != nullptr && as->is_string()) {
        later_.emplace(as->get<std::string>(), "/ops/" + std::to_string(i));
      }
    }
  }

  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    throw InputError(file_, pointer, message);
  }

  OpsCall parse_call(const Json& j, std::size_t index) {
    OpsCall call;
    call.pointer = "/ops/" + std::to_string(index);
    const std::string& at = call.pointer;
    if (!j.is_object()) {
      fail(at, "expected an object with an \"op\" key, got " + describe(&j));
    }
    const Json* op = member(j, "op");
    if (op == nullptr || !op->is_string()) {
      fail(at + "/op", "expected the name of an operation, got " + describe(op));
    }
    call.op = op->get<std::string>();
    const OpSpec* spec = find_op(call.op);
    if (spec == nullptr) {
      fail(at + "/op", "expected an operation skbsim models (skbsim ops --help lists them), got " +
                           describe(op));
    }
    if (spec->only_6x && k_.version == KernelVersion::k2_6_20) {
      fail(at + "/op", "expected an operation " + kernel_label(k_) + " has, got " + describe(op) +
                           " (6.x only)");
    }
    reject_unknown_keys(j, *spec, at);

    if (const Json* c = member(j, "comment")) {
      if (!c->is_string()) {
        fail(at + "/comment", "expected a string, got " + describe(c));
      }
      call.comment = c->get<std::string>();
    }
    if (spec->takes_skb) {
      call.skb = use_name(j, "skb", Makes::kSkb, at);
    }
    if (spec->takes_page) {
      call.page = use_name(j, "page", Makes::kPage, at);
    }
    if (spec->takes_sk) {
      call.sk = name(j, "sk", at);
    }
    if (spec->makes != Makes::kNothing) {
      call.as = name(j, "as", at);
      const auto it = names_.find(call.as);
      if (it != names_.end()) {
        fail(at + "/as", "expected a new name, got " + json_quote(call.as) + " (already names " +
                             what(it->second.what) + " at " + it->second.pointer + "/as)");
      }
      names_.emplace(call.as, NameDef{spec->makes, at});
    }
    for (std::string_view a : spec->args) {
      if (!a.empty()) {
        call.args.emplace_back(std::string(a), unsigned_arg(j, a, at));
      }
    }
    if (spec->kind == Kind::kSet) {
      set_fields(j, call);
    }
    if (const Json* f = member(j, "fail_alloc")) {
      if (!f->is_boolean()) {
        fail(at + "/fail_alloc", "expected true or false, got " + describe(f));
      }
      call.fail_alloc = f->get<bool>();
    }
    return call;
  }

 private:
  static std::string what(Makes m) { return m == Makes::kPage ? "a page" : "an skb"; }

  void reject_unknown_keys(const Json& j, const OpSpec& spec, const std::string& at) const {
    const std::vector<std::string_view> keys = op_keys(spec, k_);
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
        continue;
      }
      const std::string where = at + "/" + escape_key(key);
      if (spec.kind == Kind::kSet && key == "csum_start") {
        fail(where, "expected a field " + kernel_label(k_) +
                        " has, got \"csum_start\" (added after 2.6.20, which sums from the "
                        "transport header)");
      }
      std::string message = "expected a key of " + std::string(spec.name) + " (" +
                            join(keys, ", ") + "), got " + json_quote(key);
      if (key == "fail_alloc") {
        message += " (" + std::string(spec.name) + " allocates nothing)";
      }
      fail(where, message);
    }
  }

  std::string name(const Json& j, std::string_view key, const std::string& at) const {
    const Json* v = member(j, key);
    if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().empty()) {
      fail(at + "/" + std::string(key), "expected a name (a non-empty string), got " + describe(v));
    }
    return v->get<std::string>();
  }

  std::string use_name(const Json& j, std::string_view key, Makes m, const std::string& at) const {
    std::string n = name(j, key, at);
    const auto it = names_.find(n);
    if (it == names_.end()) {
      const auto later = later_.find(n);
      fail(at + "/" + std::string(key),
           "expected the name of " + what(m) + " defined by an earlier op, got " + json_quote(n) +
               (later == later_.end() ? "" : " (first given at " + later->second + "/as)"));
    }
    if (it->second.what != m) {
      fail(at + "/" + std::string(key), "expected the name of " + what(m) + ", got " +
                                            json_quote(n) + " (" + what(it->second.what) + ", " +
                                            it->second.pointer + "/as)");
    }
    return n;
  }

  // An integer in [lo, hi]; `note` explains the range.
  std::int64_t integer(const Json* v, const std::string& where, std::int64_t lo, std::int64_t hi,
                       const std::string& note = {}) const {
    const std::string kind = lo < 0 ? "an integer" : "an unsigned integer";
    if (v == nullptr || !v->is_number_integer()) {
      fail(where, "expected " + kind + ", got " + describe(v));
    }
    bool in_range = false;
    std::int64_t value = 0;
    if (v->is_number_unsigned()) {
      const auto u = v->get<std::uint64_t>();
      in_range = u <= static_cast<std::uint64_t>(hi);
      value = in_range ? static_cast<std::int64_t>(u) : 0;
    } else {
      value = v->get<std::int64_t>();
      in_range = value >= lo && value <= hi;
    }
    if (!in_range) {
      fail(where, "expected " + kind + " in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "]" + note + ", got " + describe(v));
    }
    return value;
  }

  std::int64_t unsigned_arg(const Json& j, std::string_view key, const std::string& at) const {
    const std::string where = at + "/" + std::string(key);
    if (key == "i") {
      return integer(member(j, key), where, 0, k_.max_skb_frags - 1,
                     " (MAX_SKB_FRAGS is " + std::to_string(k_.max_skb_frags) + " on " +
                         std::string(k_.name) + ")");
    }
    return integer(member(j, key), where, 0, key == "truesize" ? kMaxFragTruesize : kMaxU16);
  }

  void set_fields(const Json& j, OpsCall& call) const {
    const std::string& at = call.pointer;
    bool any = false;
    std::vector<std::string_view> names;
    for (const SetField& f : kSetFields) {
      if (f.only_6x && k_.version == KernelVersion::k2_6_20) {
        continue;
      }
      names.push_back(f.key);
      const Json* v = member(j, f.key);
      if (v == nullptr) {
        continue;
      }
      any = true;
      const std::string where = at + "/" + std::string(f.key);
      switch (f.type) {
        case FieldType::kIpSummed: {
          const auto s =
              v->is_string() ? ip_summed_from_name(v->get_ref<const std::string&>()) : std::nullopt;
          if (!s) {
            fail(where,
                 "expected one of CHECKSUM_NONE, CHECKSUM_UNNECESSARY, CHECKSUM_COMPLETE, "
                 "CHECKSUM_PARTIAL, got " +
                     describe(v));
          }
          call.ip_summed = s;
          break;
        }
        case FieldType::kU16:
          call.args.emplace_back(std::string(f.key), integer(v, where, 0, kMaxU16));
          break;
        case FieldType::kU32:
          call.args.emplace_back(std::string(f.key), integer(v, where, 0, kMaxU32));
          break;
        case FieldType::kOffset:
          call.args.emplace_back(std::string(f.key), integer(v, where, -kMaxU16, kMaxU16));
          break;
      }
    }
    if (!any) {
      fail(at, "expected at least one field to set (" + join(names, ", ") + "), got none");
    }
  }

  const std::string& file_;
  const KernelModel& k_;
  std::map<std::string, NameDef, std::less<>> names_;
  std::map<std::string, std::string, std::less<>> later_;  // name -> where it is first given
};

// Parses JSON, rejecting a key given twice in one object (nlohmann would keep the last).
Json parse_json(const std::string& file, std::string_view text) {
  struct Frame {
    bool is_array = false;
    std::size_t next_index = 0;
    std::string at;  // the key or index of the element being read
    std::set<std::string, std::less<>> keys;
  };
  std::vector<Frame> stack;
  auto pointer = [&stack] {
    std::string p;
    for (const Frame& f : stack) {
      p += "/" + escape_key(f.at);
    }
    return p;
  };
  auto element = [&stack] {
    if (!stack.empty() && stack.back().is_array) {
      stack.back().at = std::to_string(stack.back().next_index++);
    }
  };
  const Json::parser_callback_t callback = [&](int /*depth*/, Json::parse_event_t event,
                                               Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        element();
        stack.emplace_back().is_array = event == Json::parse_event_t::array_start;
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        stack.pop_back();
        break;
      case Json::parse_event_t::key: {
        Frame& f = stack.back();
        f.at = parsed.get<std::string>();
        if (!f.keys.insert(f.at).second) {
          throw InputError(
              file, pointer(),
              "expected each key once in an object, got " + json_quote(f.at) + " again");
        }
        break;
      }
      case Json::parse_event_t::value:
        element();
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const Json::parse_error& e) {
    // nlohmann: "[json.exception.parse_error.101] parse error at line 3, column 5: ...".
    const std::string what = e.what();
    const std::string marker = "parse error ";
    const std::size_t pos = what.find(marker);
    throw InputError(file, "",
                     "expected valid JSON, got a parse error " +
                         (pos == std::string::npos ? what : what.substr(pos + marker.size())));
  }
}

// ---- running ----------------------------------------------------------------------------------

// A run error that is not an SkbBug from the model: a use of a freed or NULL name, a header
// offset outside the head. Same shape: what() = "<condition> in <op> ...".
class RunFailure : public std::runtime_error {
 public:
  RunFailure(std::string condition, const std::string& message)
      : std::runtime_error(message), condition_(std::move(condition)) {}
  const std::string& condition() const noexcept { return condition_; }

 private:
  std::string condition_;
};

LedgerCell minus(const LedgerCell& a, const LedgerCell& b) noexcept {
  LedgerCell d = a;
  d.subtract(b);
  return d;
}

using Cells = std::array<LedgerCell, kSymCount>;

// The ledger delta of one step: totals, then each symbol that was called.
Json effect_json(const Cells& before, const Cells& after) {
  LedgerCell total;
  Json symbols = Json::object();
  for (std::size_t i = 0; i < kSymCount; ++i) {
    const LedgerCell d = minus(after[i], before[i]);
    if (d.calls == 0) {
      continue;
    }
    total.add(d);
    symbols[std::string(symbol_name(static_cast<Sym>(i)))] = {{"calls", d.calls},
                                                              {"bytes", d.bytes()}};
  }
  Json e = Json::object();
  e["bytes_copied"] = total.bytes_copied();
  e["bytes_checksummed"] = total.bytes_checksummed();
  e["allocs"] = total.allocs;
  e["alloc_bytes"] = total.alloc_bytes;
  e["frees"] = total.frees;
  e["free_bytes"] = total.free_bytes;
  e["page_refs"] = total.page_refs;
  e["symbols"] = std::move(symbols);
  return e;
}

std::string_view fclone_name(Fclone f) noexcept {
  switch (f) {
    case Fclone::kUnavailable:
      return "unavailable";
    case Fclone::kOrig:
      return "orig";
    case Fclone::kClone:
      return "clone";
  }
  return "unavailable";
}

class Runner {
 public:
  explicit Runner(const OpsScript& script)
      : script_(script), k_(KernelModel::get(script.kernel)), ctx_(k_, pool_, ledger_) {}

  OpsResult run() {
    OpsResult result;
    Json doc = Json::object();
    doc["kernel"] = std::string(k_.name);
    if (!script_.description.empty()) {
      doc["description"] = script_.description;
    }
    Json steps = Json::array();
    for (const OpsCall& call : script_.calls) {
      const OpSpec& spec = op_spec(call.op);
      Json step = echo(call, spec);
      const Cells before = ledger_.cells();
      std::optional<std::pair<std::string, std::string>> error;
      try {
        ctx_.fail_next_alloc = call.fail_alloc;
        step["result"] = execute(call, spec);
      } catch (const SkbBug& e) {
        error.emplace(e.condition(), e.what());
      } catch (const RunFailure& e) {
        error.emplace(e.condition(), e.what());
      } catch (const UnsupportedOp& e) {
        throw InputError(script_.file, call.pointer + "/op",
                         "expected an operation the model supports here, got " +
                             json_quote(call.op) + " (" + e.what() + ")");
      }
      ctx_.fail_next_alloc = false;  // an injection the op did not consume dies with it
      forget_freed(call);
      if (!error) {
        if (auto bad = check_pool(pool_, k_)) {
          error.emplace("invariant violated", "invariant violated after " + call.op + ": " + *bad);
        }
      }
      if (error) {
        step["error"] = {{"condition", error->first}, {"message", error->second}};
      }
      step["effect"] = effect_json(before, ledger_.cells());
      step["skbs"] = skbs_json();
      step["pages"] = pages_json();
      if (!socks_.empty()) {
        step["socks"] = socks_json();
      }
      steps.push_back(std::move(step));
      if (error) {
        result.exit_code = 1;
        result.error = script_.file + ": " + call.pointer + ": " + error->second;
        break;
      }
    }
    doc["steps"] = std::move(steps);
    doc["leaks"] = leaks_json();
    result.json = doc.dump(2) + "\n";
    return result;
  }

 private:
  enum class State : std::uint8_t { kLive, kNull, kGone };
  // What a name refers to: the object and its generation when it was named.
  struct Handle {
    std::string name;
    Makes what = Makes::kSkb;
    Skb* skb = nullptr;
    Page* page = nullptr;
    std::uint32_t gen = 0;
    std::uint64_t id = 0;
    State state = State::kLive;
    std::string why;  // kNull: the op that returned NULL; kGone: the op that freed or took it
  };

  static bool alive(const Handle& h) noexcept {
    if (h.state != State::kLive) {
      return false;
    }
    return h.what == Makes::kSkb ? h.skb->live() && h.skb->gen() == h.gen
                                 : h.page->live && h.page->gen == h.gen;
  }

  Handle& handle(const std::string& name) {
    const auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      throw std::logic_error("ops_runner: unvalidated name " + name);
    }
    return handles_[it->second];
  }

  std::string label(const Handle& h) const {
    return (h.what == Makes::kSkb ? "skb #" : "page #") + std::to_string(h.id) + " (" +
           json_quote(h.name) + ")";
  }

  // The live object `name` refers to; a NULL, freed or given-up name is a run error (`null_ok`:
  // NULL is returned as nullptr, for kfree_skb(NULL)).
  Handle& resolve(const OpsCall& call, const std::string& name, bool freeing, bool null_ok) {
    Handle& h = handle(name);
    if (h.state == State::kNull) {
      if (null_ok) {
        return h;
      }
      throw RunFailure("NULL pointer dereference", "NULL pointer dereference in " + call.op +
                                                       " on " + json_quote(name) + ": " + h.why);
    }
    if (!alive(h)) {
      const std::string condition = freeing ? "double free" : "use after free";
      throw RunFailure(condition, condition + " in " + call.op + " on " + label(h) + ": " +
                                      (h.state == State::kGone ? h.why : "freed"));
    }
    return h;
  }

  Skb& skb(const OpsCall& call) { return *resolve(call, call.skb, false, false).skb; }
  Page& page(const OpsCall& call) { return *resolve(call, call.page, false, false).page; }

  Sock& sock(const std::string& name) {
    for (auto& [n, s] : socks_) {
      if (n == name) {
        return *s;
      }
    }
    auto s = std::make_unique<Sock>();
    s->id = socks_.size() + 1;
    return *socks_.emplace_back(name, std::move(s)).second;
  }

  Json bind(const OpsCall& call, Makes what, Skb* s, Page* p) {
    Handle h;
    h.name = call.as;
    h.what = what;
    h.skb = s;
    h.page = p;
    if (s == nullptr && p == nullptr) {
      h.state = State::kNull;
      h.why = call.op + " at " + call.pointer + " returned NULL";
    } else if (s != nullptr) {
      h.gen = s->gen();
      h.id = s->id();
    } else {
      h.gen = p->gen;
      h.id = p->id;
    }
    by_name_[call.as] = handles_.size();
    handles_.push_back(std::move(h));
    return handles_.back().state == State::kNull ? Json(nullptr) : Json(call.as);
  }

  // skb_unshare / skb_share_check: the result takes "as"; the old name goes when its skb is the
  // result (renamed) or was freed (forget_freed), and stays while another user keeps it alive.
  Json hand_over(const OpsCall& call, Handle& old, Skb* result) {
    const bool same = result != nullptr && result == old.skb;
    const std::size_t old_index = by_name_.at(old.name);
    Json r = bind(call, Makes::kSkb, result, nullptr);
    if (same) {
      Handle& h = handles_[old_index];
      h.state = State::kGone;
      h.why = "given up to " + call.op + " at " + call.pointer + ", whose result is " +
              json_quote(call.as);
    }
    return r;
  }

  // After each step: names whose object the step freed stop naming it.
  void forget_freed(const OpsCall& call) {
    for (Handle& h : handles_) {
      if (h.state == State::kLive && !alive(h)) {
        h.state = State::kGone;
        h.why = "freed by " + call.op + " at " + call.pointer;
      }
    }
  }

  Json execute(const OpsCall& call, const OpSpec& spec) {
    const auto u32 = [&call](std::string_view key) {
      return static_cast<std::uint32_t>(call.arg(key));
    };
    switch (spec.kind) {
      case Kind::kAllocSkb:
        return bind(call, Makes::kSkb, ops::alloc_skb(ctx_, u32("size")), nullptr);
      case Kind::kAllocSkbFclone:
        return bind(call, Makes::kSkb, ops::alloc_skb_fclone(ctx_, u32("size")), nullptr);
      case Kind::kNetdevAllocSkb:
        return bind(call, Makes::kSkb, ops::netdev_alloc_skb(ctx_, u32("length")), nullptr);
      case Kind::kReserve:
        ops::reserve(ctx_, skb(call), u32("len"));
        return nullptr;
      case Kind::kPut:
        ops::put(ctx_, skb(call), u32("len"));
        return nullptr;
      case Kind::kPush:
        ops::push(ctx_, skb(call), u32("len"));
        return nullptr;
      case Kind::kPull:
        return ops::pull(ctx_, skb(call), u32("len"));
      case Kind::kTrim:
        static_cast<void>(ops::trim(ctx_, skb(call), u32("len")));  // void in the kernel
        return nullptr;
      case Kind::kClone:
        return bind(call, Makes::kSkb, ops::clone(ctx_, skb(call)), nullptr);
      case Kind::kCopy:
        return bind(call, Makes::kSkb, ops::copy(ctx_, skb(call)), nullptr);
      case Kind::kPskbCopy:
        return bind(call, Makes::kSkb, ops::pskb_copy(ctx_, skb(call)), nullptr);
      case Kind::kExpandHead:
        return ops::expand_head(ctx_, skb(call), u32("nhead"), u32("ntail"));
      case Kind::kCow:
        return ops::cow(ctx_, skb(call), u32("headroom"));
      case Kind::kCowHead:
        return ops::cow_head(ctx_, skb(call), u32("headroom"));
      case Kind::kHeaderRelease:
        ops::header_release(ctx_, skb(call));
        return nullptr;
      case Kind::kGet:
        ops::get(ctx_, skb(call));
        return call.skb;
      case Kind::kUnshare: {
        Handle& old = resolve(call, call.skb, false, false);
        return hand_over(call, old, ops::unshare(ctx_, *old.skb));
      }
      case Kind::kShareCheck: {
        Handle& old = resolve(call, call.skb, false, false);
        return hand_over(call, old, ops::share_check(ctx_, *old.skb));
      }
      case Kind::kPullTail:
        return ops::pull_tail(ctx_, skb(call), u32("delta"));
      case Kind::kLinearize:
        return ops::linearize(ctx_, skb(call));
      case Kind::kAllocPage:
        return bind(call, Makes::kPage, nullptr, ops::alloc_page(ctx_));
      case Kind::kGetPage:
        ops::get_page(ctx_, page(call));
        return nullptr;
      case Kind::kPutPage:
        ops::put_page(ctx_, page(call));
        return nullptr;
      case Kind::kFillPageDesc: {
        Skb& s = skb(call);
        ops::fill_page_desc(ctx_, s, u32("i"), page(call), u32("off"), u32("size"));
        return nullptr;
      }
      case Kind::kAddRxFrag: {
        Skb& s = skb(call);
        ops::add_rx_frag(ctx_, s, u32("i"), page(call), u32("off"), u32("size"), u32("truesize"));
        return nullptr;
      }
      case Kind::kFragGrow:
        ops::frag_grow(ctx_, skb(call), u32("size"), u32("truesize"));
        return nullptr;
      case Kind::kSetOwnerW: {
        Skb& s = skb(call);
        ops::set_owner_w(ctx_, s, sock(call.sk));
        return nullptr;
      }
      case Kind::kSetOwnerR: {
        Skb& s = skb(call);
        ops::set_owner_r(ctx_, s, sock(call.sk));
        return nullptr;
      }
      case Kind::kOrphan:
        ops::orphan(ctx_, skb(call));
        return nullptr;
      case Kind::kKfreeSkb:
      case Kind::kConsumeSkb: {
        Handle& h = resolve(call, call.skb, true, true);
        if (h.state == State::kNull) {
          return nullptr;  // kfree_skb(NULL) and consume_skb(NULL) return at once
        }
        if (spec.kind == Kind::kKfreeSkb) {
          ops::kfree_skb(ctx_, *h.skb);
        } else {
          ops::consume_skb(ctx_, *h.skb);
        }
        return nullptr;
      }
      case Kind::kKfreeSkbNow:  // __kfree_skb(NULL) dereferences it: no NULL check there
        ops::kfree_skb_now(ctx_, *resolve(call, call.skb, true, false).skb);
        return nullptr;
      case Kind::kChecksum:
        ops::checksum(ctx_, skb(call), u32("offset"), u32("len"));
        return nullptr;
      case Kind::kCopyAndCsumBits:
        ops::copy_and_csum_bits(ctx_, skb(call), u32("offset"), u32("len"));
        return nullptr;
      case Kind::kCsumPartial:
        ops::csum_partial(ctx_, u32("len"));
        return nullptr;
      case Kind::kCsumPartialCopyGeneric:
        ops::csum_partial_copy_generic(ctx_, u32("len"));
        return nullptr;
      case Kind::kAddData:
        ops::add_data(ctx_, skb(call), u32("len"));
        return Json::number_integer_t{0};
      case Kind::kChecksumHelp:
        return ops::checksum_help(ctx_, skb(call));
      case Kind::kIpDecreaseTtl:
        ops::ip_decrease_ttl(ctx_, skb(call));
        return nullptr;
      case Kind::kIpFastCsum:
        ops::ip_fast_csum(ctx_, skb(call));
        return nullptr;
      case Kind::kStoreBits:
        ops::store_bits(ctx_, skb(call), u32("offset"), u32("len"));
        return Json::number_integer_t{0};
      case Kind::kSet:
        apply_set(call);
        return nullptr;
    }
    return nullptr;
  }

  // The pseudo-op "set": metadata a stack writes directly into the sk_buff or its shared info.
  void apply_set(const OpsCall& call) {
    Skb& s = skb(call);
    const auto head_offset = [&](std::string_view key) -> std::uint16_t {
      const std::int64_t h = static_cast<std::int64_t>(s.data_offset()) + call.arg(key);
      if (h < 0 || h > static_cast<std::int64_t>(s.end_offset()) || h >= kNoHeader) {
        throw RunFailure("header offset outside the head",
                         "header offset outside the head in set on skb #" + std::to_string(s.id()) +
                             " (" + json_quote(call.skb) + "): " + std::string(key) + " at data " +
                             (call.arg(key) < 0 ? "" : "+") + std::to_string(call.arg(key)) +
                             " is head + " + std::to_string(h) + ", outside 0.." +
                             std::to_string(s.end_offset()));
      }
      return static_cast<std::uint16_t>(h);
    };
    // Check every offset before writing anything, so a refused set leaves the skb as it was.
    for (std::string_view key :
         {"csum_start", "network_header", "transport_header", "mac_header"}) {
      if (call.has(key)) {
        head_offset(key);
      }
    }
    if (call.ip_summed) {
      s.ip_summed = *call.ip_summed;
    }
    if (call.has("csum_start")) {
      s.csum_start = head_offset("csum_start");  // skb_partial_csum_set: headroom + start
    }
    if (call.has("csum_offset")) {
      s.csum_offset = static_cast<std::uint16_t>(call.arg("csum_offset"));
    }
    if (call.has("gso_size") || call.has("gso_segs") || call.has("gso_type")) {
      const SharedInfo& si = s.shinfo();
      const auto field = [&call](std::string_view key, std::uint32_t current) {
        return call.has(key) ? static_cast<std::uint32_t>(call.arg(key)) : current;
      };
      ops::set_gso(s, field("gso_size", si.gso_size), field("gso_segs", si.gso_segs),
                   field("gso_type", si.gso_type));
    }
    // The model's set_*_header take the offset from data (checked above).
    if (call.has("network_header")) {
      ops::set_network_header(s, static_cast<std::int32_t>(call.arg("network_header")));
    }
    if (call.has("transport_header")) {
      ops::set_transport_header(s, static_cast<std::int32_t>(call.arg("transport_header")));
    }
    if (call.has("mac_header")) {
      ops::set_mac_header(s, static_cast<std::int32_t>(call.arg("mac_header")));
    }
    if (call.has("protocol")) {
      s.protocol = static_cast<std::uint16_t>(call.arg("protocol"));
    }
  }

  // The op as the file gave it, keys in the operation's canonical order.
  Json echo(const OpsCall& call, const OpSpec& spec) const {
    Json j = Json::object();
    j["op"] = call.op;
    if (!call.comment.empty()) {
      j["comment"] = call.comment;
    }
    if (spec.takes_skb) {
      j["skb"] = call.skb;
    }
    if (spec.takes_page) {
      j["page"] = call.page;
    }
    if (spec.takes_sk) {
      j["sk"] = call.sk;
    }
    if (spec.makes != Makes::kNothing) {
      j["as"] = call.as;
    }
    for (const SetField& f : kSetFields) {  // "set" keeps ip_summed in its place
      if (f.type == FieldType::kIpSummed && call.ip_summed) {
        j["ip_summed"] = std::string(ip_summed_name(*call.ip_summed));
      }
    }
    for (const auto& [key, value] : call.args) {
      j[key] = value;
    }
    if (call.fail_alloc) {
      j["fail_alloc"] = true;
    }
    return j;
  }

  std::string sock_name(const Sock* sk) const {
    for (const auto& [n, s] : socks_) {
      if (s.get() == sk) {
        return n;
      }
    }
    return {};
  }

  const Handle* name_of(const void* object) const {
    for (const Handle& h : handles_) {
      if (alive(h) && (h.what == Makes::kSkb ? static_cast<const void*>(h.skb)
                                             : static_cast<const void*>(h.page)) == object) {
        return &h;
      }
    }
    return nullptr;
  }

  Json skb_json(const Skb& s) const {
    Json j = Json::object();
    j["id"] = s.id();
    j["buf"] = s.buf().id;
    j["len"] = s.len();
    j["data_len"] = s.data_len();
    j["headlen"] = s.headlen();
    j["headroom"] = s.headroom();
    j["tailroom"] = s.tailroom();
    j["end"] = s.end_offset();
    j["truesize"] = s.truesize();
    j["users"] = s.users();
    j["skb_shared"] = s.shared();
    j["cloned"] = s.cloned_flag();
    j["skb_cloned"] = s.cloned();
    j["skb_header_cloned"] = s.header_cloned();
    j["nohdr"] = s.nohdr();
    j["fclone"] = std::string(fclone_name(s.fclone()));
    j["dataref"] = s.shinfo().dataref_all();
    j["dataref_payload"] = s.shinfo().dataref_payload();
    j["nr_frags"] = s.shinfo().nr_frags;
    j["gso_size"] = s.shinfo().gso_size;
    j["ip_summed"] = std::string(ip_summed_name(s.ip_summed));
    if (k_.version != KernelVersion::k2_6_20) {
      j["hdr_len"] = s.hdr_len();
    }
    j["sk"] = s.sk() == nullptr ? Json(nullptr) : Json(sock_name(s.sk()));
    return j;
  }

  Json skbs_json() const {
    Json j = Json::object();
    for (const Handle& h : handles_) {
      if (h.what == Makes::kSkb && alive(h)) {
        j[h.name] = skb_json(*h.skb);
      }
    }
    return j;
  }

  Json pages_json() const {
    Json j = Json::object();
    for (const Handle& h : handles_) {
      if (h.what == Makes::kPage && alive(h)) {
        j[h.name] = {{"id", h.page->id}, {"refcount", h.page->refcount}};
      }
    }
    return j;
  }

  Json socks_json() const {
    Json j = Json::object();
    for (const auto& [n, s] : socks_) {
      j[n] = {{"wmem_alloc", s->wmem_alloc}, {"rmem_alloc", s->rmem_alloc}};
    }
    return j;
  }

  // Every skb, data buffer and page still live, in the pool's storage order.
  Json leaks_json() const {
    Json leaks = Json::array();
    pool_.for_each_live_skb([&](const Skb& s) {
      Json e = {{"kind", "skb"}, {"id", s.id()}};
      if (const Handle* h = name_of(&s)) {
        e["name"] = h->name;
      }
      leaks.push_back(std::move(e));
    });
    pool_.for_each_live_buf([&](const DataBuf& b) {
      leaks.push_back({{"kind", "data"}, {"id", b.id}, {"bytes", b.alloc_bytes}});
    });
    pool_.for_each_live_page([&](const Page& p) {
      Json e = {{"kind", "page"}, {"id", p.id}};
      if (const Handle* h = name_of(&p)) {
        e["name"] = h->name;
      }
      e["refcount"] = p.refcount;
      leaks.push_back(std::move(e));
    });
    return leaks;
  }

  const OpsScript& script_;
  const KernelModel& k_;
  SkbPool pool_;
  Ledger ledger_;
  OpCtx ctx_;
  std::vector<Handle> handles_;                              // in the order names were given
  std::map<std::string, std::size_t, std::less<>> by_name_;  // name -> its latest handle
  std::vector<std::pair<std::string, std::unique_ptr<Sock>>> socks_;  // in order of first use
};

}  // namespace

// ---- OpsCall ----------------------------------------------------------------------------------

bool OpsCall::has(std::string_view key) const noexcept {
  return std::any_of(args.begin(), args.end(), [key](const auto& a) { return a.first == key; });
}

std::int64_t OpsCall::arg(std::string_view key) const {
  for (const auto& [k, v] : args) {
    if (k == key) {
      return v;
    }
  }
  throw std::logic_error("ops_runner: " + op + " has no argument " + std::string(key));
}

// ---- parsing ----------------------------------------------------------------------------------

OpsScript parse_ops_script(const std::string& file, std::string_view text) {
  const Json doc = parse_json(file, text);
  if (!doc.is_object()) {
    throw InputError(file, "",
                     R"(expected an object with "kernel" and "ops", got )" + describe(&doc));
  }
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "kernel" && it.key() != "description" && it.key() != "ops") {
      throw InputError(
          file, "/" + escape_key(it.key()),
          "expected a key of an ops file (kernel, description, ops), got " + json_quote(it.key()));
    }
  }
  OpsScript script;
  script.file = file;
  const Json* kernel = member(doc, "kernel");
  const auto version = kernel != nullptr && kernel->is_string()
                           ? KernelModel::parse(kernel->get_ref<const std::string&>())
                           : std::nullopt;
  if (!version) {
    throw InputError(file, "/kernel", R"(expected "2.6.20" or "6.x", got )" + describe(kernel));
  }
  script.kernel = *version;
  if (const Json* d = member(doc, "description")) {
    if (!d->is_string()) {
      throw InputError(file, "/description", "expected a string, got " + describe(d));
    }
    script.description = d->get<std::string>();
  }
  const Json* ops = member(doc, "ops");
  if (ops == nullptr || !ops->is_array()) {
    throw InputError(file, "/ops", "expected an array of operations, got " + describe(ops));
  }
  Validator v(file, KernelModel::get(script.kernel), *ops);
  for (std::size_t i = 0; i < ops->size(); ++i) {
    script.calls.push_back(v.parse_call((*ops)[i], i));
  }
  return script;
}

OpsScript load_ops_script(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    throw InputError(path, "",
                     std::string("expected a readable file, got ") + std::strerror(errno));
  }
  std::string text;
  std::array<char, 65536> chunk{};
  std::size_t n = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), f.get())) > 0) {
    text.append(chunk.data(), n);
  }
  if (std::ferror(f.get()) != 0) {
    throw InputError(path, "",
                     std::string("expected a readable file, got ") + std::strerror(errno));
  }
  return parse_ops_script(path, text);
}

// ---- running ----------------------------------------------------------------------------------

OpsResult run_ops_script(const OpsScript& script) {
  return Runner(script).run();
}

// ---- help -------------------------------------------------------------------------------------

std::string ops_reference() {
  std::string s =
      "Operations (each {\"op\": NAME, ...}; \"comment\": \"...\" is allowed on any; ops marked\n"
      "[fail_alloc] accept \"fail_alloc\": true, which makes their first allocation fail):\n\n";
  const KernelModel& k6 = KernelModel::get(KernelVersion::k6x);
  for (const OpSpec& spec : kOps) {
    if (spec.kind == Kind::kSet) {
      continue;
    }
    std::vector<std::string_view> keys = op_keys(spec, k6);
    keys.erase(keys.begin(), keys.begin() + 2);  // "op", "comment"
    if (spec.allocates) {
      keys.pop_back();  // "fail_alloc"
    }
    std::string line = "  " + std::string(spec.name);
    line.resize(std::max<std::size_t>(line.size() + 1, 30), ' ');
    line += join(keys, ", ");
    if (spec.allocates || spec.only_6x) {
      line.resize(std::max<std::size_t>(line.size() + 1, 64), ' ');
      line += spec.allocates ? "[fail_alloc]" : "";
      line += spec.only_6x ? (spec.allocates ? " 6.x only" : "6.x only") : "";
    }
    s += line + "\n";
  }
  s +=
      "  (frag_grow is not a kernel function: it is the in-place growth of the last frag that\n"
      "  tcp_sendmsg open-codes when it appends to the same page)\n"
      "  set                         skb, and any of: ip_summed (\"CHECKSUM_NONE\" ...), "
      "csum_start\n"
      "                              (6.x only; from data, as skb_partial_csum_set), csum_offset,\n"
      "                              gso_size, gso_segs, gso_type, network_header,\n"
      "                              transport_header, mac_header (from data, may be negative),\n"
      "                              protocol\n\n"
      "Names: \"as\" names the new skb or page (a name is given once per file); \"skb\" and\n"
      "\"page\" must name one given by an earlier op; \"sk\" names a socket, created on first "
      "use.\n"
      "Numbers are unsigned integers up to 65535 (\"i\" below MAX_SKB_FRAGS, \"truesize\" up to\n"
      "1048576). skb_cow_head and consume_skb do not exist on 2.6.20.\n";
  return s;
}

}  // namespace skbsim::sim
