//===- LoomEnums.h - Enums of the loom dialect ------------------*- C++ -*-===//
//
// The dialect's enums (precision, optimizer, schedule, recomputation) without
// the rest of the dialect, for code such as the JSON importer that names them
// before any IR exists.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOMENUMS_H
#define LOOM_DIALECT_LOOMENUMS_H

#include "mlir/Support/LLVM.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>

#include "loom/Dialect/LoomEnums.h.inc"

#endif // LOOM_DIALECT_LOOMENUMS_H
