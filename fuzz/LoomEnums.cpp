//===- LoomEnums.cpp - The dialect's enums for the fuzzers ----------------===//
//
// The enums' string conversions, which the dialect library defines among its
// attributes; the model reader's fuzzers link them alone.
//
//===----------------------------------------------------------------------===//

#include "Loom/LoomEnums.h"

#include "llvm/ADT/StringSwitch.h"

#include "Loom/LoomEnums.cpp.inc"
