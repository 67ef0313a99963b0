# Running GPU tests on a GPU that others use too: the GPU test lock and the "another process"
# decisions (tests/gpu_share.h), and compute-sanitizer's summaries (tests/sanitizer_summary.sh).
# Both are checked here without a GPU; the GPU tests use them where there is one.

$(BUILD)/tests/test_gpu_share: tests/test_gpu_share.c tests/gpu_share.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDFLAGS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_gpu_share
TESTS += $(BUILD)/tests/test_gpu_share
TESTS += tests/test_sanitizer_summary.sh tests/test_cuda_sanitize_scripts.sh

# Bugs planted for compute-sanitizer (tests/test_cuda_ops_sanitize.sh: the verdict must see them).
ifneq ($(NVCC),)
$(BUILD)/tests/cuda_sanitize_plant: tests/cuda_sanitize_plant.cu | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -lineinfo -o $@ $< -Xlinker -rpath,$(CUDA_HOME)/lib64
ALL += $(BUILD)/tests/cuda_sanitize_plant
endif
