// plot.cpp — `skbsim plot`: gnuplot scripts and data from result JSONs, baselines and sweeps.

#include "sim/plot.hpp"

#include <algorithm>
#include <filesystem>
#include <array>
#include <cstdio>
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

#include <sys/wait.h>

namespace skbsim::sim {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;
using nlohmann::json;

constexpr int kExitUsage = 2;

// The symbol groups of include/skbsim/symbols.hpp (group_name()), the order the bars stack in.
struct GroupStyle {
  const char* key;     // as results carry it
  const char* legend;  // as the picture names it
  const char* colour;
};
constexpr std::array<GroupStyle, 7> kGroups = {{
    {"copy", "copy", "#d62728"},
    {"checksum", "checksum", "#ff7f0e"},
    {"skb", "skb management", "#1f77b4"},
    {"protocol", "protocol (TCP, IPv4)", "#2ca02c"},
    {"device", "device and softirq", "#9467bd"},
    {"memory", "memory (slab, pages)", "#8c564b"},
    {"other", "other (syscall, wake-up)", "#7f7f7f"},
}};

constexpr std::array<const char*, 10> kLineColours = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                      "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                      "#bcbd22", "#17becf"};

// The measured figures a reference block can hold, with how a panel names them.
struct FigureStyle {
  const char* key;
  const char* title;
};
constexpr std::array<FigureStyle, 5> kFigures = {{
    {"cpu_util_pct", "CPU utilisation of the local host (%)"},
    {"service_demand_us_per_kb", "service demand of the local host (us/KB)"},
    {"remote_cpu_util_pct", "CPU utilisation of the remote host (%)"},
    {"remote_service_demand_us_per_kb", "service demand of the remote host (us/KB)"},
    {"throughput_mbps", "throughput (10^6 bit/s)"},
}};

std::string num(double v, int decimals = 4) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(decimals) << v;
  return s.str();
}

// A gnuplot single-quoted string: literal except '' for one quote.
std::string gp(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    q += c == '\'' ? std::string("''") : std::string(1, c);
  }
  return q + "'";
}

// A quoted string column in a .dat file (gnuplot has no escapes there).
std::string dat(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    q += c == '"' ? '\'' : c;
  }
  return q + "\"";
}

// Pictures of more pixels than this are written as PNG by libgd (gnuplot's png terminal: a
// palette PNG, about a third of cairo's bytes here) rather than cairo: predicted-vs-measured over
// every committed set is some 60 Mpx, 2.2 MB from cairo and 0.7 MB from libgd.
constexpr long kCairoPngMaxPixels = 20'000'000;

// The script around a picture's commands: one pass per format, X.gp drawing X.<format>.
std::string script(const std::string& name, const std::string& what, const std::string& data,
                   const std::vector<std::string>& formats, int width, int height,
                   const std::string& body) {
  std::string fmts;
  for (const std::string& f : formats) {
    fmts += (fmts.empty() ? "" : " ") + f;
  }
  std::ostringstream s;
  s << "# " << what << "\n"
    << "# Written by skbsim plot with " << data << ", the data it reads. To draw it again, run\n"
    << "# `gnuplot " << name << ".gp` in this directory: it writes " << name << ".svg and " << name
    << ".png.\n"
    << "set encoding utf8\n"
    << "do for [fmt in " << gp(fmts) << "] {\n"
    << "  if (fmt eq 'svg') {\n"
    << "    set terminal svg size " << width << "," << height
    << " dynamic noenhanced font 'sans,12' background '#ffffff'\n"
    << "  } else {\n"
    << "    set terminal "
    << (static_cast<long>(width) * height > kCairoPngMaxPixels ? "png" : "pngcairo") << " size "
    << width << "," << height << " noenhanced font 'sans,11' background '#ffffff'\n"
    << "  }\n"
    << "  set output '" << name << ".'.fmt\n"
    << body << "  unset output\n"
    << "}\n";
  return s.str();
}

// ---- reading --------------------------------------------------------------------------------

enum class Kind : std::uint8_t { kResult, kSweep };

Kind kind_of(const PlotInput& in) {
  const json& d = in.doc;
  if (d.is_object() && d.contains("axes") && d.contains("rows")) {
    return Kind::kSweep;
  }
  if (d.is_object() && d.contains("scenario") && d.contains("hosts")) {
    return Kind::kResult;
  }
  const std::string found = d.is_object() ? std::string("an object without them")
                                          : "a JSON " + std::string(d.type_name());
  throw InputError(in.file, "",
                   "expected a result JSON (keys \"scenario\", \"hosts\": skbsim run, results/) or "
                   "a sweep (keys \"axes\", \"rows\": skbsim sweep), got " +
                       found);
}

std::string host_list(const JsonReader& hosts) {
  std::string list;
  for (auto it = hosts.node().begin(); it != hosts.node().end(); ++it) {
    list += (list.empty() ? "" : ", ") + it.key();
  }
  return list.empty() ? "none" : list;
}

// The host a result is drawn for: --host; else the one the result names as local (baselines
// carry "local_host"); else its reference's host; else the first by name.
std::string pick_host(const JsonReader& doc, const JsonReader& hosts, const std::string& wanted) {
  if (!hosts.node().is_object() || hosts.node().empty()) {
    hosts.fail("expected an object with at least one host, got " +
               std::string(hosts.node().is_object() ? "an empty object" : "no object"));
  }
  std::string h = wanted;
  if (h.empty() && doc.has("local_host")) {
    h = doc.child("local_host").string();
  }
  if (h.empty() && doc.has("reference") && doc.child("reference").has("host")) {
    h = doc.child("reference").child("host").string();
  }
  if (h.empty()) {
    h = hosts.node().begin().key();
  }
  if (!hosts.has(h)) {
    hosts.fail("expected a host named \"" + h + "\"" + (wanted.empty() ? "" : " (--host)") +
               ", got " + host_list(hosts));
  }
  return h;
}

struct Bar {
  std::string label;
  std::array<double, kGroups.size()> cpu{};  // percentage points per group
  double total = 0;
};

Bar read_bar(const PlotInput& in, const std::string& wanted_host) {
  const JsonReader doc(in.doc, in.file);
  const JsonReader hosts = doc.child("hosts");
  const std::string host = pick_host(doc, hosts, wanted_host);
  const JsonReader h = hosts.child(host);
  Bar b;
  b.label = doc.child("scenario").string() + " (" + host + ")";
  b.total = h.child("cpu_util_pct").number_in(0, 1e9);
  if (h.has("cpu_pct_by_group")) {  // a baseline
    const JsonReader g = h.child("cpu_pct_by_group");
    for (std::size_t i = 0; i < kGroups.size(); ++i) {
      b.cpu[i] = g.number_or(kGroups[i].key, 0, 1e9, 0);
    }
    return b;
  }
  if (!h.has("profile")) {
    h.fail(R"(expected "profile" (skbsim run) or "cpu_pct_by_group" (results/), got neither)");
  }
  std::array<double, kGroups.size()> cycles{};
  double all = 0;
  for (const JsonReader& row : h.child("profile").array()) {
    const std::string g = row.child("group").enum_of(
        {"copy", "checksum", "skb", "protocol", "device", "memory", "other"});
    const double c = row.child("cycles").number_in(0, 1e300);
    for (std::size_t i = 0; i < kGroups.size(); ++i) {
      if (g == kGroups[i].key) {
        cycles[i] += c;
      }
    }
    all += c;
  }
  for (std::size_t i = 0; i < kGroups.size(); ++i) {
    b.cpu[i] = all > 0 ? b.total * cycles[i] / all : 0;
  }
  return b;
}

struct Check {  // one measured figure of one scenario
  std::string scenario;
  double measured = 0;
  double predicted = 0;
  double tolerance_pct = 0;
};

// figure key -> checks, from a result's reference block (predicted from its hosts, or for the
// remote figures, whose host the result does not name, from its error_pct) or a baseline's
// "validation" array.
void read_checks(const PlotInput& in, std::map<std::string, std::vector<Check>>& out) {
  const JsonReader doc(in.doc, in.file);
  const std::string name = doc.child("scenario").string();
  if (doc.has("validation")) {  // a baseline: figure -> measured, predicted, tolerance
    const JsonReader all = doc.child("validation");
    if (!all.node().is_object()) {
      all.fail("expected an object, got " + std::string(all.node().type_name()));
    }
    for (auto it = all.node().begin(); it != all.node().end(); ++it) {
      const JsonReader v = all.child(it.key());
      out[it.key()].push_back({name, v.child("measured").number_in(-1e300, 1e300),
                               v.child("predicted").number_in(-1e300, 1e300),
                               v.child("tolerance_pct").number_in(0, 1e6)});
    }
    return;
  }
  if (!doc.has("reference")) {
    return;
  }
  const JsonReader ref = doc.child("reference");
  const double tol = ref.child("tolerance_pct").number_in(0, 1e6);
  for (const FigureStyle& f : kFigures) {
    if (!ref.has(f.key)) {
      continue;
    }
    Check c{name, ref.child(f.key).number_in(-1e300, 1e300), 0, tol};
    const std::string key = f.key;
    if (key == "throughput_mbps") {
      c.predicted = doc.child("throughput_mbps").number_in(0, 1e300);
    } else if (key.rfind("remote_", 0) == 0) {
      const double e = doc.child("error_pct").child(key).number_in(-1e300, 1e300);
      c.predicted = c.measured * (1 + e / 100);
    } else {
      const std::string host = ref.child("host").string();
      c.predicted = doc.child("hosts").child(host).child(key).number_in(0, 1e300);
    }
    out[key].push_back(c);
  }
}

// ---- the three pictures ---------------------------------------------------------------------

void breakdown(const std::vector<Bar>& bars, const std::vector<std::string>& formats,
               OutputFiles& files) {
  std::ostringstream d;
  d << "# CPU utilisation of each scenario's host by kernel symbol group, in percentage points of\n"
       "# the host's CPUs (netperf's utilisation); the groups add up to the total.\n"
       "# scenario (host)";
  for (const GroupStyle& g : kGroups) {
    d << "  " << g.key;
  }
  d << "  total\n";
  double top = 0;
  std::size_t longest = 0;
  for (const Bar& b : bars) {
    d << dat(b.label);
    for (double v : b.cpu) {
      d << " " << num(v);
    }
    d << " " << num(b.total) << "\n";
    top = std::max(top, b.total);
    longest = std::max(longest, b.label.size());
  }
  std::ostringstream p;
  p << "  set title 'CPU breakdown by kernel symbol group: where each host spends its CPU'\n"
       "  set ylabel 'CPU utilisation (% of the host''s CPUs)'\n"
       "  set style data histograms\n"
       "  set style histogram rowstacked\n"
       "  set style fill solid 0.85 border rgb '#404040'\n"
       "  set boxwidth 0.6 relative\n"
       "  set key outside right top vertical Left reverse noautotitle title 'symbol group'\n"
       "  set xtics rotate by 40 right nomirror scale 0\n"
       "  set lmargin "
    << std::max<std::size_t>(10, bars.front().label.size() * 7 / 10) << "\n"
    << "  set ytics nomirror\n"
       "  set grid ytics lc rgb '#d0d0d0'\n"
       "  set yrange [0:"
    << num(top > 0 ? top * 1.12 : 1, 2) << "]\n"
    << "  plot ";
  for (std::size_t i = 0; i < kGroups.size(); ++i) {
    p << (i == 0 ? "'breakdown.dat' using 2:xtic(1)" : "       '' using " + std::to_string(i + 2))
      << " title " << gp(kGroups[i].legend) << " lc rgb " << gp(kGroups[i].colour) << ", \\\n";
  }
  p << "       '' using 0:" << kGroups.size() + 2 << ":(sprintf('%.2f', $" << kGroups.size() + 2
    << ")) with labels offset 0,0.7 notitle\n";
  const int width = std::max(760, 300 + 80 * static_cast<int>(bars.size()));
  const int height = 540 + 4 * static_cast<int>(longest);
  files.emplace_back("breakdown.dat", d.str());
  files.emplace_back("breakdown.gp",
                     script("breakdown", "CPU breakdown by kernel symbol group, per scenario",
                            "breakdown.dat", formats, width, height, p.str()));
}

// Scenarios per row of a predicted-against-measured figure: a figure with more wraps onto further
// rows, so the picture's width stays within what a PNG surface holds (cairo: 32 767 px a side)
// as the committed sets grow. Its height grows by a row (about 460 px) per 40 scenarios of each
// figure: some 70 rows, 900 scenarios, before that limit.
constexpr std::size_t kScenariosPerRow = 40;

void predicted_vs_measured(const std::map<std::string, std::vector<Check>>& checks,
                           const std::vector<std::string>& formats, OutputFiles& files) {
  std::ostringstream d;
  d << "# Predicted against measured. One block (gnuplot index) per figure; columns: x, scenario,\n"
       "# measured, measured - tolerance, measured + tolerance, predicted, error %, tolerance %.\n";
  std::ostringstream p;
  std::size_t panels = 0;  // one per figure shown
  std::size_t rows = 0;    // their rows, kScenariosPerRow scenarios at most each
  std::size_t widest = 0;
  std::size_t longest = 0;
  for (const FigureStyle& f : kFigures) {
    if (checks.count(f.key) == 0) {
      continue;
    }
    const std::vector<Check>& cs = checks.at(f.key);
    const auto band_of = [](const Check& c) {
      return std::abs(c.measured) * c.tolerance_pct / 100;
    };
    d << (panels == 0 ? "" : "\n\n") << "# index " << panels << ": " << f.title << "\n";
    for (std::size_t i = 0; i < cs.size(); ++i) {
      const Check& c = cs[i];
      const double band = band_of(c);
      const double err = c.measured != 0 ? 100 * (c.predicted - c.measured) / c.measured : 0;
      d << i << " " << dat(c.scenario) << " " << num(c.measured) << " " << num(c.measured - band)
        << " " << num(c.measured + band) << " " << num(c.predicted) << " " << num(err, 3) << " "
        << num(c.tolerance_pct, 3) << "\n";
      longest = std::max(longest, c.scenario.size());
    }
    const std::string idx = "index " + std::to_string(panels);
    const std::size_t parts = (cs.size() + kScenariosPerRow - 1) / kScenariosPerRow;
    for (std::size_t part = 0; part < parts; ++part) {
      const std::size_t first = part * kScenariosPerRow;
      const std::size_t last = std::min(cs.size(), first + kScenariosPerRow) - 1;
      double lo = 1e300;
      double hi = -1e300;
      std::string tics;
      for (std::size_t i = first; i <= last; ++i) {
        const Check& c = cs[i];
        const double band = band_of(c);
        lo = std::min({lo, c.measured - band, c.predicted});
        hi = std::max({hi, c.measured + band, c.predicted});
        tics += (i == first ? "" : ", ") + gp(c.scenario) + " " + std::to_string(i);
      }
      // Each row has its own y range, as each figure had: a row of small rates stays readable
      // beside one of large ones.
      const double pad = hi > lo ? (hi - lo) * 0.25 : std::max(1.0, std::abs(hi) * 0.1);
      // The row's points: the block's lines first..last (gnuplot's every ::first::last).
      const std::string sel =
          idx + " every ::" + std::to_string(first) + "::" + std::to_string(last);
      const std::string title = parts == 1
                                    ? f.title
                                    : std::string(f.title) + " (" + std::to_string(part + 1) +
                                          " of " + std::to_string(parts) + ")";
      p << "  set title " << gp(title) << "\n"
        << "  set xrange [" << num(static_cast<double>(first) - 0.6, 1) << ":"
        << num(static_cast<double>(first + std::min(cs.size(), kScenariosPerRow)) - 0.4, 1) << "]\n"
        << "  set yrange [" << num(std::max(0.0, lo - pad)) << ":" << num(hi + pad) << "]\n"
        << "  set xtics (" << tics << ")\n"
        << "  plot 'predicted-vs-measured.dat' " << sel
        << " using 1:3:($1-0.3):($1+0.3):4:5 with boxxyerror fs solid 0.3 noborder"
           " lc rgb '#2ca02c' title 'measured ± tolerance', \\\n"
        << "       '' " << sel << " using 1:3:(0.3) with xerrorbars ps 0 lw 2 lc rgb '#000000'"
        << " title 'measured', \\\n"
        << "       '' " << sel << " using 1:6 with points pt 9 ps 1.8 lc rgb '#d62728'"
        << " title 'predicted', \\\n"
        << "       '' " << sel << " using ($1+0.33):6:(sprintf('%+.1f%%', $7)) with labels left"
        << " notitle\n";
      p << (rows == 0 ? "  unset key\n" : "");
      ++rows;
    }
    widest = std::max(widest, std::min(cs.size(), kScenariosPerRow));
    ++panels;
  }
  if (panels == 0) {
    return;
  }
  const int width = std::max(820, 400 + 170 * static_cast<int>(widest));
  // Horizontal labels while they fit their slot (about 7 px a character), else slanted.
  const bool rotate = static_cast<double>(longest) * 7.5 >
                      static_cast<double>(width - 400) / static_cast<double>(widest);
  std::ostringstream body;
  body << "  set multiplot layout " << rows
       << ",1 title 'Predicted against measured, with each scenario''s tolerance band'\n"
       << "  set key outside right top\n"
       << "  set grid ytics lc rgb '#d0d0d0'\n"
       << "  set lmargin " << (rotate ? std::max<std::size_t>(10, longest * 3 / 5) : 10) << "\n"
       << "  set rmargin 30\n"
       << (rotate ? "  set xtics rotate by 30 right nomirror\n" : "  set xtics nomirror\n")
       << p.str() << "  unset multiplot\n";
  const int height =
      static_cast<int>(rows) * (260 + (rotate ? 4 * static_cast<int>(longest) : 0)) + 60;
  files.emplace_back("predicted-vs-measured.dat", d.str());
  files.emplace_back(
      "predicted-vs-measured.gp",
      script("predicted-vs-measured", "Predicted against measured, with the tolerance band",
             "predicted-vs-measured.dat", formats, width, height, body.str()));
}

// How a swept value reads in a legend or on an axis.
std::string value_text(const json& v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_array()) {
    std::string s;
    for (const json& e : v) {
      s += (s.empty() ? "" : "+") + value_text(e);
    }
    return s.empty() ? "none" : s;
  }
  return v.dump();
}

// The last token of a JSON pointer, unescaped: "/traffic/flows/0/send_size" -> "send_size".
std::string short_name(const std::string& pointer) {
  std::string t = pointer.substr(pointer.rfind('/') + 1);
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '~' && i + 1 < t.size()) {
      out += t[i + 1] == '1' ? '/' : '~';
      ++i;
    } else {
      out += t[i];
    }
  }
  return out;
}

struct Axis {
  std::string path;
  std::vector<json> values;
};

struct SweepPoint {
  std::size_t x;  // index into the first axis's values
  double cpu;
  double sd;
};

struct Sweep {
  std::string scenario;
  std::string host;
  std::vector<Axis> axes;
  // One line per combination of the other axes' values (their indices, in axis order).
  std::map<std::vector<std::size_t>, std::vector<SweepPoint>> lines;
};

std::vector<Axis> read_axes(const JsonReader& doc) {
  std::vector<Axis> axes;
  for (const JsonReader& a : doc.child("axes").array()) {
    Axis ax{a.child("path").string(), {}};
    for (const JsonReader& v : a.child("values").array()) {
      ax.values.push_back(v.node());
    }
    if (ax.values.empty()) {
      a.child("values").fail("expected at least one value, got an empty array");
    }
    axes.push_back(std::move(ax));
  }
  if (axes.empty()) {
    doc.child("axes").fail("expected at least one axis, got an empty array");
  }
  return axes;
}

// Where a row sits on every axis.
std::vector<std::size_t> row_position(const JsonReader& row, const std::vector<Axis>& axes) {
  const JsonReader inputs = row.child("inputs");
  std::vector<std::size_t> at;
  for (const Axis& ax : axes) {
    const JsonReader v = inputs.child(ax.path);
    const auto it = std::find(ax.values.begin(), ax.values.end(), v.node());
    if (it == ax.values.end()) {
      v.fail("expected one of the values of axis " + ax.path + ", got " + v.node().dump());
    }
    at.push_back(static_cast<std::size_t>(it - ax.values.begin()));
  }
  return at;
}

Sweep read_sweep(const PlotInput& in, const std::string& wanted_host) {
  const JsonReader doc(in.doc, in.file);
  Sweep sw;
  sw.scenario = doc.has("scenario") ? doc.child("scenario").string() : in.file;
  sw.axes = read_axes(doc);
  const std::vector<JsonReader> rows = doc.child("rows").array();
  if (rows.empty()) {
    doc.child("rows").fail("expected at least one row, got an empty array");
  }
  const json no_local_host = json::object();  // a sweep's rows name no local host
  sw.host = pick_host(JsonReader(no_local_host, in.file), rows.front().child("hosts"), wanted_host);
  for (const JsonReader& row : rows) {
    const std::vector<std::size_t> at = row_position(row, sw.axes);
    const JsonReader h = row.child("hosts").child(sw.host);
    sw.lines[std::vector<std::size_t>(at.begin() + 1, at.end())].push_back(
        {at.front(), h.child("cpu_util_pct").number_in(0, 1e9),
         h.child("service_demand_us_per_kb").number_in(0, 1e9)});
  }
  for (auto& [key, points] : sw.lines) {
    std::stable_sort(points.begin(), points.end(),
                     [](const SweepPoint& a, const SweepPoint& b) { return a.x < b.x; });
  }
  return sw;
}

// How the first axis is drawn: numbers at their values (on a log2 scale when they span a factor
// 16 or more), anything else as categories at 0, 1, 2, ...
struct XScale {
  bool numeric = true;
  bool log = false;
  std::string lo;  // the range, with a margin so the outermost points clear the border
  std::string hi;
  std::string tics;  // gnuplot's set xtics (...) list
  std::size_t longest_tic = 0;
  std::string at(const Axis& x, std::size_t i) const {
    return numeric ? x.values[i].dump() : std::to_string(i);
  }
};

XScale x_scale(const Axis& x) {
  XScale s;
  double lo = 1e300;
  double hi = -1e300;
  for (const json& v : x.values) {
    s.numeric = s.numeric && v.is_number();
    if (v.is_number()) {
      lo = std::min(lo, v.get<double>());
      hi = std::max(hi, v.get<double>());
    }
  }
  s.log = s.numeric && lo > 0 && hi / lo >= 16;
  const double span = hi > lo ? hi - lo : std::max(1.0, std::abs(hi));
  if (!s.numeric) {
    s.lo = "-0.3";
    s.hi = num(static_cast<double>(x.values.size()) - 0.7, 1);
  } else if (s.log) {
    s.lo = num(lo / 1.4);
    s.hi = num(hi * 1.4);
  } else {
    s.lo = num(lo - 0.04 * span);
    s.hi = num(hi + 0.04 * span);
  }
  for (std::size_t i = 0; i < x.values.size(); ++i) {
    s.tics += (i == 0 ? "" : ", ") + gp(value_text(x.values[i])) + " " + s.at(x, i);
    s.longest_tic = std::max(s.longest_tic, value_text(x.values[i]).size());
  }
  return s;
}

// A line's legend: the other axes' values, named by the last token of their path unless two
// axes share it.
std::string line_title(const Sweep& sw, const std::vector<std::size_t>& key) {
  std::string title;
  for (std::size_t a = 1; a < sw.axes.size(); ++a) {
    const std::string name = short_name(sw.axes[a].path);
    bool clash = false;
    for (std::size_t b = 0; b < sw.axes.size(); ++b) {
      clash = clash || (b != a && short_name(sw.axes[b].path) == name);
    }
    title += (title.empty() ? "" : ", ") + (clash ? sw.axes[a].path : name) + "=" +
             value_text(sw.axes[a].values[key[a - 1]]);
  }
  return title.empty() ? "host " + sw.host : title;
}

void sweep(const PlotInput& in, const std::string& stem, const std::string& wanted_host,
           const std::vector<std::string>& formats, OutputFiles& files) {
  const Sweep sw = read_sweep(in, wanted_host);
  const Axis& x = sw.axes.front();
  const XScale xs = x_scale(x);
  std::ostringstream d;
  // The sweep file's name only: a machine path would go into committed data files.
  d << "# Sweep of " << sw.scenario << " (" << std::filesystem::path(in.file).filename().string()
    << "), host " << sw.host
    << ". One block (gnuplot index) per line;\n# columns: " << x.path
    << (xs.numeric ? "" : " (index)") << ", its value, CPU utilisation %, service demand us/KB.\n";
  std::vector<std::string> titles;
  std::size_t longest_title = 0;
  for (const auto& [key, points] : sw.lines) {
    titles.push_back(line_title(sw, key));
    longest_title = std::max(longest_title, titles.back().size());
    d << (titles.size() == 1 ? "" : "\n\n") << "# index " << titles.size() - 1 << ": "
      << titles.back() << "\n";
    for (const SweepPoint& pt : points) {
      d << xs.at(x, pt.x) << " " << dat(value_text(x.values[pt.x])) << " " << num(pt.cpu) << " "
        << num(pt.sd) << "\n";
    }
  }
  const std::string data = stem + ".dat";
  files.emplace_back(data, d.str());
  struct Y {
    const char* suffix;
    int column;
    std::string what;
    std::string unit;
  };
  for (const Y& y :
       {Y{"-cpu", 3, "CPU utilisation", "%"}, Y{"-service-demand", 4, "Service demand", "us/KB"}}) {
    std::ostringstream p;
    p << "  set title "
      << gp(y.what + " of host " + sw.host + " against " + short_name(x.path) + ": sweep of " +
            sw.scenario)
      << "\n  set xlabel " << gp(x.path) << "\n  set ylabel "
      << gp((y.column == 3 ? "CPU utilisation" : "service demand") + std::string(" of host ") +
            sw.host + " (" + y.unit + ")")
      << "\n  set key outside right top\n  set grid lc rgb '#d0d0d0'\n  set yrange [0:*]\n"
      << (xs.log ? "  set logscale x 2\n" : "") << "  set xrange [" << xs.lo << ":" << xs.hi
      << "]\n  set xtics (" << xs.tics << ")"
      << (xs.longest_tic > 6 && x.values.size() > 4 ? " rotate by 30 right" : "") << "\n  plot ";
    for (std::size_t i = 0; i < titles.size(); ++i) {
      p << (i == 0 ? "" : ", \\\n       ") << gp(data) << " index " << i << " using 1:" << y.column
        << " with linespoints lw 2 pt " << (i % 7) + 5 << " ps 1.1 lc rgb "
        << gp(kLineColours[i % kLineColours.size()]) << " title " << gp(titles[i]);
    }
    p << "\n";
    const std::string name = stem + y.suffix;
    files.emplace_back(name + ".gp",
                       script(name, y.what + " across a sweep of " + sw.scenario, data, formats,
                              760 + 7 * static_cast<int>(longest_title), 540, p.str()));
  }
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return q + "'";
}

// Runs `gnuplot FILE` in FILE's directory; InputError (naming `shown`) when gnuplot is missing or
// fails, with the last line it printed.
void run_gnuplot(const fs::path& gp_file, const std::string& shown) {
  const std::string cmd = "cd " + shell_quote(gp_file.parent_path().string()) + " && gnuplot " +
                          shell_quote(gp_file.filename().string()) + " 2>&1";
  std::string output;
  int status = -1;
  if (FILE* pipe = ::popen(cmd.c_str(), "r")) {
    std::array<char, 512> buf{};
    while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) {
      output += buf.data();
    }
    status = ::pclose(pipe);
  }
  if (status == 0) {
    return;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    throw InputError("gnuplot", "",
                     "expected the gnuplot program on the PATH (Debian package gnuplot-nox), "
                     "got none");
  }
  std::string last;
  std::istringstream lines(output);
  for (std::string l; std::getline(lines, l);) {
    if (l.find_first_not_of(" ^") != std::string::npos) {
      last = l;
    }
  }
  throw InputError(shown, "", "expected gnuplot to draw it, got: " + last);
}

std::string stem_for(const std::string& file, std::set<std::string>& taken) {
  std::string stem = fs::path(file).stem().string();
  if (stem.empty()) {
    stem = "sweep";
  }
  std::string s = stem;
  for (int n = 2; taken.count(s) != 0; ++n) {
    s = stem + "-" + std::to_string(n);
  }
  taken.insert(s);
  return s;
}

}  // namespace

PlotInput load_plot_input(const std::string& path) {
  return {path, load_json_file(path, path)};
}

OutputFiles plot_files(const std::vector<PlotInput>& inputs, const PlotOptions& o) {
  std::vector<Bar> bars;
  std::map<std::string, std::vector<Check>> checks;
  OutputFiles files;
  std::set<std::string> taken = {"breakdown", "predicted-vs-measured"};
  for (const PlotInput& in : inputs) {
    if (kind_of(in) == Kind::kSweep) {
      if (o.sweeps) {
        sweep(in, stem_for(in.file, taken), o.host, o.formats, files);
      }
      continue;
    }
    if (o.breakdown) {
      bars.push_back(read_bar(in, o.host));
    }
    if (o.predicted) {
      read_checks(in, checks);
    }
  }
  if (!bars.empty()) {
    breakdown(bars, o.formats, files);
  }
  predicted_vs_measured(checks, o.formats, files);
  if (files.empty()) {
    std::string wanted;
    for (const auto& [on, what] : {std::pair{o.breakdown, "a result"},
                                   std::pair{o.predicted, "a result with measured figures"},
                                   std::pair{o.sweeps, "a sweep"}}) {
      wanted += on ? std::string(wanted.empty() ? "" : " or ") + what : "";
    }
    throw InputError(inputs.empty() ? std::string("(no input)") : inputs.front().file, "",
                     "expected " + wanted + " to draw, got nothing drawable");
  }
  return files;
}

void draw(const fs::path& dir, const OutputFiles& files, const std::vector<std::string>& formats) {
  for (const auto& [name, content] : files) {
    if (fs::path(name).extension() != ".gp") {
      continue;
    }
    const fs::path gp_file = dir / name;
    run_gnuplot(gp_file, name);
    for (const std::string& f : formats) {
      const fs::path pic = gp_file.parent_path() / (gp_file.stem().string() + "." + f);
      std::error_code ec;
      if (!fs::exists(pic) || fs::file_size(pic, ec) == 0) {
        throw InputError(
            name, "", "expected gnuplot to draw " + pic.filename().string() + ", got no picture");
      }
    }
  }
}

std::vector<std::string> write_plots(const fs::path& out, const std::vector<PlotInput>& inputs,
                                     const PlotOptions& o) {
  const OutputFiles files = plot_files(inputs, o);
  write_atomically(out, files, [&](const fs::path& dir) { draw(dir, files, o.formats); });
  std::vector<std::string> pictures;
  for (const auto& [name, content] : files) {
    if (fs::path(name).extension() == ".gp") {
      for (const std::string& f : o.formats) {
        pictures.push_back((out / (fs::path(name).stem().string() + "." + f)).string());
      }
    }
  }
  return pictures;
}

int run_plot(const std::vector<std::string>& args) {
  const std::string usage = "skbsim plot RESULTS... [--out DIR] [--format svg,png] [--host HOST]";
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help")(
      "out,o", po::value<std::string>()->default_value("plots"),
      "the directory to write (replaced as a whole)")(
      "format,f", po::value<std::string>()->default_value("svg,png"),
      "picture formats: svg, png or both")("host", po::value<std::string>(),
                                           "the host to draw (default: each result's local host)");
  po::options_description all;
  all.add(visible).add_options()("inputs", po::value<std::vector<std::string>>());
  po::positional_options_description pos;
  pos.add("inputs", -1);
  po::variables_map vm;
  if (!parse_args(args, visible, all, pos, vm, usage, "skbsim plot")) {
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    std::cout
        << "Usage: " << usage
        << "\n\nDraws pictures with gnuplot from what skbsim writes, into DIR: from result JSONs\n"
           "(skbsim run --format json) or baselines (results/), breakdown.svg, the CPU of each\n"
           "scenario's host stacked by kernel symbol group, and predicted-vs-measured.svg for\n"
           "those with a reference; from a sweep.json (skbsim sweep), <name>-cpu.svg and\n"
           "<name>-service-demand.svg, the first axis on x and one line per combination of the\n"
           "others. Next to each picture: X.gp and the .dat it reads (`gnuplot X.gp` draws it\n"
           "again). Nothing is written unless every picture is drawn.\n\n"
        << visible;
    return 0;
  }
  PlotOptions o;
  o.formats.clear();
  std::istringstream fmts(vm["format"].as<std::string>());
  bool formats_ok = true;
  for (std::string f; std::getline(fmts, f, ',');) {
    formats_ok = formats_ok && (f == "svg" || f == "png") &&
                 std::find(o.formats.begin(), o.formats.end(), f) == o.formats.end();
    o.formats.push_back(f);
  }
  if (vm.count("inputs") == 0 || !formats_ok || o.formats.empty()) {
    std::cerr << "skbsim plot: expected RESULTS... and --format svg, png or svg,png\n\nUsage: "
              << usage << "\n";
    return kExitUsage;
  }
  if (vm.count("host") != 0) {
    o.host = vm["host"].as<std::string>();
  }
  try {
    std::vector<PlotInput> inputs;
    for (const std::string& f : vm["inputs"].as<std::vector<std::string>>()) {
      inputs.push_back(load_plot_input(f));
    }
    for (const std::string& p : write_plots(vm["out"].as<std::string>(), inputs, o)) {
      std::cout << "wrote " << p << "\n";
    }
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  }
  return 0;
}

}  // namespace skbsim::sim
