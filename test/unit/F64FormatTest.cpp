//===- F64FormatTest.cpp - Hyperparameters print without loss -------------===//

#include "loom/Dialect/LoomDialect.h"

#include "gtest/gtest.h"

#include <cstdlib>

using namespace mlir::loom;

TEST(FormatF64, ReadsBackExactly) {
  for (double value : {3e-4, 0.1, 1e-8, 0.95, 50.0, 1.0 / 3.0, 1e20, 6e-5,
                       123456789.125, 2.0, 0.0, -1.5}) {
    std::string text = formatF64(value);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
    // MLIR reads "1e-05" as an integer: a '.' must come first.
    EXPECT_NE(text.find('.'), std::string::npos) << text;
  }
}

TEST(FormatF64, IsShortForHandWrittenValues) {
  EXPECT_EQ(formatF64(3e-4), "0.0003");
  EXPECT_EQ(formatF64(1e-8), "1.0e-08");
  EXPECT_EQ(formatF64(50.0), "50.0");
  EXPECT_EQ(formatF64(0.95), "0.95");
}
