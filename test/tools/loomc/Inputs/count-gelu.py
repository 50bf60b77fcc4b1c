"""Counts, in the IR of a bufferized step, the tanh operations left in loops
and the calls of loom_rt_gemm_gelu by mode (its second argument, a
constant that the printer names after its value)."""
import re
import sys

text = open(sys.argv[1]).read()
modes = re.findall(r"call @loom_rt_gemm_gelu\(%\w+, %c(\d)_i32", text)
print(f"tanh {text.count('math.tanh')}, forward {modes.count('0')}, "
      f"backward {modes.count('1')}")
