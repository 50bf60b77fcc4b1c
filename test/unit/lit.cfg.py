# Loom's GoogleTest unit tests, run by lit next to the FileCheck tests.

import os

import lit.formats

config.name = "Loom-Unit"
config.suffixes = []
config.test_source_root = os.path.join(config.loom_obj_root, "test", "unit")
config.test_exec_root = config.test_source_root
config.test_format = lit.formats.GoogleTest(".", "Tests")
