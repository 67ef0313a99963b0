# The CUDA backend (kernels/cuda): libkcuda.a (nvcc; CUDA runtime + cuBLAS), its plan target (plain C,
# built always), and the tests that hold every CUDA op against its kernels/cpu twin. Everything builds
# and links without a GPU; the GPU tests print one SKIP line and exit 77 where no device is found.
#
# -arch: CUDA_ARCH (the top Makefile fills it from nvidia-smi: sm_90 on H100/H200). With no GPU and no
# CUDA_ARCH, a portable fatbin: sm_80 and sm_90 code plus compute_90 PTX for newer devices.
#
# Objects linked into the tests are built WITHOUT the sanitizers even when SAN=1: nvcc links the test,
# and the CUDA runtime does not run under ASan (its shadow gap). The pure-C plan test is sanitized.

KCUDA_SRC_CU := $(wildcard kernels/cuda/*.cu)
KCUDA_HDRS   := kernels/cuda/kernels_cuda.h kernels/cuda/ops_cuda.h kernels/cuda/cuda_common.cuh kernels/cuda/cuda_no_device.h \
                kernels/cuda/storage.cuh kernels/cuda/embedding_walk.h kernels/kernels.h kernels/dp_kernels.h kernels/noise.h dpmem.h \
                kernels/adamw_element.h kernels/secure_noise.h kernels/chacha20.h

# cuDNN's C++ frontend (headers only, for the fused attention of attention_cudnn.cpp): PyPI's
# nvidia-cudnn-frontend wheel, pinned, its include/ unpacked under .deps/ (git-ignored) on first use.
# cuDNN itself is the toolkit's (/usr/local/cuda: libcudnn.so.9; on a GPU machine, torch's wheel).
CUDNN_FE_VERSION := 1.32.0
CUDNN_FE_DIR     := .deps/cudnn-frontend-$(CUDNN_FE_VERSION)
CUDNN_FE_HDR     := $(CUDNN_FE_DIR)/include/cudnn_frontend.h
$(CUDNN_FE_HDR):
	@echo "… fetching cuDNN's frontend headers (PyPI nvidia-cudnn-frontend==$(CUDNN_FE_VERSION))"
	@rm -rf $(CUDNN_FE_DIR).tmp && mkdir -p $(CUDNN_FE_DIR).tmp
	@python3 -m pip download --quiet --no-deps --only-binary=:all: -d $(CUDNN_FE_DIR).tmp \
	    nvidia-cudnn-frontend==$(CUDNN_FE_VERSION) || \
	    { echo "✗ could not download nvidia-cudnn-frontend==$(CUDNN_FE_VERSION) from PyPI (needed for the CUDA build)"; exit 1; }
	@python3 -c 'import glob, sys, zipfile; z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/*.whl")[0]); \
	    [z.extract(n, sys.argv[2]) for n in z.namelist() if n.startswith("include/")]' $(CUDNN_FE_DIR).tmp $(CUDNN_FE_DIR)
	@rm -rf $(CUDNN_FE_DIR).tmp
	@test -f $@ && echo "✓ cuDNN frontend headers in $(CUDNN_FE_DIR)/include"
.PHONY: cudnn-frontend
cudnn-frontend: $(CUDNN_FE_HDR)
KCUDA_PLAN_OBJ := $(BUILD)/obj/kcuda/scratch_cuda.o

# Plain C (no CUDA): what `--plan-for cuda` needs. Sanitized like any C object of this build.
$(KCUDA_PLAN_OBJ): kernels/cuda/scratch_cuda.c $(KCUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# The reference side of the CPU-vs-GPU tests, unsanitized (see above): kernels.c, the CPU backend,
# the plan backend, the DP kernels, the noise.
KCUDA_REF_SRC := kernels/kernels.c kernels/init.c $(filter-out kernels/cpu/dp_%,$(wildcard kernels/cpu/*.c)) \
                 kernels/plan/backend_plan.c kernels/cpu/dp_norms_direct.c kernels/cpu/dp_norms_ghost.c kernels/cpu/dp_norms_tied.c \
                 kernels/cpu/dp_norms_flash.c kernels/cpu/dp_norms_embedding.c kernels/cpu/dp_clip.c kernels/cpu/dp_mixed.c kernels/cpu/dp_update.c \
                 kernels/cuda/scratch_cuda.c
KCUDA_REF_OBJ := $(patsubst %.c,$(BUILD)/obj/kcuda_ref/%.o,$(KCUDA_REF_SRC))
KCUDA_CFLAGS_NOSAN := $(filter-out $(SANFLAGS),$(CFLAGS))

$(BUILD)/obj/kcuda_ref/%.o: %.c $(KCUDA_HDRS) kernels/cpu/kernels_cpu.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(KCUDA_CFLAGS_NOSAN) -fopenmp -c -o $@ $<

# The pure-C plan test: CUDA scratch sizes and the plan's tagged allocations, exact (runs everywhere).
# It links the trainer library (mk/trainer.mk: kernels.c, the plan backend and the CPU table).
$(BUILD)/tests/test_cuda_ops_plan: tests/test_cuda_ops_plan.c $(KCUDA_PLAN_OBJ) $(BUILD)/libtrainer.a $(KCUDA_HDRS) \
        tests/check.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Ikernels/cuda $(CFLAGS) -fopenmp -o $@ tests/test_cuda_ops_plan.c $(KCUDA_PLAN_OBJ) $(BUILD)/libtrainer.a \
	    $(LDFLAGS) -fopenmp -lopenblas -lcjson $(LDLIBS)

ALL   += $(BUILD)/tests/test_cuda_ops_plan
TESTS += $(BUILD)/tests/test_cuda_ops_plan

ifneq ($(NVCC),)

KCUDA_ARCH   := $(if $(CUDA_ARCH),,-gencode arch=compute_80$(comma)code=sm_80 -gencode arch=compute_90$(comma)code=sm_90 \
                 -gencode arch=compute_90$(comma)code=compute_90)
KCUDA_NVCCFLAGS := $(NVCCFLAGS) $(KCUDA_ARCH) -Ikernels/cuda
KCUDA_OBJ    := $(patsubst kernels/cuda/%.cu,$(BUILD)/obj/kcuda/%.o,$(KCUDA_SRC_CU)) $(BUILD)/obj/kcuda/attention_cudnn.o
KCUDA_LIB    := $(BUILD)/libkcuda.a
# What a program linking libkcuda.a needs (also the plan object, scratch_cuda.o, which is in the lib).
KCUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -Xlinker -rpath,$(CUDA_HOME)/lib64 -lcudnn -lnvrtc -lcublas -lcudart -lstdc++

# The frontend is host C++17: the C++ compiler builds it, its headers (and cuDNN's) as system headers.
$(BUILD)/obj/kcuda/attention_cudnn.o: kernels/cuda/attention_cudnn.cpp $(KCUDA_HDRS) $(CUDNN_FE_HDR) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 $(OPT) -g $(WARN) -DCUDNN_FRONTEND_SKIP_JSON_LIB -isystem $(CUDNN_FE_DIR)/include \
	    -isystem $(CUDA_HOME)/include -I. -Ikernels -Ikernels/cuda -Isamples -c -o $@ $<

$(BUILD)/obj/kcuda/%.o: kernels/cuda/%.cu $(KCUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(KCUDA_NVCCFLAGS) $(CPPFLAGS) -c -o $@ $<

# The secure noise must round every double product and sum on its own, as the host does (its values are
# the CPU's bit for bit): no fused multiply-add in that file.
$(BUILD)/obj/kcuda/secure_noise.o: KCUDA_NVCCFLAGS += -fmad=false

$(BUILD)/obj/kcuda/scratch_cuda_nosan.o: kernels/cuda/scratch_cuda.c $(KCUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(KCUDA_CFLAGS_NOSAN) -c -o $@ $<

$(KCUDA_LIB): $(KCUDA_OBJ) $(BUILD)/obj/kcuda/scratch_cuda_nosan.o
	@rm -f $@
	$(AR) rcs $@ $^

# Every CUDA op against its CPU twin (SKIP without a GPU).
# The CPU side every nvcc-linked program of this fragment needs (kernels.c, CPU and plan backends,
# CPU DP kernels, noise), unsanitized; scratch_cuda comes from the library.
KCUDA_TEST_REF := $(filter-out $(BUILD)/obj/kcuda_ref/kernels/cuda/%,$(KCUDA_REF_OBJ))
KCUDA_DEPS_L   := $(if $(DEPS),-L$(DEPS)/lib/x86_64-linux-gnu -L$(DEPS)/lib/x86_64-linux-gnu/openblas-pthread)

$(BUILD)/tests/test_cuda_kernels: tests/test_cuda_kernels.cu $(KCUDA_LIB) $(KCUDA_TEST_REF) $(KCUDA_HDRS) tests/check.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(KCUDA_NVCCFLAGS) $(CPPFLAGS) -o $@ tests/test_cuda_kernels.cu $(KCUDA_TEST_REF) $(KCUDA_LIB) \
	    $(KCUDA_DEPS_L) $(KCUDA_LDLIBS) -lopenblas -lgomp $(LDLIBS)

# Kernel timings on the GPU vs cuBLAS GEMM of the same layer (SKIP line without a GPU).
# (with the trainers' table of dense peaks, samples/llama/mfu.c: each kernel's % of the device's peak)
$(BUILD)/bench/bench_cuda_kernels: bench/bench_cuda_kernels.cu $(KCUDA_LIB) $(KCUDA_TEST_REF) $(BUILD)/obj/kcuda_ref/samples/llama/mfu.o \
        $(KCUDA_HDRS) samples/llama/mfu.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(KCUDA_NVCCFLAGS) $(CPPFLAGS) -o $@ bench/bench_cuda_kernels.cu $(KCUDA_TEST_REF) $(BUILD)/obj/kcuda_ref/samples/llama/mfu.o $(KCUDA_LIB) \
	    $(KCUDA_DEPS_L) $(KCUDA_LDLIBS) -lopenblas -lgomp $(LDLIBS)

# Not in the sanitizer pass (SAN=1): nvcc output is not ASan-instrumented (device code cannot be; on a
# GPU, compute-sanitizer is the tool: tests/test_cuda_ops_sanitize.sh) and the trainers of that pass
# link no CUDA, so rebuilding the library there would cost minutes and check nothing new.
ifneq ($(SAN),1)
ALL     += $(KCUDA_LIB) $(BUILD)/tests/test_cuda_kernels $(BUILD)/bench/bench_cuda_kernels
TESTS   += $(BUILD)/tests/test_cuda_kernels tests/test_cuda_ops_train.sh tests/test_cuda_ops_sanitize.sh
BENCHES += $(BUILD)/bench/bench_cuda_kernels
endif

.PHONY: cuda-backend
cuda-backend: $(KCUDA_LIB) $(BUILD)/tests/test_cuda_kernels $(BUILD)/tests/test_cuda_ops_plan $(BUILD)/bench/bench_cuda_kernels

else
.PHONY: cuda-backend
cuda-backend: $(BUILD)/tests/test_cuda_ops_plan
endif
