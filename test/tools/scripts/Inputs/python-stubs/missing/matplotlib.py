# Stands for a Python without matplotlib (test/tools/scripts/plot.test).
raise ModuleNotFoundError("No module named 'matplotlib'")
