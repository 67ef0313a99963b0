# LLaMA trainer core: kernels (interface, CPU backend, plan backend), the model, the shared training
# loop, build/train_vanilla, and their tests and benchmark. OpenMP for loops, OpenBLAS for GEMM.

TRAINER_CFLAGS  := -fopenmp
TRAINER_LDLIBS  := -fopenmp -lopenblas -lcjson
TRAINER_HDRS    := kernels/kernels.h kernels/cpu/kernels_cpu.h samples/config.h samples/data.h \
                   samples/llama.h samples/train.h dpmem.h samples/checkpoint.h samples/safetensors.h samples/hf_config.h
TRAINER_SRC     := kernels/kernels.c $(filter-out kernels/cpu/dp_%,$(wildcard kernels/cpu/*.c)) \
                   kernels/plan/backend_plan.c samples/config.c samples/data.c samples/llama.c samples/train.c \
                   samples/checkpoint.c samples/safetensors.c samples/hf_config.c
TRAINER_OBJ     := $(patsubst %.c,$(BUILD)/obj/trainer/%.o,$(TRAINER_SRC))
TRAINER_LIB     := $(BUILD)/libtrainer.a

$(BUILD)/obj/trainer/%.o: %.c $(TRAINER_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -c -o $@ $<

$(TRAINER_LIB): $(TRAINER_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/train_vanilla: samples/train_vanilla.c $(TRAINER_LIB) $(TRAINER_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(TRAINER_LIB) $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

TRAINER_TESTS := test_kernels_cpu test_llama_grad test_llama_train test_llama_memory
$(BUILD)/tests/test_kernels_cpu $(BUILD)/tests/test_llama_grad $(BUILD)/tests/test_llama_train $(BUILD)/tests/test_llama_memory \
$(BUILD)/bench/bench_trainer: $(BUILD)/%: %.c $(TRAINER_LIB) $(TRAINER_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(TRAINER_LIB) $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL     += $(BUILD)/train_vanilla $(addprefix $(BUILD)/tests/,$(TRAINER_TESTS)) $(BUILD)/bench/bench_trainer
TESTS   += $(addprefix $(BUILD)/tests/,$(TRAINER_TESTS)) tests/test_llama_cli.sh
BENCHES += $(BUILD)/bench/bench_trainer
