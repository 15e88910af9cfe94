// File helpers: whole-file reads and atomic writes (temp file in the same directory, fsync,
// rename), so a failed or interrupted write never leaves a partial output file.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dskc {
std::string read_file_bytes(const std::string& path);  // Error(Io) naming the path
void write_file_atomic(const std::string& path, const std::string& bytes);  // Error(Io)
// Writes several files so that either all appear or none does: every temp file is written
// first, then all are renamed into place.
void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);
}  // namespace dskc
