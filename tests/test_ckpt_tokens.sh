#!/bin/sh
# test_ckpt_tokens.sh — tools/make_tokens.py (docs/CHECKPOINTS.md's way from text to --data): ids
# become an llm.c token file with the exact header (uint16 below 65536 ids, uint32 for Llama 3's
# 128256), --info reads it back, the trainer trains on it, and an id outside the vocabulary is refused.
# (The --tokenizer path needs transformers, which this machine lacks; it only feeds the same writer.)
B=${DPMEM_BUILD:-build}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3 for tools/make_tokens.py"; exit 77; }
d=$(mktemp -d /tmp/test_ckpt_tokens.XXXXXX) || exit 1
trap 'rm -rf "$d"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=1; }
python3 -c 'print(" ".join(str((i * 37) % 1000) for i in range(300)))' >"$d/ids.txt"
python3 tools/make_tokens.py --ids "$d/ids.txt" --vocab 1000 --out "$d/t16.bin" >/dev/null || no "make_tokens --ids failed"
# header: magic 20240520 = 0x01350158 LE, version 1, 300 tokens; then token 1 = 37 as uint16
h=$(od -A n -t u4 -N 12 "$d/t16.bin" | tr -s ' ')
[ "$h" = " 20240520 1 300" ] || no "uint16 header is '$h'"
[ "$(wc -c <"$d/t16.bin")" -eq $((1024 + 600)) ] || no "uint16 file size $(wc -c <"$d/t16.bin")"
[ "$(od -A n -t u2 -j 1026 -N 2 "$d/t16.bin" | tr -d ' ')" = 37 ] || no "second token is not 37"
python3 tools/make_tokens.py --info "$d/t16.bin" | grep -q "uint16, version 1, 300 tokens, max id 999" || no "--info: $(python3 tools/make_tokens.py --info "$d/t16.bin")"
python3 tools/make_tokens.py --ids "$d/ids.txt" --vocab 128256 --out "$d/t32.bin" >/dev/null || no "uint32 write failed"
h=$(od -A n -t u4 -N 12 "$d/t32.bin" | tr -s ' ')
[ "$h" = " 20240801 7 300" ] || no "uint32 header is '$h'"
[ "$(wc -c <"$d/t32.bin")" -eq $((1024 + 1200)) ] || no "uint32 file size"
if [ -x "$B/train_vanilla" ]; then
  "$B/train_vanilla" --data "$d/t16.bin" --steps 2 >"$d/out" 2>&1 || no "train_vanilla on the token file: $(tail -2 "$d/out")"
  grep -q "llm.c uint16, 300 tokens" "$d/out" || no "trainer did not read it as llm.c uint16: $(head -1 "$d/out")"
fi
echo "1 2 1000" >"$d/bad.txt"
python3 tools/make_tokens.py --ids "$d/bad.txt" --vocab 1000 --out "$d/bad.bin" 2>"$d/err" && no "an id outside the vocabulary was accepted"
grep -q "token 1000 at position 2 is outside" "$d/err" || no "error message: $(cat "$d/err")"
[ $fail -eq 0 ] && echo "token files: uint16/uint32 headers, --info, trainer reads them, bad ids refused OK"
exit $fail
