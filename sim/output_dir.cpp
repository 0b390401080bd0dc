#include "sim/output_dir.hpp"

#include <fstream>

#include "sim/input_error.hpp"

namespace skbsim::sim {

namespace fs = std::filesystem;

void write_atomically(const fs::path& dir, const OutputFiles& files,
                      const std::function<void(const fs::path&)>& finish) {
  const fs::path partial = dir.string() + ".partial";
  std::error_code ec;
  fs::remove_all(partial, ec);
  const auto fail = [&](const std::string& what) {
    fs::remove_all(partial, ec);
    throw InputError(dir.string(), "", "expected a writable output directory, got " + what);
  };
  fs::create_directories(partial, ec);
  if (ec) {
    fail(ec.message());
  }
  for (const auto& [name, content] : files) {
    const fs::path target = partial / name;
    fs::create_directories(target.parent_path(), ec);
    std::ofstream out(target, std::ios::binary);
    out << content;
    if (ec || !out) {
      fail("a write error");
    }
  }
  if (finish) {
    try {
      finish(partial);
    } catch (...) {
      fs::remove_all(partial, ec);
      throw;
    }
  }
  const fs::path old = dir.string() + ".old";
  fs::remove_all(old, ec);
  if (fs::exists(dir)) {
    fs::rename(dir, old, ec);
    if (ec) {
      fail(ec.message());
    }
  }
  fs::rename(partial, dir);
  fs::remove_all(old, ec);
}

void write_file_atomically(const fs::path& file, const std::string& content) {
  const fs::path tmp = file.string() + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << content;
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw InputError(file.string(), "", "expected a writable file, got a write error");
    }
  }
  fs::rename(tmp, file);
}

}  // namespace skbsim::sim
