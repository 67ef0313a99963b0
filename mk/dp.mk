# DP-SGD math: accountant, noise, per-sample norm kernels, clipping; their tests and tools.
# (samples/train_* join here once the trainer's hooks are in.)


$(BUILD)/dp-accountant: tools/dp_accountant.c samples/dp/accountant.c samples/dp/accountant.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tools/dp_accountant.c samples/dp/accountant.c $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/test_accountant: tests/test_accountant.c samples/dp/accountant.c samples/dp/accountant.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_accountant.c samples/dp/accountant.c $(LDFLAGS) $(LDLIBS)

ALL   += $(BUILD)/dp-accountant $(BUILD)/tests/test_accountant
TESTS += $(BUILD)/tests/test_accountant tests/test_accountant_opacus.sh

# -fopenmp -fno-math-errno as the trainers build noise.c: the test runs its vector path.
$(BUILD)/tests/test_noise: tests/test_noise.c kernels/cpu/noise.c kernels/noise.h kernels/cpu/vmath.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fopenmp -fno-math-errno -o $@ tests/test_noise.c kernels/cpu/noise.c $(LDFLAGS) -fopenmp $(LDLIBS)

ALL   += $(BUILD)/tests/test_noise
TESTS += $(BUILD)/tests/test_noise

DP_KERNEL_SRC := kernels/cpu/dp_norms_direct.c kernels/cpu/dp_norms_ghost.c kernels/cpu/dp_norms_tied.c kernels/cpu/dp_norms_flash.c \
                 kernels/cpu/dp_norms_embedding.c kernels/cpu/dp_clip.c kernels/cpu/dp_mixed.c

$(BUILD)/tests/test_dp_norms: tests/test_dp_norms.c $(DP_KERNEL_SRC) kernels/dp_kernels.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fopenmp -o $@ tests/test_dp_norms.c $(DP_KERNEL_SRC) $(LDFLAGS) -fopenmp -lopenblas $(LDLIBS)

ALL   += $(BUILD)/tests/test_dp_norms
TESTS += $(BUILD)/tests/test_dp_norms

$(BUILD)/bench/dp_norms: bench/dp_bench_norms.c $(DP_KERNEL_SRC) kernels/cpu/blas_core.c kernels/cpu/blas_core.h kernels/dp_kernels.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ bench/dp_bench_norms.c $(DP_KERNEL_SRC) kernels/cpu/blas_core.c $(LDFLAGS) -lopenblas $(LDLIBS)

ALL     += $(BUILD)/bench/dp_norms
BENCHES += $(BUILD)/bench/dp_norms

$(BUILD)/tests/test_dp_config: tests/test_dp_config.c samples/dp/dp_config.c samples/dp/dp_config.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_dp_config.c samples/dp/dp_config.c $(LDFLAGS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_dp_config
TESTS += $(BUILD)/tests/test_dp_config

# The DP samples: the trainer library (mk/trainer.mk) + the DP strategy and kernels. trainer.mk is
# read after this file, so its variables are empty in prerequisite lists here: name its files.
DP_TRAINER_DEPS := $(BUILD)/libtrainer.a kernels/kernels.h samples/llama/config.h samples/llama/data.h samples/llama/llama.h samples/llama/train.h dpmem.h
# (the noise, kernels/cpu/noise.c, is in the trainer library: the weights' initialisation draws from it too)
DP_STRATEGY_SRC := samples/dp/dp_sgd.c samples/dp/dp_norms.c samples/dp/dp_clip.c samples/dp/dp_lora.c samples/dp/dp_report.c \
                   samples/dp/dp_device.c samples/dp/dp_fused.c samples/dp/dp_plan_bench.c
DP_LIB_SRC := $(DP_STRATEGY_SRC) samples/dp/dp_config.c samples/dp/accountant.c $(DP_KERNEL_SRC) kernels/cpu/dp_update.c
# kernels_cuda.h: dp_norms.c sizes the GPU's flash and tied-gather scratch with its inline functions
DP_LIB_HDR := samples/dp/dp_sgd.h samples/dp/dp_sgd_impl.h samples/dp/poisson_capacity.h samples/dp/dp_config.h samples/dp/accountant.h kernels/noise.h kernels/dp_kernels.h \
              kernels/cuda/kernels_cuda.h
DP_SAMPLES := train_dpsgd train_ghost train_flash train_lora

# The DP samples link the CUDA backend exactly as train_vanilla does (mk/trainer.mk's TRAINER_CUDA_LINK:
# where nvcc exists, not under SAN=1, not with TRAINER_CUDA=0), and then samples/dp/dp_*.c are built with
# DP_HAVE_CUDA (its `_cuda` kernel calls). DP_CUDA_ON repeats TRAINER_CUDA_ON's condition because
# prerequisites are expanded before trainer.mk is read (recipes are expanded later: they use its names).
DP_CUDA_ON   := $(and $(filter 1,$(or $(TRAINER_CUDA),1)),$(KCUDA_LIB),$(filter-out 1,$(SAN)))
DP_CUDA_DEPS := $(if $(DP_CUDA_ON),$(BUILD)/obj/trainer/samples/llama/train_cuda.o $(KCUDA_LIB) kernels/cuda/kernels_cuda.h,$(BUILD)/obj/trainer/cuda_why.o)
DP_CUDA_DEPS += $(if $(and $(DP_CUDA_ON),$(wildcard $(CUDA_HOME)/include/nccl.h),$(wildcard $(CUDA_HOME)/lib/libnccl.so $(CUDA_HOME)/lib64/libnccl.so)),$(BUILD)/obj/trainer/samples/llama/comm_nccl.o)

# The DP strategy and kernels, compiled once for the four samples (samples/dp/dp_*.c with DP_HAVE_CUDA where they
# link the CUDA backend: the objects follow the trainers' link mode, mk/trainer.mk's stamp).
DP_LIB     := $(BUILD)/libdp.a
DP_LIB_OBJ := $(patsubst %.c,$(BUILD)/obj/dp/%.o,$(DP_LIB_SRC))
$(BUILD)/obj/dp/%.o: %.c $(DP_LIB_HDR) $(filter-out $(BUILD)/libtrainer.a,$(DP_TRAINER_DEPS)) $(BUILD)/obj/trainer/link-mode | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) $(if $(TRAINER_CUDA_ON),-DDP_HAVE_CUDA) -c -o $@ $<
$(DP_LIB): $(DP_LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# train_dpsgd, train_ghost, train_flash: samples/train_dp.c's table, one row each (-DDP_SAMPLE picks it).
DP_TABLE_SAMPLES := train_dpsgd train_ghost train_flash
DP_LINK = $(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB) \
	    $(TRAINER_CUDA_LINK) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)
$(addprefix $(BUILD)/,$(DP_TABLE_SAMPLES)): $(BUILD)/%: samples/train_dp.c $(DP_LIB) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) $(DP_CUDA_DEPS) $(BUILD)/obj/trainer/link-mode | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(DP_LINK) -DDP_SAMPLE='"$*"'
$(BUILD)/train_lora: $(BUILD)/%: samples/%.c $(DP_LIB) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) $(DP_CUDA_DEPS) $(BUILD)/obj/trainer/link-mode | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(DP_LINK)

ALL += $(addprefix $(BUILD)/,$(DP_SAMPLES))

$(BUILD)/tests/test_dp_train: tests/test_dp_train.c tests/test_dp_rig.h $(DP_LIB_SRC) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB_SRC) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_dp_train
TESTS += $(BUILD)/tests/test_dp_train

# --poisson's room for a step's rows against the exact binomial tail (samples/dp/poisson_capacity.h)
$(BUILD)/tests/test_dp_poisson: tests/test_dp_poisson.c $(DP_LIB_SRC) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB_SRC) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)
ALL   += $(BUILD)/tests/test_dp_poisson
TESTS += $(BUILD)/tests/test_dp_poisson

$(BUILD)/tests/test_dp_precision: tests/test_dp_precision.c tests/test_dp_rig.h $(DP_LIB_SRC) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB_SRC) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_dp_precision
TESTS += $(BUILD)/tests/test_dp_precision

$(BUILD)/tests/test_dp_lora: tests/test_dp_lora.c tests/test_dp_rig.h $(DP_LIB_SRC) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB_SRC) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_dp_lora
TESTS += $(BUILD)/tests/test_dp_lora

$(BUILD)/tests/test_dp_lora_bf16: tests/test_dp_lora_bf16.c tests/test_dp_rig.h $(DP_LIB_SRC) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB_SRC) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_dp_lora_bf16
TESTS += $(BUILD)/tests/test_dp_lora_bf16

# (the samples are real prerequisites: the test runs them, so a changed sample must be rebuilt first)
$(BUILD)/tests/test_dp_cli: tests/test_dp_cli.c tests/test_dp_common.h samples/dp/accountant.c samples/dp/accountant.h $(addprefix $(BUILD)/,$(DP_SAMPLES)) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_dp_cli.c samples/dp/accountant.c $(LDFLAGS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_dp_cli
TESTS += $(BUILD)/tests/test_dp_cli tests/test_train_numbers.sh

$(BUILD)/bench/dp_train: bench/dp_bench_train.c bench/timed_strategy.h $(DP_LIB_SRC) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB_SRC) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL     += $(BUILD)/bench/dp_train
BENCHES += $(BUILD)/bench/dp_train

# The two memory levers (bf16, activation checkpointing): time and peak ratios in one run.
$(BUILD)/bench/levers: bench/bench_levers.c bench/timed_strategy.h $(DP_LIB_SRC) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB_SRC) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL     += $(BUILD)/bench/levers
BENCHES += $(BUILD)/bench/levers

# DP on the CUDA target: the plan's DP buffers are those of the CUDA path (runs everywhere), and the
# GPU run against the CPU (SKIP line and exit 77 without a GPU). Both run the samples.
$(BUILD)/tests/test_dp_cuda: tests/test_dp_cuda.c tests/test_dp_common.h tests/logread.h kernels/cuda/kernels_cuda.h $(addprefix $(BUILD)/,$(DP_SAMPLES)) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_dp_cuda.c $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/test_dp_cuda_gpu: tests/test_dp_cuda_gpu.c tests/test_dp_common.h $(addprefix $(BUILD)/,$(DP_SAMPLES) train_vanilla) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_dp_cuda_gpu.c $(LDFLAGS) $(LDLIBS) -lm

ALL   += $(BUILD)/tests/test_dp_cuda $(BUILD)/tests/test_dp_cuda_gpu
TESTS += $(BUILD)/tests/test_dp_cuda $(BUILD)/tests/test_dp_cuda_gpu

# The DP step's fused noise + AdamW (kernels/cpu/dp_update.c) against noise_privatize + adamw_update, bit
# for bit: it links the trainer library (the CPU backend, the noise); trainer.mk's names in the recipe only.
$(BUILD)/tests/test_dp_update: tests/test_dp_update.c kernels/cpu/dp_update.c kernels/dp_kernels.h kernels/adamw_element.h \
                               kernels/noise.h $(BUILD)/libtrainer.a | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ tests/test_dp_update.c kernels/cpu/dp_update.c $(TRAINER_LIB) \
	    $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_dp_update
TESTS += $(BUILD)/tests/test_dp_update

# The loop's fused update (samples/dp/dp_fused.c) saves the two passes' model byte for byte, and says which ran:
# the DP trainers, dpmem-trace (META dp.update), mpirun for --zero over two ranks.
TESTS += tests/test_dp_fused.sh

# Sequence classification (samples/llama/classify.h): the model, its finite differences, the labelled
# data file; with --dump, the tensors tests/test_classify_torch.py compares with transformers and Opacus.
$(BUILD)/tests/test_classify: tests/test_classify.c tests/test_dp_rig.h $(DP_LIB_SRC) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB_SRC) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_classify
TESTS += $(BUILD)/tests/test_classify tests/test_classify_cli.sh

# The cryptographic noise stream (--secure-noise): RFC 8439's vectors, the sampler, the grid; noise.c for
# the Philox path it is compared with. -fopenmp -fno-math-errno as the trainers build it.
$(BUILD)/tests/test_secure_noise: tests/test_secure_noise.c kernels/cpu/secure_noise.c kernels/cpu/noise.c kernels/secure_noise.h \
                                  kernels/chacha20.h kernels/noise.h kernels/cpu/vmath.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fopenmp -fno-math-errno -o $@ tests/test_secure_noise.c kernels/cpu/secure_noise.c kernels/cpu/noise.c \
	    $(LDFLAGS) -fopenmp $(LDLIBS)

ALL   += $(BUILD)/tests/test_secure_noise
TESTS += $(BUILD)/tests/test_secure_noise

# The CPU noise pass per coordinate: Philox against the secure stream (--secure-noise), the ratio per round.
$(BUILD)/bench/bench_noise: bench/bench_noise.c kernels/cpu/noise.c kernels/cpu/secure_noise.c kernels/noise.h kernels/secure_noise.h \
                            kernels/chacha20.h kernels/cpu/vmath.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fopenmp -fno-math-errno -o $@ bench/bench_noise.c kernels/cpu/noise.c kernels/cpu/secure_noise.c \
	    $(LDFLAGS) -fopenmp $(LDLIBS)

ALL     += $(BUILD)/bench/bench_noise
BENCHES += $(BUILD)/bench/bench_noise
