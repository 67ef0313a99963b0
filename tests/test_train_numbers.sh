#!/bin/sh
# test_train_numbers.sh — every number the sample trainers print and log is one a researcher can cite:
#   - each step's loss is in the log at full precision (META train.loss), and the printed
#     "loss: A (step 1) -> B (step N)" lines are the first and the last of them;
#   - the closing table has median, min, quartiles and max per phase over the timed steps (the warm-up
#     left out and said, META timing.warmup_steps), with clip and noise as their own rows;
#   - snapshots at the phase boundaries (after_model_creation, after_step_1, end);
#   - config.method names what ran (flash+bk, mixed+bk, lora+mixed+bk), the DP and LoRA settings;
#   - --log-sample-norms N logs each step's first N norms with their clip factors min(1, C/(n+1e-6));
#   - one definition of a data row for every trainer and sampling mode: a 257-token file at T = 64 has
#     4 rows (vanilla and DP alike), and Poisson sampling at rate 1 reads the same sequences as the
#     sequential batches (the same first loss, also when a physical batch is padded);
#   - the per-layer choice lines of a DP method only with --verbose (one line of counts without it),
#     the norm IO in KiB/MiB/GiB as every other size;
#   - '-' is not a trainer's log or checkpoint (one clear line).
# Exits 0 on pass, 1 on failure.
B=${DPMEM_BUILD:-build}
for p in train_vanilla train_flash train_lora dpmem-report; do [ -x "$B/$p" ] || { echo "FAIL: $B/$p not built"; exit 1; }; done
command -v python3 >/dev/null || { echo "SKIP: no python3 to read the report's JSON"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ---- a DP run: loss, table, snapshots, method, settings, sample norms --------------------------------
"$B/train_flash" --model tiny --seq-len 16 --steps 4 --batch-size 8 --max-physical-batch-size 4 --norm mixed \
    --log-sample-norms 5 --log "$tmp/dp.log" >"$tmp/dp.out" 2>"$tmp/dp.err" || { bad "train_flash: $(cat "$tmp/dp.err")"; }
"$B/dpmem-report" "$tmp/dp.log" --json - >"$tmp/dp.json" || bad "dpmem-report --json - on the DP log"
python3 - "$tmp/dp.json" "$tmp/dp.out" "$tmp/dp.log" <<'PY' || bad "the DP run's numbers (above)"
import json, re, struct, sys
o = json.load(open(sys.argv[1]))[0]
out = open(sys.argv[2]).read()
def check(c, what):
    if not c: print("  wrong:", what); check.bad = 1
check.bad = 0
m = re.search(r'^loss: ([0-9.]+) \(step 1\) -> ([0-9.]+) \(step 4\): each the mean over that step\'s batch, before that step\'s update', out, re.M)
check(m, "the loss line says what its numbers are")
check(len(o['loss']) == 4, "4 losses logged: %s" % o['loss'])
if m:
    check('%.6f' % o['loss'][0] == m.group(1) and '%.6f' % o['loss'][3] == m.group(2), "printed loss %s -> %s, logged %s" % (m.group(1), m.group(2), o['loss']))
check(any(len(repr(x)) > 12 for x in o['loss']), "the logged losses have full precision: %s" % o['loss'])
check(o['config.method'] == 'mixed+bk' and o['dp.norm'] == 'mixed' and o['dp.clip'] == 'bk', "method %s" % o['config.method'])
check(o['batch_logical'] == 8 and o['batch_physical'] == 4 and o['dp.dataset_size'] == 65536, "batches / dataset size")
check(o['warmup_steps'] == 1 and o['timed_steps'] == 3 and o['timing.warmup_steps'] == 1, "the warm-up: %s %s" % (o['warmup_steps'], o['timed_steps']))
check(o['snapshots'] == 3, "3 snapshots, got %s" % o['snapshots'])
check(o['sample_norms'] == 20, "5 norms a step for 4 steps, got %s" % o['sample_norms'])
check(o['step_median_ms'] > 0 and o['step_min_ms'] <= o['step_q1_ms'] <= o['step_median_ms'] <= o['step_q3_ms'] <= o['step_max_ms'], "step stats ordered")
check(o['scope.clip.count'] > 0 and o['scope.noise.count'] == 4, "clip and noise scopes")
m = re.search(r'^time per step \(ms\) over steps 2\.\.4; 1 warm-up step left out', out, re.M)
check(m, "the table says which steps it times")
for ph in ('step', 'data', 'forward', 'loss', 'backward', 'clip', 'noise', 'optimizer_step', 'zero_grad', 'other'):
    check(re.search(r'^  %s +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+' % ph, out, re.M), "table row %s" % ph)
# the log's strings: each dp.sample_norms record "S I n c ...", c = min(1, C / (n + 1e-6)) with C = 1
d = open(sys.argv[3], 'rb').read()
recs = [s for s in re.findall(rb'[0-9][0-9 .e+-]{6,}', d) if re.fullmatch(rb'[1-4] [0-9]+( [0-9.e+-]+ [0-9.e+-]+)+', s)]
pairs = []
for r in recs:
    v = r.split()
    pairs += [(float(v[i]), float(v[i + 1])) for i in range(2, len(v), 2)]
check(len(pairs) == 20, "20 (norm, factor) pairs in the log, got %d" % len(pairs))
check(all(abs(c - min(1.0, 1.0 / (n + 1e-6))) <= 1e-6 for n, c in pairs), "clip factors = min(1, C/(n+1e-6))")
sys.exit(check.bad)
PY
for snap in after_model_creation after_step_1 end; do grep -aq "$snap" "$tmp/dp.log" || bad "the log has no snapshot $snap"; done
# a tag's first ALLOC, stamped before its STRING was written, must not make the log's clock go backwards
# (the report would then print no time at all)
"$B/dpmem-report" "$tmp/dp.log" | grep -q "timestamps go backwards" && bad "the trainer's log has timestamps that go backwards"

# ---- vanilla: clip and noise rows too (0), the method, accumulation's logical batch; --timing-warmup --
"$B/train_vanilla" --model tiny --seq-len 16 --steps 3 --batch-size 2 --grad-accum 2 --timing-warmup 0 --log "$tmp/v.log" >"$tmp/v.out" 2>&1 || bad "train_vanilla: $(cat "$tmp/v.out")"
grep -q "^time per step (ms) over steps 1\.\.3; 0 warm-up steps left out" "$tmp/v.out" || bad "--timing-warmup 0 not in the table's heading"
grep -q "^  clip  *0\.000  *0\.000" "$tmp/v.out" && grep -q "^  noise  *0\.000" "$tmp/v.out" || bad "vanilla's table lacks clip/noise rows"
"$B/dpmem-report" "$tmp/v.log" --csv - >"$tmp/v.csv" || bad "dpmem-report --csv -"
python3 - "$tmp/v.csv" <<'PY' || bad "vanilla's CSV row"
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))[0]
ok = r['config.method'] == 'vanilla' and r['batch_logical'] == '4' and r['batch_physical'] == '2' and r['warmup_steps'] == '0' and r['timed_steps'] == '3'
print("  vanilla row:", {k: r[k] for k in ('config.method', 'batch_logical', 'batch_physical', 'warmup_steps', 'timed_steps')})
sys.exit(0 if ok else 1)
PY
"$B/train_vanilla" --model tiny --seq-len 16 --steps 2 --timing-warmup 9 --quiet >"$tmp/w.out" 2>&1 || bad "--timing-warmup 9 with 2 steps"
grep -q "median step .*(step 2; 1 warm-up step left out)" "$tmp/w.out" || bad "--timing-warmup beyond the steps: one step must stay timed: $(head -n 1 "$tmp/w.out")"

# ---- --quiet: what a run is for (the loss, epsilon, the peak), no header, progress or tables (issue 49) --
"$B/train_flash" --model tiny --seq-len 16 --steps 2 --quiet >"$tmp/q.out" 2>&1 || bad "train_flash --quiet"
qlines=$(sed 's/:.*//' "$tmp/q.out" | tr '\n' '|')
[ "$qlines" = "done|loss|peak tagged memory|DP-SGD|" ] && grep -q "^DP-SGD: epsilon = [0-9.]* at delta = 1e-05 after 2 steps" "$tmp/q.out" \
    && grep -q "^peak tagged memory: [0-9]* bytes ([0-9.]* MiB)$" "$tmp/q.out" || bad "--quiet prints: $(cat "$tmp/q.out")"
"$B/train_flash" --help | grep -q -- "--quiet (only what the run is for: the loss, a DP run's epsilon, the peak; no header, progress or tables)" \
    || bad "--help does not say what --quiet does"

# ---- LoRA: the method and its settings -----------------------------------------------------------
"$B/train_lora" --model tiny --seq-len 16 --steps 1 --batch-size 2 --lora-rank 4 --lora-targets q,down --log "$tmp/l.log" --quiet >/dev/null 2>&1 || bad "train_lora"
"$B/dpmem-report" "$tmp/l.log" --json - | python3 -c '
import json, sys
o = json.load(sys.stdin)[0]
sys.exit(0 if (o["config.method"], o["lora.rank"], o["lora.alpha"], o["lora.targets"]) == ("lora+mixed+bk", 4, 8, "q,down") else 1)' \
    || bad "the LoRA run's method and settings"

# ---- one definition of a row ---------------------------------------------------------------------
python3 -c '
import struct, sys
n = 257
sys.stdout.buffer.write(struct.pack("<256i", *([20240520, 1, n] + [0] * 253)) + struct.pack("<%dH" % n, *[(i * 7919) % 1000 for i in range(n)]))' >"$tmp/257.bin"
common="--model tiny --seq-len 64 --batch-size 4 --steps 1 --data $tmp/257.bin --seed 3"
"$B/train_vanilla" $common >"$tmp/r_v.out" 2>&1 || bad "vanilla on 257 tokens: $(tail -n 1 "$tmp/r_v.out")"
"$B/train_flash" $common --noise-multiplier 0 >"$tmp/r_f.out" 2>&1 || bad "train_flash on 257 tokens: $(tail -n 1 "$tmp/r_f.out")"
"$B/train_flash" $common --noise-multiplier 0 --poisson >"$tmp/r_p.out" 2>&1 || bad "train_flash --poisson on 257 tokens: $(tail -n 1 "$tmp/r_p.out")"
grep -q "sample rate 1 (4 rows)" "$tmp/r_f.out" || bad "257 tokens at T = 64 are 4 rows: $(grep 'sample rate' "$tmp/r_f.out")"
l_v=$(sed -n 's/^loss: \([0-9.]*\) (step 1).*/\1/p' "$tmp/r_v.out"); l_f=$(sed -n 's/^loss: \([0-9.]*\) (step 1).*/\1/p' "$tmp/r_f.out")
l_p=$(sed -n 's/^loss: \([0-9.]*\) (step 1).*/\1/p' "$tmp/r_p.out")
if [ -n "$l_v" ] && [ "$l_v" = "$l_f" ] && [ "$l_f" = "$l_p" ]; then echo "ok   the 4 rows of 257 tokens: the same first loss $l_v for vanilla, sequential DP and Poisson DP"
else bad "the same rows must give the same first loss: vanilla '$l_v', DP '$l_f', DP --poisson '$l_p'"; fi
# Poisson at rate 1 in physical batches of 3: the second physical batch is 1 row and 2 of padding,
# which must not count in the logged loss (the mean over the 4 rows drawn: vanilla's)
"$B/train_flash" $common --noise-multiplier 0 --poisson --max-physical-batch-size 3 >"$tmp/r_p3.out" 2>&1 || bad "train_flash --poisson, physical 3"
l_p3=$(sed -n 's/^loss: \([0-9.]*\) (step 1).*/\1/p' "$tmp/r_p3.out")
awk -v a="$l_v" -v b="$l_p3" 'BEGIN { d = a - b; exit !(a != "" && b != "" && d < 2e-6 && d > -2e-6) }' \
    && echo "ok   Poisson with a padded physical batch: first loss $l_p3 (vanilla's $l_v)" || bad "Poisson, padded batch: first loss '$l_p3', vanilla's '$l_v' (the padding counted?)"
"$B/train_flash" $common --batch-size 5 >"$tmp/r_5.out" 2>"$tmp/r_5.err" && bad "a batch of 5 from 4 rows ran"
grep -q "the dataset has 4 rows (sequences of 65 tokens, one every 64), fewer than the batch 5" "$tmp/r_5.err" || bad "batch 5 of 4 rows: $(cat "$tmp/r_5.err")"

# ---- --save: config.json's float fields as the shortest decimals; a v5 config kept v5 ----------------
"$B/train_vanilla" --model tiny --seq-len 16 --steps 1 --save "$tmp/ck1" --quiet >/dev/null 2>&1 || bad "--save"
python3 - "$tmp/ck1/config.json" <<'PY' || bad "--save's config.json (above)"
import json, re, sys
text = open(sys.argv[1]).read(); c = json.loads(text)
ok = c["rms_norm_eps"] == 1e-06 and c["rope_theta"] == 10000 and not re.search(r"9\.9999", text)
print("  rms_norm_eps %r, rope_theta %r" % (c["rms_norm_eps"], c["rope_theta"]))
sys.exit(0 if ok else 1)
PY
python3 - "$tmp/ck1/config.json" <<'PY'
import json, sys   # the same checkpoint as transformers v5 writes it: rope_parameters, theta inside
c = json.load(open(sys.argv[1])); c.pop("rope_scaling", None)
c["rope_parameters"] = {"rope_theta": c.pop("rope_theta"), "rope_type": "default"}
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
"$B/train_vanilla" --init-from "$tmp/ck1" --seq-len 16 --steps 1 --save "$tmp/ck2" --quiet >/dev/null 2>"$tmp/e" || bad "--init-from a v5 config: $(cat "$tmp/e")"
python3 - "$tmp/ck2/config.json" <<'PY' || bad "a v5 config saved in another form (above)"
import json, sys
c = json.load(open(sys.argv[1]))
print("  saved:", {k: c.get(k) for k in ("rope_parameters", "rope_scaling", "rope_theta", "rms_norm_eps")})
sys.exit(0 if c.get("rope_parameters") == {"rope_theta": 10000, "rope_type": "default"} and "rope_scaling" not in c and "rope_theta" not in c and c["rms_norm_eps"] == 1e-06 else 1)
PY

# ---- the per-layer choice lines only with --verbose; sizes in binary units (issue 38) ---------------
# tiny has 2 layers: LoRA on q and v gives 8 adapter matrices, mixed norms choose for each of them
"$B/train_lora" --model tiny --seq-len 16 --steps 2 --batch-size 4 --lora-rank 2 >"$tmp/lora.out" 2>&1 || bad "train_lora failed: $(tail -n 2 "$tmp/lora.out")"
"$B/train_lora" --model tiny --seq-len 16 --steps 2 --batch-size 4 --lora-rank 2 --verbose >"$tmp/lorav.out" 2>&1 || bad "train_lora --verbose failed"
n=$(grep -c '^DP-SGD mixed: .*\.lora_[AB] ' "$tmp/lora.out"); nv=$(grep -c '^DP-SGD mixed: .*\.lora_[AB] ' "$tmp/lorav.out")
[ "$n" = 0 ] && [ "$nv" = 8 ] || bad "LoRA's per-layer lines: $n without --verbose (want 0), $nv with it (want 8)"
grep -q '^DP-SGD mixed: 8 LoRA adapter matrices: [0-9]* direct from their kept per-sample gradients, [0-9]* flash, [0-9]* direct (--verbose: each)$' "$tmp/lora.out" \
    || bad "LoRA: no one-line count of the adapters' choices: $(grep '^DP-SGD mixed' "$tmp/lora.out")"
grep -q '; norm IO [0-9.]* \(KiB\|MiB\|GiB\)/step' "$tmp/lora.out" && ! grep -q 'MB/step' "$tmp/lora.out" \
    || bad "the norm IO is not in KiB/MiB/GiB: $(grep -o 'norm IO[^;]*' "$tmp/lora.out")"
[ $fail -ne 0 ] || echo "ok   LoRA: per-layer lines only with --verbose ($nv), the norm IO in binary units"

# ---- '-' is no trainer output --------------------------------------------------------------------
for f in --log --save; do
    "$B/train_vanilla" --steps 1 $f - >"$tmp/o" 2>"$tmp/e" && bad "$f - ran"
    [ "$(grep -c . "$tmp/e")" = 1 ] && grep -q "error: $f needs a .*not '-', standard output" "$tmp/e" || bad "$f -: $(cat "$tmp/e")"
    [ ! -e ./- ] || bad "$f - left a file named '-'"
done

[ $fail -eq 0 ] && echo "trainer numbers: all checks passed"
exit $fail
