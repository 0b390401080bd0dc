// The 2007 thread reproduced (the scenario issue's acceptance points), from the committed scenario
// files and the committed fitted preset: CPU within the stated tolerance for all three rows, the
// profile remarks of the thread, Kirill's what-if, and the calibration that CI must reproduce.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "sim/calibrate.hpp"
#include "sim/report.hpp"
#include "sim/scenario.hpp"

namespace skbsim::sim {
namespace {

const std::string kDir = std::string(SKBSIM_SOURCE_DIR) + "/scenarios/thread2007/";

struct Row {
  Scenario sc;
  RunResult r;
};

// Each scenario runs once per process (they are deterministic).
const Row& row(const std::string& name) {
  static std::map<std::string, Row> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    Scenario sc = load_scenario(kDir + name + ".json");
    RunResult r = run_scenario(sc.spec);
    it = cache.emplace(name, Row{std::move(sc), std::move(r)}).first;
  }
  return it->second;
}

const HostResult& host_a(const RunResult& r) {
  for (const auto& h : r.hosts) {
    if (h.name == "A") {
      return h;
    }
  }
  throw std::logic_error("no host A");
}

double per_seg_cycles(const Row& x, Sym s) {
  return static_cast<double>(host_a(x.r).cells[index(s)].cost_ps) /
         static_cast<double>(x.r.segments);
}

std::size_t rank_of(const HostResult& h, Sym s) {
  std::size_t rank = 1;
  for (const auto& c : h.cells) {
    rank += c.cost_ps > h.cells[index(s)].cost_ps ? 1 : 0;
  }
  return h.cells[index(s)].calls == 0 ? 0 : rank;
}

class ThreadRow : public ::testing::TestWithParam<const char*> {};

TEST_P(ThreadRow, CpuUtilisationWithinFivePercentAtTheStatedThroughput) {
  const Row& x = row(GetParam());
  ASSERT_TRUE(x.sc.reference);
  const Reference& ref = *x.sc.reference;
  EXPECT_NEAR(x.r.throughput_mbps, *ref.throughput_mbps, 0.01 * *ref.throughput_mbps);
  const double cpu = host_a(x.r).cpu_util_pct;
  EXPECT_LE(std::abs(cpu - *ref.cpu_util_pct), 0.05 * *ref.cpu_util_pct)
      << "predicted " << cpu << " measured " << *ref.cpu_util_pct;
  EXPECT_TRUE(x.r.hazards.empty());
  EXPECT_TRUE(x.r.pool_empty_at_end);
}
INSTANTIATE_TEST_SUITE_P(Thread2007, ThreadRow,
                         ::testing::Values("no-container", "container", "container-skip-cow"));

TEST(ThreadProfile, PskbExpandHeadAmongTopFiveOnlyWithoutThePatch) {
  const std::size_t unpatched = rank_of(host_a(row("container").r), Sym::kPskbExpandHead);
  EXPECT_GE(unpatched, 1U);
  EXPECT_LE(unpatched, 5U);
  EXPECT_EQ(rank_of(host_a(row("container-skip-cow").r), Sym::kPskbExpandHead), 0U);
  EXPECT_EQ(rank_of(host_a(row("no-container").r), Sym::kPskbExpandHead), 0U);
}

// "the remaining symbol that shows unusual activity is csum_partial_copy_generic()": of the
// symbols whose cost per segment grew from the no-container row to the patched one, it grew most.
TEST(ThreadProfile, CsumPartialCopyGenericGrewMostWithThePatch) {
  const Row& a = row("no-container");
  const Row& c = row("container-skip-cow");
  EXPECT_EQ(host_a(a.r).cells[index(Sym::kCsumPartialCopyGeneric)].calls, 0U);
  Sym most = Sym::kCount;
  double growth = 0;
  for (std::size_t i = 0; i < kSymCount; ++i) {
    const double g = per_seg_cycles(c, static_cast<Sym>(i)) - per_seg_cycles(a, static_cast<Sym>(i));
    if (g > growth) {
      growth = g;
      most = static_cast<Sym>(i);
    }
  }
  EXPECT_EQ(most, Sym::kCsumPartialCopyGeneric) << symbol_name(most);
}

TEST(ThreadProfile, NamesTheKernelFunctionsAlongThePath) {
  const HostResult& h = host_a(row("container").r);
  for (Sym s : {Sym::kTcpSendmsg, Sym::kTcpTransmitSkb, Sym::kIpQueueXmit, Sym::kDevQueueXmit,
                Sym::kEtunXmit, Sym::kNetifRx, Sym::kIpRcv, Sym::kIpForward, Sym::kSkbCow,
                Sym::kPskbExpandHead, Sym::kSkbClone, Sym::kE1000XmitFrame, Sym::kKfreeSkb}) {
    EXPECT_GT(h.cells[index(s)].calls, 0U) << symbol_name(s);
  }
}

// Kirill's what-if: etun with HW_CSUM | SG | LLTX | HIGHDMA. TCP in the container copies without
// summing, the copy in ip_forward remains (the skb is still a clone), and the result says what
// 2.6.20 ip_forward does to the CHECKSUM_PARTIAL skb.
TEST(KirillWhatIf, ChecksumMovesOffTheCpuAndTheForwardedPartialChecksumIsReported) {
  const Row& k = row("whatif-etun-offload");
  const Row& b = row("container");
  const HostResult& h = host_a(k.r);
  EXPECT_EQ(h.cells[index(Sym::kCsumPartialCopyGeneric)].calls, 0U);
  EXPECT_GT(h.cells[index(Sym::kCopyFromUser)].copied, 0U);
  EXPECT_GT(h.cells[index(Sym::kPskbExpandHead)].calls, 0U);
  EXPECT_LT(h.cpu_util_pct, host_a(b.r).cpu_util_pct);
  bool reported = false;
  for (const Hazard& z : k.r.hazards) {
    reported = reported || (z.kind == "partial_checksum_forwarded" &&
                            z.message.find("CHECKSUM_NONE") != std::string::npos);
  }
  EXPECT_TRUE(reported);
}

// CI re-runs the committed fit: scenarios/models/xeon-2007-fitted.json must be what its own
// "fit.command" yields from the starting preset.
TEST(Calibration, CommittedFitIsReproduced) {
  const std::string models = std::string(SKBSIM_SOURCE_DIR) + "/scenarios/models/";
  std::ifstream in(models + "xeon-2007-fitted.json");
  const auto doc = nlohmann::json::parse(in);
  const auto& fit_doc = doc.at("fit");
  std::vector<std::string> free;
  for (auto it = fit_doc.at("free").begin(); it != fit_doc.at("free").end(); ++it) {
    free.push_back(it.key());
  }
  ASSERT_FALSE(free.empty());
  ASSERT_LE(free.size(), 3U);
  const std::string cmd = fit_doc.at("command").get<std::string>();
  EXPECT_NE(cmd.find("--preset scenarios/models/xeon-2007.json"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--scenarios scenarios/thread2007"), std::string::npos) << cmd;
  std::vector<Scenario> scenarios;
  for (const char* n : {"container-skip-cow", "container", "no-container"}) {
    scenarios.push_back(row(n).sc);
  }
  const CostPreset start = CostPreset::load(models + "xeon-2007.json", "xeon-2007.json");
  const FitResult f = fit(scenarios, start, free);
  for (const std::string& p : free) {
    const double committed = fit_doc.at("free").at(p).get<double>();
    EXPECT_NEAR(f.preset.get(p), committed, 1e-9 * std::abs(committed)) << p;
  }
}

// error_pct holds each CPU's busy share against the model's; a CPU measured idle (0 %) has no
// relative error, so it has no entry rather than an infinite one.
TEST(Report, EachCpusBusyShareHasItsErrorExceptAnIdleOnes) {
  Reference ref;
  ref.host = "A";
  ref.cpu_busy_pct_by_cpu = {50, 0};
  RunResult r;
  HostResult h;
  h.name = "A";
  h.cpu_busy_pct = {40, 10};
  r.hosts.push_back(h);
  const auto e = error_pct(r, ref);
  EXPECT_DOUBLE_EQ(e.at("cpu_busy_pct_cpu0").get<double>(), -20.0);
  EXPECT_FALSE(e.contains("cpu_busy_pct_cpu1"));
}

// Leave-one-out: the skip-cow row predicted from a fit of the other two within 15% of 15.41%.
TEST(Calibration, SkipCowRowPredictedFromTheOtherTwoWithinFifteenPercent) {
  const std::string models = std::string(SKBSIM_SOURCE_DIR) + "/scenarios/models/";
  std::ifstream in(models + "xeon-2007-fitted.json");
  const auto doc = nlohmann::json::parse(in);
  std::vector<std::string> free;
  for (auto it = doc.at("fit").at("free").begin(); it != doc.at("fit").at("free").end(); ++it) {
    free.push_back(it.key());
  }
  const CostPreset start = CostPreset::load(models + "xeon-2007.json", "xeon-2007.json");
  const FitResult f = fit({row("no-container").sc, row("container").sc}, start, free);
  const auto predicted = evaluate({row("container-skip-cow").sc}, f.preset);
  ASSERT_EQ(predicted.size(), 1U);
  EXPECT_EQ(predicted[0].measured, 15.41);
  EXPECT_LE(std::abs(predicted[0].error_pct()), 15.0) << predicted[0].predicted;
}

}  // namespace
}  // namespace skbsim::sim
