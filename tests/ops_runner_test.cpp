// `skbsim ops` (sim/ops_runner.*, sim/cli.cpp). Through the real binary, SKBSIM_BINARY:
//   - every scenarios/ops/*.json, compared byte for byte with tests/data/ops/golden/<name>.json;
//   - every tests/data/ops/bad/<name>.json: exit 2, nothing on stdout, exactly the one line of
//     <name>.expected on stderr;
//   - the kernel BUG cases of tests/data/ops/bug/: exit 1, a complete report whose last step
//     carries the error, one line on stderr; a leak (tests/data/ops/run/leak.json): exit 0;
//   - the command line itself (--help, --version, bad flags).
// In process (run_ops_script, the same code without a process start-up): the remaining run
// errors of tests/data/ops/bug/, more bad-input lines, the life of names, every operation of both
// kernels, determinism, and what the TCP examples must show (kernel-skb-facts.md §1.4, §3.2, §11).
//
// Regenerating the golden files after a deliberate change to the model or the report:
//   SKBSIM_UPDATE_GOLDEN=1 build/ops/tests/ops_runner_test --gtest_filter='OpsGolden.*'
// then review `git diff tests/data/ops/golden` before committing.
//
// Binary cases run as one batch of processes in parallel per test (start-up under the sanitizers
// dominates), with stdout, stderr and the exit code captured in a temp directory.

#include "sim/ops_runner.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/process.hpp"
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/input_error.hpp"

#include <unistd.h>

namespace {

namespace fs = std::filesystem;
namespace sim = skbsim::sim;
using Json = nlohmann::ordered_json;

fs::path source_dir() {
  return SKBSIM_SOURCE_DIR;
}
fs::path scenarios_dir() {
  return source_dir() / "scenarios" / "ops";
}
fs::path data_dir() {
  return source_dir() / "tests" / "data" / "ops";
}

using skbsim::testing::Invocation;
using skbsim::testing::slurp;
using skbsim::testing::TempDir;

// Runs `skbsim <args>` for each element of `cases`, all in `cwd`.
std::vector<Invocation> run_skbsim(const fs::path& cwd,
                                   const std::vector<std::vector<std::string>>& cases) {
  return skbsim::testing::run_batch(SKBSIM_BINARY, cwd, cases);
}

Invocation run_one(const fs::path& cwd, const std::vector<std::string>& args) {
  return run_skbsim(cwd, {args}).front();
}

// `skbsim ops <file>` for each file.
std::vector<std::vector<std::string>> ops_cases(const std::vector<std::string>& files) {
  std::vector<std::vector<std::string>> cases;
  cases.reserve(files.size());
  for (const std::string& f : files) {
    cases.push_back({"ops", f});
  }
  return cases;
}

// The *.json files of `dir`, by name.
std::vector<std::string> json_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") {
      names.push_back(e.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string stem(const std::string& file) {
  return fs::path(file).stem().string();
}

std::size_t line_count(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

// The step of `report` at `index`, and the state of skb `name` after it.
const Json& skb_after(const Json& report, std::size_t index, const std::string& name) {
  return report.at("steps").at(index).at("skbs").at(name);
}

// The index of the first step whose "op" is `op` (and, if given, whose "skb" or "as" is `name`).
std::size_t step_index(const Json& report, const std::string& op, const std::string& name = {}) {
  const Json& steps = report.at("steps");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Json& s = steps[i];
    const bool named = name.empty() || s.value("skb", "") == name || s.value("as", "") == name;
    if (s.at("op") == op && named) {
      return i;
    }
  }
  ADD_FAILURE() << "no step " << op << " " << name;
  return 0;
}

// ---- golden outputs of the examples -----------------------------------------------------------

bool update_golden() {
  const char* v = std::getenv("SKBSIM_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

void check_golden(const std::string& scenario, const Invocation& run) {
  SCOPED_TRACE(scenario);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.err, "");
  const Json input = Json::parse(slurp(scenarios_dir() / scenario));
  EXPECT_TRUE(input.contains("description")) << "every example tells its story";
  const fs::path golden = data_dir() / "golden" / scenario;
  if (update_golden()) {
    std::ofstream(golden, std::ios::binary) << run.out;
    return;
  }
  ASSERT_TRUE(fs::exists(golden)) << golden << " is missing: SKBSIM_UPDATE_GOLDEN=1 creates it";
  EXPECT_EQ(run.out, slurp(golden)) << "if intended, regenerate with SKBSIM_UPDATE_GOLDEN=1";
  EXPECT_EQ(Json::parse(run.out).at("leaks"), Json::array()) << "the examples free everything";
}

TEST(OpsGolden, EveryScenarioMatchesItsGoldenOutput) {
  const std::vector<std::string> scenarios = json_files(scenarios_dir());
  ASSERT_GE(scenarios.size(), 5U);
  const std::vector<Invocation> runs = run_skbsim(scenarios_dir(), ops_cases(scenarios));
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    check_golden(scenarios[i], runs[i]);
  }
}

TEST(OpsGolden, EveryGoldenFileHasItsScenario) {
  for (const std::string& g : json_files(data_dir() / "golden")) {
    EXPECT_TRUE(fs::exists(scenarios_dir() / g)) << g << " has no scenarios/ops/" << g;
  }
}

// ---- what the examples must show (kernel-skb-facts.md §1.4, §3.2, §11) ------------------------

// The report of scenarios/ops/`name`, run in process (OpsGolden checks the binary prints the same).
Json scenario_report(const std::string& name) {
  const sim::OpsResult r =
      sim::run_ops_script(sim::load_ops_script((scenarios_dir() / name).string()));
  EXPECT_EQ(r.exit_code, 0) << r.error;
  return Json::parse(r.json);
}

TEST(OpsScenario, Tcp2620CloneIsClonedWithPrivateHeaderAndCowCopiesHeadPlusShinfo) {
  const Json report = scenario_report("tcp_clone_cow_2620.json");
  EXPECT_EQ(report.at("kernel"), "2.6.20");

  const std::size_t clone = step_index(report, "skb_clone");
  const Json& c = skb_after(report, clone, "c");
  EXPECT_EQ(c.at("skb_cloned"), true);
  EXPECT_EQ(c.at("skb_header_cloned"), false);
  EXPECT_EQ(c.at("dataref"), 2);
  EXPECT_EQ(c.at("dataref_payload"), 1);
  EXPECT_EQ(c.at("nohdr"), false);
  EXPECT_EQ(c.at("fclone"), "clone");
  const Json& o = skb_after(report, clone, "o");
  EXPECT_EQ(o.at("nohdr"), true);
  EXPECT_EQ(o.at("buf"), c.at("buf"));
  EXPECT_EQ(report.at("steps").at(clone).at("effect").at("allocs"), 0) << "the fclone companion";

  const std::size_t cow = step_index(report, "skb_cow");
  const Json& before = skb_after(report, cow - 1, "c");
  const std::uint64_t tail_minus_head =
      before.at("headroom").get<std::uint64_t>() + before.at("headlen").get<std::uint64_t>();
  const Json& effect = report.at("steps").at(cow).at("effect");
  EXPECT_EQ(effect.at("symbols").at("pskb_expand_head").at("bytes"), tail_minus_head + 164);
  EXPECT_EQ(tail_minus_head + 164, 1804U);  // 192 + 1448 + 164
  EXPECT_EQ(effect.at("bytes_copied"), 1804);
  EXPECT_EQ(report.at("steps").at(cow).at("result"), 0);
  EXPECT_EQ(skb_after(report, cow, "c").at("skb_cloned"), false);
  EXPECT_EQ(report.at("leaks"), Json::array());
}

TEST(OpsScenario, Tcp6xCowCopiesOnlyHeadersAndTheShinfoPrefix) {
  const Json report = scenario_report("tcp_clone_cow_6x.json");
  const std::size_t cow = step_index(report, "skb_cow");
  const Json& before = skb_after(report, cow - 1, "c");
  EXPECT_EQ(before.at("skb_cloned"), true);
  EXPECT_EQ(before.at("nr_frags"), 1);
  const std::uint64_t tail_minus_head =
      before.at("headroom").get<std::uint64_t>() + before.at("headlen").get<std::uint64_t>();
  const Json& effect = report.at("steps").at(cow).at("effect");
  // offsetof(struct skb_shared_info, frags[nr_frags]) = 48 + 16 * nr_frags on x86_64.
  EXPECT_EQ(effect.at("symbols").at("pskb_expand_head").at("bytes"), tail_minus_head + 48 + 16);
  EXPECT_LT(effect.at("bytes_copied").get<std::uint64_t>(), 1448U) << "the payload is not copied";
  EXPECT_EQ(effect.at("page_refs"), 1);
  EXPECT_EQ(report.at("steps").at(cow).at("pages").at("p").at("refcount"), 2);
}

// ---- bad input --------------------------------------------------------------------------------

void check_bad(const fs::path& dir, const std::string& file, const Invocation& run) {
  SCOPED_TRACE(file);
  const fs::path expected = dir / (stem(file) + ".expected");
  ASSERT_TRUE(fs::exists(expected));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(line_count(run.err), 1U);
  EXPECT_EQ(run.err, slurp(expected));
}

TEST(OpsBadInput, EveryBadFileGivesExitTwoNoStdoutAndItsExpectedLine) {
  const fs::path dir = data_dir() / "bad";
  const std::vector<std::string> files = json_files(dir);
  ASSERT_GE(files.size(), 12U);
  const std::vector<Invocation> runs = run_skbsim(dir, ops_cases(files));
  for (std::size_t i = 0; i < files.size(); ++i) {
    check_bad(dir, files[i], runs[i]);
  }
}

TEST(OpsBadInput, ExpectedLinesAreSingleLinesNamingTheFile) {
  for (const auto& e : fs::directory_iterator(data_dir() / "bad")) {
    if (e.path().extension() != ".expected") {
      continue;
    }
    SCOPED_TRACE(e.path().filename().string());
    const std::string line = slurp(e.path());
    EXPECT_EQ(line_count(line), 1U);
    EXPECT_EQ(line.rfind(e.path().stem().string() + ".json: /", 0), 0U);
    EXPECT_TRUE(fs::exists(data_dir() / "bad" / (e.path().stem().string() + ".json")));
  }
}

// ---- kernel BUG conditions and run errors -----------------------------------------------------

struct BugCase {
  std::string file;
  std::string condition;
  std::size_t steps;  // the failing step is the last one printed
};

// One line on stderr, "<file>: /ops/<failing step>: <message>".
void check_bug_line(const BugCase& c, const std::string& err) {
  EXPECT_EQ(line_count(err), 1U);
  EXPECT_EQ(err.rfind(c.file + ": /ops/" + std::to_string(c.steps - 1) + ": ", 0), 0U) << err;
}

// A complete, parseable report whose last step, and only that one, carries the error.
void check_bug_report(const BugCase& c, const std::string& json) {
  const Json report = Json::parse(json);
  const Json& steps = report.at("steps");
  ASSERT_EQ(steps.size(), c.steps);
  EXPECT_EQ(steps.back().at("error").at("condition"), c.condition);
  EXPECT_NE(steps.back().at("error").at("message").get<std::string>().find(c.condition),
            std::string::npos);
  EXPECT_EQ(
      std::count_if(steps.begin(), steps.end(), [](const Json& s) { return s.contains("error"); }),
      1);
  EXPECT_TRUE(report.at("leaks").is_array());
}

std::vector<std::string> files_of(const std::vector<BugCase>& cases) {
  std::vector<std::string> files;
  files.reserve(cases.size());
  for (const BugCase& c : cases) {
    files.push_back(c.file);
  }
  return files;
}

// The conditions the kernel itself BUGs on (and the model's use-after-free, double-free and
// shared-header rules), through the binary: exit 1, the report on stdout, one line on stderr.
const std::vector<BugCase>& binary_bug_cases() {
  static const std::vector<BugCase> cases = {
      {"skb_over_panic.json", "skb_over_panic", 3},
      {"expand_head_shared.json", "BUG_ON(skb_shared(skb))", 3},
      {"use_after_free.json", "use after free", 4},
      {"double_free.json", "double free", 5},
      {"push_header_cloned.json", "write to shared header", 5},
  };
  return cases;
}

// The other run errors, in process (same runner, no process start-up).
const std::vector<BugCase>& in_process_bug_cases() {
  static const std::vector<BugCase> cases = {
      {"skb_under_panic.json", "skb_under_panic", 3},
      {"null_dereference.json", "NULL pointer dereference", 2},
      {"given_up_name.json", "use after free", 3},
      {"page_use_after_free.json", "use after free", 5},
      {"fill_page_desc_lengths.json", "invariant violated", 3},
      {"header_outside_head.json", "header offset outside the head", 2},
  };
  return cases;
}

TEST(OpsBug, KernelBugsExitOneWithTheErrorInTheLastStep) {
  const std::vector<BugCase>& cases = binary_bug_cases();
  const std::vector<Invocation> runs = run_skbsim(data_dir() / "bug", ops_cases(files_of(cases)));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].file);
    EXPECT_EQ(runs[i].exit_code, 1);
    check_bug_line(cases[i], runs[i].err);
    check_bug_report(cases[i], runs[i].out);
  }
}

TEST(OpsBug, OtherRunErrorsEndTheRunTheSameWay) {
  for (const BugCase& c : in_process_bug_cases()) {
    SCOPED_TRACE(c.file);
    const std::string path = (data_dir() / "bug" / c.file).string();
    const sim::OpsResult r = sim::run_ops_script(sim::load_ops_script(path));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.error.rfind(path + ": /ops/" + std::to_string(c.steps - 1) + ": ", 0), 0U)
        << r.error;
    check_bug_report(c, r.json);
  }
}

TEST(OpsBug, EveryBugFileIsChecked) {
  std::vector<std::string> files = files_of(binary_bug_cases());
  const std::vector<std::string> more = files_of(in_process_bug_cases());
  files.insert(files.end(), more.begin(), more.end());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, json_files(data_dir() / "bug"));
}

// ---- runs that complete -----------------------------------------------------------------------

TEST(OpsRun, LeaksAreListedWithNamesAndTheRunStillSucceeds) {
  const Invocation run = run_one(data_dir() / "run", {"ops", "leak.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  // o (128 bytes asked: a 512-byte kmalloc object) and the page with the reference never put.
  EXPECT_EQ(Json::parse(run.out).at("leaks"), Json::parse(R"([
      {"kind": "skb", "id": 1, "name": "o"},
      {"kind": "data", "id": 2, "bytes": 512},
      {"kind": "page", "id": 3, "name": "p", "refcount": 2}])"));
}

// ---- the runner in process: parsing and running without the command line --------------------

sim::OpsResult run_in_process(const std::string& file) {
  return sim::run_ops_script(sim::load_ops_script((data_dir() / "run" / file).string()));
}

// The InputError line parse_ops_script gives for `text`, or "(accepted)".
std::string rejection(std::string_view text) {
  try {
    static_cast<void>(sim::parse_ops_script("t.json", text));
  } catch (const sim::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(OpsParse, RejectsEachMistakeWithOneLineNamingWhere) {
  struct Case {
    std::string_view text;
    std::string_view line;
  };
  // clang-format off
  const std::vector<Case> cases = {
      {"", "t.json: /: expected valid JSON, got a parse error at line 1, column 1: syntax error "
           "while parsing value - unexpected end of input; expected '[', '{', or a literal"},
      {R"([{"op": "alloc_skb"}])", R"(t.json: /: expected an object with "kernel" and "ops", got an array)"},
      {R"({"kernel": "6.x", "ops": [], "opts": []})",
       R"(t.json: /opts: expected a key of an ops file (kernel, description, ops), got "opts")"},
      {R"({"ops": []})", R"(t.json: /kernel: expected "2.6.20" or "6.x", got nothing)"},
      {R"({"kernel": "2.6.21", "ops": []})", R"(t.json: /kernel: expected "2.6.20" or "6.x", got "2.6.21")"},
      {R"({"kernel": "6.x", "kernel": "2.6.20", "ops": []})",
       R"(t.json: /kernel: expected each key once in an object, got "kernel" again)"},
      {R"({"kernel": "6.x", "ops": {"op": "alloc_skb"}})",
       "t.json: /ops: expected an array of operations, got an object"},
      {R"({"kernel": "6.x", "description": 7, "ops": []})",
       "t.json: /description: expected a string, got 7"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1}, "skb_put"]})",
       R"(t.json: /ops/1: expected an object with an "op" key, got "skb_put")"},
      {R"({"kernel": "6.x", "ops": [{"as": "o", "size": 1}]})",
       "t.json: /ops/0/op: expected the name of an operation, got nothing"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 12.5}]})",
       "t.json: /ops/0/size: expected an unsigned integer, got 12.5"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 18446744073709551616}]})",
       "t.json: /ops/0/size: expected an unsigned integer, got 1.8446744073709552e+19"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1},
                                    {"op": "kfree_skb", "skb": "c"},
                                    {"op": "skb_clone", "skb": "o", "as": "c"}]})",
       R"(t.json: /ops/1/skb: expected the name of an skb defined by an earlier op, got "c" (first given at /ops/2/as))"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1}, {"op": "skb_put", "skb": 1, "len": 1}]})",
       "t.json: /ops/1/skb: expected a name (a non-empty string), got 1"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1},
                                    {"op": "skb_set_owner_w", "skb": "o", "sk": ""}]})",
       R"(t.json: /ops/1/sk: expected a name (a non-empty string), got "")"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1, "comment": 3}]})",
       "t.json: /ops/0/comment: expected a string, got 3"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1, "a/b~": 1}]})",
       R"(t.json: /ops/0/a~1b~0: expected a key of alloc_skb (op, comment, as, size, fail_alloc), got "a/b~")"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1}, {"op": "set", "skb": "o"}]})",
       "t.json: /ops/1: expected at least one field to set (ip_summed, csum_start, csum_offset, "
       "gso_size, gso_segs, gso_type, network_header, transport_header, mac_header, protocol), got none"},
      {R"({"kernel": "2.6.20", "ops": [{"op": "alloc_skb", "as": "o", "size": 1}, {"op": "set", "skb": "o", "csum": 1}]})",
       "t.json: /ops/1/csum: expected a key of set (op, comment, skb, ip_summed, csum_offset, gso_size, "
       R"(gso_segs, gso_type, network_header, transport_header, mac_header, protocol), got "csum")"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1}, {"op": "set", "skb": "o", "ip_summed": "PARTIAL"}]})",
       "t.json: /ops/1/ip_summed: expected one of CHECKSUM_NONE, CHECKSUM_UNNECESSARY, "
       R"(CHECKSUM_COMPLETE, CHECKSUM_PARTIAL, got "PARTIAL")"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1, "fail_alloc": 1}]})",
       "t.json: /ops/0/fail_alloc: expected true or false, got 1"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1}, {"op": "set", "skb": "o", "network_header": -70000}]})",
       "t.json: /ops/1/network_header: expected an integer in [-65535, 65535], got -70000"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1}, {"op": "alloc_page", "as": "p"},
           {"op": "skb_add_rx_frag", "skb": "o", "i": 17, "page": "p", "off": 0, "size": 1, "truesize": 1}]})",
       "t.json: /ops/2/i: expected an unsigned integer in [0, 16] (MAX_SKB_FRAGS is 17 on 6.x), got 17"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_skb", "as": "o", "size": 1}, {"op": "get_page", "page": "o"}]})",
       R"(t.json: /ops/1/page: expected the name of a page, got "o" (an skb, /ops/0/as))"},
      {R"({"kernel": "6.x", "ops": [{"op": "alloc_page", "as": "p"}, {"op": "kfree_skb", "skb": "p"}]})",
       R"(t.json: /ops/1/skb: expected the name of an skb, got "p" (a page, /ops/0/as))"},
      {R"({"kernel": "2.6.20", "ops": [{"op": "alloc_skb", "as": "o", "size": 1}, {"op": "alloc_page", "as": "p"},
           {"op": "skb_fill_page_desc", "skb": "o", "i": 18, "page": "p", "off": 0, "size": 1}]})",
       "t.json: /ops/2/i: expected an unsigned integer in [0, 17] (MAX_SKB_FRAGS is 18 on 2.6.20), got 18"},
  };
  // clang-format on
  for (const Case& c : cases) {
    EXPECT_EQ(rejection(c.text), c.line) << c.text;
  }
}

TEST(OpsParse, AValidOpBecomesAPlainCallInTheTableOrder) {
  const sim::OpsScript script = sim::parse_ops_script("t.json", R"({
    "kernel": "2.6.20", "description": "d",
    "ops": [{"fail_alloc": true, "op": "alloc_skb", "as": "o", "size": 9},
            {"op": "pskb_expand_head", "ntail": 8, "nhead": 16, "skb": "o", "fail_alloc": false},
            {"op": "set", "skb": "o", "protocol": 2048, "ip_summed": "CHECKSUM_PARTIAL",
             "mac_header": -14}]})");
  EXPECT_EQ(script.description, "d");
  ASSERT_EQ(script.calls.size(), 3U);
  EXPECT_EQ(script.calls[0].pointer, "/ops/0");
  EXPECT_TRUE(script.calls[0].fail_alloc);
  const sim::OpsCall& expand = script.calls[1];
  EXPECT_EQ(expand.skb, "o");
  EXPECT_FALSE(expand.fail_alloc);
  ASSERT_EQ(expand.args.size(), 2U);
  EXPECT_EQ(expand.args[0].first, "nhead");  // kernel parameter order, not the file's
  EXPECT_EQ(expand.arg("ntail"), 8);
  const sim::OpsCall& set = script.calls[2];
  EXPECT_EQ(set.ip_summed, skbsim::IpSummed::kPartial);
  EXPECT_EQ(set.arg("mac_header"), -14);
  EXPECT_EQ(set.arg("protocol"), 2048);
}

TEST(OpsRunner, TheSameScriptGivesTheSameReport) {
  const sim::OpsResult a = run_in_process("all_ops_6x.json");
  const sim::OpsResult b = run_in_process("all_ops_6x.json");
  EXPECT_EQ(a.json, b.json);
  EXPECT_EQ(a.exit_code, 0);
}

TEST(OpsRunner, NamesLiveAsLongAsTheirSkb) {
  const sim::OpsResult run = run_in_process("names.json");
  ASSERT_EQ(run.exit_code, 0) << run.error;
  const Json report = Json::parse(run.json);
  std::vector<std::vector<std::string>> names;  // the skb names after each step
  for (const Json& step : report.at("steps")) {
    names.emplace_back();
    for (const auto& [name, skb] : step.at("skbs").items()) {
      names.back().push_back(name);
    }
  }
  // clang-format off
  const std::vector<std::vector<std::string>> expected = {
      {"o"},       // alloc_skb
      {"o"},       // skb_get
      {"o"},       // kfree_skb dropped one of two users: o stays
      {"o"},       // skb_get
      {"o", "s"},  // skb_share_check cloned the shared o, which keeps its name
      {"o", "u"},  // skb_unshare copied the cloned s and freed it
      {"o", "v"},  // skb_share_check of an unshared skb: the same skb, renamed
      {"o"},       // kfree_skb v
      {}};         // kfree_skb o
  // clang-format on
  EXPECT_EQ(names, expected);
  EXPECT_EQ(skb_after(report, 2, "o").at("users"), 1);
  EXPECT_EQ(report.at("steps").at(4).at("result"), "s");
  EXPECT_EQ(skb_after(report, 6, "v").at("id"), skb_after(report, 5, "u").at("id"));
}

// The operations a completed run of tests/data/ops/run/`file` went through; it must free
// everything.
std::set<std::string> ops_of(const std::string& file) {
  SCOPED_TRACE(file);
  const sim::OpsResult run = run_in_process(file);
  EXPECT_EQ(run.exit_code, 0) << run.error;
  std::set<std::string> ops;
  if (run.exit_code == 0) {
    const Json report = Json::parse(run.json);
    EXPECT_EQ(report.at("leaks"), Json::array());
    for (const Json& s : report.at("steps")) {
      ops.insert(s.at("op").get<std::string>());
    }
  }
  return ops;
}

TEST(OpsRunner, EveryOperationOfBothKernelsRuns) {
  const std::set<std::string> seen_2620 = ops_of("all_ops_2620.json");
  const std::set<std::string> seen_6x = ops_of("all_ops_6x.json");
  // clang-format off
  const std::vector<std::string> both = {
      "alloc_skb", "alloc_skb_fclone", "__netdev_alloc_skb", "skb_reserve", "skb_put", "skb_push",
      "skb_pull", "skb_trim", "skb_clone", "skb_copy", "pskb_copy", "pskb_expand_head", "skb_cow",
      "skb_header_release", "skb_get", "skb_unshare", "skb_share_check", "__pskb_pull_tail",
      "skb_linearize", "alloc_page", "get_page", "put_page", "skb_fill_page_desc",
      "skb_add_rx_frag", "frag_grow", "skb_set_owner_w", "skb_set_owner_r", "skb_orphan", "kfree_skb",
      "skb_checksum", "skb_copy_and_csum_bits", "csum_partial", "csum_partial_copy_generic",
      "skb_add_data", "skb_checksum_help", "ip_decrease_ttl", "ip_fast_csum", "skb_store_bits",
      "set"};
  // clang-format on
  for (const std::string& op : both) {
    EXPECT_EQ(seen_2620.count(op), 1U) << op;
    EXPECT_EQ(seen_6x.count(op), 1U) << op;
  }
  EXPECT_EQ(seen_6x.count("skb_cow_head"), 1U);
  EXPECT_EQ(seen_6x.count("consume_skb"), 1U);
}

// ---- the command line -------------------------------------------------------------------------

TEST(OpsCli, HelpAndVersionGoToStdoutWithExitZero) {
  const std::vector<Invocation> runs = run_skbsim(source_dir(), {{"--help"}, {"--version"}});
  for (const Invocation& r : runs) {
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.err, "");
  }
  EXPECT_EQ(runs[0].out.rfind("Usage: skbsim", 0), 0U);
  EXPECT_NE(runs[0].out.find("\n  ops "), std::string::npos) << "the commands are listed";
  EXPECT_EQ(runs[1].out, "skbsim 0.1.0\n");
}

TEST(OpsCli, OpsHelpListsTheOperations) {
  const Invocation r = run_one(source_dir(), {"ops", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.rfind("Usage: skbsim ops", 0), 0U);
  EXPECT_NE(r.out.find("\n  skb_cow_head "), std::string::npos);
}

TEST(OpsCli, BadUsageGivesExitTwoAndUsageOnStderr) {
  const std::vector<Invocation> runs = run_skbsim(source_dir(), {{"--bogus"},
                                                                 {},
                                                                 {"frobnicate"},
                                                                 {"ops"},
                                                                 {"ops", "--bogus", "x.json"},
                                                                 {"ops", "a.json", "b.json"}});
  for (const Invocation& r : runs) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("Usage: skbsim"), std::string::npos) << r.err;
  }
}

TEST(OpsCli, AnUnreadableFileIsOneLineOfBadInput) {
  TempDir tmp;
  const Invocation r = run_one(tmp.path(), {"ops", "missing.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "missing.json: /: expected a readable file, got No such file or directory\n");
}

}  // namespace
