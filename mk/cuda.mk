# dpmem_cuda.h: the GPU layer. Its tests build on any machine with the CUDA toolkit (no GPU needed to
# build or link); those that need a GPU print one SKIP line without one. Nothing here without nvcc.

ifneq ($(NVCC),)

DPMEM_CUDA_LIBDIR := $(CUDA_HOME)/lib64
DPMEM_CUDA_LIBS   := -L$(DPMEM_CUDA_LIBDIR) -Wl,-rpath,$(DPMEM_CUDA_LIBDIR) -lcudart
DPMEM_CUDA_CLANG       := $(shell command -v clang-14 || command -v clang)
DPMEM_CUDA_HDRS   := dpmem_cuda.h dpmem.h tests/logread.h tests/test_cuda_common.h kernels/cuda/cuda_no_device.h

# The NVTX extension capture library, loaded by tests through NVTX_INJECTION64_PATH. Never built with
# the sanitizers: the nvcc-built test (not sanitized) loads it too, and ASan must come first or not at all.
$(BUILD)/tests/libnvtx_inject_ext.so: tests/nvtx_inject_ext.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(filter-out $(SANFLAGS),$(CFLAGS)) -fPIC -shared -o $@ $< $(filter-out $(SANFLAGS),$(LDFLAGS)) -lpthread

# The same test built by each compiler the header promises to work with.
$(BUILD)/tests/test_cuda_api: tests/test_cuda_api.c $(DPMEM_CUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDFLAGS) $(DPMEM_CUDA_LIBS) $(LDLIBS)

$(BUILD)/tests/test_cuda_api_cxx: tests/test_cuda_api.c $(DPMEM_CUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -x c++ -o $@ $< -x none $(LDFLAGS) $(DPMEM_CUDA_LIBS) $(LDLIBS)

$(BUILD)/tests/test_cuda_api_nvcc: tests/test_cuda_api.c $(DPMEM_CUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(CPPFLAGS) -x cu -o $@ $< -Xlinker -rpath,$(DPMEM_CUDA_LIBDIR) $(LDLIBS)

DPMEM_CUDA_API_TESTS := $(BUILD)/tests/test_cuda_api $(BUILD)/tests/test_cuda_api_cxx $(BUILD)/tests/test_cuda_api_nvcc

# clang as a C compiler (skipped in the sanitizer build: its runtime may not be installed).
ifneq ($(DPMEM_CUDA_CLANG),)
ifneq ($(SAN),1)
$(BUILD)/tests/test_cuda_api_clang: tests/test_cuda_api.c $(DPMEM_CUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(DPMEM_CUDA_CLANG) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDFLAGS) $(DPMEM_CUDA_LIBS) $(LDLIBS)
DPMEM_CUDA_API_TESTS += $(BUILD)/tests/test_cuda_api_clang
endif
endif

# DPMEM_DISABLE: the object is kept for test_cuda_disabled.sh to inspect with nm.
$(BUILD)/tests/test_cuda_disabled.o: tests/test_cuda_disabled.c dpmem_cuda.h dpmem.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/test_cuda_disabled: $(BUILD)/tests/test_cuda_disabled.o
	$(CC) -o $@ $< $(LDFLAGS) $(DPMEM_CUDA_LIBS) $(LDLIBS)

# The GPU layer against a simulated device: the fake runtime replaces libcudart.
$(BUILD)/tests/test_cuda_fake: tests/test_cuda_fake.c tests/test_cuda_fakert.c tests/test_cuda_fakert.h $(DPMEM_CUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_cuda_fake.c tests/test_cuda_fakert.c $(LDFLAGS) $(LDLIBS)

# The same without NVTX (DPMEM_NO_NVTX): everything but regions and counters still works.
$(BUILD)/tests/test_cuda_fake_nonvtx: tests/test_cuda_fake.c tests/test_cuda_fakert.c tests/test_cuda_fakert.h $(DPMEM_CUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DDPMEM_NO_NVTX -o $@ tests/test_cuda_fake.c tests/test_cuda_fakert.c $(LDFLAGS) $(LDLIBS)

DPMEM_CUDA_FAKE_TESTS := $(BUILD)/tests/test_cuda_fake $(BUILD)/tests/test_cuda_fake_nonvtx

# What needs a GPU (kernels, cuBLAS): nvcc. Runs its checks only where a device is present.
$(BUILD)/tests/test_cuda_gpu: tests/test_cuda_gpu.cu $(DPMEM_CUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(CPPFLAGS) -o $@ $< -Xlinker -rpath,$(DPMEM_CUDA_LIBDIR) -lcublas $(LDLIBS)

$(BUILD)/bench/bench_cuda: tests/test_cuda_bench.c $(DPMEM_CUDA_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDFLAGS) $(DPMEM_CUDA_LIBS) $(LDLIBS)

# The words for "no CUDA device" (kernels/cuda/cuda_no_device.h), against the CUDA runtime's errors.
$(BUILD)/tests/test_cuda_no_device: tests/test_cuda_no_device.c kernels/cuda/cuda_no_device.h tests/check.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LDFLAGS) $(DPMEM_CUDA_LIBS) $(LDLIBS)

ALL     += $(BUILD)/tests/libnvtx_inject_ext.so $(DPMEM_CUDA_API_TESTS) $(BUILD)/tests/test_cuda_disabled \
           $(DPMEM_CUDA_FAKE_TESTS) $(BUILD)/tests/test_cuda_gpu $(BUILD)/bench/bench_cuda $(BUILD)/tests/test_cuda_no_device
TESTS   += $(DPMEM_CUDA_API_TESTS) tests/test_cuda_disabled.sh $(DPMEM_CUDA_FAKE_TESTS) \
           $(BUILD)/tests/test_cuda_gpu tests/test_cuda_memcheck.sh $(BUILD)/tests/test_cuda_no_device
BENCHES += $(BUILD)/bench/bench_cuda

.PHONY: cuda
cuda: $(BUILD)/tests/libnvtx_inject_ext.so $(DPMEM_CUDA_API_TESTS) $(BUILD)/tests/test_cuda_disabled \
      $(DPMEM_CUDA_FAKE_TESTS) $(BUILD)/tests/test_cuda_gpu $(BUILD)/bench/bench_cuda

endif
