#pragma once
// ops_runner.hpp — `skbsim ops FILE.json`: runs a script of sk_buff operations, named after their
// kernel functions, against one SkbPool and one Ledger, and reports the state after each as JSON.
//
//   {"kernel": "2.6.20", "description": "...",
//    "ops": [{"op": "alloc_skb_fclone", "as": "o", "size": 1640},
//            {"op": "skb_reserve", "skb": "o", "len": 192},
//            {"op": "skb_clone", "skb": "o", "as": "c"}, ...]}
//
//   -> {"kernel": "2.6.20", "description": "...",
//       "steps": [{"op": ..., <the op's keys, in its table's order>,
//                  "result": <the function's return: 0 / -12, true / false for skb_pull and
//                             __pskb_pull_tail, the name a returned skb or page got (null for
//                             NULL), null for void functions, data pointers and checksums>,
//                  "error": {"condition", "message"}   (only on the step that ended the run),
//                  "effect": {bytes_copied, bytes_checksummed (a fused copy-and-checksum counts
//                             in both), allocs, alloc_bytes, frees, free_bytes, page_refs,
//                             "symbols": {kernel symbol: {calls, bytes}}}   (the ledger delta),
//                  "skbs": {name: {id, buf, len, data_len, headlen, headroom, tailroom, end,
//                                  truesize, users, skb_shared, cloned, skb_cloned,
//                                  skb_header_cloned, nohdr, fclone, dataref (lo16),
//                                  dataref_payload (hi16), nr_frags, gso_size, ip_summed,
//                                  hdr_len (6.x only), sk}},
//                  "pages": {name: {id, refcount}}, "socks": {name: {wmem_alloc, rmem_alloc}}
//                  (socks once one exists)}, ...],
//       "leaks": [{"kind": "skb" | "data" | "page", "id": 1, "name": "o", ...}, ...]}
//
// Two phases. parse_ops_script() validates the whole file into a plain OpsScript (types, ranges,
// unknown keys, operations the kernel version lacks, skb and page names defined before use and
// never twice) and throws InputError at the first problem, before anything runs. run_ops_script()
// then runs every op; a condition the kernel would BUG on (SkbBug from the model), a use of a freed
// or NULL skb, or a broken model invariant (check_pool after every step) ends the run with the
// error in the last step and exit code 1. Leaks are findings, not errors.
//
// Names are the script's handles on skbs and pages. A name stays bound while the object lives: a
// kfree_skb that only drops one of several users (skb_get) keeps it; the free that releases the
// object drops it, and a later use is reported as "use after free" (the runner keeps its own
// name -> (object, generation) table, so a recycled object is never mistaken for the old one).
// skb_unshare / skb_share_check bind their result to "as"; the old name goes with the original
// skb when that was freed or is the result itself, and stays while another user keeps the
// original alive. A name an op left NULL (failure injection) dereferences as "NULL pointer
// dereference", except in kfree_skb / consume_skb, which accept NULL as the kernel's do.
//
// "fail_alloc": true on an allocating op sets OpCtx::fail_next_alloc for that op only: its first
// allocation fails (as failslab would make it), and an op that allocates nothing ignores it.
//
// The report is deterministic: ordered keys, no addresses, no clock. This header stays free of
// nlohmann (sim/ is built with JSON_DIAGNOSTICS in Debug, which changes the library's ABI).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "skbsim/kernel.hpp"

namespace skbsim::sim {

// One validated operation of an ops file.
struct OpsCall {
  std::string pointer;  // where it is in the file: "/ops/3"
  std::string op;       // the kernel function ("skb_cow") or the pseudo-op "set"
  std::string comment;  // free text, echoed in the report
  std::string skb;      // the skb it acts on; "" when the op takes none
  std::string page;     // the page it uses (get_page, skb_add_rx_frag ...); "" when none
  std::string sk;       // the socket (skb_set_owner_w / _r), created on first use
  std::string as;       // the name its new skb or page gets; "" when it makes none
  // Numeric arguments by kernel parameter name ("len", "nhead" ...) and, for "set", the fields
  // it sets ("gso_size", "network_header" ...), in the order of the operation's table.
  std::vector<std::pair<std::string, std::int64_t>> args;
  std::optional<IpSummed> ip_summed;  // "set" only
  bool fail_alloc = false;            // the op's first allocation fails (OpCtx::fail_next_alloc)

  bool has(std::string_view key) const noexcept;
  // The argument `key`; the operation's table guarantees it is there (std::logic_error if not).
  std::int64_t arg(std::string_view key) const;
};

struct OpsScript {
  std::string file;  // as the user named it, for messages
  KernelVersion kernel = KernelVersion::k6x;
  std::string description;
  std::vector<OpsCall> calls;
};

// Validates `text` (the content of `file`) into an OpsScript. Throws InputError with the first
// problem: "<file>: <json pointer>: expected ..., got ...".
OpsScript parse_ops_script(const std::string& file, std::string_view text);
// Reads `path` and parses it; an unreadable file is an InputError too.
OpsScript load_ops_script(const std::string& path);

struct OpsResult {
  std::string json;   // the report, 2-space indented, ending in a newline
  int exit_code = 0;  // 0, or 1 when a step hit a BUG condition, a use after free or a NULL
                      // dereference, or broke a model invariant
  std::string error;  // then: "<file>: /ops/N: <condition> in <op> ..." (one line)
};

// Runs a validated script: one SkbPool, one Ledger, no cost model. Throws InputError only if the
// model refuses an operation as not modelled (UnsupportedOp), which validation should prevent.
OpsResult run_ops_script(const OpsScript& script);

// The operations, their keys and kernel versions, for `skbsim ops --help`.
std::string ops_reference();

}  // namespace skbsim::sim
