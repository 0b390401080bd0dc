#include "sim/atomic_write.hpp"

#include <fstream>

#include "sim/input_error.hpp"

namespace skbsim::sim {

namespace fs = std::filesystem;

void write_atomically(const fs::path& dir,
                      const std::vector<std::pair<std::string, std::string>>& files) {
  const fs::path partial = dir.string() + ".partial";
  std::error_code ec;
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) {
    throw InputError(dir.string(), "", "expected a writable output directory, got " + ec.message());
  }
  for (const auto& [name, content] : files) {
    std::ofstream out(partial / name, std::ios::binary);
    out << content;
    if (!out) {
      fs::remove_all(partial, ec);
      throw InputError(dir.string(), "", "expected a writable output directory, got a write error");
    }
  }
  const fs::path old = dir.string() + ".old";
  fs::remove_all(old, ec);
  if (fs::exists(dir)) {
    fs::rename(dir, old);
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
