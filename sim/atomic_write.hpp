#pragma once
// atomic_write.hpp — outputs written completely or not at all (style.md §5): a command that fails
// half-way leaves the previous output, or nothing, never a mix.
//
//   DIR.partial/  <- every file written here first
//   DIR -> DIR.old, DIR.partial -> DIR, DIR.old removed
//
// The downside: the old output and the new one are both on disk for a moment, and a crash between
// the two renames leaves DIR.old behind (the next write removes it).

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace skbsim::sim {

// Writes `files` (name -> content) into `dir`: everything goes into `dir.partial/` first, which
// then replaces `dir`. Throws InputError (naming `dir`) when a file cannot be written; `dir` is
// then untouched and `dir.partial/` removed.
void write_atomically(const std::filesystem::path& dir,
                      const std::vector<std::pair<std::string, std::string>>& files);

// Writes one file through `file.partial`, renamed over `file` once complete.
void write_file_atomically(const std::filesystem::path& file, const std::string& content);

}  // namespace skbsim::sim
