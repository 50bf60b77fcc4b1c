"""Trains a small byte-level BPE tokenizer with the tokenizers package and
saves it as a Hugging Face tokenizer.json: the tokenizer of
test/e2e/prepare-data.test.

  make-tokenizer.py OUT TEXT... [--vocab N] [--pad-to M] [--eot TOKEN | --no-eot]

Byte-level, so that any text encodes and decodes back to itself. The
end-of-text token (default <|endoftext|>) is added last, a special token.
--pad-to M fills the model's vocabulary with unused entries so that the
end-of-text token's id is M - 1: past 65,535, the data is written as
32-bit tokens, with the end-of-text token the one above 16 bits.
"""
import argparse
import json

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("texts", nargs="+")
p.add_argument("--vocab", type=int, default=320)
p.add_argument("--pad-to", type=int)
p.add_argument("--eot", default="<|endoftext|>")
p.add_argument("--no-eot", action="store_true")
a = p.parse_args()

tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tokenizer.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=a.vocab, show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
texts = [open(path, encoding="utf-8").read() for path in a.texts]
tokenizer.train_from_iterator(texts, trainer=trainer)
if a.pad_to:
    spec = json.loads(tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    for i in range(len(vocab), a.pad_to - 1):
        vocab[f"<|unused_{i}|>"] = i
    tokenizer = Tokenizer.from_str(json.dumps(spec))
if not a.no_eot:
    tokenizer.add_special_tokens([a.eot])
tokenizer.save(a.out)
print(f"tokenizer: vocabulary {tokenizer.get_vocab_size()}, "
      f"end of text {tokenizer.token_to_id(a.eot)}")
