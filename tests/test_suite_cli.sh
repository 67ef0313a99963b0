#!/bin/sh
# test_suite_cli.sh — tools/run_experiments's command line: every bad flag, value, experiment, sweep
# or impossible combination gives exit 2 and one line on stderr naming the problem, before any run;
# --help exits 0 and lists every experiment; numbers with leading zeros are decimal (one plan run
# checks that the runs get them so). Exits 0 on pass, 1 on failure.
B=${DPMEM_BUILD:-build}
S=tools/run_experiments
[ -x "$B/train_vanilla" ] || { echo "FAIL: $B/train_vanilla not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# expect_usage PATTERN ARGS...: exit 2, exactly one line on stderr, matching PATTERN; nothing run.
expect_usage() {
    pat=$1; shift
    rm -rf "$tmp/out"
    sh "$S" --build "$B" --out "$tmp/out" "$@" >"$tmp/stdout" 2>"$tmp/err"; rc=$?
    lines=$(grep -c . "$tmp/err")
    if [ $rc -ne 2 ]; then echo "FAIL [$*]: exit $rc, want 2"; cat "$tmp/err"; fail=1; return; fi
    if [ "$lines" -ne 1 ]; then echo "FAIL [$*]: $lines lines on stderr, want 1"; cat "$tmp/err"; fail=1; return; fi
    if ! grep -q -- "$pat" "$tmp/err"; then echo "FAIL [$*]: stderr lacks '$pat': $(cat "$tmp/err")"; fail=1; return; fi
    if ls "$tmp/out"/*.log >/dev/null 2>&1; then echo "FAIL [$*]: a run started"; fail=1; return; fi
    echo "ok   [$*] -> $(cat "$tmp/err")"
}

expect_usage "unknown option '--bogus'" --bogus 1
expect_usage "unknown option '--bogus'" --bogus
expect_usage "unknown experiment 'ghost+ghost'" ghost+ghost
expect_usage "unknown experiment 'flash+x'" --methods vanilla,flash+x
expect_usage "experiment 'ghost+twopass' given twice (as ghost+twopass)" ghost ghost+twopass
expect_usage "experiment 'dpsgd' given twice (as direct+bk)" --methods direct+bk dpsgd
expect_usage "--repeat needs a positive integer, got '0'" --repeat 0
expect_usage "--repeat with --plan" --plan --repeat 2
expect_usage "--timing-warmup needs a non-negative integer" --timing-warmup x
expect_usage "--fit SIZE plans what fits: give --plan too" --fit 80G
expect_usage "--fit needs a size such as 80GB, 80GiB or a device (h100-80gb, h100-94gb, h200, a100-40gb, a100-80gb), got '80Q'" --plan --fit 80Q
expect_usage "--fit needs a size such as 80GB, 80GiB or a device (h100-80gb, h100-94gb, h200, a100-40gb, a100-80gb), got 'h100-40gb'" --plan --fit h100-40gb
expect_usage "--fit-margin needs a size such as 512MiB or 1GiB, got 'lots'" --plan --fit h200 --fit-margin lots
expect_usage "--fit-margin 2GB leaves nothing of 1GB" --plan --fit 1GB --fit-margin 2GB
expect_usage "--fit-margin goes with --fit" --plan --fit-margin 1GiB
# past 1 EiB (and past the shell's 2^63): a usage error, never "[: Illegal number" and every method "none"
expect_usage "--fit 10000000T is 1.1e+19 bytes, more than 1 EiB (2^60 bytes): every plan the trainers accept fits in less" --plan --fit 10000000T
expect_usage "--fit 99999999999999999999 is 1e+20 bytes, more than 1 EiB" --plan --fit 99999999999999999999
expect_usage "--fit 1048577T is 1.15e+18 bytes, more than 1 EiB" --plan --fit 1048577T
expect_usage "--fit and --sweep" --plan --fit 80G --sweep seq-len=8,16
expect_usage "--fit plans fp32 and both levers itself" --plan --fit 80G --precision bf16
expect_usage "unknown experiment 'dpsdg'" vanilla dpsdg
expect_usage "experiment 'ghost' given twice" ghost ghost
expect_usage "--steps needs a positive integer, got '0'" --steps 0
expect_usage "--steps needs a positive integer, got 'abc'" --steps abc
expect_usage "--seq-len needs a positive integer, got '-5'" --seq-len -5
expect_usage "--dim needs a positive integer, got 'x'" --dim x
expect_usage "--batch-size 8 is not a multiple of --physical-batch 3" --batch-size 8 --physical-batch 3
expect_usage "--device must be cpu, cuda or auto, got 'tpu'" --device tpu
expect_usage "--plan-for must be cpu or cuda" --plan --plan-for tpu
expect_usage "--check compares the plan with a real run: give --plan too" --check
expect_usage "--tolerance needs a number" --plan --check --tolerance 2x
expect_usage "--sweep needs KEY=V1,V2" --sweep seq-len
expect_usage "--sweep: unknown key 'heads'" --sweep heads=1,2
expect_usage "--sweep seq-len: no values" --sweep seq-len=
expect_usage "--sweep seq-len: no values" --sweep seq-len=,,
expect_usage "--sweep seq-len: an empty value in '64,,128'" --sweep seq-len=64,,128
# a value given twice would run one configuration twice under one name (numbers compared as numbers)
expect_usage "--sweep seq-len: the value 32 is given twice in '32,32'" --sweep seq-len=32,32
expect_usage "--sweep seq-len: the value 32 is given twice in '032,32'" --sweep seq-len=032,32
expect_usage "--sweep physical-batch: the value 8 is given twice in '08,8'" --sweep physical-batch=08,8
expect_usage "--sweep precision: the value fp32 is given twice" --sweep precision=fp32,bf16,fp32
# leading zeros: decimal, never the shell's octal (010 read as 8 would pass as a multiple of 4)
expect_usage "--batch-size 10 is not a multiple of --physical-batch 4" --batch-size 010 --physical-batch 4
expect_usage "--sweep physical-batch: none of the experiments has that setting" --sweep physical-batch=08 vanilla
expect_usage "--sweep seq-len needs a positive integer, got 'big'" --sweep seq-len=64,big
expect_usage "--sweep lora-rank: none of the experiments has that setting" --sweep lora-rank=4,8 vanilla ghost
expect_usage "--steps needs a value" --steps
expect_usage "--sweep physical-batch: 3 does not divide --batch-size 8" --batch-size 8 --sweep physical-batch=2,3
expect_usage "--mem-limit needs a size such as 40M or 2G, got 'lots'" --mem-limit lots
expect_usage "train_vanilla not found" --build "$tmp/nowhere"
expect_usage "must be paths without spaces" --out "$tmp/a b"
mkdir -p "$tmp/full" && : >"$tmp/full/x"
expect_usage "is not empty" --out "$tmp/full"
# --out - (and any name beginning with '-'; EXP_OUT too; --matrix's own): one line, exit 2, nothing created (it made a
# folder named '-' and printed a screen of sed errors)
mkdir -p "$tmp/cwd"
for how in "--out -" "--out -x" "EXP_OUT=-" "--matrix opacus-small --out -"; do
    case $how in EXP_OUT=*) set -- env "$how" sh "$PWD/$S" --build "$PWD/$B" --steps 1 vanilla ;;
                 *) set -- sh "$PWD/$S" --build "$PWD/$B" $how --plan --steps 1 ;; esac
    (cd "$tmp/cwd" && "$@") >"$tmp/stdout" 2>"$tmp/err"; rc=$?
    if [ $rc -eq 2 ] && [ "$(grep -c . "$tmp/err")" -eq 1 ] && grep -q "the results are a folder of files, not a stream" "$tmp/err" &&
       [ -z "$(ls -A "$tmp/cwd")" ] && [ ! -s "$tmp/stdout" ]; then echo "ok   [$how] -> $(cat "$tmp/err")"
    else echo "FAIL [$how]: exit $rc, want 2, one line, nothing created ($(ls -A "$tmp/cwd" | tr '\n' ' ')):"; head -5 "$tmp/err"; fail=1; fi
    rm -rf "$tmp/cwd" && mkdir -p "$tmp/cwd"
done

# environment variables are checked like flags
rm -rf "$tmp/out"
EXP_STEPS=zero sh "$S" --build "$B" --out "$tmp/out" >/dev/null 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ] && grep -q "steps needs a positive integer, got 'zero'" "$tmp/err"; then echo "ok   [EXP_STEPS=zero] -> $(cat "$tmp/err")"
else echo "FAIL [EXP_STEPS=zero]: exit $rc: $(cat "$tmp/err")"; fail=1; fi

# ... and the runs get the numbers: one plan run per value, named and flagged by the number
rm -rf "$tmp/out"
sh "$S" --build "$B" --out "$tmp/out" --plan --model tiny --steps 1 --batch-size 016 --physical-batch 08 \
    --sweep seq-len=016,32 --quiet vanilla >"$tmp/stdout" 2>"$tmp/err"; rc=$?
rows=$(tail -n +2 "$tmp/out/results.csv" 2>/dev/null | cut -d, -f1-3 | tr '\n' ' ')
if [ $rc -eq 0 ] && ! grep -q "Illegal" "$tmp/err" && [ "$rows" = "vanilla,seq-len,16 vanilla,seq-len,32 " ] &&
   grep -q -- "--seq-len 16 " "$tmp/out/vanilla-seq-len16.cmd" && grep -q -- "--batch-size 8 --grad-accum 2 " "$tmp/out/vanilla-seq-len16.cmd" &&
   grep -q -- "--seq-len 32 " "$tmp/out/vanilla-seq-len32.cmd"; then
    echo "ok   [--batch-size 016 --physical-batch 08 --sweep seq-len=016,32] -> runs $rows"
else
    echo "FAIL [--batch-size 016 --physical-batch 08 --sweep seq-len=016,32]: exit $rc, rows '$rows'"; cat "$tmp/err"
    cat "$tmp/out"/*.cmd 2>/dev/null; fail=1
fi

sh "$S" --help >"$tmp/help" 2>&1; rc=$?
for e in vanilla dpsgd ghost flash mixed lora --sweep --plan --check --mem-limit --repeat --methods --fit --timing-warmup NORM+CLIP \
         "dpsgd ghost ghost+bk flash flash+twopass mixed lora" "lora     LoRA adapters (mixed norms, book-keeping)"; do
    grep -q -- "$e" "$tmp/help" || { echo "FAIL: --help does not mention $e"; fail=1; }
done
grep -q "flash norms" "$tmp/help" && { echo "FAIL: --help says flash norms (lora uses mixed)"; fail=1; }
[ $rc -eq 0 ] || { echo "FAIL: --help exit $rc"; fail=1; }

[ $fail -eq 0 ] && echo "all command-line checks passed"
exit $fail
