#pragma once
// output_dir.hpp — writing a command's output completely or not at all (style.md §5): a directory
// is built in `<dir>.partial/` and swapped in only when every file is there; a single file is
// written to `<file>.partial` and renamed over the old one. A failure leaves the old output as it
// was and no `.partial` behind.

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace skbsim::sim {

// (name relative to the directory, may contain '/'; content)
using OutputFiles = std::vector<std::pair<std::string, std::string>>;

// Writes `files` into `dir` completely or not at all: everything goes into `dir.partial/` first;
// then `finish` (when given) runs on that directory, e.g. to draw pictures from the files in it;
// then `dir.partial/` replaces `dir` (the old `dir` is moved aside and deleted). Throws InputError
// when something cannot be written; whatever `finish` throws propagates; either way `dir` is
// untouched and `dir.partial/` removed.
void write_atomically(const std::filesystem::path& dir, const OutputFiles& files,
                      const std::function<void(const std::filesystem::path&)>& finish = {});

// Writes one file via `file.partial` and a rename. Throws InputError on a write error.
void write_file_atomically(const std::filesystem::path& file, const std::string& content);
// write_file_atomically in two steps, for a caller with more to write in between: stage_file
// writes `file.partial` (none left when it throws); commit_staged renames it over `file` (none
// left when it throws); drop_staged removes it.
void stage_file(const std::filesystem::path& file, const std::string& content);
void commit_staged(const std::filesystem::path& file);
void drop_staged(const std::filesystem::path& file) noexcept;

}  // namespace skbsim::sim
