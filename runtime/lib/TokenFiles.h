//===- TokenFiles.h - Reading token shards and text -------------*- C++ -*-===//
//
// The files training data comes in: llm.c's token shards (16-bit tokens,
// or 32-bit ones for larger vocabularies) and any other file read as bytes.
// loom_dataset holds one whole; loom_loader reads many, one at a time.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_LIB_TOKENFILES_H
#define LOOM_RUNTIME_LIB_TOKENFILES_H

#include <cstdint>
#include <vector>

namespace loom {

/// Reads every token of `path`, each below `vocab`; false with the error
/// set (naming the file, and the position of a token outside the
/// vocabulary) otherwise. `shard` tells an llm.c shard from text; a file
/// that is no shard but has a shard's header one word off is refused
/// unless read `asBytes`, as bytes whatever it holds.
bool readTokenFile(const char *path, int64_t vocab,
                   std::vector<int32_t> &tokens, bool &shard,
                   bool asBytes = false);

/// The tokens `path` holds, from a shard's header or a text file's size,
/// without reading them; false with the error set for a file that is
/// neither, or a shard whose size contradicts its header.
bool countTokenFile(const char *path, int64_t &count);

} // namespace loom

#endif // LOOM_RUNTIME_LIB_TOKENFILES_H
