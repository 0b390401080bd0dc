// baseline.cpp — `skbsim baseline`: the committed predictions under results/, checked or updated.

#include "sim/baseline.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <boost/program_options.hpp>

#include "sim/cli_args.hpp"
#include "sim/commands.hpp"
#include "sim/input_error.hpp"
#include "sim/json_reader.hpp"
#include "sim/output_dir.hpp"
#include "sim/plot.hpp"
#include "sim/report.hpp"
#include "skbsim/bug.hpp"
#include "skbsim/symbols.hpp"

namespace skbsim::sim {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;
using OJ = nlohmann::ordered_json;

constexpr int kExitUsage = 2;

// The per-segment counters a baseline keeps besides the totals: the ones the thread's story is
// told with (the clone and the copy skb_cow makes of it, software checksums, GSO), 0 when the
// host never called the symbol, so a symbol that appears is a changed figure, not a new key.
constexpr std::array<const char*, 4> kTotals = {"cycles", "bytes_copied", "bytes_checksummed",
                                                "allocs"};
constexpr std::array<const char*, 8> kCounters = {"skb_clone_calls",
                                                  "pskb_expand_head_calls",
                                                  "pskb_expand_head_bytes",
                                                  "skb_segment_calls",
                                                  "skb_checksum_help_calls",
                                                  "csum_partial_bytes",
                                                  "csum_partial_copy_generic_bytes",
                                                  "copy_from_user_bytes"};

constexpr std::size_t kGroupCount = static_cast<std::size_t>(SymGroup::kOther) + 1;

double round_to(double v, int decimals) {
  const double f = std::pow(10.0, decimals);
  return std::round(v * f) / f;
}

// Leaves of a JSON document by pointer, in document order: objects are walked into; arrays and
// scalars are leaves (a hazard list is one figure).
template <class Json>
void flatten(const Json& j, const std::string& at,
             std::vector<std::pair<std::string, nlohmann::json>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      flatten(it.value(), at + "/" + json_pointer_token(it.key()), out);
    }
    return;
  }
  out.emplace_back(at, nlohmann::json(j));
}

std::string shown(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string build_kind() {
#ifdef NDEBUG
  std::string b = "optimised";
#else
  std::string b = "debug";
#endif
#ifdef __SANITIZE_ADDRESS__
  b += ", AddressSanitizer";
#endif
  return b;
}

void print_table(std::ostream& out, const std::vector<Moved>& moved) {
  std::size_t ws = 8;
  std::size_t wf = 6;
  std::size_t wb = 8;
  std::size_t wn = 3;
  for (const Moved& m : moved) {
    ws = std::max(ws, m.scenario.size());
    wf = std::max(wf, m.figure.size());
    wb = std::max(wb, m.baseline.size());
    wn = std::max(wn, m.now.size());
  }
  out << std::left << std::setw(static_cast<int>(ws + 2)) << "scenario"
      << std::setw(static_cast<int>(wf + 2)) << "figure" << std::right
      << std::setw(static_cast<int>(wb)) << "baseline" << std::setw(static_cast<int>(wn + 2))
      << "now" << std::setw(10) << "change"
      << "\n";
  for (const Moved& m : moved) {
    out << std::left << std::setw(static_cast<int>(ws + 2)) << m.scenario
        << std::setw(static_cast<int>(wf + 2)) << m.figure << std::right
        << std::setw(static_cast<int>(wb)) << m.baseline << std::setw(static_cast<int>(wn + 2))
        << m.now << std::setw(10) << m.change << "\n";
  }
}

struct Item {
  std::string rel;  // under results/
  Scenario sc;
  OJ doc;
  std::uint64_t hops = 0;
  std::uint64_t events = 0;
  double wall_ms = 0;  // best of the runs
};

// The scenarios `paths` name, each with where its baseline lives: a directory's scenarios by
// their path inside it, a file by its name.
std::vector<Item> load_items(const std::vector<std::string>& paths) {
  std::vector<Item> items;
  std::set<std::string> rels;
  for (const std::string& p : paths) {
    const bool dir = fs::is_directory(p);
    for (const std::string& f : scenario_files({p})) {
      const std::string rel = dir ? fs::path(f).lexically_relative(p).generic_string()
                                  : fs::path(f).filename().string();
      if (!rels.insert(rel).second) {
        throw InputError(f, "",
                         "expected scenarios with distinct baseline names, got a second " + rel);
      }
      items.push_back({rel, load_scenario(f), {}});
    }
  }
  if (items.empty()) {
    throw InputError(paths.front(), "", "expected scenario files, got none");
  }
  return items;
}

OJ runtime_json(const std::vector<Item>& items, unsigned repeat) {
  OJ out;
  out["comment"] =
      "The simulator's own speed when this baseline was made (skbsim baseline --update): "
      "simulated packet-hops per second of wall time, best of runs_per_scenario runs of each "
      "scenario on one core. It varies with the machine and its load: skbsim baseline --check "
      "never reads this file.";
  out["build"] = build_kind();
  out["runs_per_scenario"] = repeat;
  OJ per = OJ::object();
  std::uint64_t hops = 0;
  double wall = 0;
  for (const Item& it : items) {
    per[it.rel] = {
        {"hops", it.hops},
        {"events", it.events},
        {"wall_ms", round_to(it.wall_ms, 3)},
        {"hops_per_s",
         it.wall_ms > 0 ? std::llround(1000.0 * static_cast<double>(it.hops) / it.wall_ms) : 0}};
    hops += it.hops;
    wall += it.wall_ms;
  }
  out["scenarios"] = std::move(per);
  out["total"] = {
      {"hops", hops},
      {"wall_ms", round_to(wall, 3)},
      {"hops_per_s", wall > 0 ? std::llround(1000.0 * static_cast<double>(hops) / wall) : 0}};
  return out;
}

// One host of a baseline: its figures from the result JSON `full`, and its CPU split by group.
OJ host_json(const HostResult& h, const OJ& full) {
  OJ jh;
  jh["cpu_util_pct"] = full["cpu_util_pct"];
  jh["service_demand_us_per_kb"] = full["service_demand_us_per_kb"];
  std::array<double, kGroupCount> cost{};
  double total = 0;
  for (std::size_t i = 0; i < kSymCount; ++i) {
    const auto ps = static_cast<double>(h.cells[i].cost_ps);
    cost[static_cast<std::size_t>(symbol_group(static_cast<Sym>(i)))] += ps;
    total += ps;
  }
  OJ groups;
  for (std::size_t g = 0; g < kGroupCount; ++g) {
    groups[std::string(group_name(static_cast<SymGroup>(g)))] =
        round_to(total > 0 ? h.cpu_util_pct * cost[g] / total : 0.0, 4);
  }
  jh["cpu_pct_by_group"] = std::move(groups);
  OJ per;
  const OJ& fp = full["per_segment"];
  for (const char* k : kTotals) {
    per[k] = fp[k];
  }
  for (const char* k : kCounters) {
    per[k] = fp.contains(k) ? fp[k] : OJ(0.0);
  }
  jh["per_segment"] = std::move(per);
  return jh;
}

// The reference's figures, measured next to predicted, as `skbsim validate` pairs them.
OJ validation_json(const Scenario& sc, const RunResult& r) {
  const HostResult* local = local_host(sc, r);
  const HostResult* remote = remote_host(sc, r);
  OJ v = OJ::object();
  for (const ReferenceFigure& f : sc.reference->figures()) {
    const std::optional<double> predicted = predicted_figure(r, local, remote, f.key);
    if (!predicted) {
      continue;
    }
    // No error_pct: it follows from these two, and a small move of a prediction near its
    // measurement is a large relative move of its error, which would defeat the tolerance.
    v[f.key] = {{"measured", f.value},
                {"predicted", round_to(*predicted, 4)},
                {"tolerance_pct", sc.reference->tolerance_pct}};
  }
  return v;
}

}  // namespace

OJ baseline_json(const Scenario& sc, const RunResult& r, const std::string& scenario_file) {
  const OJ full = result_json(sc, r, false);
  OJ out;
  out["schema"] = 1;
  out["scenario"] = sc.name;
  out["scenario_file"] = scenario_file;
  out["kernel"] = full["kernel"];
  out["preset"] = full["preset"];
  const HostResult* local = local_host(sc, r);
  out["local_host"] = local != nullptr ? local->name : std::string();
  out["throughput_mbps"] = full["throughput_mbps"];
  out["segments"] = full["segments"];
  OJ hosts = OJ::object();
  for (const HostResult& h : r.hosts) {
    hosts[h.name] = host_json(h, full["hosts"][h.name]);
  }
  out["hosts"] = std::move(hosts);
  out["drops"] = full["drops"];
  OJ hazards = OJ::array();
  for (const Hazard& h : r.hazards) {
    hazards.push_back(h.kind + " (" + h.where + ")");
  }
  out["hazards"] = std::move(hazards);
  if (sc.reference) {
    out["validation"] = validation_json(sc, r);
  }
  return out;
}

std::vector<Moved> compare_baseline(const std::string& scenario, const nlohmann::json& base,
                                    const OJ& now, double tolerance_pct, std::size_t& compared) {
  std::vector<std::pair<std::string, nlohmann::json>> b;
  std::vector<std::pair<std::string, nlohmann::json>> n;
  flatten(base, "", b);
  flatten(now, "", n);
  std::map<std::string, const nlohmann::json*> by_pointer;
  for (const auto& [p, v] : b) {
    by_pointer[p] = &v;
  }
  std::vector<Moved> moved;
  std::set<std::string> seen;
  for (const auto& [p, v] : n) {
    seen.insert(p);
    ++compared;
    const std::string figure = p.substr(1);
    const auto it = by_pointer.find(p);
    if (it == by_pointer.end()) {
      moved.push_back({scenario, figure, "-", shown(v), ""});
      continue;
    }
    const nlohmann::json& old = *it->second;
    if (old.is_number() && v.is_number()) {
      const double was = old.get<double>();
      const double is = v.get<double>();
      const double d = is - was;
      if (was == 0 ? is != 0 : std::abs(d) > std::abs(was) * tolerance_pct / 100) {
        std::ostringstream c;
        if (was != 0) {
          c << std::showpos << std::fixed << std::setprecision(2) << 100 * d / std::abs(was) << "%";
        } else {
          c << "from 0";
        }
        moved.push_back({scenario, figure, shown(old), shown(v), c.str()});
      }
    } else if (old != v) {
      moved.push_back({scenario, figure, shown(old), shown(v), ""});
    }
  }
  for (const auto& [p, v] : b) {
    if (seen.count(p) == 0) {
      ++compared;
      moved.push_back({scenario, p.substr(1), shown(v), "-", ""});
    }
  }
  return moved;
}

namespace {

// Runs every scenario `runs` times (the figures are the same each time; the best wall time is
// the speed) and makes its baseline document.
void run_items(std::vector<Item>& items, unsigned runs) {
  for (Item& it : items) {
    RunResult r;
    for (unsigned i = 0; i < runs; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      r = run_scenario(it.sc.spec);
      const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - t0;
      it.wall_ms = i == 0 ? took.count() : std::min(it.wall_ms, took.count());
    }
    it.hops = r.hops;
    it.events = r.events;
    it.doc = baseline_json(it.sc, r, it.rel);
  }
}

// Baseline files under `dir` (by their "scenario_file" key; not plots/) that no item has.
std::vector<std::string> gone_baselines(const fs::path& dir, const std::vector<Item>& items) {
  std::set<std::string> rels;
  for (const Item& it : items) {
    rels.insert(it.rel);
  }
  std::vector<std::string> gone;  // relative to dir
  for (auto e = fs::recursive_directory_iterator(dir); e != fs::recursive_directory_iterator();
       ++e) {
    const std::string rel = e->path().lexically_relative(dir).generic_string();
    if (e->is_directory() && e->path().filename() == "plots") {
      e.disable_recursion_pending();
    } else if (e->is_regular_file() && e->path().extension() == ".json" && rels.count(rel) == 0) {
      const nlohmann::json doc = load_json_file(e->path().string(), e->path().string());
      if (doc.is_object() && doc.contains("scenario_file")) {
        gone.push_back(rel);
      }
    }
  }
  std::sort(gone.begin(), gone.end());
  return gone;
}

std::vector<Moved> compare_items(const std::vector<Item>& items, const fs::path& dir,
                                 double tolerance, bool find_gone, std::size_t& compared) {
  std::vector<Moved> moved;
  for (const Item& it : items) {
    const fs::path f = dir / it.rel;
    if (!fs::exists(f)) {
      moved.push_back({it.sc.name, "(baseline file)", "missing", "new scenario", ""});
      continue;
    }
    const auto found = compare_baseline(it.sc.name, load_json_file(f.string(), f.string()), it.doc,
                                        tolerance, compared);
    moved.insert(moved.end(), found.begin(), found.end());
  }
  if (find_gone && fs::is_directory(dir)) {
    for (const std::string& g : gone_baselines(dir, items)) {
      moved.push_back({g, "(baseline file)", "present", "scenario gone", ""});
    }
  }
  return moved;
}

int report_check(std::size_t scenarios, std::size_t compared, const std::vector<Moved>& moved,
                 const fs::path& dir, const std::string& tol) {
  if (moved.empty()) {
    std::cout << "skbsim baseline: " << scenarios << " scenarios, " << compared
              << " figures, all within " << tol << "% of " << dir.generic_string() << "/\n";
    return 0;
  }
  std::cout << "skbsim baseline: " << moved.size() << " change(s) against " << dir.generic_string()
            << "/ (" << scenarios << " scenarios, " << compared << " figures compared, tolerance "
            << tol << "% of the committed value):\n\n";
  print_table(std::cout, moved);
  std::cout << "\nIf the change is intended, update the baseline and commit it with the "
               "change:\n  bash scripts/baseline.sh update   (runs skbsim baseline --update)\n";
  return 1;
}

// Writes the baseline files, runtime.json and plots/ into `dir`, all or nothing, keeping the
// entries of the old `dir` it does not make (e.g. bench/).
void write_update(const fs::path& dir, const std::vector<Item>& items, unsigned repeat) {
  OutputFiles files;
  std::vector<PlotInput> inputs;
  for (const Item& it : items) {
    files.emplace_back(it.rel, it.doc.dump(2) + "\n");
    inputs.push_back({(dir / it.rel).generic_string(), nlohmann::json(it.doc)});
  }
  files.emplace_back("runtime.json", runtime_json(items, repeat).dump(2) + "\n");
  const PlotOptions o;
  const OutputFiles pictures = plot_files(inputs, o);
  for (const auto& [name, content] : pictures) {
    files.emplace_back("plots/" + name, content);
  }
  std::set<std::string> produced;
  for (const auto& [name, content] : files) {
    produced.insert(name.substr(0, name.find('/')));
  }
  write_atomically(dir, files, [&](const fs::path& partial) {
    if (fs::is_directory(dir)) {
      for (const auto& e : fs::directory_iterator(dir)) {
        if (produced.count(e.path().filename().string()) == 0) {
          fs::copy(e.path(), partial / e.path().filename(), fs::copy_options::recursive);
        }
      }
    }
    draw(partial / "plots", pictures, o.formats);
  });
}

}  // namespace

int run_baseline(const std::vector<std::string>& args) {
  const std::string usage =
      "skbsim baseline --check|--update [SCENARIO|DIR]... [--results DIR] [--tolerance PCT]";
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help")(
      "check", "compare the predictions with the committed baseline; exit 1 when one moved")(
      "update", "write the predictions, runtime.json and the plots as the new baseline")(
      "results,r", po::value<std::string>()->default_value("results"), "the baseline directory")(
      "tolerance", po::value<double>()->default_value(kBaselineTolerancePct),
      "how far a figure may move, in percent of its committed value")(
      "repeat", po::value<unsigned>()->default_value(3),
      "--update: runs per scenario for the speed in runtime.json (best of)");
  po::options_description all;
  all.add(visible).add_options()("paths", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("paths", -1);
  po::variables_map vm;
  if (!parse_args(args, visible, all, pos, vm, usage, "skbsim baseline")) {
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    std::cout
        << "Usage: " << usage
        << "\n\nRuns every scenario (default: scenarios/) and holds its predictions against\n"
           "the committed baseline in DIR (default: results/), one compact JSON per scenario at\n"
           "DIR/<its path under the scenario directory>.\n"
           "  --check   prints a table of every figure that moved beyond the tolerance\n"
           "            (scenario, figure, baseline, now, change) and exits 1 if any did; 0 if\n"
           "            none. A scenario without a baseline, or a baseline without a scenario,\n"
           "            counts as moved.\n"
           "  --update  writes the new baseline, DIR/runtime.json (the simulator's speed, never\n"
           "            compared) and DIR/plots/ (breakdown, predicted-vs-measured: SVG, PNG),\n"
           "            all or nothing; other entries of DIR (e.g. bench/) are kept.\n"
           "Run it with the whole scenario set (no SCENARIO arguments) to update results/.\n\n"
        << visible;
    return 0;
  }
  const bool check = vm.count("check") != 0;
  const bool update = vm.count("update") != 0;
  const double tolerance = vm["tolerance"].as<double>();
  const unsigned repeat = vm["repeat"].as<unsigned>();
  if (check == update || !(tolerance >= 0) || repeat == 0) {
    std::cerr << "skbsim baseline: expected one of --check and --update, --tolerance >= 0 and "
                 "--repeat >= 1\n\nUsage: "
              << usage << "\n";
    return kExitUsage;
  }
  const bool explicit_paths = vm.count("paths") != 0;
  const std::vector<std::string> paths = explicit_paths ? vm["paths"].as<std::vector<std::string>>()
                                                        : std::vector<std::string>{"scenarios"};
  const fs::path dir = vm["results"].as<std::string>();
  try {
    std::vector<Item> items = load_items(paths);
    run_items(items, update ? repeat : 1U);
    std::size_t compared = 0;
    const std::vector<Moved> moved =
        compare_items(items, dir, tolerance, !explicit_paths, compared);
    std::ostringstream tol;
    tol << tolerance;
    if (check) {
      return report_check(items.size(), compared, moved, dir, tol.str());
    }
    write_update(dir, items, repeat);
    if (!moved.empty()) {
      std::cout << "Changed from the previous baseline (tolerance " << tol.str() << "%):\n\n";
      print_table(std::cout, moved);
      std::cout << "\n";
    }
    std::cout << "wrote " << dir.generic_string() << "/: " << items.size()
              << " scenario baselines, runtime.json, plots/ (breakdown, predicted-vs-measured)\n";
#ifndef NDEBUG
    std::cerr << "note: runtime.json holds a debug build's speed; update with the release build\n";
#endif
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  } catch (const SkbBug& e) {
    std::cerr << "skbsim baseline: the model hit a kernel BUG condition: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace skbsim::sim
