#!/bin/sh
# hostile_before_after.sh — the cases of issue 13 (docs/ROBUSTNESS.md) against two checkouts, each with
# its build: one row per case and checkout, with exit status (or signal), wall time, peak RSS and what
# came out. Not part of make test or make bench (it needs an old checkout, and the old code takes
# minutes on some cases); the table in docs/ROBUSTNESS.md was made with it.
#
#   sh bench/hostile_before_after.sh OLD_SRC NEW_SRC [CASE...]
#
# OLD_SRC, NEW_SRC: source trees whose build/ holds train_vanilla, quickstart and the dpmem-* tools
# (e.g. `git archive 0b6baae | tar -x -C /tmp/old && make -C /tmp/old build/train_vanilla ...`). The
# kit's cases compile small programs against each tree's dpmem.h. A full disk is a 2 MB tmpfs where
# mount works (root), else a 2 MB file size limit (EFBIG instead of ENOSPC: the old code is slowed
# less). Cases: strings crash two_runs threads full_disk full_disk_trainer cycles snapshot long plugin
# compile_off late_include trace_self shrink fifo safetensors_100mb config_lie shards data_is_log cli.
set -u
OLD=$(cd "$1" && pwd) || exit 2
NEW=$(cd "$2" && pwd) || exit 2
shift 2
CASES=${*:-strings crash two_runs threads full_disk full_disk_trainer cycles snapshot long plugin compile_off late_include trace_self shrink fifo safetensors_100mb config_lie shards data_is_log cli}
W=$(mktemp -d /tmp/hostile_ba.XXXXXX) || exit 1
MNT=""
cleanup() { [ -n "$MNT" ] && umount "$MNT" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
export OMP_NUM_THREADS=1
unset DPMEM_LOG
CC=${CC:-cc}

# measure LABEL TREE LIMIT CMD...: one row; the command's stdout (last line) and stderr (first line) shown
measure() {
    label=$1; tree=$2; limit=$3; shift 3
    /usr/bin/time -f "%e %M" -o "$W/time" timeout "$limit" "$@" >"$W/out" 2>"$W/err"; rc=$?
    set -- $(tail -n 1 "$W/time")
    case $rc in 124) st="killed at ${limit}s";; 13[0-9]|14[0-9]) st="signal $((rc - 128))";; *) st="exit $rc";; esac
    printf '%-22s %-4s %-16s %8s s %8.1f MiB  %s | %s\n' "$label" "$tree" "$st" "${1:-?}" "$(echo "${2:-0} / 1024" | bc -l)" \
        "$(tail -n 1 "$W/out" | cut -c1-90)" "$(grep -v '^ *Command' "$W/err" | head -n 1 | cut -c1-110)"
}
both() {   # both LABEL LIMIT CMD-with-$T-and-$B: run for OLD then NEW ($T: tree, $B: its build)
    label=$1; limit=$2; shift 2
    for side in old new; do
        if [ $side = old ]; then T=$OLD; else T=$NEW; fi
        B=$T/build
        export T B W OLD NEW side
        measure "$label" $side "$limit" sh -c "$*"
    done
}
kitprog() {   # kitprog NAME: compile $W/NAME.c against both trees' dpmem.h
    for side in old new; do
        if [ $side = old ]; then t=$OLD; else t=$NEW; fi
        $CC -O2 -std=c11 -D_GNU_SOURCE -DDPMEM_NO_NVTX -I"$t" "$W/$1.c" -o "$W/$1.$side" -lpthread -ldl || exit 1
    done
}

for c in $CASES; do case $c in
strings)   # 1.1M distinct strings, then a 5000-byte ghost/late: where do its bytes go?
    cat >"$W/strings.c" <<'EOF'
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include <stdio.h>
int main(void) {
    static char a[16], b[16];
    dpmem_tag_alloc(a, 100, "params/w");
    char s[64];
    for (int i = 0; i < 1100000; i++) { snprintf(s, sizeof s, "scope.%d", i); dpmem_intern(s); }
    dpmem_tag_alloc(b, 5000, "ghost/late");
    printf("params %zu ghost %zu overflow %zu total %zu\n", dpmem_live_bytes("params"), dpmem_live_bytes("ghost"),
           dpmem_live_bytes("overflow"), dpmem_live_bytes(NULL));
    return 0;
}
EOF
    kitprog strings; both "1 full string table" 120 '$W/strings.$side' ;;
crash)     # the table full between a tag and its category: a category with no name, then a query
    cat >"$W/crash.c" <<'EOF'
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include <stdio.h>
int main(void) {
    static char a[16], b[16];
    dpmem_tag_alloc(a, 100, "params/w");
    char s[64];
    for (int i = 0; i < 1048572; i++) { snprintf(s, sizeof s, "scope.%d", i); dpmem_intern(s); }
    dpmem_tag_alloc(b, 5000, "ghost/late");
    printf("ghost %zu params %zu overflow %zu\n", dpmem_live_bytes("ghost"), dpmem_live_bytes("params"), dpmem_live_bytes("overflow"));
    return 0;
}
EOF
    kitprog crash; both "1 full table: query" 120 '$W/crash.$side' ;;
two_runs)  # a trainer writes run.log; a second one starts on the same path a second later
    both "2 two runs, one log" 120 'rm -f $W/same.log; ($B/train_vanilla --quiet --steps 300 --log $W/same.log >/dev/null 2>&1; echo "first: exit $?" >$W/first) & sleep 1; $B/train_vanilla --quiet --steps 3 --log $W/same.log >/dev/null; r=$?; wait; echo "second: exit $r; $(cat $W/first)"; exit $r' ;;
threads)   # 5000 short-lived threads, one scope and one tagged buffer each
    cat >"$W/threads.c" <<'EOF'
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
static void *work(void *arg) { static char buf[64]; (void)arg; DPMEM_SCOPE("work"); dpmem_tag_alloc(buf, 64, "activations/x"); dpmem_tag_free(buf); return NULL; }
int main(int argc, char **argv) {
    (void)argc;
    if (dpmem_open(argv[1]) != 0) return 1;
    for (int i = 0; i < 5000; i++) { pthread_t t; pthread_create(&t, NULL, work, NULL); pthread_join(t, NULL); }
    dpmem_close();
    struct stat st; stat(argv[1], &st);
    printf("log %lld bytes\n", (long long)st.st_size);
    return 0;
}
EOF
    kitprog threads; both "5 5000 short threads" 120 '$W/threads.$side $W/threads.log' ;;
full_disk|full_disk_trainer)
    if [ -z "$MNT" ]; then
        MNT=$W/small; mkdir -p "$MNT"
        if mount -t tmpfs -o size=2m tmpfs "$MNT" 2>/dev/null; then LIM=""; echo "(full disk: a 2 MB tmpfs)"
        else MNT=""; LIM="trap '' XFSZ; ulimit -f 2048;"; echo "(full disk: a 2 MB file size limit, no tmpfs)"; fi
    fi
    DIR=${MNT:-$W}
    if [ $c = full_disk ]; then
        cat >"$W/full.c" <<'EOF'
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include <pthread.h>
#include <stdio.h>
static void *work(void *arg) { char buf[64]; (void)arg; for (int i = 0; i < 20000; i++) { DPMEM_SCOPE("iter"); dpmem_tag_alloc(buf, 64, "activations/x"); dpmem_tag_free(buf); } return NULL; }
int main(int argc, char **argv) {
    (void)argc;
    if (dpmem_open(argv[1]) != 0) return 1;
    uint64_t t0 = dpmem_now_ns();
    pthread_t th[8];
    for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, work, NULL);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    printf("8 x 20000 in %.3f s, live %zu\n", (double)(dpmem_now_ns() - t0) / 1e9, dpmem_live_bytes(NULL));
    dpmem_close();
    return 0;
}
EOF
        kitprog full
        both "7 full disk, 8 threads" 600 "$LIM rm -f $DIR/*; \$W/full.\$side $DIR/full.log"
    else
        # the disk nearly full before the run starts (1.6 MB of 2 MB taken)
        both "7 full disk, trainer" 300 "$LIM rm -f $DIR/*; head -c 1600000 /dev/zero >$DIR/fill; \$B/train_vanilla --quiet --steps 100 --log $DIR/t.log >/dev/null; r=\$?; echo \"\$(\$NEW/build/dpmem-report $DIR/t.log 2>&1 | grep -E 'events over|could not' | tr '\\n' ' ' | cut -c1-150)\"; exit \$r"
    fi ;;
cycles)    # 1000 dpmem_open/dpmem_close cycles: VmSize
    cat >"$W/cycles.c" <<'EOF'
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static long vm(void) { FILE *f = fopen("/proc/self/status", "r"); char l[256]; long kb = -1; while (fgets(l, sizeof l, f)) if (!strncmp(l, "VmSize:", 7)) kb = atol(l + 7); fclose(f); return kb; }
int main(int argc, char **argv) {
    static char buf[64]; long v1 = 0; (void)argc;
    for (int i = 0; i < 1000; i++) {
        if (dpmem_open(argv[1]) != 0) return 1;
        { DPMEM_SCOPE("c"); dpmem_tag_alloc(buf, 64, "x/y"); dpmem_tag_free(buf); }
        dpmem_close();
        if (!i) v1 = vm();
    }
    printf("VmSize %ld kB after 1 cycle, %ld kB after 1000\n", v1, vm());
    return 0;
}
EOF
    kitprog cycles; both "11 open/close x1000" 120 '$W/cycles.$side $W/cycles.log' ;;
snapshot)  # 5000 categories: what one snapshot lists, against the total
    cat >"$W/snap.c" <<'EOF'
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include <stdio.h>
int main(int argc, char **argv) {
    static char buf[5000]; (void)argc;
    if (dpmem_open(argv[1]) != 0) return 1;
    for (int i = 0; i < 5000; i++) { char t[32]; snprintf(t, sizeof t, "c%04d/x", i); dpmem_tag_alloc(buf + i, (size_t)i + 1, t); }
    dpmem_snapshot("all");
    printf("total %zu\n", dpmem_live_bytes(NULL));
    dpmem_close();
    return 0;
}
EOF
    kitprog snap
    cat >"$W/snaprows.py" <<'EOF'
import struct, sys
d = open(sys.argv[1], 'rb').read()
hb, cb = struct.unpack_from('<II', d, 12)
for off in range(hb, len(d), cb):
    if struct.unpack_from('<I', d, off)[0] != 0x4B435044: continue
    p = off + 32
    while p + 16 <= off + cb:
        head = struct.unpack_from('<I', d, p)[0]
        if not head: break
        if head & 0xff == 9:
            n = struct.unpack_from('<I', d, p + 40)[0]
            print('snapshot: %d rows, sum %d B' % (n, sum(struct.unpack_from('<Q', d, p + 56 + 16 * k)[0] for k in range(n))))
        p += (head >> 16) * 8
EOF
    both "13 5000-category snap" 120 'echo "$($W/snap.$side $W/snap.log); $(python3 $W/snaprows.py $W/snap.log)"' ;;
long)      # a 300-byte category: the kit's count, and the report's
    cat >"$W/long.c" <<'EOF'
#define DPMEM_IMPLEMENTATION
#include "dpmem.h"
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    static char a[8]; char tag[400], cat[301]; (void)argc;
    memset(tag, 'a', 300); strcpy(tag + 300, "/w"); memcpy(cat, tag, 300); cat[300] = 0;
    if (dpmem_open(argv[1]) != 0) return 1;
    dpmem_tag_alloc(a, 100, tag);
    printf("kit: %zu B under the 300-byte category\n", dpmem_live_bytes(cat));
    dpmem_close();
    return 0;
}
EOF
    kitprog long; both "14 300-byte category" 60 'k=$($W/long.$side $W/long.log); $NEW/build/dpmem-report $W/long.log --csv $W/long.csv >/dev/null; echo "$k; report: $(awk -F, "NR==1{for(i=1;i<=NF;i++)if(\$i~/^at_peak.aaa/)c=i} NR==2{print \$c}" $W/long.csv) B"' ;;
plugin)    # a dlopen'd plugin with its own copy of the kit, both on DPMEM_LOG
    for side in old new; do
        if [ $side = old ]; then t=$OLD; else t=$NEW; fi
        $CC -O2 -std=c11 -D_GNU_SOURCE -fPIC -shared -I"$t" "$NEW/tests/kit_plugin.c" -o "$W/libplugin.$side.so" -lpthread || exit 1
        printf '#define DPMEM_IMPLEMENTATION\n#define DPMEM_NO_NVTX\n#include "dpmem.h"\n#include <dlfcn.h>\n#include <stdio.h>\nint main(int c, char **v) { static char b[3000]; (void)c; for (int i = 0; i < 1000; i++) { DPMEM_SCOPE("host"); dpmem_tag_alloc(b, 3000, "host/b"); dpmem_tag_free(b); } void *h = dlopen(v[1], RTLD_NOW); int (*w)(void) = (int (*)(void))dlsym(h, "plugin_work"); for (int i = 0; i < 100000; i++) w(); return 0; }\n' >"$W/host.c"
        $CC -O2 -std=c11 -D_GNU_SOURCE -I"$t" "$W/host.c" -o "$W/host.$side" -ldl -lpthread || exit 1
    done
    both "15 plugin, DPMEM_LOG" 120 'rm -f $W/pl*.log; DPMEM_LOG=$W/pl.log $W/host.$side $W/libplugin.$side.so; $NEW/build/dpmem-report $W/pl.log 2>&1 | grep -E "events over|warning" | head -n 1' ;;
compile_off)   # tests/compile/disabled.c under DPMEM_DISABLE with each compiler: how many fail
    cp "$NEW/tests/compile/disabled.c" "$W/dis.c"; cp "$W/dis.c" "$W/dis.cpp"; cp "$W/dis.c" "$W/dis.cu"
    NVCC=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
    both "compile-out, 6 compilers" 600 'f=0; for cc in "gcc -std=c11" "clang -std=c11" "gcc -std=c99"; do $cc -Wall -Wextra -Wpedantic -Werror -I$T $W/dis.c -o $W/d 2>/dev/null || f=$((f+1)); done; for cc in g++ clang++; do $cc -std=c++17 -Wall -Wextra -Wpedantic -Werror -I$T $W/dis.cpp -o $W/d 2>/dev/null || f=$((f+1)); done; '"$NVCC"' -std=c++17 -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -I$T $W/dis.cu -o $W/d 2>/dev/null || f=$((f+1)); echo "$f of 6 compilers fail"' ;;
late_include)  # the implementation after <stdio.h> under -std=c11
    both "impl after stdio, c11" 60 "$CC -std=c11 -I\$T -I\${CUDA_HOME:-/usr/local/cuda}/include $NEW/tests/compile/late_include.c -o $W/late -ldl -lpthread >$W/cc 2>&1; echo \"\$(grep -c 'error:' $W/cc) errors, \$(grep -c 'implicit declaration' $W/cc) implicit declarations\"" ;;
trace_self)    # dpmem-trace run.log -o run.log
    both "3 trace -o its input" 60 '$B/train_vanilla --quiet --steps 2 --log $W/self.log >/dev/null; a=$(wc -c <$W/self.log); $B/dpmem-trace $W/self.log -o $W/self.log; r=$?; echo "log $a -> $(wc -c <$W/self.log) bytes"; exit $r' ;;
shrink)    # the log truncated while dpmem-trace reads it (a trainer re-run on the path being viewed)
    [ -f "$W/big.log" ] || "$NEW/build/train_vanilla" --quiet --steps 3000 --log "$W/big.log" >/dev/null || exit 1
    both "3 log shrinks under reader" 120 'cp $W/big.log $W/s.log; $B/dpmem-trace $W/s.log -o $W/s.json & p=$!; sleep 0.3; truncate -s 4096 $W/s.log; wait $p' ;;
fifo)      # a FIFO as --data, as config.json, as the log read
    rm -f "$W/fifo"; mkfifo "$W/fifo"; mkdir -p "$W/fck"; rm -f "$W/fck/config.json"; mkfifo "$W/fck/config.json"
    both "4 FIFO as --data" 10 '$B/train_vanilla --quiet --steps 1 --data $W/fifo'
    both "4 FIFO as config.json" 10 '$B/train_vanilla --quiet --steps 1 --init-from $W/fck'
    both "4 FIFO to dpmem-report" 10 '$B/dpmem-report $W/fifo' ;;
safetensors_100mb|config_lie|shards|data_is_log|cli)
    if [ ! -d "$W/ckpt" ]; then
        "$NEW/build/train_vanilla" --quiet --steps 0 --save "$W/ckpt" >/dev/null || exit 1
        python3 - "$W" <<'PY' || exit 1
import json, os, shutil, struct, sys
d = sys.argv[1]
raw = open(d + '/ckpt/model.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
names = [k for k in json.loads(raw[8:8 + n]) if k != '__metadata__']
def variant(name, key, value):
    os.makedirs(d + '/' + name, exist_ok=True)
    shutil.copy(d + '/ckpt/model.safetensors', d + '/' + name)
    c = json.load(open(d + '/ckpt/config.json')); c[key] = value
    json.dump(c, open(d + '/' + name + '/config.json', 'w'))
variant('lie', 'intermediate_size', 16777216)
variant('layers', 'num_hidden_layers', 16777216)
variant('eps', 'rms_norm_eps', 1e308)
variant('theta', 'rope_theta', 1e-300)
# a 100 MB header: one tensor whose shape lists 12.5M dimensions
os.makedirs(d + '/big', exist_ok=True)
shutil.copy(d + '/ckpt/config.json', d + '/big')
h = ('{"x":{"dtype":"F32","shape":[' + ','.join(['1'] * 12500000) + '],"data_offsets":[0,4]}}').encode()
open(d + '/big/model.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + b'\0' * 4)
# a shard index of 100000 entries
os.makedirs(d + '/sharded', exist_ok=True)
shutil.copy(d + '/ckpt/config.json', d + '/sharded')
shutil.copy(d + '/ckpt/model.safetensors', d + '/sharded/a.safetensors')
extra = ['model.layers.%d.self_attn.rotary_emb.inv_freq' % i for i in range(100000)]
hb = json.dumps({x: {'dtype': 'F32', 'shape': [0], 'data_offsets': [0, 0]} for x in extra}).encode()
open(d + '/sharded/b.safetensors', 'wb').write(struct.pack('<Q', len(hb)) + hb)
wm = {x: 'a.safetensors' for x in names}; wm.update({x: 'b.safetensors' for x in extra})
json.dump({'metadata': {}, 'weight_map': wm}, open(d + '/sharded/model.safetensors.index.json', 'w'))
open(d + '/tok.bin', 'wb').write(struct.pack('<256i', *([20240520, 1, 4000] + [0] * 253)) + struct.pack('<4000H', *[i % 97 for i in range(4000)]))
PY
    fi
    case $c in
    safetensors_100mb) both "8 100 MB st header" 120 '$B/train_vanilla --quiet --steps 1 --init-from $W/big' ;;
    config_lie) both "9 config.json lies" 120 'ulimit -v 8000000; $B/train_vanilla --quiet --steps 1 --init-from $W/lie' ;;
    shards) both "10 100k-entry index" 120 '$B/train_vanilla --quiet --steps 0 --init-from $W/sharded' ;;
    data_is_log) both "16 --log is --data" 60 'cp $W/tok.bin $W/t.bin; $B/train_vanilla --quiet --steps 1 --data $W/t.bin --log $W/t.bin; r=$?; cmp -s $W/tok.bin $W/t.bin && echo "data unchanged" || echo "data overwritten"; exit $r' ;;
    cli)
        both "--dim 600000000" 30 '$B/train_vanilla --quiet --dim 600000000 --vocab 2 --heads 2 --kv-heads 2 --device plan --steps 1'
        both "--layers 2147483647" 30 '$B/train_vanilla --quiet --layers 2147483647 --device plan --steps 1'
        both "--print-params=0" 30 '$B/train_vanilla --print-params=0 >$W/o; r=$?; tail -n 1 $W/o; exit $r'
        both "quickstart --bogus" 30 'mkdir -p $W/q$$ && cd $W/q$$ && $B/quickstart --bogus >/dev/null; r=$?; echo "files: $(ls -A)"; exit $r'
        both "--data /" 30 '$B/train_vanilla --quiet --steps 1 --data /'
        both "num_hidden_layers 2^24" 30 '$B/train_vanilla --quiet --steps 1 --init-from $W/layers'
        both "rms_norm_eps 1e308" 60 '$B/train_vanilla --steps 5 --init-from $W/eps >$W/o; r=$?; grep "^done" $W/o; exit $r'
        both "rope_theta 1e-300" 60 '$B/train_vanilla --steps 5 --init-from $W/theta >$W/o; r=$?; grep "^done" $W/o; exit $r'
        both "report /proc/self/status" 30 '$B/dpmem-report /proc/self/status'
        both "META mem_limit" 60 '$B/train_vanilla --quiet --steps 1 --log $W/m.log >/dev/null; $NEW/build/dpmem-report $W/m.log | grep -o "mem_limit=[0-9]*"'
        both "--threads 100000" 30 '$B/train_vanilla --quiet --threads 100000 --steps 1' ;;
    esac ;;
*) echo "unknown case $c"; exit 2 ;;
esac; done
