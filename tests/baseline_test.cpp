// Regression baselines (sim/baseline.hpp, `skbsim baseline`): the comparison's rules, and on
// temporary copies of results/ and scenarios/: a changed figure, a changed cost coefficient, a
// new and a vanished scenario are named in the table and fail the check; --update makes it pass
// again and keeps what it does not own; bad input is one line, exit 2, nothing written.
#include "sim/baseline.hpp"

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "tests/support/process.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using skbsim::sim::compare_baseline;
using skbsim::sim::Moved;
using skbsim::testing::Invocation;
using skbsim::testing::run_batch;
using skbsim::testing::run_cli;
using skbsim::testing::slurp;
using skbsim::testing::TempDir;

const fs::path kSource = SKBSIM_SOURCE_DIR;

std::vector<Moved> compare(const json& base, const ordered_json& now) {
  std::size_t compared = 0;
  return compare_baseline("s", base, now, 0.5, compared);
}

void edit_json(const fs::path& p, const std::function<void(ordered_json&)>& edit) {
  ordered_json j = ordered_json::parse(slurp(p));
  edit(j);
  std::ofstream(p) << j.dump(2) << "\n";
}

// ---- the comparison ---------------------------------------------------------------------------

TEST(CompareBaseline, WithinToleranceIsNotAChange) {
  const json base = {{"hosts", {{"A", {{"cpu_util_pct", 20.0}}}}}};
  EXPECT_TRUE(compare(base, {{"hosts", {{"A", {{"cpu_util_pct", 20.099}}}}}}).empty());
  const auto moved = compare(base, {{"hosts", {{"A", {{"cpu_util_pct", 20.2}}}}}});
  ASSERT_EQ(moved.size(), 1U);
  EXPECT_EQ(moved[0].figure, "hosts/A/cpu_util_pct");
  EXPECT_EQ(moved[0].baseline, "20.0");
  EXPECT_EQ(moved[0].now, "20.2");
  EXPECT_EQ(moved[0].change, "+1.00%");
}

TEST(CompareBaseline, AnyChangeFromZeroAndEveryOtherKindCount) {
  const json base = {{"a", 0.0}, {"hazards", json::array()}, {"kernel", "2.6.20"}, {"gone", 1}};
  const ordered_json now = {
      {"a", 0.001}, {"hazards", {"routing_loop (A)"}}, {"kernel", "6.x"}, {"new", 2}};
  std::size_t compared = 0;
  const auto moved = compare_baseline("s", base, now, 0.5, compared);
  ASSERT_EQ(moved.size(), 5U);
  EXPECT_EQ(moved[0].change, "from 0");
  EXPECT_EQ(moved[1].figure, "hazards");
  EXPECT_EQ(moved[1].now, "[\"routing_loop (A)\"]");
  EXPECT_EQ(moved[2].now, "6.x");
  EXPECT_EQ(moved[3].figure, "new");
  EXPECT_EQ(moved[3].baseline, "-");
  EXPECT_EQ(moved[4].figure, "gone");
  EXPECT_EQ(moved[4].now, "-");
  EXPECT_EQ(compared, 5U);
}

// ---- the command, on copies ---------------------------------------------------------------------

// A copy of the project's tree under `root` cut to the 2007 thread's scenarios (with the shared
// pieces and presets they extend) and their committed baselines: root/scenarios, root/results.
// The command behaves the same on the whole set, which takes some thirty times as long.
void copy_thread2007(const fs::path& root) {
  fs::create_directories(root / "scenarios");
  fs::create_directories(root / "results");
  for (const char* d : {"thread2007", "shared", "models"}) {
    fs::copy(kSource / "scenarios" / d, root / "scenarios" / d, fs::copy_options::recursive);
  }
  fs::copy(kSource / "results/thread2007", root / "results/thread2007",
           fs::copy_options::recursive);
}

// `args`, run where `root` is the working directory (so scenarios/ and results/ are its copies).
Invocation run_in(const fs::path& root, const std::vector<std::string>& args) {
  return run_batch(SKBSIM_BINARY, root, {args}).front();
}

TEST(BaselineCommand, CheckNamesTheScenarioAndFigureThatMoved) {
  TempDir tmp;
  copy_thread2007(tmp.path());
  double committed = 0;
  edit_json(tmp.path() / "results/thread2007/container.json", [&committed](ordered_json& j) {
    committed = j["hosts"]["A"]["cpu_util_pct"].get<double>();
    j["hosts"]["A"]["cpu_util_pct"] = std::round(committed * 1.02 * 1e4) / 1e4;  // 2 % higher
  });
  const Invocation r = run_in(tmp.path(), {"baseline", "--check"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("1 change(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("thread2007-container "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hosts/A/cpu_util_pct"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-1.96%"), std::string::npos) << r.out;  // now against the edited baseline
  EXPECT_NE(r.out.find("bash scripts/baseline.sh update"), std::string::npos) << r.out;
}

// The acceptance: a deliberate change of a cost coefficient fails the check, naming scenario and
// figure; --update makes it pass again, and keeps entries of results/ it does not make.
TEST(BaselineCommand, CoefficientChangeFailsUntilTheBaselineIsUpdated) {
  TempDir tmp;
  copy_thread2007(tmp.path());
  const fs::path scenarios = tmp.path() / "scenarios";
  const fs::path results = tmp.path() / "results";
  fs::create_directories(results / "bench");
  std::ofstream(results / "bench/keep.json") << "{}\n";
  edit_json(scenarios / "models/xeon-2007-fitted.json", [](ordered_json& j) {
    j["calls"]["symbols"]["skb_clone"]["cycles"] = 600;  // was 300
  });
  const std::vector<std::string> check = {"baseline", "--check", "--results", results.string(),
                                          scenarios.string()};
  const Invocation before = run_cli(check);
  EXPECT_EQ(before.exit_code, 1) << before.out << before.err;
  EXPECT_NE(before.out.find("thread2007-container "), std::string::npos) << before.out;
  EXPECT_NE(before.out.find("hosts/A/cpu_util_pct"), std::string::npos) << before.out;
  EXPECT_NE(before.out.find("hosts/A/per_segment/cycles"), std::string::npos) << before.out;

  const Invocation update = run_cli(
      {"baseline", "--update", "--repeat", "1", "--results", results.string(), scenarios.string()});
  ASSERT_EQ(update.exit_code, 0) << update.out << update.err;
  EXPECT_NE(update.out.find("Changed from the previous baseline"), std::string::npos);
  const Invocation after = run_cli(check);
  EXPECT_EQ(after.exit_code, 0) << after.out << after.err;
  EXPECT_NE(after.out.find("all within 0.5% of"), std::string::npos) << after.out;

  EXPECT_EQ(slurp(results / "bench/keep.json"), "{}\n");
  EXPECT_TRUE(fs::exists(results / "runtime.json"));
  EXPECT_GT(fs::file_size(results / "plots/breakdown.svg"), 1000U);
  EXPECT_GT(fs::file_size(results / "plots/predicted-vs-measured.png"), 1000U);
  const auto runtime = json::parse(slurp(results / "runtime.json"));
  EXPECT_GT(runtime.at("total").at("hops").get<std::uint64_t>(), 0U);
  EXPECT_FALSE(fs::exists(results.string() + ".partial"));
}

// With the default scenario set (scenarios/ where it runs: the cut copy), a scenario without a
// baseline and a baseline without a scenario both fail the check.
TEST(BaselineCommand, NewAndVanishedScenariosCount) {
  TempDir tmp;
  copy_thread2007(tmp.path());
  const fs::path results = tmp.path() / "results";
  fs::remove(results / "thread2007/whatif-venet.json");
  fs::copy_file(results / "thread2007/container.json", results / "thread2007/ghost.json");
  const Invocation r = run_in(tmp.path(), {"baseline", "--check"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("whatif-venet "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("new scenario"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("thread2007/ghost.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("scenario gone"), std::string::npos) << r.out;
}

TEST(BaselineCommand, BadInputIsOneLineExitTwoAndNothingWritten) {
  TempDir tmp;
  const fs::path broken = tmp.path() / "broken";
  fs::create_directories(broken);
  std::ofstream(broken / "container.json") << "{\"schema\": 1,\n";
  const fs::path out = tmp.path() / "out";
  const auto runs = run_batch(
      SKBSIM_BINARY, kSource,
      {{"baseline", "--check", "--results", broken.string(), "scenarios/thread2007/container.json"},
       {"baseline", "--update", "--results", out.string(),
        "tests/data/scenarios/bad/bad-ipv4.json"},
       {"baseline", "--check", "--update"},
       {"baseline", "--help"}});
  EXPECT_EQ(runs[0].exit_code, 2);
  EXPECT_EQ(runs[0].out, "");
  EXPECT_EQ(runs[0].err, (broken / "container.json").string() +
                             ": /: expected valid JSON, got a syntax error at line 2, column 1\n");
  EXPECT_EQ(runs[1].exit_code, 2);
  EXPECT_EQ(runs[1].out, "");
  std::string expected = slurp(kSource / "tests/data/scenarios/bad/bad-ipv4.expected");
  while (!expected.empty() && expected.back() == '\n') {
    expected.pop_back();
  }
  EXPECT_EQ(runs[1].err, expected + "\n");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".partial"));
  EXPECT_EQ(runs[2].exit_code, 2);
  EXPECT_NE(runs[2].err.find("Usage: skbsim baseline"), std::string::npos);
  EXPECT_EQ(runs[3].exit_code, 0);
  EXPECT_NE(runs[3].out.find("Usage: skbsim baseline"), std::string::npos);
}

}  // namespace
