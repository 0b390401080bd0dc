// `skbsim diff` (sim/diff.hpp): the parts add up to the change, exactly on made-up results and
// within rounding on the 2007 thread's container with and without the skip-cow patch, where
// pskb_expand_head and the allocations it makes carry most of it and every symbol that moved is
// explained; results files give the same attribution as the scenarios they came from.

#include "sim/diff.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/input_error.hpp"

#include "tests/support/process.hpp"

namespace skbsim::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using skbsim::testing::Invocation;
using skbsim::testing::run_batch;
using skbsim::testing::slurp;
using skbsim::testing::TempDir;

const fs::path kSource = SKBSIM_SOURCE_DIR;
const std::string kUnpatched = "scenarios/thread2007/container.json";
const std::string kPatched = "scenarios/thread2007/container-skip-cow.json";

// A results document with one host "H" and the given profile rows {symbol, calls, cycles}.
DiffInput made_up(double cpu, std::uint64_t segments,
                  const std::vector<std::tuple<std::string, std::uint64_t, double>>& profile) {
  ordered_json r = {{"scenario", "made-up"}, {"kernel", "2.6.20"},       {"preset", "p"},
                    {"elapsed_s", 1.0},      {"throughput_mbps", 100.0}, {"segments", segments}};
  ordered_json prof = ordered_json::array();
  for (const auto& [sym, calls, cycles] : profile) {
    prof.push_back({{"symbol", sym}, {"calls", calls}, {"cycles", cycles}});
  }
  r["hosts"]["H"] = {{"cpu_util_pct", cpu},
                     {"service_demand_us_per_kb", cpu / 10},
                     {"per_segment", ordered_json::object()},
                     {"profile", prof}};
  return {"made-up.json", r, std::nullopt};
}

TEST(DiffMath, SymbolPartsAtBsRatePlusTheRatePartAreTheCpuChange) {
  // A: 100 segments, 1000 + 500 cycles; B: 120 segments (a faster rate), 0 + 600 cycles.
  const DiffInput a =
      made_up(15.0, 100, {{"pskb_expand_head", 100, 1000}, {"__kmalloc", 100, 500}});
  const DiffInput b = made_up(6.0, 120, {{"__kmalloc", 120, 600}});
  const ordered_json d = diff_json(a, b, "");
  const ordered_json& h = d.at("hosts").at("H");
  // Cycles per segment: A 10 + 5, B 0 + 5; k_B = 6 / 5 CPU points per cycle/segment.
  EXPECT_DOUBLE_EQ(h.at("cycles_per_segment").at("change").get<double>(), -10.0);
  ASSERT_EQ(h.at("symbols").size(), 1U);  // __kmalloc: the same calls and cycles per segment
  const ordered_json& s = h.at("symbols")[0];
  EXPECT_EQ(s.at("symbol"), "pskb_expand_head");
  EXPECT_DOUBLE_EQ(s.at("cpu_points").get<double>(), -12.0);
  EXPECT_DOUBLE_EQ(s.at("share_pct").get<double>(), 100.0);
  // A's 15 cycles/seg at B's rate would be 18 points instead of 15: +3.
  EXPECT_DOUBLE_EQ(h.at("cpu_points").at("segment_rate").get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(h.at("cpu_points").at("total").get<double>(), -9.0);
  EXPECT_NE(s.at("why").get<std::string>().find("no longer runs"), std::string::npos);
}

TEST(DiffMath, UnknownHostAndBadResultsAreInputErrors) {
  const DiffInput a = made_up(1.0, 10, {{"skb_clone", 10, 100}});
  try {
    (void)diff_json(a, a, "X");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--host: expected a host of both made-up.json and made-up.json, got \"X\"");
  }
  const DiffInput bad = made_up(1.0, 10, {{"no_such_function", 10, 100}});
  try {
    (void)diff_json(bad, a, "");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "made-up.json: /hosts/H/profile/0/symbol: expected a kernel symbol skbsim "
              "models, got \"no_such_function\"");
  }
}

class ThreadDiff : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const Invocation r =
        run_batch(SKBSIM_BINARY, kSource, {{"diff", kUnpatched, kPatched, "--format", "json"}})
            .front();
    ASSERT_EQ(r.exit_code, 0) << r.err;
    diff_ = new json(json::parse(r.out));
  }
  static void TearDownTestSuite() {
    delete diff_;
    diff_ = nullptr;
  }
  static const json& host(const std::string& name) { return diff_->at("hosts").at(name); }
  static json* diff_;
};
json* ThreadDiff::diff_ = nullptr;

TEST_F(ThreadDiff, SymbolsAddUpToTheCycleChangeAndPartsToTheCpuChange) {
  for (const std::string name : {"A", "B"}) {
    SCOPED_TRACE(name);
    const json& h = host(name);
    double cycles = 0;
    double points = 0;
    double share = 0;
    for (const json& s : h.at("symbols")) {
      cycles += s.at("cycles_per_segment").at("change").get<double>();
      points += s.at("cpu_points").get<double>();
      share += s.at("share_pct").get<double>();
    }
    const std::size_t n = h.at("symbols").size();
    // Each part is rounded to 4 (cycles) or 6 (points) decimals: the sums agree to n roundings.
    EXPECT_NEAR(cycles, h.at("cycles_per_segment").at("change").get<double>(), n * 5e-5 + 1e-4);
    EXPECT_NEAR(points, h.at("cpu_points").at("symbols").get<double>(), n * 5e-7 + 1e-6);
    EXPECT_NEAR(points + h.at("cpu_points").at("segment_rate").get<double>(),
                h.at("cpu_util_pct").at("change").get<double>(), n * 5e-7 + 1e-4);
    if (name == "A") {
      EXPECT_NEAR(share, 100.0, n * 5e-4 + 1e-3);
    }
  }
}

TEST_F(ThreadDiff, ExpandHeadAndItsAllocationsCarryMostOfIt) {
  const json& a = host("A");
  const double dcpu = a.at("cpu_util_pct").at("change").get<double>();
  ASSERT_LT(dcpu, -3.0);  // the patch saves several points of host A's CPU
  std::map<std::string, const json*> by_symbol;
  for (const json& s : a.at("symbols")) {
    by_symbol[s.at("symbol").get<std::string>()] = &s;
  }
  double carried = 0;
  for (const char* sym : {"pskb_expand_head", "__kmalloc", "kfree"}) {
    ASSERT_TRUE(by_symbol.count(sym) == 1) << sym;
    carried += by_symbol[sym]->at("cpu_points").get<double>();
  }
  EXPECT_GT(carried / dcpu, 0.5);
  EXPECT_EQ(a.at("symbols")[0].at("symbol"), "pskb_expand_head");  // sorted by size

  const std::string expand = by_symbol["pskb_expand_head"]->at("why");
  EXPECT_NE(expand.find("no longer runs"), std::string::npos) << expand;
  // skb_cow copies the whole linear head of a 2.6.20 MSS skb: payload, headers and headroom
  const double copied =
      by_symbol["pskb_expand_head"]->at("bytes_per_segment").at("a").get<double>();
  EXPECT_GT(copied, 1400.0 + 52.0);
  std::ostringstream want;
  want << "copies " << std::fixed << std::setprecision(1) << copied << " -> 0.0 B/seg";
  EXPECT_NE(expand.find(want.str()), std::string::npos) << expand;
  EXPECT_NE(expand.find("follows its caller skb_cow"), std::string::npos) << expand;
  const std::string kmalloc = by_symbol["__kmalloc"]->at("why");
  // One expand per segment fewer; a segment forwarded across the window's edge may tip the
  // fourth decimal.
  const std::string caller = "pskb_expand_head ";
  const std::size_t at = kmalloc.find(caller, kmalloc.find("follows its caller"));
  ASSERT_NE(at, std::string::npos) << kmalloc;
  EXPECT_NEAR(std::stod(kmalloc.substr(at + caller.size())), -1.0, 0.0005) << kmalloc;
  const std::string kfree = by_symbol["kfree"]->at("why");
  EXPECT_NE(kfree.find("mirrors __kmalloc"), std::string::npos) << kfree;
  ASSERT_TRUE(by_symbol.count("ip_decrease_ttl") == 1);
  const std::string ttl = by_symbol["ip_decrease_ttl"]->at("why");
  EXPECT_NE(ttl.find("skipped inside ip_forward"), std::string::npos) << ttl;
}

TEST_F(ThreadDiff, EverySymbolThatMovedIsExplained) {
  for (const std::string name : {"A", "B"}) {
    for (const json& s : host(name).at("symbols")) {
      const std::string why = s.at("why");
      // More than the bare numbers: a reason after them.
      EXPECT_TRUE(
          why.find("no longer") != std::string::npos || why.find("newly") != std::string::npos ||
          why.find("follows") != std::string::npos || why.find("mirrors") != std::string::npos ||
          why.find("inside") != std::string::npos || why.find("per batch") != std::string::npos ||
          why.find("covers") != std::string::npos ||
          why.find("edges of the measured window") != std::string::npos ||
          why.find("same work per segment") != std::string::npos ||
          why.find("priced differently") != std::string::npos)
          << name << " " << s.at("symbol") << ": " << why;
    }
  }
}

TEST_F(ThreadDiff, InputsThatDifferNameThePatch) {
  bool patch = false;
  for (const json& e : diff_->at("inputs")) {
    if (e.at("path") == "/patches") {
      patch = !e.contains("a") && e.at("b") == json::parse(R"({"skip_cow_from": ["etun"]})");
    }
    EXPECT_NE(e.at("path"), "/name");
  }
  EXPECT_TRUE(patch) << diff_->at("inputs").dump();
}

// Results files written by `skbsim run` give the same attribution as the scenarios.
TEST_F(ThreadDiff, ResultsFilesGiveTheSameHostsAsTheScenarios) {
  TempDir tmp;
  const auto runs =
      run_batch(SKBSIM_BINARY, kSource,
                {{"run", kUnpatched, "--format", "json"}, {"run", kPatched, "--format", "json"}});
  ASSERT_EQ(runs[0].exit_code, 0) << runs[0].err;
  ASSERT_EQ(runs[1].exit_code, 0) << runs[1].err;
  std::ofstream(tmp.path() / "a.json") << runs[0].out;
  std::ofstream(tmp.path() / "b.json") << runs[1].out;
  const auto d = run_batch(SKBSIM_BINARY, kSource,
                           {{"diff", (tmp.path() / "a.json").string(),
                             (tmp.path() / "b.json").string(), "--format", "json"},
                            {"diff", (tmp.path() / "a.json").string(),
                             (tmp.path() / "b.json").string(), "--host", "A"}});
  ASSERT_EQ(d[0].exit_code, 0) << d[0].err;
  const json from_results = json::parse(d[0].out);
  EXPECT_EQ(from_results.at("hosts"), diff_->at("hosts"));
  EXPECT_FALSE(from_results.contains("inputs"));
  EXPECT_EQ(from_results.at("a").at("kind"), "result");
  // Text: the host, the largest part first, the total line.
  ASSERT_EQ(d[1].exit_code, 0) << d[1].err;
  const std::string& text = d[1].out;
  EXPECT_NE(text.find("Host A: CPU"), std::string::npos) << text;
  EXPECT_EQ(text.find("Host B:"), std::string::npos) << text;
  EXPECT_NE(text.find("of the -"), std::string::npos) << text;
  EXPECT_LT(text.find("pskb_expand_head"), text.find("__kmalloc")) << text;
  EXPECT_NE(text.find("total (symbols"), std::string::npos) << text;
}

TEST(DiffCommand, BadInputIsOneLineExitTwo) {
  const auto runs = run_batch(SKBSIM_BINARY, kSource,
                              {{"diff", kUnpatched, "no/such.json"},
                               {"diff", kUnpatched, kPatched, "--host", "Z"},
                               {"diff", kUnpatched},
                               {"diff", "--help"}});
  EXPECT_EQ(runs[0].exit_code, 2);
  EXPECT_EQ(runs[0].err, "no/such.json: /: expected a readable JSON file, got no such file\n");
  EXPECT_EQ(runs[1].exit_code, 2);
  EXPECT_EQ(runs[1].err, "--host: expected a host of both " + kUnpatched + " and " + kPatched +
                             ", got \"Z\"\n");
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(runs[i].out, "");
  }
  EXPECT_EQ(runs[2].exit_code, 2);
  EXPECT_NE(runs[2].err.find("Usage: skbsim diff"), std::string::npos);
  EXPECT_EQ(runs[3].exit_code, 0);
  EXPECT_NE(runs[3].out.find("Usage: skbsim diff"), std::string::npos);
}

}  // namespace
}  // namespace skbsim::sim
