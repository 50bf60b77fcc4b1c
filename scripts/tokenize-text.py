#!/usr/bin/env python3
"""Prints TEXT as the token ids of the tokenizer a data directory was
prepared with (scripts/prepare-data.py), comma-separated, as loom-run's
--prompt-tokens takes them.

    tokenize-text.py DATA_DIR TEXT

The directory's meta.json names the tokenizer: tiktoken's gpt2, or the
tokenizer.json copied next to it. User errors are reported as
`tokenize-text: error: ...`, exit status 1.
"""

import importlib.util
import json
import os
import sys


def load_prepare_data():
    """prepare-data.py's tokenizers, errors and flag parsing, shared."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prepare-data.py")
    spec = importlib.util.spec_from_file_location("prepare_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tokenizer_of(prepare, directory):
    meta_path = os.path.join(directory, "meta.json")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
    except OSError as e:
        raise prepare.UserError(f"{meta_path}: cannot read: {e.strerror}")
    except ValueError as e:
        raise prepare.UserError(f"{meta_path}: not JSON ({e})")
    kind = meta.get("tokenizer", {}) if isinstance(meta, dict) else {}
    if kind.get("kind") == "tiktoken" and kind.get("name") == "gpt2":
        return prepare.make_tokenizer("gpt2", None)
    if kind.get("kind") == "tokenizers" and isinstance(kind.get("file"), str):
        return prepare.make_tokenizer(os.path.join(directory, kind["file"]), None)
    raise prepare.UserError(f"{meta_path}: field 'tokenizer': neither tiktoken's gpt2 "
                            "nor a tokenizer.json")


def main():
    prepare = load_prepare_data()
    parser = prepare.Parser(prog="tokenize-text.py", description=__doc__.splitlines()[0])
    parser.add_argument("directory", metavar="DATA_DIR")
    parser.add_argument("text", metavar="TEXT")
    try:
        a = parser.parse_args(sys.argv[1:])
        if not a.text:
            raise prepare.UserError("TEXT is empty: there is nothing to tokenize")
        tokens = tokenizer_of(prepare, a.directory).encode([a.text])[0]
    except prepare.UserError as e:
        print(f"tokenize-text: error: {e}", file=sys.stderr)
        sys.exit(1)
    print(",".join(str(t) for t in tokens))


if __name__ == "__main__":
    main()
