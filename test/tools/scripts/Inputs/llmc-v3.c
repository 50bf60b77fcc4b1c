// The lines of a later llm.c train_gpt2.c that scripts/llmc-files.py reads:
// a version 3 checkpoint and token shards (magic 20240520).
if (model_header[1] != 3) { printf("Bad version in model file\n"); exit(1); }
if (header[0] != 20240520) { printf("Bad magic in the data file\n"); exit(1); }
const char* train_tokens = "dev/data/tinyshakespeare/tiny_shakespeare_train.bin";
const char* val_tokens = "dev/data/tinyshakespeare/tiny_shakespeare_val.bin";
