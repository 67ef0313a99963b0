#!/usr/bin/env python3
"""make_tokens.py — turn text into a token file the sample trainers read (--data FILE), with the
tokenizer of the model you fine-tune. The trainers do not reimplement tokenizers; this script is the
bridge, and the only part that needs Python packages (transformers, for the tokenizer only).

The file is llm.c's format: a header of 256 little-endian int32 — magic 20240520 with uint16 tokens
(vocabularies up to 65536) or 20240801 with uint32 tokens (Llama 3's 128256), a version, the token
count — then the tokens.

    # text files -> tokens, one document per file, BOS before each (as the tokenizer adds it)
    python3 tools/make_tokens.py --tokenizer meta-llama/Llama-3.2-1B --out train.bin notes/*.txt
    # one document per line of a .jsonl's "text" field, EOS after each
    python3 tools/make_tokens.py --tokenizer ./Llama-3.2-1B --jsonl text --eos --out train.bin data.jsonl
    # ids you already have (whitespace-separated integers; no transformers needed)
    python3 tools/make_tokens.py --ids ids.txt --vocab 128256 --out train.bin
    # what a token file holds
    python3 tools/make_tokens.py --info train.bin

Not here: shuffling, train/validation splits, packing policies beyond concatenation (the trainer
walks the stream in windows of seq_len + 1)."""
import argparse
import json
import struct
import sys

MAGIC16, MAGIC32 = 20240520, 20240801


def write_tokens(path, tokens, vocab):
    """Writes `tokens` (ints in [0, vocab)) with the narrowest llm.c header that holds them."""
    wide = vocab > 65536
    for i, t in enumerate(tokens):
        if not 0 <= t < vocab:
            sys.exit("error: token %d at position %d is outside the vocabulary [0, %d)" % (t, i, vocab))
    header = [0] * 256
    header[0], header[1], header[2] = (MAGIC32, 7, len(tokens)) if wide else (MAGIC16, 1, len(tokens))
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%d%s" % (len(tokens), "I" if wide else "H"), *tokens))
    print("%s: %d tokens, %s (vocabulary %d)" % (path, len(tokens), "uint32" if wide else "uint16", vocab))


def info(path):
    with open(path, "rb") as f:
        head = f.read(1024)
        if len(head) < 1024:
            sys.exit("error: %s: %d bytes, shorter than the 1024-byte header" % (path, len(head)))
        magic, version, n = struct.unpack("<3i", head[:12])
        if magic not in (MAGIC16, MAGIC32):
            sys.exit("error: %s: magic %d is not an llm.c token file (the trainer would read its raw bytes)" % (path, magic))
        width = 2 if magic == MAGIC16 else 4
        body = f.read()
    if len(body) < n * width:
        sys.exit("error: %s: truncated: header says %d tokens, %d bytes follow" % (path, n, len(body)))
    toks = struct.unpack("<%d%s" % (n, "H" if width == 2 else "I"), body[:n * width])
    print("%s: llm.c %s, version %d, %d tokens, max id %d, first %s" %
          (path, "uint16" if width == 2 else "uint32", version, n, max(toks) if toks else -1, list(toks[:8])))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", help="text files (or .jsonl with --jsonl)")
    ap.add_argument("--tokenizer", help="Hugging Face tokenizer: a hub id or a checkpoint directory")
    ap.add_argument("--jsonl", metavar="FIELD", help="inputs are JSON lines; tokenize each line's FIELD")
    ap.add_argument("--eos", action="store_true", help="append the tokenizer's EOS after each document")
    ap.add_argument("--no-bos", action="store_true", help="do not add the tokenizer's special tokens (BOS)")
    ap.add_argument("--ids", help="a file of whitespace-separated token ids instead of text")
    ap.add_argument("--vocab", type=int, help="vocabulary size (with --ids; else the tokenizer's)")
    ap.add_argument("--out", help="the token file to write")
    ap.add_argument("--info", metavar="FILE", help="describe a token file and exit")
    a = ap.parse_args()
    if a.info:
        info(a.info)
        return
    if not a.out:
        sys.exit("error: --out FILE is required")
    if a.ids:
        if not a.vocab or a.vocab < 2:
            sys.exit("error: --ids needs --vocab N (the model's vocab_size)")
        with open(a.ids) as f:
            try:
                tokens = [int(x) for x in f.read().split()]
            except ValueError as e:
                sys.exit("error: %s: %s" % (a.ids, e))
        write_tokens(a.out, tokens, a.vocab)
        return
    if not a.tokenizer or not a.inputs:
        sys.exit("error: give --tokenizer and text files (or --ids FILE --vocab N)")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        sys.exit("error: tokenizing text needs transformers (pip install transformers); --ids needs nothing")
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    vocab = a.vocab or len(tok)
    docs = []
    for path in a.inputs:
        with open(path, encoding="utf-8") as f:
            if a.jsonl:
                docs.extend(json.loads(line)[a.jsonl] for line in f if line.strip())
            else:
                docs.append(f.read())
    tokens = []
    for d in docs:
        tokens.extend(tok(d, add_special_tokens=not a.no_bos)["input_ids"])
        if a.eos:
            if tok.eos_token_id is None:
                sys.exit("error: this tokenizer has no EOS token; drop --eos")
            tokens.append(tok.eos_token_id)
    write_tokens(a.out, tokens, vocab)


if __name__ == "__main__":
    main()
