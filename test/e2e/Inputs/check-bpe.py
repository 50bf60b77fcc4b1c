"""Checks loom-run's BPE encoder (tools/loom-run/Bpe.cpp, through the
bpe-encode driver) against the tokenizer a data directory was prepared
with: tiktoken's gpt2, or the directory's tokenizer.json through the
tokenizers package, as scripts/prepare-data.py encodes documents.

  check-bpe.py DIR BPE_ENCODE [FILE...] [--random N] [--seed S]

Encodes texts chosen for the corners of GPT-2's pattern (contractions,
runs of white space, digits, punctuation, scripts, emoji, combining marks,
Unicode's newer letters), N random strings of such characters (default
3000), and each FILE's text, with DIR/bpe.txt and with the tokenizer, and
checks that byte sequences that are not UTF-8 are refused at the offset
Python's decoder gives. Prints a summary line, or the differences (up to
ten) and exits 1.
"""
import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys

FIXED = [
    "", "Hello world", "Hello, world! How's it going?",
    "I'm sure they'll say we've done what you'd've", "IT'S HE'LL WE'RE",
    "'s", "'S", "x's", " 's", "''s", "'re're", "'", "''", "don't", "'ll've'd",
    "'\u0301s", "a  b", "a   b", "   ", " ", "  leading", "trailing  ", "trailing \t",
    "tab\there", "\t\tx", "line\nbreak", "\n\n\nx", "a\r\nb\r\n\r\nc", "\r\n", " \n x",
    "x \n", "end\n", "a \u00a0b", "  \u3000x", "abc123def", "123456789", " 42",
    "3.14159", "1,000,000", "v2.0-rc1", "x\u00b2\u00b3", "\u00bd \u00be", "x\u00b2!",
    " \u00b2?", "\u216b.", "\u0663!", "\u00e9\u0301!",
    "\u0663\u0664\u0665 Arabic-Indic", "\u216b roman", "!!!???...", "--==>>", " ---",
    "(a) [b] {c}", "email@example.com", "https://example.com/path?q=1&r=2",
    "#include <stdio.h>", "<|endoftext|>", "foo<|endoftext|>bar",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9", "e\u0301t\u00e9", " \u0301\u0301x",
    "\u03a9\u03bc\u03ad\u03b3\u03b1 \u03b1\u03b2\u03b3", "\u03a3 \u03c2",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\u4e2d\u6587 \u6c49\u5b57",
    "\ud55c\uad6d\uc5b4",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd", "\u0939\u093f\u0928\u094d\u0926\u0940", "\u0e44\u0e17\u0e22",
    "\U0001f600", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family",
    "\U0001f3f3\ufe0f\u200d\U0001f308", "a\U0001f600b", " \U0001f600\U0001f600",
    "a\u00a0b", "\u3000\u5168\u89d2", "a\u2028b\u2029c", "x\u0085y", "\u200b zero width",
    "\ufeffbom", "\u1680ogham", "a\u202fb\u205fc", "\u000b\u000c", "\u001c\u001d\u001e\u001f x",
    "\u180e mongolian", "\u1c89\u1c8a", "\U00013460\U00013461", "\U00010d40 \U00010d41",
    # Letters new in Unicode 15 and 16: Cyrillic, CJK extension H, Egyptian
    # hieroglyphs extension A, Garay.
    "\U00031350", "\u1c89's", "(\U00031350!", "\U00013460'd.", "\U00010d40 \u1c8a'll",
    "\u0378", "\ue000", "\uffff", "\U0010ffff", "\x00nul", "\x7f",
    "\u01c5ungla", "\u02b0\u02b2", "\u01c2", "a" * 3000, " " * 1000 + "x", "\n" * 500,
    "1" * 700, "!" * 900, "\u4e00" * 800,
]
# Characters random strings are made of: each class of the pattern, the
# characters its alternatives turn on, and code points of every UTF-8 length.
POOL = (list(" \t\n\r'srtvemld") + list("aZ09.,!?-_()\"") + ["\u00a0", "\u3000", "\u2028",
        "\u0085", "\u000b", "\u001c", "\u00e9", "\u0301", "\u0663", "\u00b2", "\u216b",
        "\u03a9", "\u0416", "\u65e5", "\u30c6", "\ud55c", "\u0645", "\u0939", "\u093f",
        "\U0001f600", "\u200d", "\ufe0f", "\U0001f3f3", "\u1c89", "\U00013460", "\ue000",
        "\u0378", "\ufeff", "\U0010ffff", "\u02b0", "\u01c5", "\x00"])
NOT_UTF8 = [b"caf\xe9", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80",
            b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"ab\xe2\x82", b"\x80", b"\xff",
            b"ok \xf0\x9f\x98", b"\xe2\x28\xa1", b"x\xc3"]


def load_prepare_data():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, os.pardir, os.pardir, os.pardir, "scripts", "prepare-data.py")
    spec = importlib.util.spec_from_file_location("prepare_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference(directory):
    """The directory's tokenizer, as prepare-data.py encodes with it."""
    prepare = load_prepare_data()
    kind = json.load(open(os.path.join(directory, "meta.json")))["tokenizer"]
    try:
        if kind.get("kind") == "tiktoken":
            return prepare.make_tokenizer("gpt2", None), "tiktoken's gpt2"
        path = os.path.join(directory, kind["file"])
        return prepare.make_tokenizer(path, None), kind["file"]
    except prepare.UserError as e:
        sys.exit(f"check-bpe: {e}")


def run_encoder(encoder, directory, texts):
    lines = "".join(text.hex() + "\n" for text in texts)
    done = subprocess.run([encoder, os.path.join(directory, "bpe.txt"),
                           os.path.join(directory, "vocab.hex")],
                          input=lines, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"check-bpe: {encoder} failed: {done.stderr.strip()}")
    return done.stdout.split("\n")[:len(texts)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("encoder")
    p.add_argument("files", nargs="*")
    p.add_argument("--random", type=int, default=3000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    rng = random.Random(a.seed)
    texts = list(FIXED)
    texts += ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 40)))
              for _ in range(a.random)]
    texts += [open(path, encoding="utf-8", newline="").read() for path in a.files]
    tokenizer, name = reference(a.dir)
    expected = tokenizer.encode(texts)
    got = run_encoder(a.encoder, a.dir, [t.encode("utf-8") for t in texts] + NOT_UTF8)

    differences = []
    for text, ids, line in zip(texts, expected, got):
        if line != " ".join(map(str, ids)):
            differences.append(f"{text[:60]!r}: {name} {ids[:12]}, bpe.txt {line[:80]}")
    for data, line in zip(NOT_UTF8, got[len(texts):]):
        try:
            data.decode("utf-8")
            want = "(UTF-8)"
        except UnicodeDecodeError as e:
            want = f"error: not UTF-8 text (byte {e.start})"
        if line != want:
            differences.append(f"{data!r}: expected {want!r}, got {line!r}")
    if differences:
        print(f"check-bpe: {len(differences)} differences from {name}:")
        print("\n".join(differences[:10]))
        sys.exit(1)
    tokens = sum(len(ids) for ids in expected)
    print(f"check-bpe: {len(texts)} texts, {tokens} tokens, the same ids as {name}; "
          f"{len(NOT_UTF8)} byte strings refused as not UTF-8 where Python's decoder stops")


main()
