/* fuzz_safetensors_libfuzzer.c — libFuzzer entry for the safetensors header parser (and, when the
   input's first byte is '{', the config.json parser). Built by mk/ckpt.mk when clang has libFuzzer:
       build/fuzz/fuzz_safetensors_libfuzzer -max_total_time=600
   The in-suite, deterministic fuzzer is tests/fuzz_safetensors.c; this one is for long runs. */
#include "llama/hf_config.h"
#include "llama/safetensors.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char err[SAFETENSORS_ERR];
    if (size && data[0] == '{') {
        HFConfig c;
        if (hf_config_parse(&c, (const char *)data, size, "config.json", err, sizeof err) == 0 && c.head_dim <= 2048) {
            float inv[1024];
            hf_config_rope_inv_freq(&c, inv);
        }
        return 0;
    }
    SafeTensors st;
    if (safetensors_parse(&st, data, size, "fuzz", err, sizeof err) != 0) return 0;
    for (int i = 0; i < st.n; i++) {
        const SafeTensor *t = &st.tensors[i];
        if (t->numel > (1u << 20)) continue;
        float *tmp = malloc(t->numel * sizeof(float) + 1);
        if (safetensors_to_f32(&st, t, tmp, t->numel, err, sizeof err) != 0 &&
            (t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16 || t->dtype == ST_F64))
            abort(); /* an accepted float tensor must convert */
        free(tmp);
    }
    safetensors_close(&st);
    return 0;
}
