#!/bin/sh
# test_hostile_cli.sh — hostile command lines and input files against every program (issue 13): a
# table of bad command lines -> the exit code and a piece of the one line each must print on stderr.
# Each case runs under a time limit (a FIFO must not block open(), a lying config.json must fail
# before it allocates what it claims), and the cases that offer a program its own input as an output
# also check that the input is unchanged afterwards. Exits 0 on pass, 1 on failure; takes seconds.
B=$(cd "${DPMEM_BUILD:-build}" 2>/dev/null && pwd) || { echo "FAIL: no build directory ${DPMEM_BUILD:-build}"; exit 1; }
ROOT=$(pwd)
for p in train_vanilla train_dpsgd quickstart dpmem-report; do
    [ -x "$B/$p" ] || { echo "FAIL: $B/$p not built"; exit 1; }
done
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is needed to write the hostile config.json files"; exit 77; }
d=$(mktemp -d /tmp/test_hostile_cli.XXXXXX) || exit 1
trap 'rm -rf "$d"' EXIT
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
unset DPMEM_LOG
fail=0
T="$B/train_vanilla --quiet"

# ---- the inputs --------------------------------------------------------------------------------
python3 - "$d" <<'PY' || { echo "FAIL: python3 could not write the data"; exit 1; }
import struct, sys
d = sys.argv[1]
open(d + '/tok.bin', 'wb').write(struct.pack('<256i', *([20240520, 1, 4000] + [0] * 253)) +
                                  struct.pack('<4000H', *[i % 97 for i in range(4000)]))
PY
$T --steps 0 --save "$d/ckpt" >/dev/null 2>"$d/err" || { echo "FAIL: could not save a checkpoint: $(cat "$d/err")"; exit 1; }
mkfifo "$d/fifo" && mkdir "$d/cwd" || { echo "FAIL: mkfifo"; exit 1; }
# variants of the checkpoint: config.json edited (JSON kept valid), or a FIFO in place of a file
variant() {   # variant NAME KEY VALUE: ckpt with config.json[KEY] = VALUE (python literal)
    mkdir -p "$d/$1" && cp "$d/ckpt/model.safetensors" "$d/$1/" &&
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c[sys.argv[3]]=eval(sys.argv[4]); json.dump(c, open(sys.argv[2],'w'))" \
        "$d/ckpt/config.json" "$d/$1/config.json" "$2" "$3"
}
variant lie intermediate_size 16777216
variant layers num_hidden_layers 16777216
variant eps rms_norm_eps 1e308
variant theta rope_theta 1e-300
mkdir -p "$d/fifocfg" "$d/fifost" && mkfifo "$d/fifocfg/config.json" && cp "$d/ckpt/model.safetensors" "$d/fifocfg/" &&
    cp "$d/ckpt/config.json" "$d/fifost/" && mkfifo "$d/fifost/model.safetensors" || { echo "FAIL: fixtures"; exit 1; }
cp "$d/tok.bin" "$d/tok.orig" && cp "$d/ckpt/model.safetensors" "$d/model.orig"
# a sharded checkpoint whose index lists 200000 tensors (the model's, and zero-size rotary buffers
# that old conversions leave behind): the index was checked in quadratic time (100k entries: 31 s)
python3 - "$d" <<'PY' || { echo "FAIL: python3 could not write the sharded checkpoint"; exit 1; }
import json, os, shutil, struct, sys
d = sys.argv[1]
os.makedirs(d + '/sharded')
shutil.copy(d + '/ckpt/config.json', d + '/sharded/config.json')
shutil.copy(d + '/ckpt/model.safetensors', d + '/sharded/a.safetensors')
raw = open(d + '/ckpt/model.safetensors', 'rb').read()
names = [k for k in json.loads(raw[8:8 + struct.unpack('<Q', raw[:8])[0]]) if k != '__metadata__']
extra = ['model.layers.%d.self_attn.rotary_emb.inv_freq' % i for i in range(200000)]
h = json.dumps({n: {'dtype': 'F32', 'shape': [0], 'data_offsets': [0, 0]} for n in extra}).encode()
open(d + '/sharded/b.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h)
wm = {n: 'a.safetensors' for n in names}
wm.update({n: 'b.safetensors' for n in extra})
json.dump({'metadata': {}, 'weight_map': wm}, open(d + '/sharded/model.safetensors.index.json', 'w'))
PY

# ---- the table: EXIT | piece of the stderr line | command line ($d: a temp dir, $B: the build) ----
# Every command runs with a 20 s limit; exit 124 means it hung or ran far too long.
cases() {
cat <<'EOF'
1 | --dim needs an integer in [2, 16777216], got '600000000' | $T --dim 600000000 --vocab 2 --heads 2 --kv-heads 2 --device plan
1 | --layers needs an integer in [1, 4096], got '2147483647' | $T --layers 2147483647 --device plan
1 | --dim 16777216 gives an FFN width of 8/3 x 16777216 | $T --dim 16777216 --heads 16 --kv-heads 16 --device plan
1 | more than 1 EiB: --dim 16777216 --ffn 16777216 --layers 4096 | $T --dim 16777216 --ffn 16777216 --layers 4096 --heads 16 --kv-heads 16 --device plan
1 | --batch-size 65536 x --seq-len 65536 is 4294967296 tokens, more than the kernels' limit of 536870911 (INT_MAX/4 | $T --batch-size 65536 --seq-len 65536 --device plan
1 | --vocab 16777216 x --dim 16777216 is 281474976710656, more than the kernels' limit of 17179869176 | $T --vocab 16777216 --dim 16777216 --heads 2 --kv-heads 2 --ffn 2 --device plan
1 | direct norms keep about 3.23e+19 bytes of per-sample gradients (1048576 samples x 7696615276544 parameters), more than 1 EiB | $B/train_dpsgd --device plan --norm direct --dim 65536 --heads 512 --kv-heads 512 --layers 256 --vocab 2 --ffn 65536 --batch-size 1048576 --seq-len 1 --max-physical-batch-size 1048576 --dataset-size 2097152
1 | --threads needs an integer in [1, 4096], got '100000' | $T --threads 100000 --steps 1
1 | --print-params is a switch and takes no value (got '0') | $T --print-params=0
1 | --check-finite is a switch and takes no value | $T --check-finite=1 --steps 1
1 | --poisson takes no value | $B/train_dpsgd --poisson=0 --steps 1
1 | cannot open data file '/': not a regular file (a directory) | $T --data / --steps 1
1 | cannot open data file '$d/fifo': not a regular file (a FIFO) | $T --data $d/fifo --steps 1
1 | config.json: not a regular file (a FIFO) | $T --init-from $d/fifocfg --steps 1
1 | model.safetensors: not a regular file (a FIFO) | $T --init-from $d/fifost --steps 1
1 | "num_hidden_layers" must be an integer in [1, 4096] | $T --init-from $d/layers --steps 1
1 | "rms_norm_eps" must be a number in [1e-30, 1] | $T --init-from $d/eps --steps 1
1 | "rope_theta" must be a number in [1, 1e+12] | $T --init-from $d/theta --steps 1
1 | tensor 'model.layers.0.mlp.gate_proj.weight': shape [256, 64], the model expects [16777216, 64] | $T --init-from $d/lie --steps 1
1 | --log $d/tok.bin is the same file as --data $d/tok.bin | $T --data $d/tok.bin --log $d/tok.bin --steps 1
1 | --log $d/./tok.bin is the same file as --data $d/tok.bin | $T --data $d/tok.bin --log $d/./tok.bin --steps 1
1 | DPMEM_LOG $d/tok.bin is the same file as --data | env DPMEM_LOG=$d/tok.bin $T --data $d/tok.bin --steps 1
1 | --log $d/ckpt/model.safetensors is the same file as --init-from's $d/ckpt/model.safetensors | $T --init-from $d/ckpt --log $d/ckpt/model.safetensors --steps 1
1 | --save's $d/out/model.safetensors is the same file as --data | $T --data $d/out/model.safetensors --save $d/out --steps 1
1 | --log $d/new/config.json is the same file as --save's $d/new/config.json | $T --log $d/new/config.json --save $d/new --steps 1
1 | --log $d/ckpt/model.safetensors is the same file as --save's | $T --init-from $d/ckpt --save $d/ckpt --log $d/ckpt/model.safetensors --steps 1
2 | quickstart: unknown option '--bogus' | $B/quickstart --bogus
2 | quickstart: one log name at most | $B/quickstart a.log b.log
1 | not a dpmem log (bad magic) | $B/dpmem-report /proc/self/status
1 | not a regular file (a FIFO) | $B/dpmem-report $d/fifo
2 | -o $d/tok.bin is the same file as log $d/tok.bin | $B/dpmem-trace $d/tok.bin -o $d/tok.bin
2 | the results folder '$d' is not empty | sh $ROOT/tools/run_experiments --build $B --out $d vanilla -- --data $d/tok.bin
EOF
}

n=0
cases | while IFS='|' read -r code want cmd; do
    code=$(echo $code); want=$(echo "$want" | sed 's/^ *//; s/ *$//'); cmd=$(echo "$cmd" | sed 's/^ *//')
    want=$(printf '%s' "$want" | sed "s|\$d|$d|g; s|\$B|$B|g")
    (cd "$d/cwd" && eval "timeout 20 $cmd") >"$d/out" 2>"$d/err"; rc=$?   # in a scratch directory: a stray file lands there
    lines=$(grep -c . "$d/err")
    if [ "$rc" -ne "$code" ]; then echo "FAIL [$cmd]: exit $rc, want $code"; cat "$d/err"; echo x >>"$d/failed"; continue; fi
    if ! grep -qF -- "$want" "$d/err"; then echo "FAIL [$cmd]: stderr lacks '$want':"; cat "$d/err"; echo x >>"$d/failed"; continue; fi
    if [ "$lines" -ne 1 ]; then echo "FAIL [$cmd]: $lines lines on stderr, want 1:"; cat "$d/err"; echo x >>"$d/failed"; continue; fi
    echo "ok   exit $rc: $(cat "$d/err")"
done
[ -f "$d/failed" ] && fail=1

# ---- what must hold after the table ----------------------------------------------------------------
cmp -s "$d/tok.bin" "$d/tok.orig" || { echo "FAIL: the training data was written over"; fail=1; }
cmp -s "$d/ckpt/model.safetensors" "$d/model.orig" || { echo "FAIL: the checkpoint was written over"; fail=1; }
( cd "$d/cwd" && "$B/quickstart" --help >../out 2>../err ); rc=$?
[ $rc -eq 0 ] && grep -q "usage: quickstart" "$d/out" && [ -z "$(ls -A "$d/cwd")" ] ||
    { echo "FAIL: quickstart --help: exit $rc, or it (or a case above) wrote a file: $(ls -A "$d/cwd")"; fail=1; }
# a pseudo-file is read for what it holds (its size reads 0): as raw-byte tokens here
"$B/train_vanilla" --data /proc/self/status --vocab 256 --seq-len 8 --steps 1 >"$d/out" 2>"$d/err" && grep -q "raw bytes" "$d/out" ||
    { echo "FAIL: --data /proc/self/status: $(cat "$d/err")"; fail=1; }
# the log says which memory limit was in force (the default: 90% of MemAvailable), not 0
$T --steps 1 --log "$d/limit.log" >/dev/null 2>"$d/err" || { echo "FAIL: a run with --log: $(cat "$d/err")"; fail=1; }
"$B/dpmem-report" "$d/limit.log" >"$d/rep" 2>&1
grep -q "mem_limit_from=90% of MemAvailable" "$d/rep" && ! grep -q "mem_limit=0 " "$d/rep" ||
    { echo "FAIL: META does not give the memory limit in force: $(grep -o 'mem_limit[^ ]*' "$d/rep" | tr '\n' ' ')"; fail=1; }
# two runs on one log path: the second is refused with one line, the first runs on (the second's
# truncation killed it with SIGBUS)
$T --steps 100000000 --log "$d/same.log" >/dev/null 2>&1 & first=$!
i=0; while [ ! -s "$d/same.log" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
timeout 20 $T --steps 2 --log "$d/same.log" >/dev/null 2>"$d/err"; rc=$?
sleep 1
alive=0; kill -0 $first 2>/dev/null && alive=1
kill $first 2>/dev/null; wait $first 2>/dev/null
[ $rc -eq 1 ] && [ "$(grep -c . "$d/err")" -eq 1 ] && grep -q "is writing it; give this run another log" "$d/err" && [ $alive -eq 1 ] ||
    { echo "FAIL: a second run on the log path of a running one: exit $rc, the first still running: $alive; $(cat "$d/err")"; fail=1; }
"$B/dpmem-report" "$d/same.log" >"$d/rep" 2>"$d/err" && grep -q "not closed cleanly" "$d/err" && ! grep -q corrupt "$d/err" ||
    { echo "FAIL: the first run's log: $(cat "$d/err")"; fail=1; }
# a 200000-entry shard index loads in seconds
timeout 20 $T --init-from "$d/sharded" --steps 0 >/dev/null 2>"$d/err" ||
    { echo "FAIL: a 200000-entry shard index: exit $? (124: over 20 s): $(cat "$d/err")"; fail=1; }
# saving over the --init-from directory stays allowed (it is read whole before --save replaces it)
$T --init-from "$d/ckpt" --save "$d/ckpt" --steps 0 >/dev/null 2>"$d/err" || { echo "FAIL: --save over --init-from: $(cat "$d/err")"; fail=1; }

# a picture written to something that is not a regular file is written into it, never renamed over it
# (a FIFO here; as root, /dev/null became a regular file this way): the FIFO stays a FIFO, its reader
# gets the whole PNG
if [ -x "$B/dpmem-render" ]; then
    $T --steps 2 --log "$d/pic.log" >/dev/null 2>&1 && mkfifo "$d/pic.png" || { echo "FAIL: fixtures for the FIFO picture"; fail=1; }
    ( timeout 30 cat "$d/pic.png" > "$d/got.png" ) &
    reader=$!
    timeout 20 "$B/dpmem-render" "$d/pic.log" -o "$d/pic.png" >/dev/null 2>"$d/err"; rc=$?
    wait $reader
    [ $rc -eq 0 ] && [ -p "$d/pic.png" ] && [ "$(head -c 8 "$d/got.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
        [ "$(tail -c 8 "$d/got.png" | od -An -tx1 | tr -d ' \n')" = 49454e44ae426082 ] ||
        { echo "FAIL: dpmem-render -o FIFO: exit $rc, still a FIFO: $([ -p "$d/pic.png" ] && echo yes || echo no), $(cat "$d/err")"; fail=1; }
    ls "$d" | grep -q partial && { echo "FAIL: dpmem-render left a partial file beside the FIFO"; fail=1; }
fi

[ $fail -eq 0 ] && echo "hostile command lines: all cases passed"
exit $fail
