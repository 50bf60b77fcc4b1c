# Lit configuration of Loom's regression tests.

import os
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "Loom"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit", "unit", "CMakeLists.txt", "loom-check.cpp", "loom-comm-check.cpp", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")

config.substitutions.append(("%examples", os.path.join(config.loom_src_root, "examples")))
config.substitutions.append(("%loom_src", config.loom_src_root))
config.substitutions.append(("%loom_obj", config.loom_obj_root))
# The interpreter the build was configured with (LOOM_PYTHON, docs/python.md),
# which setup installed the tests' packages into: %python, the scripts the
# tests run (through LOOM_PYTHON in their environment) and the features
# below, never lit's own interpreter or the first python3 on PATH.
loom_python = getattr(config, "loom_python", "") or sys.executable
config.environment["LOOM_PYTHON"] = loom_python
# "%expect-exit 1 loomc bad.json": the command must exit with exactly 1.
config.substitutions.append(
    ("%expect-exit", "%s %s" % (loom_python, os.path.join(config.test_source_root, "lit", "expect-exit.py"))))

# Several ranks on a machine with fewer cores, as root in containers.
config.substitutions.append(("%mpirun", "mpirun --allow-run-as-root --oversubscribe"))

# CUDA: "cuda-runtime" where the runtime has its CUDA backend, "ptxas" where
# the toolkit's assembler is (kernels are checked against it), "cuda-device"
# where a GPU is visible. Tests that need a GPU are unsupported elsewhere.
import shutil
import subprocess
if getattr(config, "loom_have_cuda", False):
    config.available_features.add("cuda-runtime")
ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
try:
    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    if smi.returncode == 0 and "GPU" in smi.stdout:
        config.available_features.add("cuda-device")
except (OSError, subprocess.SubprocessError):
    pass
config.substitutions.append(("%lit_helpers", os.path.join(config.test_source_root, "lit")))

# "jax": JAX in LOOM_PYTHON, for the independent GPT-2 trainer the numerics
# are checked against (scripts/jax-gpt2.py; scripts/setup.sh installs it).
if subprocess.run([loom_python, "-c", "import jax"],
                  capture_output=True).returncode == 0:
    config.available_features.add("jax")
# LOOM_GPT2_BPE: GPT-2's BPE ranks setup fetched (scripts/prepare-data.py),
# and "gpt2-bpe" where they are there.
config.environment["LOOM_GPT2_BPE"] = os.path.join(config.loom_obj_root, "share", "gpt2.tiktoken")
if os.path.isfile(config.environment["LOOM_GPT2_BPE"]):
    config.available_features.add("gpt2-bpe")
# "tensorboard": TensorBoard's event reader, which reads loom-run's event
# files back (scripts/setup.sh installs it).
if subprocess.run([loom_python, "-c", "import tensorboard"],
                  capture_output=True).returncode == 0:
    config.available_features.add("tensorboard")

# "%haswell-blas loom-run ...": OpenBLAS's Haswell (AVX2) kernels, whatever
# the machine's newest. lit passes no OPENBLAS_CORETYPE or LOOM_CPU_GEMM
# through, and the runtime otherwise picks the library and kernels of the
# CPU it finds (oneDNN's where it has AVX-512), whose sums round
# differently: a test that holds a diverging quantity to a bound (a single
# step's loss of two precisions) must not depend on the machine. Without
# AVX2, the machine's own. bf16 products widen for SGEMM too, not oneDNN's
# on AMX or AVX512-BF16.
def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()
_flags = _cpu_flags()
config.substitutions.append(
    ("%haswell-blas", "env LOOM_CPU_BF16_GEMM=widen LOOM_CPU_GEMM=openblas" +
     (" OPENBLAS_CORETYPE=Haswell" if "avx2" in _flags else "")))
# LOOM_TEST_OPENBLAS_CORETYPE=<set>: the suite with another of OpenBLAS's
# kernel sets (docs/loom-run.md, "GEMMs on the CPU").
if os.environ.get("LOOM_TEST_OPENBLAS_CORETYPE"):
    config.environment["OPENBLAS_CORETYPE"] = os.environ["LOOM_TEST_OPENBLAS_CORETYPE"]
# LOOM_TEST_CPU_GEMM=openblas|onednn: the suite with the other library of
# f32 GEMMs. "onednn": the runtime was built with oneDNN.
if os.environ.get("LOOM_TEST_CPU_GEMM"):
    config.environment["LOOM_CPU_GEMM"] = os.environ["LOOM_TEST_CPU_GEMM"]
if getattr(config, "loom_have_dnnl", False):
    config.available_features.add("onednn")
# "cpu-avx", "cpu-avx512f": the machine's vector units, for the tests of
# which kernels and which code a CPU gets.
for _flag in ("avx", "avx512f"):
    if _flag in _flags:
        config.available_features.add("cpu-" + _flag)

llvm_config.use_default_substitutions()
config.substitutions = [s for s in config.substitutions if s[0] != "%python"]
config.substitutions.append(("%python", '"%s"' % loom_python))
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tools = [
    ToolSubst("loom-opt", unresolved="fatal"),
    ToolSubst("loomc", unresolved="fatal"),
    ToolSubst("loom-run", unresolved="fatal"),
    ToolSubst("loom-check", unresolved="fatal"),
    ToolSubst("loom-comm-check", unresolved="fatal"),
]
llvm_config.add_tool_substitutions(tools, [config.loom_tools_dir, config.llvm_tools_dir])
