# LLaMA trainer core: kernels (interface, CPU backend, plan backend), the model, the shared training
# loop, build/train_vanilla, and their tests and benchmark. OpenMP for loops, OpenBLAS for GEMM.

# -fno-math-errno: sqrt and friends need no errno fallback call, so loops over them vectorize
# (kernels/cpu/optimizer.c's AdamW); no value changes.
TRAINER_CFLAGS  := -fopenmp -fno-math-errno
TRAINER_LDLIBS  := -fopenmp -lopenblas -lcjson
# Data parallelism over MPI (samples/llama/comm.h): Debian's OpenMPI at its fixed place (under DEPS= where
# packages were unpacked), so the flags are right on the first build, before the packages are there.
MPI_PREFIX      := $(if $(DEPS),$(DEPS),/usr)/lib/x86_64-linux-gnu/openmpi
TRAINER_CFLAGS  += -DHAVE_MPI -I$(MPI_PREFIX)/include -I$(MPI_PREFIX)/include/openmpi
TRAINER_LDLIBS  += -L$(MPI_PREFIX)/lib -Wl$(comma)-rpath$(comma)$(MPI_PREFIX)/lib -lmpi
TRAINER_HDRS    := $(wildcard kernels/*.h kernels/cpu/*.h kernels/plan/*.h samples/llama/*.h) dpmem.h common/io_guard.h common/utf8.h common/timestats.h
TRAINER_SRC     := kernels/kernels.c kernels/init.c $(filter-out kernels/cpu/dp_%,$(wildcard kernels/cpu/*.c)) \
                   kernels/plan/backend_plan.c kernels/plan/cost.c kernels/plan/profile.c samples/llama/config.c samples/llama/data.c samples/llama/llama.c samples/llama/train.c samples/llama/classify.c samples/llama/train_gpu_time.c samples/llama/mfu.c samples/llama/plan_time.c \
                   samples/llama/checkpoint.c samples/llama/safetensors.c samples/llama/hf_config.c common/io_guard.c common/timestats.c samples/llama/comm.c samples/llama/dist.c samples/llama/shard.c samples/llama/grad_reduce.c samples/llama/lora.c samples/llama/eval.c
# --plan-for cuda: the CUDA target's scratch sizes are plain C (kernels/cuda/scratch_cuda.c).
TRAINER_CUDA_PLAN := $(wildcard kernels/cuda/scratch_cuda.c)
TRAINER_SRC     += $(TRAINER_CUDA_PLAN)
TRAINER_CFLAGS  += $(if $(TRAINER_CUDA_PLAN),-DTRAIN_HAVE_CUDA_PLAN)
TRAINER_OBJ     := $(patsubst %.c,$(BUILD)/obj/trainer/%.o,$(TRAINER_SRC))
TRAINER_LIB     := $(BUILD)/libtrainer.a

$(BUILD)/obj/trainer/%.o: %.c $(TRAINER_HDRS) mk/trainer.mk | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -c -o $@ $<

$(TRAINER_LIB): $(TRAINER_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# The real CUDA backend in build/train_vanilla where nvcc exists (mk/cuda_backend.mk's libkcuda.a), not
# in the sanitizer build (the CUDA runtime does not run under ASan); TRAINER_CUDA=0 leaves it out.
TRAINER_CUDA    ?= 1
TRAINER_CUDA_ON := $(and $(filter 1,$(TRAINER_CUDA)),$(KCUDA_LIB),$(filter-out 1,$(SAN)))
# NCCL (the toolkit's; in lib/ or lib64/) for the device all-reduce between GPU ranks (samples/llama/comm_nccl.c).
NCCL_LIBDIR     := $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_HOME)/lib/libnccl.so $(CUDA_HOME)/lib64/libnccl.so))))
TRAINER_NCCL_ON := $(and $(TRAINER_CUDA_ON),$(NCCL_LIBDIR),$(wildcard $(CUDA_HOME)/include/nccl.h))
# The trainers' link mode (with the CUDA backend or without: `make demo` links them without where no
# GPU will run them) in a stamp rewritten only when the mode changes, so that a change relinks them.
# A rule, not a parse-time $(shell): every make that only parsed this file wrote its own mode there —
# `make demo`'s outer make (TRAINER_CUDA=1) and its inner one (0 without a GPU) flipped it on every run,
# relinking 14 programs for nothing, and `make -n` wrote it too. Now only a make that links a trainer
# writes it (make re-reads its time after the recipe: unchanged content, unchanged time, no relink).
TRAINER_LINK_STAMP := $(BUILD)/obj/trainer/link-mode
TRAINER_LINK_MODE  := $(if $(TRAINER_CUDA_ON),cuda,cpu)
$(TRAINER_LINK_STAMP): FORCE
	@mkdir -p $(@D); [ "$$(cat $@ 2>/dev/null)" = $(TRAINER_LINK_MODE) ] || echo $(TRAINER_LINK_MODE) > $@
# A trainer linked without the backend says why at --device cuda (train.c: train_cuda_missing_why): its
# real reason at build time, not always "no nvcc" (make demo leaves it out where it found no GPU). The
# source is rewritten only when the reason changes, as the stamp above.
WHY_SAN  := the sanitizer build (SAN=1) leaves it out, since the CUDA runtime does not run under AddressSanitizer
WHY_OFF  := it was linked with TRAINER_CUDA=$(TRAINER_CUDA)$(if $(HAVE_GPU),,$(comma) as make demo links the trainers where nvidia-smi found no GPU at build time)
WHY_OFF  := $(WHY_OFF); nvcc is there: make it again with TRAINER_CUDA=1$(comma) the default (e.g. make build/train_vanilla)
WHY_NVCC := no nvcc at build time$(comma) none under CUDA_HOME=$(CUDA_HOME): install the CUDA toolkit or give CUDA_HOME$(comma) then make it again
TRAINER_CUDA_WHY := $(if $(filter 1,$(SAN)),$(WHY_SAN),$(if $(KCUDA_LIB),$(if $(filter 1,$(TRAINER_CUDA)),,$(WHY_OFF)),$(WHY_NVCC)))
TRAINER_WHY_C := $(BUILD)/obj/trainer/cuda_why.c
TRAINER_WHY_O := $(BUILD)/obj/trainer/cuda_why.o
$(TRAINER_WHY_C): FORCE
	@mkdir -p $(@D); printf 'const char *const train_cuda_missing_why = "%s";\n' '$(subst ',,$(strip $(TRAINER_CUDA_WHY)))' > $@.new; \
	    if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; fi
$(TRAINER_WHY_O): $(TRAINER_WHY_C)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
.PHONY: FORCE
FORCE:
TRAINER_CUDA_LINK := $(if $(TRAINER_CUDA_ON),$(BUILD)/obj/trainer/samples/llama/train_cuda.o $(KCUDA_LIB) \
                     $(if $(TRAINER_NCCL_ON),$(BUILD)/obj/trainer/samples/llama/comm_nccl.o -L$(NCCL_LIBDIR) -Wl$(comma)-rpath$(comma)$(NCCL_LIBDIR) -lnccl) \
                     -L$(CUDA_HOME)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA_HOME)/lib64 -lcudnn -lnvrtc -lcublas -lcudart -lstdc++,$(TRAINER_WHY_O))

$(BUILD)/train_vanilla: samples/train_vanilla.c $(TRAINER_LIB) $(TRAINER_HDRS) $(TRAINER_LINK_STAMP) $(if $(TRAINER_CUDA_ON),$(BUILD)/obj/trainer/samples/llama/train_cuda.o $(KCUDA_LIB),$(TRAINER_WHY_O)) $(if $(TRAINER_NCCL_ON),$(BUILD)/obj/trainer/samples/llama/comm_nccl.o) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(TRAINER_CUDA_LINK) $(TRAINER_LIB) $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

# The link a CPU plan's collectives run over, measured under mpirun (samples/llama/plan_time.c runs it).
$(BUILD)/plan_comm_probe: samples/plan_comm_probe.c $(TRAINER_LIB) samples/llama/comm.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(TRAINER_LIB) $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

TRAINER_TESTS := test_kernels_cpu test_llama_grad test_llama_train test_llama_memory test_llama_precision test_llama_init test_blas_core test_plan_cost
$(addprefix $(BUILD)/tests/,$(TRAINER_TESTS)): $(BUILD)/tests/%: tests/%.c $(TRAINER_LIB) $(TRAINER_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(TRAINER_LIB) $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

# OpenBLAS as on a CPU it does not know (Prescott until OPENBLAS_CORETYPE is set), preloaded by test_blas_core.
$(BUILD)/tests/test_blas_core: $(BUILD)/tests/libfake_corename.so
$(BUILD)/tests/libfake_corename.so: tests/fake_corename.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(filter-out $(SANFLAGS),$(CFLAGS)) -shared -fPIC -o $@ $<

# The bf16 kernels' test exports its own cblas_sbgemm (-rdynamic), so that the sbgemm path is run
# here too (Debian's OpenBLAS does not export one), then runs itself again on the widening path.
$(BUILD)/tests/test_kernels_bf16: tests/test_kernels_bf16.c $(TRAINER_LIB) $(TRAINER_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -rdynamic -o $@ $< $(TRAINER_LIB) $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

# Where the closing table's times come from (host, or the GPU's through dpmem_cuda.h) and the MFU, against
# the simulated GPU (tests/test_cuda_fakert.c linked in place of libcudart): runs on every machine.
$(BUILD)/tests/test_train_timing: tests/test_train_timing.c tests/test_cuda_fakert.c tests/test_cuda_fakert.h dpmem_cuda.h \
        tests/check.h $(TRAINER_LIB) $(TRAINER_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ tests/test_train_timing.c tests/test_cuda_fakert.c $(TRAINER_LIB) $(LDFLAGS) \
	    $(TRAINER_LDLIBS) $(LDLIBS)

$(BUILD)/bench/bench_trainer: bench/bench_trainer.c $(TRAINER_LIB) $(TRAINER_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(TRAINER_LIB) $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

.PHONY: trainer trainer-test
trainer: $(BUILD)/train_vanilla $(addprefix $(BUILD)/tests/,$(TRAINER_TESTS)) $(BUILD)/bench/bench_trainer
trainer-test: trainer
	@DPMEM_BUILD=$(BUILD) sh tests/run_tests.sh $(addprefix $(BUILD)/tests/,$(TRAINER_TESTS)) tests/test_llama_cli.sh

ALL     += $(BUILD)/plan_comm_probe $(BUILD)/train_vanilla $(addprefix $(BUILD)/tests/,$(TRAINER_TESTS)) $(BUILD)/tests/test_kernels_bf16 $(BUILD)/bench/bench_trainer \
           $(BUILD)/tests/test_train_timing
TESTS   += $(addprefix $(BUILD)/tests/,$(TRAINER_TESTS)) $(BUILD)/tests/test_kernels_bf16 tests/test_llama_cli.sh \
           $(BUILD)/tests/test_train_timing
BENCHES += $(BUILD)/bench/bench_trainer

# The GPU embedding backward's column walk (kernels/cuda/embedding_walk.h) on the host against the plain
# walk: plain C++, so it runs on every machine, the sanitized pass included.
$(BUILD)/tests/test_embedding_walk: tests/test_embedding_walk.cpp kernels/cuda/embedding_walk.h kernels/kernels.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -o $@ $< $(LDFLAGS) $(LDLIBS)
ALL   += $(BUILD)/tests/test_embedding_walk
TESTS += $(BUILD)/tests/test_embedding_walk
