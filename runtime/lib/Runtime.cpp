//===- Runtime.cpp - Opening and closing artifacts -----------------------===//
//
// loom_model_open: an artifact's file checked before the loader maps it,
// its code loaded, its manifest read, the pipeline rank's job joined and
// its tensors laid out and bound; and what a model says of itself.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime.h"
#include "CpuFeatures.h"
#include "CpuGemm.h"
#include "Manifest.h"
#include "Model.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <sys/resource.h>
#include <vector>

using namespace loom;

/// The loader maps a shared object's segments without checking that the file
/// holds them, and a truncated file then faults on first touch. Check the
/// ELF header and every segment against the file's size before dlopen.
static bool checkObjectFile(const char *path) {
  if (!checkRegularFile(path))
    return false;
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return setError("%s: cannot open: %s", path, std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                          std::istreambuf_iterator<char>());
  if (bytes.size() < 4 || std::memcmp(bytes.data(),
                                      "\x7f"
                                      "ELF",
                                      4) != 0)
    return setError("%s: not a Loom artifact (wrong magic: expected a shared "
                    "object made by loomc)",
                    path);
  auto truncated = [&] {
    return setError("%s: cannot load the artifact (truncated or corrupt?): "
                    "its ELF headers describe more than the file's %zu bytes",
                    path, bytes.size());
  };
  if (bytes.size() < 64 || bytes[4] != 2 /*ELFCLASS64*/)
    return truncated();
  auto read = [&](size_t offset, size_t size) -> uint64_t {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + offset, size);
    return v;
  };
  uint64_t phoff = read(32, 8), shoff = read(40, 8);
  uint64_t phentsize = read(54, 2), phnum = read(56, 2);
  uint64_t shentsize = read(58, 2), shnum = read(60, 2);
  if (phoff + phnum * phentsize > bytes.size() ||
      shoff + shnum * shentsize > bytes.size())
    return truncated();
  for (uint64_t i = 0; i < phnum; ++i) {
    size_t h = phoff + i * phentsize;
    if (h + 56 > bytes.size() ||
        read(h + 8, 8) + read(h + 32, 8) > bytes.size()) // p_offset + p_filesz
      return truncated();
  }
  return checkArtifactChecksum(path, bytes);
}

/// Checks that this CPU has every feature the artifact's code may use: an
/// instruction it lacks would stop the program with SIGILL midway.
static bool checkTargetCpu(const char *path, void *handle) {
  auto *target = static_cast<const char *>(dlsym(handle, LOOM_CPU_SYMBOL));
  if (!target)
    return setError("%s: the artifact does not say which CPU its code is for "
                    "(compiled by an older loomc?): compile it again",
                    path);
  std::string_view required = target;
  std::string_view cpu = required.substr(0, required.find(' '));
  required.remove_prefix(cpu.size());
  std::vector<std::string> missing =
      missingCpuFeatures(required, hostCpuFeatures());
  if (missing.empty())
    return true;
  std::string list;
  for (const std::string &name : missing)
    list += (list.empty() ? "" : ", ") + name;
  return setError("%s: compiled for CPU '%.*s' and uses %s, which this CPU "
                  "lacks; "
                  "compile it on this machine, or for an older CPU with "
                  "loomc --target-cpu (such as x86-64-v3)",
                  path, static_cast<int>(cpu.size()), cpu.data(), list.c_str());
}

extern "C" {

loom_model *loom_model_open(const char *path) {
  auto model = std::make_unique<loom_model>();
  model->path = path;
  if (!sgemmLibraryError().empty()) {
    setError("%s", sgemmLibraryError().c_str());
    return nullptr;
  }
  if (!checkObjectFile(path))
    return nullptr;
  // A path without a slash would make dlopen search the library path.
  std::string openPath =
      std::strchr(path, '/') ? path : std::string("./") + path;
  model->handle = dlopen(openPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!model->handle) {
    setError("%s: cannot load the artifact (truncated or corrupt?): %s", path,
             dlerror());
    return nullptr;
  }
  if (!checkTargetCpu(path, model->handle))
    return nullptr;
  auto *manifest =
      static_cast<const char *>(dlsym(model->handle, LOOM_MANIFEST_SYMBOL));
  if (!manifest) {
    setError("%s: not a Loom artifact (no manifest)", path);
    return nullptr;
  }
  if (!model->parseManifest(manifest) || !model->joinPipeline() ||
      !model->layoutParams() || !model->bindEntries())
    return nullptr;
  return model.release();
}

void loom_model_close(loom_model *model) {
  delete model;
  loom_release_cached_memory();
}

double loom_peak_memory_mib(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0; // kilobytes on Linux
}

const loom_model_info *loom_model_get_info(const loom_model *model) {
  return &model->info;
}

int64_t loom_model_get_step(const loom_model *model) {
  return static_cast<int64_t>(model->step);
}

} // extern "C"
