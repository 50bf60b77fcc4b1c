//===- FuzzFile.h - A fuzz input as a file --------------------*- C++ -*-===//
//
// The runtime's readers take paths: each input is written to one temporary
// file, reused for every input of the run.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_FUZZ_FUZZFILE_H
#define LOOM_FUZZ_FUZZFILE_H

#include "Manifest.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

namespace loom::fuzz {
/// Writes `data` to the run's temporary file and returns its path.
inline const char *writeInput(const uint8_t *data, size_t size) {
  static std::string path = [] {
    const char *dir = std::getenv("TMPDIR");
    std::string pattern = std::string(dir ? dir : "/tmp") + "/loom-fuzz-XXXXXX";
    int fd = mkstemp(pattern.data());
    if (fd < 0) {
      std::perror("mkstemp");
      std::abort();
    }
    close(fd);
    std::atexit([] { std::remove(path.c_str()); });
    return pattern;
  }();
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file || std::fwrite(data, 1, size, file) != size || std::fclose(file)) {
    std::perror(path.c_str());
    std::abort();
  }
  return path.c_str();
}
/// The model of the manifest file `path`, read once; aborts the run if it
/// cannot be opened (the seed is broken, not the input).
inline loom_model *openModel(const char *path) {
  std::ifstream file(path);
  std::string text((std::istreambuf_iterator<char>(file)),
                   std::istreambuf_iterator<char>());
  loom_model *model = loom::openManifest(text.c_str(), /*layout=*/true);
  if (!model) {
    std::fprintf(stderr, "%s: %s\n", path, loom_last_error());
    std::abort();
  }
  return model;
}
} // namespace loom::fuzz

#endif // LOOM_FUZZ_FUZZFILE_H
