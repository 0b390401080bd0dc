// `skbsim sweep` (sim/sweep.hpp): value lists and ranges, grid order, pointer edits and the
// container copies, every ready-made study's points valid, and through the binary: the same bytes
// for any --jobs, and a bad point is one line, exit 2, nothing written.

#include "sim/sweep.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/features.hpp"
#include "sim/input_error.hpp"

#include "tests/support/process.hpp"

namespace skbsim::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using skbsim::testing::Invocation;
using skbsim::testing::run_batch;
using skbsim::testing::slurp;
using skbsim::testing::TempDir;

const fs::path kSource = SKBSIM_SOURCE_DIR;
const std::string kFixture = "tests/data/scenarios/good/2007-container.json";

std::vector<ordered_json> values(const std::string& text) {
  return parse_sweep_values(text, "--set", "/x");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(SweepValues, GeometricRangeIncludesBothEnds) {
  const auto v = values("64..65536*4");
  EXPECT_EQ(ordered_json(v), ordered_json::parse("[64, 256, 1024, 4096, 16384, 65536]"));
}

TEST(SweepValues, GeometricRangeStopsBeforePassingTheEnd) {
  EXPECT_EQ(ordered_json(values("1..256*3")), ordered_json::parse("[1, 3, 9, 27, 81, 243]"));
}

TEST(SweepValues, ArithmeticRangeWithAndWithoutStep) {
  EXPECT_EQ(ordered_json(values("1..10+3")), ordered_json::parse("[1, 4, 7, 10]"));
  EXPECT_EQ(ordered_json(values("1..3")), ordered_json::parse("[1, 2, 3]"));
}

TEST(SweepValues, FractionalRangeHasNoBinaryNoise) {
  EXPECT_EQ(ordered_json(values("0.1..0.5+0.1")), ordered_json::parse("[0.1, 0.2, 0.3, 0.4, 0.5]"));
}

TEST(SweepValues, IntegerRangesGiveIntegers) {
  for (const ordered_json& v : values("64..1024*2")) {
    EXPECT_TRUE(v.is_number_integer()) << v.dump();
  }
}

TEST(SweepValues, JsonBareWordsRangesAndListsMix) {
  const auto v = values(R"(1,2..4,true,"a,b",6.x,2.6.20,[NETIF_F_SG,"x"],[],{"k":[1,2]})");
  EXPECT_EQ(ordered_json(v), ordered_json::parse(
                                 R"([1, 2, 3, 4, true, "a,b", "6.x", "2.6.20",
                                     ["NETIF_F_SG", "x"], [], {"k": [1, 2]}])"));
}

TEST(SweepValues, CommasInsideBracketsDoNotSeparate) {
  const auto v = values(R"(["NETIF_F_SG","NETIF_F_HW_CSUM"],[])");
  ASSERT_EQ(v.size(), 2U);
  EXPECT_EQ(v[0].size(), 2U);
  EXPECT_TRUE(v[1].empty());
}

TEST(SweepValues, BadListsAndRangesAreInputErrors) {
  EXPECT_EQ(error_of([] { (void)values("10..1"); }),
            "--set: /x: expected a range whose end is not below its start, got \"10..1\"");
  EXPECT_EQ(error_of([] { (void)values("1..10*1"); }),
            "--set: /x: expected a factor above 1 from a start above 0, got \"1..10*1\"");
  EXPECT_EQ(error_of([] { (void)values("1..x"); }),
            "--set: /x: expected a numeric range, got \"1..x\" (a range is A..B, A..B+STEP or "
            "A..B*FACTOR)");
  EXPECT_EQ(error_of([] { (void)values("1,,2"); }),
            "--set: /x: expected values separated by single commas, got an empty value in "
            "\"1,,2\"");
  EXPECT_EQ(error_of([] { (void)values("[1,2"); }),
            "--set: /x: expected a value list with balanced brackets and quotes, got \"[1,2\"");
}

TEST(SweepSet, LinkedPathsTakeOneValuePerPath) {
  const SweepAxis a =
      parse_sweep_set("/kernel,/devices/A~1etun0/kind=[2.6.20,etun],[6.x,veth]", "--set");
  ASSERT_EQ(a.paths.size(), 2U);
  ASSERT_EQ(a.points.size(), 2U);
  EXPECT_EQ(a.points[1][0], "6.x");
  EXPECT_EQ(a.points[1][1], "veth");
  EXPECT_EQ(error_of([] { (void)parse_sweep_set("/kernel,/seed=[2.6.20]", "--set"); }),
            "--set: /kernel,/seed: expected each value of a linked axis to be an array of 2 "
            "values (one per path), got [\"2.6.20\"]");
}

TEST(SweepSet, PathsMustBePointersOrTheContainersPseudoPath) {
  EXPECT_EQ(error_of([] { (void)parse_sweep_set("kernel=6.x", "--set"); }),
            "--set: kernel: expected a JSON pointer to a value in the scenario such as "
            "/traffic/flows/0/send_size, got \"kernel\"");
  EXPECT_EQ(error_of([] { (void)parse_sweep_set("/a~2b=1", "--set"); }),
            "--set: /a~2b: expected \"~0\" or \"~1\" after \"~\" in a JSON pointer (RFC 6901), "
            "got \"/a~2b\"");
  EXPECT_EQ(error_of([] { (void)parse_sweep_set("/x-vms=1", "--set"); }),
            "--set: /x-vms: expected a JSON pointer into the scenario or the pseudo-path "
            "/x-containers, got \"/x-vms\"");
  EXPECT_EQ(error_of([] { (void)parse_sweep_set("/seed", "--set"); }),
            "--set: expected PATH=VALUES such as /traffic/flows/0/send_size=64..65536*4, got "
            "\"/seed\"");
}

TEST(SweepGrid, FirstAxisVariesSlowest) {
  std::vector<SweepAxis> axes(2);
  axes[0].paths = {"/a"};
  axes[0].points = {{1}, {2}};
  axes[1].paths = {"/b"};
  axes[1].points = {{1}, {2}, {3}};
  const auto grid = sweep_grid(axes);
  const std::vector<std::vector<std::size_t>> want = {{0, 0}, {0, 1}, {0, 2},
                                                      {1, 0}, {1, 1}, {1, 2}};
  EXPECT_EQ(grid, want);
}

class SweepPointTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::current_path(kSource); }
  SweepPoint point(const std::vector<std::string>& sets) {
    SweepPlan plan;
    plan.scenario = kFixture;
    for (const std::string& s : sets) {
      plan.axes.push_back(parse_sweep_set(s, "--set"));
    }
    return sweep_point(load_scenario(kFixture), plan,
                       std::vector<std::size_t>(plan.axes.size(), 0));
  }
};

TEST_F(SweepPointTest, StarTokenSetsEveryMatchingMember) {
  const SweepPoint p = point({R"(/devices/A~1etun*/features=[NETIF_F_SG,NETIF_F_HW_CSUM])"});
  for (const DeviceSpec& d : p.scenario.spec.devices) {
    if (d.kind == DevKind::kEtun) {
      ASSERT_TRUE(d.features.has_value()) << d.name;
      EXPECT_EQ(*d.features, feat::kSg | feat::kHwCsum) << d.name;
    }
  }
  EXPECT_EQ(p.inputs.dump(), R"({"/devices/A~1etun*/features":["NETIF_F_SG","NETIF_F_HW_CSUM"]})");
}

TEST_F(SweepPointTest, NullRemovesAMember) {
  const SweepPoint p = point({"/patches=null"});
  EXPECT_FALSE(p.scenario.document.contains("patches"));
  EXPECT_TRUE(p.scenario.spec.patches.skip_cow_from.empty());
}

TEST_F(SweepPointTest, MissingObjectsAreCreatedAndValidated) {
  EXPECT_EQ(error_of([&] { (void)point({"/traffic/flow/0/send_size=1024"}); }),
            kFixture +
                ": /traffic/flow: expected one of the keys test, duration_s, warmup_s, flows, "
                "comment, got unknown key \"flow\" (did you mean \"flows\"?) (sweep point "
                "/traffic/flow/0/send_size=1024)");
  EXPECT_EQ(error_of([&] { (void)point({"/traffic/flows/3/send_size=1024"}); }),
            kFixture +
                ": /traffic/flows/3: expected an index of the array /traffic/flows (0..0) or "
                "\"*\", got \"3\" (sweep point /traffic/flows/3/send_size=1024)");
}

TEST_F(SweepPointTest, ContainersAreCopiedWithTheirPairRouteAndFlow) {
  const SweepPoint p = point({"/x-containers=3"});
  const ScenarioSpec& s = p.scenario.spec;
  ASSERT_EQ(s.flows.size(), 3U);
  std::set<std::string> from;
  std::set<std::uint32_t> addrs;
  for (const FlowSpec& f : s.flows) {
    from.insert(f.from_ns);
    addrs.insert(f.from_addr);
    EXPECT_EQ(f.to_ns, "B/root");
  }
  EXPECT_EQ(from, (std::set<std::string>{"A/ct", "A/ct.2", "A/ct.3"}));
  EXPECT_EQ(addrs.size(), 3U);  // a subnet each: 10.0.1.2, 10.0.2.2, 10.0.3.2
  EXPECT_TRUE(addrs.count((10U << 24) | (2U << 8) | 2U) == 1);
  std::size_t etuns = 0;
  for (const DeviceSpec& d : s.devices) {
    etuns += d.kind == DevKind::kEtun ? 1 : 0;
    if (d.name == "A/etun1.3") {
      EXPECT_EQ(d.ns, "A/ct.3");
      EXPECT_EQ(d.peer, "A/etun0.3");
    }
  }
  EXPECT_EQ(etuns, 6U);
  const auto root = std::find_if(s.namespaces.begin(), s.namespaces.end(),
                                 [](const NamespaceSpec& n) { return n.name == "A/root"; });
  ASSERT_NE(root, s.namespaces.end());
  EXPECT_EQ(std::count_if(root->routes.begin(), root->routes.end(),
                          [](const RouteSpec& r) { return r.dev.rfind("A/etun0", 0) == 0; }),
            3);
}

TEST_F(SweepPointTest, ContainersNeedAFlowFromAContainer) {
  EXPECT_EQ(error_of([&] {
              (void)point({"/traffic/flows/0/from=A/root", "/x-containers=2"});
            }),
            kFixture +
                ": /x-containers: expected a first flow that starts in a container (a namespace "
                "joined to its host's namespace by one etun, veth or venet pair), got a flow "
                "from A/root, which has 2 device(s), not one end of a pair (sweep point "
                "/traffic/flows/0/from=\"A/root\", /x-containers=2)");
  EXPECT_EQ(error_of([&] { (void)point({"/x-containers=0"}); }),
            kFixture +
                ": /x-containers: expected an integer in [1, 1024] (the number of containers), "
                "got 0 (sweep point /x-containers=0)");
}

// Every point of every ready-made study is a valid scenario (nothing runs here).
TEST(Studies, EveryPointOfEveryStudyValidates) {
  fs::current_path(kSource);
  std::size_t studies = 0;
  for (const auto& e : fs::directory_iterator(kSource / "scenarios/studies")) {
    if (e.path().extension() != ".json") {
      continue;
    }
    ++studies;
    const std::string file = fs::relative(e.path(), kSource).generic_string();
    SCOPED_TRACE(file);
    const Study st = load_study(file);
    const Scenario base = load_scenario(st.plan.scenario);
    const auto grid = sweep_grid(st.plan.axes);
    EXPECT_GE(grid.size(), 2U);
    for (const auto& index : grid) {
      EXPECT_NO_THROW((void)sweep_point(base, st.plan, index));
    }
  }
  EXPECT_EQ(studies, 4U);
}

TEST(Studies, BadStudyFilesNameTheirPointer) {
  TempDir tmp;
  const fs::path f = tmp.path() / "study.json";
  std::ofstream(f) << R"({"scenario": ")" << (kSource / kFixture).string()
                   << R"(", "set": {"/seed": "1..3"}, "x": "/kernel", "y": "cpu_util_pct",
                         "host": "A"})";
  EXPECT_EQ(error_of([&] { (void)load_study(f.string()); }),
            f.string() + ": /x: expected one of the paths in \"set\", got \"/kernel\"");
}

// ---- through the binary ----------------------------------------------------------------------

// A short sweep (4 points, 20 ms of simulated time each) written with 1 and with 2 jobs.
TEST(SweepCommand, SameBytesForAnyNumberOfJobs) {
  TempDir tmp;
  auto args = [&](const std::string& jobs, const std::string& out) {
    return std::vector<std::string>{"sweep",  kFixture,
                                    "--set",  "/traffic/duration_s=0.02",
                                    "--set",  "/traffic/warmup_s=0.005",
                                    "--set",  "/traffic/flows/0/send_size=1024..16384*4",
                                    "--set",  R"(/patches/skip_cow_from=[],[etun])",
                                    "--jobs", jobs,
                                    "--out",  (tmp.path() / out).string()};
  };
  const auto runs = run_batch(SKBSIM_BINARY, kSource, {args("1", "j1"), args("2", "j2")});
  for (const Invocation& r : runs) {
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");  // no progress unless stderr is a terminal
  }
  const std::string json1 = slurp(tmp.path() / "j1/sweep.json");
  const std::string csv1 = slurp(tmp.path() / "j1/sweep.csv");
  EXPECT_EQ(json1, slurp(tmp.path() / "j2/sweep.json"));
  EXPECT_EQ(csv1, slurp(tmp.path() / "j2/sweep.csv"));

  const auto j = nlohmann::json::parse(json1);
  EXPECT_EQ(j.at("scenario"), kFixture);
  ASSERT_EQ(j.at("axes").size(), 4U);
  EXPECT_EQ(j.at("axes")[2].at("values"), nlohmann::json::parse("[1024, 4096, 16384]"));
  ASSERT_EQ(j.at("rows").size(), 6U);
  // Grid order: the last axis turns fastest.
  EXPECT_EQ(j.at("rows")[1].at("inputs").at("/patches/skip_cow_from"),
            nlohmann::json::parse(R"(["etun"])"));
  EXPECT_EQ(j.at("rows")[2].at("inputs").at("/traffic/flows/0/send_size"), 4096);
  const auto& row = j.at("rows")[0];
  EXPECT_GT(row.at("throughput_mbps").get<double>(), 0);
  const auto& a = row.at("hosts").at("A");
  EXPECT_GT(a.at("cpu_util_pct").get<double>(), 0);
  EXPECT_GT(a.at("per_segment").at("pskb_expand_head_calls").get<double>(), 0.9);
  EXPECT_EQ(j.at("rows")[1].at("hosts").at("A").at("per_segment").at("pskb_expand_head_calls"),
            0.0);  // skb_cow skipped for packets from etun
  EXPECT_TRUE(a.at("per_segment").contains("csum_partial_copy_generic_bytes"));
  EXPECT_TRUE(row.at("hazards").is_array());

  // CSV: a header, one line per row, the inputs as compact JSON.
  std::vector<std::string> lines;
  std::istringstream in(csv1);
  for (std::string l; std::getline(in, l);) {
    lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 7U);
  EXPECT_EQ(lines[0].rfind("/traffic/duration_s,/traffic/warmup_s,/traffic/flows/0/send_size,"
                           "/patches/skip_cow_from,throughput_mbps,A.cpu_util_pct,"
                           "A.service_demand_us_per_kb,A.bytes_copied,",
                           0),
            0U)
      << lines[0];
  EXPECT_EQ(lines[2].rfind(R"(0.02,0.005,1024,"[""etun""]",)", 0), 0U) << lines[2];
}

// --plot draws the table it computed (skbsim plot's sweep pictures): CPU and service demand
// against the first axis, the .gp and .dat beside them.
TEST(SweepCommand, PlotDrawsTheSweep) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "plot";
  const auto runs = run_batch(
      SKBSIM_BINARY, kSource,
      {{"sweep", kFixture, "--set", "/traffic/duration_s=0.02", "--set",
        "/traffic/flows/0/send_size=1024,16384", "--set", R"(/patches/skip_cow_from=[],[etun])",
        "--plot", dir.string()}});
  ASSERT_EQ(runs[0].exit_code, 0) << runs[0].err;
  for (const char* f : {"sweep-cpu.svg", "sweep-cpu.png", "sweep-cpu.gp",
                        "sweep-service-demand.svg", "sweep.dat"}) {
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  }
  EXPECT_NE(slurp(dir / "sweep-cpu.gp").find("send_size"), std::string::npos);
}

TEST(SweepCommand, BadPointIsOneLineExitTwoAndWritesNothing) {
  TempDir tmp;
  const fs::path out = tmp.path() / "out";
  const auto runs = run_batch(
      SKBSIM_BINARY, kSource,
      {{"sweep", kFixture, "--set", "/traffic/flows/0/send_size=1024,0", "--out", out.string()},
       {"sweep", kFixture, "--set", "/devices/A~1etun9/mtu=1500", "--out", out.string()},
       {"sweep", kFixture, "--set", "/traffic/flows/0/send_size", "--out", out.string()}});
  EXPECT_EQ(runs[0].err, kFixture +
                             ": /traffic/flows/0/send_size: expected an integer in [1, 16777216], "
                             "got 0 (sweep point /traffic/flows/0/send_size=0)\n");
  EXPECT_EQ(runs[1].err.rfind(kFixture + ": /devices/A~1etun9/", 0), 0U) << runs[1].err;
  EXPECT_EQ(runs[2].err.rfind("--set: expected PATH=VALUES", 0), 0U) << runs[2].err;
  for (const Invocation& r : runs) {
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".partial"));
}

TEST(SweepCommand, HelpAndUsage) {
  const auto runs = run_batch(SKBSIM_BINARY, kSource,
                              {{"sweep", "--help"}, {"sweep", kFixture}, {"sweep", "--jobs", "0"}});
  EXPECT_EQ(runs[0].exit_code, 0);
  EXPECT_NE(runs[0].out.find("Usage: skbsim sweep"), std::string::npos);
  EXPECT_EQ(runs[1].exit_code, 2);
  EXPECT_NE(runs[1].err.find("Usage: skbsim sweep"), std::string::npos);
  EXPECT_EQ(runs[2].exit_code, 2);
}

}  // namespace
}  // namespace skbsim::sim
