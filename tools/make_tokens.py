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

LABELLED ROWS for --task classify (samples/llama/data.h): a header of 256 int32 (magic 20260335,
version 1, rows, row length R, labels K, pad id), then per row its label and R tokens, right-padded
with the pad id. From a CSV (with a header line) or JSON lines of (text[, text pair], label), each
row tokenized alone (a pair as the tokenizer's pair encoding: premise and hypothesis, with its
special tokens), truncated to --max-len:

    python3 tools/make_tokens.py --labels --tokenizer ./Llama-3.2-1B --text premise --pair hypothesis \
        --label label --max-len 128 --out snli.bin snli_train.jsonl
    # rows of ids you already have: "LABEL ID ID ..." per line (no transformers needed)
    python3 tools/make_tokens.py --labels --ids rows.txt --vocab 128256 --num-labels 3 --pad-id 0 --out rows.bin

Labels that are integers are taken as they are (0..K-1); other values (strings) are numbered in
the order of --label-names, or sorted, and the mapping is printed.

Not here: shuffling, train/validation splits, packing policies beyond concatenation (the trainer
walks the stream in windows of seq_len + 1)."""
import argparse
import json
import struct
import sys

MAGIC16, MAGIC32 = 20240520, 20240801
MAGIC_LABELLED = 20260335


def write_labelled(path, rows, labels, vocab, num_labels, pad_id, max_len=None):
    """Labelled rows (lists of ids) right-padded with pad_id to the longest (or max_len) row."""
    if not rows:
        sys.exit("error: no rows to write")
    if num_labels < 2:
        sys.exit("error: --num-labels must be at least 2 (got %d)" % num_labels)
    # the pad pads rows where written: a real token (-1 in the header means "none", and rows padded
    # with -1 were written, to be refused by the trainer later); rows of equal length need none
    if pad_id is not None and not 0 <= pad_id < vocab:
        sys.exit("error: the pad id %d is outside the vocabulary [0, %d) (rows of one length need no --pad-id: leave it out)"
                 % (pad_id, vocab))
    R = max_len or max(len(r) for r in rows)
    header = [0] * 256
    header[:6] = [MAGIC_LABELLED, 1, len(rows), R, num_labels, -1 if pad_id is None else pad_id]
    body = []
    for i, (r, y) in enumerate(zip(rows, labels)):
        if not 0 <= y < num_labels:
            sys.exit("error: row %d has label %d, outside 0..%d" % (i, y, num_labels - 1))
        if not r:
            sys.exit("error: row %d has no tokens (a classify row needs at least one to pool)" % i)
        r = r[:R]
        for t in r:
            if not 0 <= t < vocab:
                sys.exit("error: row %d has token %d, outside the vocabulary [0, %d)" % (i, t, vocab))
        if len(r) < R and pad_id is None:
            sys.exit("error: row %d has %d tokens, fewer than %d, and there is no pad token: give --pad-id" % (i, len(r), R))
        body.append(y)
        body.extend(r + [pad_id] * (R - len(r)))
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%di" % len(body), *body))
    print("%s: %d labelled rows of %d tokens, %d labels, pad id %s (vocabulary %d)" %
          (path, len(rows), R, num_labels, pad_id, vocab))


def read_records(paths, fields):
    """(field values...) per record of CSV files (with a header line) or JSON lines (.jsonl/.json)."""
    import csv
    out = []
    for path in paths:
        with open(path, encoding="utf-8", newline="") as f:
            if path.endswith((".jsonl", ".json")):
                recs = [json.loads(line) for line in f if line.strip()]
            else:
                recs = list(csv.DictReader(f))
        for i, r in enumerate(recs):
            missing = [k for k in fields if k and k not in r]
            if missing:
                sys.exit("error: %s: record %d has no field %s" % (path, i + 1, ", ".join(missing)))
            out.append(tuple(r[k] if k else None for k in fields))
    return out


def label_ids(values, names):
    """Integer labels as they are; others numbered by --label-names or sorted (the mapping printed)."""
    try:
        return [int(v) for v in values], None
    except (TypeError, ValueError):
        pass
    order = names.split(",") if names else sorted(set(str(v) for v in values))
    index = {n: i for i, n in enumerate(order)}
    bad = [v for v in values if str(v) not in index]
    if bad:
        sys.exit("error: label %r is not in --label-names %s" % (bad[0], ",".join(order)))
    print("labels: " + ", ".join("%d = %s" % (i, n) for i, n in enumerate(order)))
    return [index[str(v)] for v in values], order


def labelled(a):
    if a.ids:
        if not a.vocab or a.num_labels is None:
            sys.exit("error: --labels --ids needs --vocab N and --num-labels K")
        rows, labels = [], []
        with open(a.ids) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    x = [int(v) for v in line.split()]
                except ValueError as e:
                    sys.exit("error: %s line %d: %s" % (a.ids, n, e))
                labels.append(x[0])
                rows.append(x[1:])
        write_labelled(a.out, rows, labels, a.vocab, a.num_labels, a.pad_id, a.max_len)
        return
    if not a.tokenizer or not a.inputs:
        sys.exit("error: --labels needs --tokenizer and CSV/JSONL files (or --ids FILE)")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        sys.exit("error: tokenizing text needs transformers (pip install transformers); --ids needs nothing")
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    recs = read_records(a.inputs, (a.text, a.pair, a.label))
    labels, order = label_ids([r[2] for r in recs], a.label_names)
    pad = a.pad_id if a.pad_id is not None else tok.pad_token_id
    if pad is None:
        sys.exit("error: the tokenizer has no pad token: give --pad-id (the model's pad_token_id)")
    kw = {"add_special_tokens": not a.no_bos}
    if a.max_len:
        kw.update(truncation=True, max_length=a.max_len)
    rows = [tok(r[0], r[1], **kw)["input_ids"] if a.pair else tok(r[0], **kw)["input_ids"] for r in recs]
    k = a.num_labels or (len(order) if order else max(labels) + 1)
    write_labelled(a.out, rows, labels, a.vocab or len(tok), max(k, 2), pad, a.max_len)


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
        if magic == MAGIC_LABELLED:
            R, K, pad = struct.unpack("<3i", head[12:24])
            body = f.read()
            if len(body) < 4 * n * (R + 1):
                sys.exit("error: %s: truncated: header says %d rows of %d tokens" % (path, n, R))
            labels = [struct.unpack_from("<i", body, 4 * i * (R + 1))[0] for i in range(n)]
            print("%s: labelled, version %d, %d rows of %d tokens, %d labels (counts %s), pad id %d" %
                  (path, version, n, R, K, [labels.count(k) for k in range(K)], pad))
            return
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
    ap.add_argument("--labels", action="store_true", help="labelled rows for --task classify (see above)")
    ap.add_argument("--text", default="text", help="--labels: the text field (default text)")
    ap.add_argument("--pair", help="--labels: the second text's field (premise/hypothesis pairs)")
    ap.add_argument("--label", default="label", help="--labels: the label field (default label)")
    ap.add_argument("--label-names", help="--labels: comma-separated label values in label order")
    ap.add_argument("--num-labels", type=int, help="--labels: K (default: from the labels)")
    ap.add_argument("--max-len", type=int, help="--labels: truncate rows to this many tokens (default: the longest)")
    ap.add_argument("--pad-id", type=int, help="--labels: the pad token (default: the tokenizer's)")
    a = ap.parse_args()
    if a.info:
        info(a.info)
        return
    if not a.out:
        sys.exit("error: --out FILE is required")
    if a.labels:
        labelled(a)
        return
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
