// Pictures (sim/plot.hpp): what `skbsim plot` and `validate --plot` write — the gnuplot scripts
// and data composed from results, baselines and sweeps, SVG and PNG that gnuplot drew with the
// titles they promise, and bad input as one line, exit 2, nothing written.
#include "sim/plot.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/input_error.hpp"

#include "tests/support/process.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using skbsim::sim::InputError;
using skbsim::sim::OutputFiles;
using skbsim::sim::plot_files;
using skbsim::sim::PlotInput;
using skbsim::sim::PlotOptions;
using skbsim::testing::Invocation;
using skbsim::testing::json_stems;
using skbsim::testing::run_batch;
using skbsim::testing::run_cli;
using skbsim::testing::slurp;
using skbsim::testing::TempDir;

const fs::path kSource = SKBSIM_SOURCE_DIR;

const std::string* file_named(const OutputFiles& files, const std::string& name) {
  for (const auto& [n, content] : files) {
    if (n == name) {
      return &content;
    }
  }
  return nullptr;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

bool is_png(const fs::path& p) {
  const std::string s = slurp(p);
  return s.size() > 1000 && s.compare(0, 4, "\x89PNG") == 0;
}

PlotInput sweep_fixture() {
  return {"tests/data/plot/sweep.json", json::parse(slurp(kSource / "tests/data/plot/sweep.json"))};
}

// A small result in the shape of docs/results.md: two hosts, a reference on host A.
json tiny_result(const std::string& name, double cpu) {
  return json::parse(R"({
    "scenario": ")" + name +
                     R"(", "throughput_mbps": 700.0,
    "hosts": {
      "A": {"cpu_util_pct": )" +
                     std::to_string(cpu) + R"(, "service_demand_us_per_kb": 4.0,
            "profile": [{"symbol": "memcpy", "group": "copy", "calls": 10, "cycles": 300},
                        {"symbol": "tcp_sendmsg", "group": "protocol", "calls": 10, "cycles": 100}]},
      "B": {"cpu_util_pct": 5.0, "service_demand_us_per_kb": 1.0, "profile": []}},
    "reference": {"source": "test", "tolerance_pct": 5, "host": "A", "cpu_util_pct": 20.0},
    "error_pct": {"cpu_util_pct": 0}})");
}

// ---- composing (no gnuplot) -------------------------------------------------------------------

TEST(PlotFiles, BreakdownStacksEachGroupsShareOfTheLocalHostsCpu) {
  const OutputFiles f = plot_files({{"a.json", tiny_result("alpha", 20.0)}}, PlotOptions{});
  const std::string* dat = file_named(f, "breakdown.dat");
  ASSERT_NE(dat, nullptr);
  // copy = 300/400 of 20 %, protocol = 100/400 of it; the bar is host A's (the reference's).
  EXPECT_NE(dat->find("\"alpha (A)\" 15.0000 0.0000 0.0000 5.0000 0.0000 0.0000 0.0000 20.0000"),
            std::string::npos)
      << *dat;
  const std::string* gp = file_named(f, "breakdown.gp");
  ASSERT_NE(gp, nullptr);
  EXPECT_NE(gp->find("CPU breakdown by kernel symbol group"), std::string::npos);
  EXPECT_NE(gp->find("set output 'breakdown.'.fmt"), std::string::npos);
}

TEST(PlotFiles, HostOptionPicksTheBar) {
  PlotOptions o;
  o.host = "B";
  const OutputFiles f = plot_files({{"a.json", tiny_result("alpha", 20.0)}}, o);
  EXPECT_NE(file_named(f, "breakdown.dat")->find("\"alpha (B)\""), std::string::npos);
}

TEST(PlotFiles, PredictedAgainstMeasuredCarriesTheToleranceBand) {
  const OutputFiles f =
      plot_files({{"a.json", tiny_result("alpha", 21.0)}, {"b.json", tiny_result("beta", 19.0)}},
                 PlotOptions{});
  const std::string* dat = file_named(f, "predicted-vs-measured.dat");
  ASSERT_NE(dat, nullptr);
  // x, scenario, measured, measured -/+ 5 %, predicted, error %, tolerance %
  EXPECT_NE(dat->find("0 \"alpha\" 20.0000 19.0000 21.0000 21.0000 5.000 5.000"), std::string::npos)
      << *dat;
  EXPECT_NE(dat->find("1 \"beta\" 20.0000 19.0000 21.0000 19.0000 -5.000 5.000"), std::string::npos)
      << *dat;
  EXPECT_NE(file_named(f, "predicted-vs-measured.gp")->find("measured ± tolerance"),
            std::string::npos);
}

// A figure over many scenarios wraps onto rows of 40, so the picture's width stays within what a
// PNG surface holds (cairo: 32 767 px a side) as measured sets are committed: 85 scenarios make
// three rows, the last of five, each plotting its own lines of the figure's block.
TEST(PlotFiles, PredictedAgainstMeasuredWrapsManyScenariosOntoRows) {
  std::vector<PlotInput> in;
  for (int i = 0; i < 85; ++i) {
    const std::string name = "s" + std::to_string(100 + i);
    in.push_back({name + ".json", tiny_result(name, 20.0)});
  }
  const OutputFiles f = plot_files(in, PlotOptions{});
  const std::string* gp = file_named(f, "predicted-vs-measured.gp");
  ASSERT_NE(gp, nullptr);
  EXPECT_NE(gp->find("set multiplot layout 3,1"), std::string::npos) << *gp;
  EXPECT_NE(gp->find("(1 of 3)"), std::string::npos);
  EXPECT_NE(gp->find("(3 of 3)"), std::string::npos);
  EXPECT_NE(gp->find("index 0 every ::0::39 using"), std::string::npos);
  EXPECT_NE(gp->find("index 0 every ::40::79 using"), std::string::npos);
  EXPECT_NE(gp->find("index 0 every ::80::84 using"), std::string::npos);
  // The last row keeps the others' slot width: x from 79.4 to 119.6.
  EXPECT_NE(gp->find("set xrange [79.4:119.6]"), std::string::npos);
  EXPECT_NE(gp->find("'s184' 84)"), std::string::npos);  // its last tic
  // 40 slots of 170 px and the margins, not 85.
  EXPECT_NE(gp->find("pngcairo size 7200,"), std::string::npos) << *gp;
}

// A picture of more than 20 Mpx is written by libgd's png terminal, a palette PNG about a third of
// cairo's size (the committed predicted-vs-measured: 0.7 MB against cairo's 2.2 over seven sets,
// 0.8 MB over eight): 480 scenarios with long, slanted names make 12 rows of some 440 px at
// 7 200 px, 38 Mpx.
TEST(PlotFiles, ALargePictureIsAPalettePng) {
  std::vector<PlotInput> in;
  for (int i = 0; i < 480; ++i) {
    const std::string name = "a-long-measured-scenario-name-" + std::to_string(100 + i);
    in.push_back({name + ".json", tiny_result(name, 20.0)});
  }
  const OutputFiles f = plot_files(in, PlotOptions{});
  const std::string* gp = file_named(f, "predicted-vs-measured.gp");
  ASSERT_NE(gp, nullptr);
  EXPECT_NE(gp->find("set terminal png size 7200,"), std::string::npos) << gp->substr(0, 600);
  EXPECT_EQ(gp->find("pngcairo"), std::string::npos);
}

TEST(PlotFiles, ResultWithoutReferenceHasNoPredictedPlot) {
  json r = tiny_result("alpha", 20.0);
  r.erase("reference");
  const OutputFiles f = plot_files({{"a.json", r}}, PlotOptions{});
  EXPECT_NE(file_named(f, "breakdown.gp"), nullptr);
  EXPECT_EQ(file_named(f, "predicted-vs-measured.gp"), nullptr);
}

TEST(PlotFiles, SweepHasOneLinePerCombinationOfTheOtherAxes) {
  const OutputFiles f = plot_files({sweep_fixture()}, PlotOptions{});
  const std::string* dat = file_named(f, "sweep.dat");
  ASSERT_NE(dat, nullptr);
  EXPECT_EQ(count(*dat, "# index "), 2U) << *dat;
  EXPECT_NE(dat->find("# index 1: skip_cow_from=etun"), std::string::npos);
  EXPECT_NE(dat->find("256 \"256\" 29.6653 6.7537"), std::string::npos) << *dat;
  const std::string* cpu = file_named(f, "sweep-cpu.gp");
  const std::string* sd = file_named(f, "sweep-service-demand.gp");
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(sd, nullptr);
  EXPECT_NE(cpu->find("CPU utilisation of host A against send_size"), std::string::npos);
  EXPECT_NE(cpu->find("set logscale x 2"), std::string::npos);  // 256 .. 65536
  EXPECT_NE(sd->find("Service demand of host A against send_size"), std::string::npos);
}

// A categorical first axis and three axes: x is the value's position, each line one pair.
TEST(PlotFiles, SweepWithCategoricalAxisAndThreeAxes) {
  json s = {{"scenario", "s.json"},
            {"axes",
             {{{"path", "/kernel"}, {"values", {"2.6.20", "6.x"}}},
              {{"path", "/a/mtu"}, {"values", {1500, 9000}}},
              {{"path", "/b/mtu"}, {"values", {json::array(), {"sg", "tso"}}}}}},
            {"rows", json::array()}};
  for (const char* k : {"2.6.20", "6.x"}) {
    for (int m : {1500, 9000}) {
      for (const json& f : {json::array(), json{"sg", "tso"}}) {
        s["rows"].push_back(
            {{"inputs", {{"/kernel", k}, {"/a/mtu", m}, {"/b/mtu", f}}},
             {"throughput_mbps", 1.0},
             {"hosts", {{"A", {{"cpu_util_pct", m / 100.0}, {"service_demand_us_per_kb", 1.0}}}}}});
      }
    }
  }
  const OutputFiles f = plot_files({{"dir/s.json", s}}, PlotOptions{});
  const std::string* dat = file_named(f, "s.dat");
  ASSERT_NE(dat, nullptr);
  EXPECT_EQ(count(*dat, "# index "), 4U) << *dat;
  // Two axes named "mtu": the legend spells their paths out.
  EXPECT_NE(dat->find("# index 3: /a/mtu=9000, /b/mtu=sg+tso"), std::string::npos) << *dat;
  EXPECT_NE(dat->find("1 \"6.x\" 90.0000"), std::string::npos) << *dat;
  EXPECT_NE(file_named(f, "s-cpu.gp")->find("set xtics ('2.6.20' 0, '6.x' 1)"), std::string::npos);
}

TEST(PlotFiles, BaselineDocumentsDrawLikeResults) {
  const PlotInput b{"results/thread2007/container.json",
                    json::parse(slurp(kSource / "results/thread2007/container.json"))};
  const OutputFiles f = plot_files({b}, PlotOptions{});
  EXPECT_NE(file_named(f, "breakdown.dat")->find("\"thread2007-container (A)\""),
            std::string::npos);
  EXPECT_NE(file_named(f, "predicted-vs-measured.dat")->find("\"thread2007-container\" 21.8800"),
            std::string::npos);
}

TEST(PlotFiles, NothingDrawableIsAnInputError) {
  PlotOptions o;
  o.breakdown = false;
  json r = tiny_result("alpha", 20.0);
  r.erase("reference");
  EXPECT_THROW(plot_files({{"a.json", r}}, o), InputError);
}

// ---- the command, with gnuplot -----------------------------------------------------------------

TEST(PlotCommand, ResultsGiveBreakdownAndPredictedPicturesWithTheirTitles) {
  TempDir tmp;
  const auto runs = run_batch(
      SKBSIM_BINARY, kSource,
      {{"run", "scenarios/thread2007/container.json", "--out", (tmp.path() / "b").string()},
       {"run", "scenarios/thread2007/no-container.json", "--out", (tmp.path() / "a").string()}});
  ASSERT_EQ(runs[0].exit_code, 0) << runs[0].err;
  ASSERT_EQ(runs[1].exit_code, 0) << runs[1].err;
  const fs::path out = tmp.path() / "plots";
  const Invocation p = run_cli({"plot", (tmp.path() / "a/result.json").string(),
                               (tmp.path() / "b/result.json").string(), "--out", out.string()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("breakdown.svg"), std::string::npos) << p.out;
  for (const char* name : {"breakdown", "predicted-vs-measured"}) {
    SCOPED_TRACE(name);
    for (const char* ext : {".gp", ".dat", ".svg"}) {
      EXPECT_GT(fs::file_size(out / (std::string(name) + ext)), 100U);
    }
    EXPECT_TRUE(is_png(out / (std::string(name) + ".png")));
  }
  const std::string bars = slurp(out / "breakdown.svg");
  EXPECT_NE(bars.find("CPU breakdown by kernel symbol group"), std::string::npos);
  EXPECT_NE(bars.find("thread2007-container (A)"), std::string::npos);
  EXPECT_NE(bars.find("thread2007-no-container (A)"), std::string::npos);
  EXPECT_NE(bars.find("CPU utilisation (% of the host"), std::string::npos);
  EXPECT_NE(bars.find("skb management"), std::string::npos);
  const std::string pvm = slurp(out / "predicted-vs-measured.svg");
  EXPECT_NE(pvm.find("Predicted against measured"), std::string::npos);
  EXPECT_NE(pvm.find("CPU utilisation of the local host (%)"), std::string::npos);
  EXPECT_NE(pvm.find("measured ± tolerance"), std::string::npos);
  EXPECT_FALSE(fs::exists(out.string() + ".partial"));
}

TEST(PlotCommand, SweepPicturesAndTheScriptDrawsThemAgainByHand) {
  TempDir tmp;
  const fs::path out = tmp.path() / "p";
  const Invocation p =
      run_cli({"plot", "tests/data/plot/sweep.json", "--out", out.string(), "--format", "svg"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_FALSE(fs::exists(out / "sweep-cpu.png"));  // --format svg
  const std::string svg = slurp(out / "sweep-service-demand.svg");
  EXPECT_NE(svg.find("Service demand of host A against send_size"), std::string::npos);
  EXPECT_NE(svg.find("skip_cow_from=etun"), std::string::npos);
  EXPECT_NE(svg.find("service demand of host A (us/KB)"), std::string::npos);
  fs::remove(out / "sweep-cpu.svg");
  const std::string cmd = "cd " + skbsim::testing::shell_quote(out.string()) +
                          " && gnuplot sweep-cpu.gp >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_NE(slurp(out / "sweep-cpu.svg").find("CPU utilisation of host A against send_size"),
            std::string::npos);
}

// Every bad input fixture: its one expected line, exit 2, nothing on stdout, nothing written —
// and an existing output directory left as it was.
TEST(PlotCommand, BadInputIsOneLineExitTwoAndNothingWritten) {
  TempDir tmp;
  const std::vector<std::string> names = json_stems(kSource / "tests/data/plot/bad");
  ASSERT_GE(names.size(), 6U);
  std::vector<std::vector<std::string>> cases;
  for (const std::string& n : names) {
    cases.push_back(
        {"plot", "tests/data/plot/bad/" + n + ".json", "--out", (tmp.path() / n).string()});
  }
  const fs::path kept = tmp.path() / "kept";
  fs::create_directories(kept);
  std::ofstream(kept / "mine.txt") << "keep me";
  cases.push_back({"plot", "tests/data/plot/sweep.json", "--host", "Z", "--out", kept.string()});
  const auto runs = run_batch(SKBSIM_BINARY, kSource, cases);
  for (std::size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    std::string expected = slurp(kSource / "tests/data/plot/bad" / (names[i] + ".expected"));
    while (!expected.empty() && expected.back() == '\n') {
      expected.pop_back();
    }
    EXPECT_EQ(runs[i].exit_code, 2);
    EXPECT_EQ(runs[i].out, "");
    EXPECT_EQ(runs[i].err, expected + "\n");
    EXPECT_FALSE(fs::exists(tmp.path() / names[i]));
    EXPECT_FALSE(fs::exists(tmp.path() / (names[i] + ".partial")));
  }
  const Invocation& host = runs.back();
  EXPECT_EQ(host.exit_code, 2);
  EXPECT_EQ(host.err,
            "tests/data/plot/sweep.json: /rows/0/hosts: expected a host named \"Z\" (--host), "
            "got A, B\n");
  EXPECT_EQ(slurp(kept / "mine.txt"), "keep me");
  EXPECT_EQ(std::distance(fs::directory_iterator(kept), fs::directory_iterator()), 1);
}

TEST(PlotCommand, BadFlagsPrintUsageAndExitTwo) {
  const auto runs = run_batch(
      SKBSIM_BINARY, kSource,
      {{"plot", "tests/data/plot/sweep.json", "--format", "gif"}, {"plot"}, {"plot", "--help"}});
  EXPECT_EQ(runs[0].exit_code, 2);
  EXPECT_NE(runs[0].err.find("Usage: skbsim plot"), std::string::npos);
  EXPECT_EQ(runs[1].exit_code, 2);
  EXPECT_EQ(runs[2].exit_code, 0);
  EXPECT_NE(runs[2].out.find("Usage: skbsim plot"), std::string::npos);
}

TEST(ValidateCommand, PlotWritesPredictedAgainstMeasured) {
  TempDir tmp;
  const fs::path out = tmp.path() / "v";
  const Invocation v = run_cli({"validate", "scenarios/thread2007", "--plot", out.string()});
  ASSERT_NE(v.exit_code, 2) << v.err;
  EXPECT_NE(v.out.find("thread2007-container"), std::string::npos);
  EXPECT_TRUE(is_png(out / "predicted-vs-measured.png"));
  const std::string svg = slurp(out / "predicted-vs-measured.svg");
  EXPECT_NE(svg.find("thread2007-container-skip-cow"), std::string::npos);
  EXPECT_FALSE(fs::exists(out / "breakdown.svg"));
}

TEST(ValidateCommand, PlotWithoutReferencesIsOneLineAndWritesNothing) {
  TempDir tmp;
  const fs::path out = tmp.path() / "v";
  const Invocation v = run_cli({"validate", "scenarios/modern", "--plot", out.string()});
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_EQ(v.out, "");
  EXPECT_EQ(v.err, "scenarios/modern: /: expected a scenario with a reference to plot, got none\n");
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
