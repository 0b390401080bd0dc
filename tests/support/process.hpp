#pragma once
// process.hpp — running the real `skbsim` binary from tests: a scratch directory and a batch of
// invocations run in parallel, each with its exit code, stdout and stderr.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace skbsim::testing {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return q + "'";
}

// A scratch directory, removed with the object.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("skbsim_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct Invocation {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `binary <args>` for each element of `cases`, all in `cwd`, in parallel.
inline std::vector<Invocation> run_batch(const std::string& binary, const fs::path& cwd,
                                         const std::vector<std::vector<std::string>>& cases) {
  TempDir tmp;
  std::string script = "cd " + shell_quote(cwd.string()) + " || exit 99\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string base = (tmp.path() / std::to_string(i)).string();
    std::string cmd = shell_quote(binary);
    for (const std::string& a : cases[i]) {
      cmd += " " + shell_quote(a);
    }
    script += "( " + cmd + " >" + shell_quote(base + ".out") + " 2>" + shell_quote(base + ".err") +
              " </dev/null; echo $? >" + shell_quote(base + ".rc") + " ) &\n";
    if (i % 2 == 1) {
      script += "wait\n";  // two at a time: the machine has two cores
    }
  }
  script += "wait\n";
  const fs::path script_path = tmp.path() / "run.sh";
  std::ofstream(script_path) << script;
  (void)std::system(("/bin/sh " + shell_quote(script_path.string())).c_str());
  std::vector<Invocation> runs(cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const fs::path base = tmp.path() / std::to_string(i);
    runs[i].out = slurp(base.string() + ".out");
    runs[i].err = slurp(base.string() + ".err");
    const std::string rc = slurp(base.string() + ".rc");
    runs[i].exit_code = rc.empty() ? -1 : std::stoi(rc);
  }
  return runs;
}

// The *.json fixtures of `dir`, by stem, sorted.
inline std::vector<std::string> json_stems(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") {
      names.push_back(e.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

#if defined(SKBSIM_BINARY) && defined(SKBSIM_SOURCE_DIR)
// One `skbsim <args>` from the source directory (relative fixture paths resolve there).
inline Invocation run_cli(const std::vector<std::string>& args) {
  return run_batch(SKBSIM_BINARY, SKBSIM_SOURCE_DIR, {args}).front();
}
#endif

}  // namespace skbsim::testing
