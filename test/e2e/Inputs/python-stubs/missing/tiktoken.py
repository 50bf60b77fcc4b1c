# Stands for a Python without the tiktoken package (test/e2e/prepare-data.test).
raise ModuleNotFoundError("No module named 'tiktoken'")
