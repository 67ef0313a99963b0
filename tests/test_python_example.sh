#!/bin/sh
# test_python_example.sh — samples/python/opacus_llama.py (HF LlamaForCausalLM, tiny shapes, Opacus on
# the CPU) runs in both modes with its side-by-side against the C trainer, and the tools render,
# report and trace its log. Checks the side-by-side's table: params, grads and input equal in both
# (ratio 1.000), each run's peak found.
PY_SAN_SKIP="the example runs in the plain pass (about 30 s per mode under ASan); libdpmem.so runs sanitized under torch and Opacus in test_python_torch.sh" \
PY_NEEDS=torch . tests/python_env.sh
fail=0
no() { echo "FAIL: $*"; fail=1; }
for mode in ghost hooks; do
    out=$tmp/$mode
    "$PY" samples/python/opacus_llama.py --mode $mode --steps 2 --out "$out" --compare "$B" >"$tmp/$mode.out" 2>&1 \
        || { no "opacus_llama.py --mode $mode failed:"; tail -n 15 "$tmp/$mode.out"; continue; }
    log=$out/pytorch-$mode.log
    [ -s "$log" ] || no "$mode: no log"
    "$B/dpmem-render" "$log" -o "$out/timeline.png" >/dev/null 2>&1 && [ -s "$out/timeline.png" ] || no "$mode: dpmem-render failed on the PyTorch log"
    "$B/dpmem-trace" "$log" -o "$out/trace.json" >/dev/null 2>&1 && grep -q '"name":"second_backward"\|"name":"clip"' "$out/trace.json" \
        || no "$mode: dpmem-trace failed, or no scope in its trace"
    "$B/dpmem-report" "$log" >"$out/report.txt" 2>&1 && grep -q "activations" "$out/report.txt" || no "$mode: dpmem-report failed"
    [ -s "$out/breakdown.png" ] || no "$mode: no breakdown.png"
    md=$out/side_by_side.md
    for cat in params grads input; do
        grep -q "^| $cat | [0-9]* | [0-9]* | 1.000 | +0 |" "$md" || no "$mode: $cat differs between C and PyTorch: $(grep "^| $cat |" "$md")"
    done
    grep -q "^| activations | [1-9][0-9]* | [1-9][0-9]* |" "$md" || no "$mode: no activations in both runs"
    grep -q "total (peak)" "$md" || no "$mode: no total row"
done
[ $fail -eq 0 ] && sed -n '/^| category/,/total (peak)/p' "$tmp/ghost/side_by_side.md"
exit $fail
