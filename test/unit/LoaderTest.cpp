//===- LoaderTest.cpp - Windows from many shards, shuffled ----------------===//
//
// loom_loader's contract (runtime.h): each epoch takes every window of
// every shard once, the order a function of the seed and the epoch alone;
// a directory's meta.json vocabulary and its shards are checked up front.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace {

/// A temporary directory, removed with what it holds.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/loom-loader-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

/// llm.c's 32-bit shard of tokens first, first + 1, ...: each window's
/// first token says where it starts.
void writeShard(const std::string &path, int32_t first, int32_t count) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240801;
  header[1] = 7;
  header[2] = count;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(header.data()), 1024);
  for (int32_t t = first; t < first + count; ++t)
    out.write(reinterpret_cast<const char *>(&t), 4);
}

constexpr int64_t kVocab = 100000, kSequence = 8;

/// The first token of each window of `windows` from `first`.
std::vector<int32_t> starts(loom_loader *loader, int64_t first,
                            int64_t windows) {
  std::vector<int32_t> tokens(windows * kSequence), targets(tokens.size());
  EXPECT_EQ(
      loom_loader_batch(loader, first, windows, tokens.data(), targets.data()),
      0)
      << loom_last_error();
  std::vector<int32_t> out;
  for (int64_t w = 0; w < windows; ++w) {
    out.push_back(tokens[w * kSequence]);
    // Targets are the next tokens.
    EXPECT_EQ(targets[w * kSequence], tokens[w * kSequence] + 1);
  }
  return out;
}

TEST(Loader, EachEpochTakesEveryWindowOnce) {
  TempDir dir;
  // 41 tokens: 5 windows; 17: 2; 5: none (shorter than a window and its
  // target).
  writeShard(dir.path + "/a_train_000.bin", 0, 41);
  writeShard(dir.path + "/a_train_001.bin", 1000, 17);
  writeShard(dir.path + "/a_train_002.bin", 2000, 5);
  writeShard(dir.path + "/a_val_000.bin", 3000, 20);
  loom_loader *loader =
      loom_loader_open(dir.path.c_str(), "train", kVocab, kSequence, 1, 7);
  ASSERT_NE(loader, nullptr) << loom_last_error();
  EXPECT_EQ(loom_loader_files(loader), 3);
  EXPECT_EQ(loom_loader_tokens(loader), 63);
  ASSERT_EQ(loom_loader_windows(loader), 7);
  std::set<int32_t> expected = {0, 8, 16, 24, 32, 1000, 1008};
  std::vector<int32_t> epoch0 = starts(loader, 0, 7);
  std::vector<int32_t> epoch1 = starts(loader, 7, 7);
  EXPECT_EQ(std::set<int32_t>(epoch0.begin(), epoch0.end()), expected);
  EXPECT_EQ(std::set<int32_t>(epoch1.begin(), epoch1.end()), expected);
  // Shuffled anew each epoch, and the same from the same position.
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(starts(loader, 3, 2),
            std::vector<int32_t>(epoch0.begin() + 3, epoch0.begin() + 5));
  loom_loader_close(loader);

  loom_loader *inOrder =
      loom_loader_open(dir.path.c_str(), "train", kVocab, kSequence, 0, 7);
  ASSERT_NE(inOrder, nullptr);
  EXPECT_EQ(starts(inOrder, 0, 8),
            (std::vector<int32_t>{0, 8, 16, 24, 32, 1000, 1008, 0}));
  loom_loader_close(inOrder);

  loom_loader *validation =
      loom_loader_open(dir.path.c_str(), "val", kVocab, kSequence, 0, 7);
  ASSERT_NE(validation, nullptr);
  EXPECT_EQ(starts(validation, 0, 2), (std::vector<int32_t>{3000, 3008}));
  loom_loader_close(validation);
}

TEST(Loader, SeedsShuffleDifferently) {
  TempDir dir;
  writeShard(dir.path + "/train_0.bin", 0, 801);
  writeShard(dir.path + "/train_1.bin", 5000, 801);
  loom_loader *a =
      loom_loader_open(dir.path.c_str(), "train", kVocab, kSequence, 1, 1);
  loom_loader *b =
      loom_loader_open(dir.path.c_str(), "train", kVocab, kSequence, 1, 2);
  ASSERT_TRUE(a && b);
  EXPECT_NE(starts(a, 0, 20), starts(b, 0, 20));
  loom_loader_close(a);
  loom_loader_close(b);
}

TEST(Loader, Patterns) {
  TempDir dir;
  writeShard(dir.path + "/x_0.bin", 0, 100);
  writeShard(dir.path + "/x_1.bin", 100, 100);
  loom_loader *loader = loom_loader_open((dir.path + "/x_*.bin").c_str(),
                                         "train", kVocab, kSequence, 0, 0);
  ASSERT_NE(loader, nullptr) << loom_last_error();
  EXPECT_EQ(loom_loader_files(loader), 2);
  loom_loader_close(loader);
  EXPECT_EQ(loom_loader_open((dir.path + "/y_*.bin").c_str(), "train", kVocab,
                             kSequence, 0, 0),
            nullptr);
  EXPECT_NE(std::string(loom_last_error()).find("no file matches"),
            std::string::npos);
}

TEST(Loader, BadDirectories) {
  TempDir dir;
  EXPECT_EQ(
      loom_loader_open(dir.path.c_str(), "train", kVocab, kSequence, 1, 0),
      nullptr);
  EXPECT_NE(std::string(loom_last_error()).find("no train shards"),
            std::string::npos);
  // Shards too short for one window.
  writeShard(dir.path + "/train_0.bin", 0, 8);
  EXPECT_EQ(
      loom_loader_open(dir.path.c_str(), "train", kVocab, kSequence, 1, 0),
      nullptr);
  EXPECT_NE(std::string(loom_last_error()).find("none of which holds"),
            std::string::npos);
  // Tokenized with a larger vocabulary than the model's.
  writeShard(dir.path + "/train_0.bin", 0, 100);
  std::ofstream(dir.path + "/meta.json")
      << R"({"vocab_size": 50257, "tokenizer": {"kind": "tiktoken", "name": "gpt2"}})";
  EXPECT_EQ(loom_loader_open(dir.path.c_str(), "train", 256, kSequence, 1, 0),
            nullptr);
  EXPECT_NE(std::string(loom_last_error())
                .find("meta.json: the data was tokenized with a vocabulary of "
                      "50257 tokens (gpt2), more than the model's 256"),
            std::string::npos)
      << loom_last_error();
  // A token past the vocabulary, found when its shard is read.
  std::ofstream(dir.path + "/meta.json") << R"({"vocab_size": 50})";
  loom_loader *loader =
      loom_loader_open(dir.path.c_str(), "train", 64, kSequence, 0, 0);
  ASSERT_NE(loader, nullptr) << loom_last_error();
  std::vector<int32_t> tokens(kSequence), targets(kSequence);
  EXPECT_EQ(loom_loader_batch(loader, 0, 1, tokens.data(), targets.data()), 1);
  EXPECT_NE(std::string(loom_last_error()).find("outside the model's"),
            std::string::npos);
  loom_loader_close(loader);
}

} // namespace

namespace {
/// loom_dataset_skip in constant time lands where taking the windows one
/// by one does, from any cursor.
TEST(Dataset, SkipEqualsTaking) {
  TempDir dir;
  std::string path = dir.path + "/text";
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 103; ++i)
      out.put(static_cast<char>('a' + i % 26));
  }
  loom_dataset *data = loom_dataset_open(path.c_str(), 256);
  ASSERT_NE(data, nullptr) << loom_last_error();
  std::vector<int32_t> tokens(kSequence), targets(kSequence);
  for (int64_t begin : {0, 5})
    for (int64_t start : {int64_t(0), begin + 3, int64_t(99)})
      for (int64_t windows : {0, 1, 5, 11, 12, 13, 100, 1001}) {
        int64_t taken = start, skipped = start;
        for (int64_t w = 0; w < windows; ++w)
          ASSERT_EQ(loom_dataset_batch(data, begin, 90, &taken, 1, kSequence,
                                       tokens.data(), targets.data()),
                    0);
        ASSERT_EQ(
            loom_dataset_skip(data, begin, 90, &skipped, windows, kSequence),
            0);
        // The same next window.
        std::vector<int32_t> a(kSequence), b(kSequence);
        loom_dataset_batch(data, begin, 90, &taken, 1, kSequence, a.data(),
                           targets.data());
        loom_dataset_batch(data, begin, 90, &skipped, 1, kSequence, b.data(),
                           targets.data());
        EXPECT_EQ(taken, skipped) << begin << " " << start << " " << windows;
        EXPECT_EQ(a, b);
      }
  loom_dataset_close(data);
}
} // namespace
