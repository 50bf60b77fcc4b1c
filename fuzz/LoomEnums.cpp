//===- LoomEnums.cpp - The dialect's enums for the fuzzers ----------------===//
//
// The enums' string conversions, which the dialect library defines among its
// attributes; the model reader's fuzzers link them alone.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/LoomEnums.h"

#include "llvm/ADT/StringSwitch.h"

#include "loom/Dialect/LoomEnums.cpp.inc"
