"""Writes the small corpus test/e2e/prepare-data.test prepares, into DIR:

  one.txt             a text file: non-ASCII text, CRLF and LF line ends
  tree/               a directory, read in the sorted order of its paths:
    a/notes.md        Markdown that quotes the end-of-text token's text
    b.jsonl           JSON Lines: blank lines and an empty text are skipped
    b/deep/c.text     nested
    empty.txt         no text: no document
    image.bin         not a text suffix: not read
  extra.jsonl         JSON Lines with its text in a "content" field

The documents of `one.txt tree`, in order: one.txt, tree/a/notes.md, the
two of tree/b.jsonl, tree/b/deep/c.text.
"""
import json
import os
import sys

out = sys.argv[1]


def write(path, data):
    path = os.path.join(out, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


write("one.txt", "Loom trains transformers.\r\nÜber naïve façades — ✓ 日本語\n\tindented\n")
write("tree/a/notes.md", "# Notes\n\nA document may quote <|endoftext|> as text.\n")
write("tree/b.jsonl",
      json.dumps({"text": "The first record.", "id": 1}) + "\n\n"
      + json.dumps({"text": ""}) + "\n"
      + json.dumps({"id": 3, "text": "The second record,\nover two lines."}) + "\n   \n")
write("tree/b/deep/c.text", "deep in the tree " * 5)
write("tree/empty.txt", "")
write("tree/image.bin", bytes(range(256)))
write("extra.jsonl",
      json.dumps({"content": "Another field holds the text."}) + "\n"
      + json.dumps({"content": "And a second document."}) + "\n")
