#include "sim/output_dir.hpp"

#include <fstream>

#include "sim/input_error.hpp"

namespace skbsim::sim {

namespace fs = std::filesystem;

void write_atomically(const fs::path& dir_as_named, const OutputFiles& files,
                      const std::function<void(const fs::path&)>& finish) {
  // "res/" is "res": the names built beside it are "res.partial" and "res.old"
  const fs::path dir = dir_as_named.has_filename() ? dir_as_named : dir_as_named.parent_path();
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
    out.close();  // the last flush's error counts too
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
  const fs::file_status st = fs::symlink_status(dir, ec);  // a link in the way is replaced
  if (ec && st.type() != fs::file_type::not_found) {
    fail(ec.message());
  }
  const bool had_old = fs::exists(st);
  if (had_old) {
    fs::rename(dir, old, ec);
    if (ec) {
      fail(ec.message());
    }
  }
  fs::rename(partial, dir, ec);
  if (ec) {
    const std::string why = ec.message();
    if (had_old) {
      fs::rename(old, dir, ec);  // the old output back as it was
    }
    fail(why);
  }
  fs::remove_all(old, ec);
}

namespace {

fs::path partial_of(const fs::path& file) {
  return file.string() + ".partial";
}

}  // namespace

void stage_file(const fs::path& file, const std::string& content) {
  if (file.empty() || !file.has_filename()) {
    throw InputError(file.string(), "", "expected a file name, got none");
  }
  const fs::path tmp = partial_of(file);
  std::ofstream out(tmp, std::ios::binary);
  out << content;
  out.close();  // the last flush's error counts too
  if (!out) {
    drop_staged(file);
    throw InputError(file.string(), "", "expected a writable file, got a write error");
  }
}

void commit_staged(const fs::path& file) {
  std::error_code ec;
  fs::rename(partial_of(file), file, ec);
  if (ec) {
    drop_staged(file);
    throw InputError(file.string(), "", "expected a writable file, got " + ec.message());
  }
}

void drop_staged(const fs::path& file) noexcept {
  std::error_code ignored;
  fs::remove(partial_of(file), ignored);
}

void write_file_atomically(const fs::path& file, const std::string& content) {
  stage_file(file, content);
  commit_staged(file);
}

}  // namespace skbsim::sim
