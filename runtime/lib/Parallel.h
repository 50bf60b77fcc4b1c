//===- Parallel.h - The runtime's threads, inside the runtime ---*- C++ -*-===//

#ifndef LOOM_RUNTIME_PARALLEL_H
#define LOOM_RUNTIME_PARALLEL_H

namespace loom {
/// Whether the calling thread is running part of a parallel loop (whose
/// other parts occupy the other threads).
bool isInParallelLoop();
} // namespace loom

#endif // LOOM_RUNTIME_PARALLEL_H
