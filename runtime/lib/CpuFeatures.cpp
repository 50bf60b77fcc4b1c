//===- CpuFeatures.cpp - The CPU's vector units and OpenBLAS's kernels ----===//
//
// OpenBLAS picks its kernels once, when it loads, from the CPU's model
// number; a processor newer than its tables gets generic SSE3 kernels
// (Prescott), several times slower than the vector units allow, without a
// word. It reads OPENBLAS_CORETYPE at that moment only, so choosing for it
// means executing the program again with the variable set. The choice goes
// by the vector units CPUID reports, not by model numbers, and is made only
// where OpenBLAS's own is narrower: a user's OPENBLAS_CORETYPE always wins.
//
//===----------------------------------------------------------------------===//

#include "CpuFeatures.h"
#include "CpuGemm.h"
#include "Device.h"
#include "DnnlGemm.h"

#include "loom/abi.h"
#include "loom/runtime.h"

#include <algorithm>
#include <cblas.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

using namespace loom;

namespace {
/// Set for the program executed again: what OpenBLAS had picked.
constexpr const char *kReplacedVariable = "LOOM_OPENBLAS_REPLACED";

/// How wide the vector units a kernel set or a CPU uses: 3 for AVX-512, 2
/// for AVX2 with FMA, 1 for AVX, 0 for narrower.
int widthOf(std::string_view kernels) {
  static const std::pair<const char *, int> widths[] = {
      {"SkylakeX", 3},    {"Cooperlake", 3}, {"SapphireRapids", 3},
      {"Haswell", 2},     {"Zen", 2},        {"Excavator", 2},
      {"Sandybridge", 1}, {"Bulldozer", 1},  {"Piledriver", 1},
      {"Steamroller", 1}};
  for (const auto &[name, width] : widths)
    if (kernels.size() == std::strlen(name) &&
        !strncasecmp(kernels.data(), name, kernels.size()))
      return width;
  return 0;
}

const char *widthName(int width) {
  static const char *names[] = {"SSE", "AVX", "AVX2", "AVX-512"};
  return names[width];
}

#if defined(__x86_64__) || defined(__i386__)
CpuFeatures detect() {
  CpuFeatures cpu;
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d))
    return cpu;
  cpu.amd = (b == 0x68747541 && c == 0x444d4163 && d == 0x69746e65) || // AMD
            (b == 0x6f677948 && c == 0x656e6975 && d == 0x6e65476e);   // Hygon
  // The registers a feature uses are usable only where the operating system
  // saves them on a context switch, which it says in XCR0.
  unsigned long long xcr0 = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 27))) { // OSXSAVE
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  auto reported = [&](unsigned leaf, unsigned subleaf, int reg, int bit) {
    unsigned r[4];
    if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3]))
      return false;
    return (r[reg] >> bit & 1u) != 0;
  };
#define LOOM_DETECT_FEATURE(name, leaf, subleaf, reg, bit, xcr0Bits)           \
  if (reported(leaf, subleaf, reg, bit) && (xcr0 & (xcr0Bits)) == (xcr0Bits))  \
    cpu.names.push_back(name);
  LOOM_X86_FEATURES(LOOM_DETECT_FEATURE)
#undef LOOM_DETECT_FEATURE
  return cpu;
}
#else
CpuFeatures detect() { return {}; }
#endif

/// Why OpenBLAS runs the kernels it runs, once the program has been executed
/// again or not.
struct Choice {
  std::string replaced; // what OpenBLAS picked before Loom chose
  std::string execError;
};

Choice &choice() {
  static Choice value;
  return value;
}
} // namespace

int loom::vectorWidth(const CpuFeatures &cpu) {
  if (cpu.has("avx512f") && cpu.has("avx512bw") && cpu.has("avx512dq") &&
      cpu.has("avx512vl"))
    return kAvx512Width;
  if (cpu.has("avx2") && cpu.has("fma"))
    return 2;
  return cpu.has("avx") ? 1 : 0;
}

bool CpuFeatures::has(std::string_view name) const {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const CpuFeatures &loom::hostCpuFeatures() {
  static const CpuFeatures cpu = detect();
  return cpu;
}

std::vector<std::string> loom::missingCpuFeatures(std::string_view required,
                                                  const CpuFeatures &cpu) {
  std::vector<std::string> missing;
  while (!required.empty()) {
    size_t end = std::min(required.find(' '), required.size());
    std::string_view name = required.substr(0, end);
    if (!name.empty() && !cpu.has(name))
      missing.emplace_back(name);
    required.remove_prefix(std::min(end + 1, required.size()));
  }
  return missing;
}

std::vector<std::string> loom::openBlasKernelSets(const CpuFeatures &cpu) {
  int width = vectorWidth(cpu);
  std::vector<std::string> sets;
  if (width >= kAvx512Width)
    sets.push_back("SkylakeX");
  if (width >= 2) {
    sets.push_back(cpu.amd ? "Zen" : "Haswell");
    sets.push_back(cpu.amd ? "Haswell" : "Zen");
  }
  if (width >= 1)
    sets.push_back("Sandybridge");
  sets.push_back("Prescott");
  return sets;
}

std::string loom::widerOpenBlasKernels(const CpuFeatures &cpu,
                                       std::string_view loaded) {
  if (widthOf(loaded) >= vectorWidth(cpu))
    return "";
  return openBlasKernelSets(cpu).front();
}

namespace {
/// OpenBLAS, its kernels and who chose them, for loom_blas_kernels.
std::string openBlasLine() {
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH ...": the library and its version.
  std::string config = openblas_get_config();
  size_t end = config.find(' ', config.find(' ') + 1);
  std::string kernels = openblas_get_corename();
  std::string line = config.substr(0, end) + ", " + kernels + " kernels";
  const CpuFeatures &cpu = hostCpuFeatures();
  const char *cpuWidth = widthName(vectorWidth(cpu));
  const Choice &why = choice();
  const char *requested = std::getenv("OPENBLAS_CORETYPE");
  if (!why.replaced.empty())
    line += std::string(" (chosen for this CPU's ") + cpuWidth +
            "; OpenBLAS picked " + why.replaced + ")";
  else if (requested && strcasecmp(requested, kernels.c_str()))
    line += std::string(" (OPENBLAS_CORETYPE=") + requested + " was not taken)";
  else if (requested)
    line += " (OPENBLAS_CORETYPE)";
  else
    line += " (OpenBLAS's choice)";
  if (widthOf(kernels) < vectorWidth(cpu))
    line += "; this CPU could run " + openBlasKernelSets(cpu).front() +
            " kernels (" + cpuWidth + ")" +
            (why.execError.empty()
                 ? ""
                 : " (running again failed: " + why.execError + ")");
  return line;
}

/// oneDNN, its kernels' vector units and who chose it.
std::string oneDnnSgemmLine() {
  const char *requested = std::getenv("LOOM_CPU_GEMM");
  if (requested && *requested)
    return dnnlSgemmKernels() + " (LOOM_CPU_GEMM)";
  return dnnlSgemmKernels() + " (chosen for this CPU's " +
         widthName(vectorWidth(hostCpuFeatures())) + ")";
}

/// The running program's file. Executing it by that name, not as
/// /proc/self/exe, keeps the process's name (the kernel takes it from the
/// path executed): schedulers, pkill and job tools find ranks by it.
std::string executablePath() {
  char path[4096];
  ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0 || static_cast<size_t>(length) >= sizeof(path) - 1)
    return "/proc/self/exe";
  std::string resolved(path, length);
  // Replaced or removed since it started: only the open file is left.
  if (access(resolved.c_str(), X_OK) != 0)
    return "/proc/self/exe";
  return resolved;
}
} // namespace

extern "C" {

void loom_select_blas_kernels(char **argv) {
  if (const char *replaced = std::getenv(kReplacedVariable)) {
    choice().replaced = replaced;
    unsetenv(kReplacedVariable);
    return;
  }
  // Under oneDNN too: the products too small for it (attention's blocks
  // among them) run in OpenBLAS.
  if (std::getenv("OPENBLAS_CORETYPE"))
    return;
  std::string loaded = openblas_get_corename();
  std::string wider = widerOpenBlasKernels(hostCpuFeatures(), loaded);
  if (wider.empty())
    return;
  setenv("OPENBLAS_CORETYPE", wider.c_str(), 1);
  setenv(kReplacedVariable, loaded.c_str(), 1);
  execv(executablePath().c_str(), argv);
  // Still here: OpenBLAS keeps its pick, and says so in loom_blas_kernels.
  choice().execError = std::strerror(errno);
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kReplacedVariable);
}

const char *loom_blas_kernels(void) {
  static std::string line;
  if (cudaActive())
    return "";
  line = sgemmLibrary() == SgemmLibrary::OneDnn
             ? oneDnnSgemmLine() + "; small GEMMs: " + openBlasLine()
             : openBlasLine();
  std::string bf16 = dnnlKernels();
  if (!bf16.empty())
    line += "; bf16 GEMMs: " + bf16;
  return line.c_str();
}

const char *loom_blas_kernel_sets(void) {
  static std::string line;
  line.clear();
  for (const std::string &name : openBlasKernelSets(hostCpuFeatures()))
    line += (line.empty() ? "" : " ") + name;
  return line.c_str();
}

} // extern "C"
