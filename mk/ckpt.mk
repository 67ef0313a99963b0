# Checkpoints (issue 9): safetensors reader/writer, Hugging Face config.json, the HF <-> model name
# map (--init-from / --save); their tests, the in-suite header fuzzer and a libFuzzer target.

CKPT_CORE_SRC := samples/llama/safetensors.c samples/llama/hf_config.c common/io_guard.c
CKPT_CORE_HDR := samples/llama/safetensors.h samples/llama/hf_config.h common/io_guard.h common/utf8.h
CKPT_LIBS     := -lcjson

$(BUILD)/tests/test_ckpt_safetensors: tests/test_ckpt_safetensors.c $(CKPT_CORE_SRC) $(CKPT_CORE_HDR) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_ckpt_safetensors.c $(CKPT_CORE_SRC) $(LDFLAGS) $(CKPT_LIBS) $(LDLIBS)

$(BUILD)/tests/test_ckpt_config: tests/test_ckpt_config.c $(CKPT_CORE_SRC) $(CKPT_CORE_HDR) kernels/kernels.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_ckpt_config.c $(CKPT_CORE_SRC) $(LDFLAGS) $(CKPT_LIBS) $(LDLIBS)

$(BUILD)/tests/fuzz_safetensors: tests/fuzz_safetensors.c $(CKPT_CORE_SRC) $(CKPT_CORE_HDR) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/fuzz_safetensors.c $(CKPT_CORE_SRC) $(LDFLAGS) $(CKPT_LIBS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_ckpt_safetensors $(BUILD)/tests/test_ckpt_config $(BUILD)/tests/fuzz_safetensors
TESTS += $(BUILD)/tests/test_ckpt_safetensors $(BUILD)/tests/test_ckpt_config $(BUILD)/tests/fuzz_safetensors \
         tests/test_ckpt_tokens.sh

# libFuzzer target (clang's -fsanitize=fuzzer), built only where clang has libFuzzer and not in the
# SAN=1 pass (it carries its own sanitizers). Run it longer by hand:
#   build/fuzz/fuzz_safetensors_libfuzzer -max_total_time=600 build/fuzz/corpus
CKPT_CLANG := $(shell command -v clang-14 2>/dev/null || command -v clang 2>/dev/null)
ifneq ($(filter 1,$(SAN)),1)
ifneq ($(CKPT_CLANG),)
CKPT_HAVE_LIBFUZZER := $(shell printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' | $(CKPT_CLANG) -x c -fsanitize=fuzzer - -o /dev/null 2>/dev/null && echo 1)
endif
endif
ifeq ($(CKPT_HAVE_LIBFUZZER),1)
$(BUILD)/fuzz/fuzz_safetensors_libfuzzer: tests/fuzz_safetensors_libfuzzer.c $(CKPT_CORE_SRC) $(CKPT_CORE_HDR) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CKPT_CLANG) $(CPPFLAGS) -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	    -o $@ tests/fuzz_safetensors_libfuzzer.c $(CKPT_CORE_SRC) $(DEPS_LIB) $(CKPT_LIBS) -lm
ALL += $(BUILD)/fuzz/fuzz_safetensors_libfuzzer
endif

# Model-level tests: they link the trainer library (mk/trainer.mk; its variables are read at recipe
# time, since that fragment is included after this one), so they exist only where that fragment does.
ifneq ($(wildcard mk/trainer.mk),)
$(BUILD)/tests/test_ckpt_model: tests/test_ckpt_model.c $(BUILD)/libtrainer.a $(CKPT_CORE_HDR) samples/llama/checkpoint.h samples/llama/lora.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

$(BUILD)/bench/bench_ckpt: bench/bench_ckpt.c $(BUILD)/libtrainer.a $(CKPT_CORE_HDR) samples/llama/checkpoint.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL     += $(BUILD)/tests/test_ckpt_model $(BUILD)/bench/bench_ckpt
BENCHES += $(BUILD)/bench/bench_ckpt
TESTS += $(BUILD)/tests/test_ckpt_model tests/test_ckpt_hf.sh tests/test_ckpt_cli.sh
endif
