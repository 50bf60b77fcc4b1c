# Stands for a Python without the tokenizers package (test/e2e/prepare-data.test).
raise ModuleNotFoundError("No module named 'tokenizers'")
