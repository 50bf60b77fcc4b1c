// The lines of llm.c's early train_gpt2.c that scripts/llmc-files.py reads:
// a version 1 checkpoint and bare int32 tokens.
if (model_header[1] != 1) { printf("Bad version in model file"); exit(1); }
char* train_tokens = "data/tiny_shakespeare_train.bin";
char* val_tokens = "data/tiny_shakespeare_val.bin";
