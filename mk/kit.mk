# The kit (dpmem.h): its tests, the NVTX capture library, the benchmark and the quickstart sample.

KIT_TESTS := test_kit_accounting test_kit_scopes test_kit_threads test_kit_crash test_kit_nvtx test_kit_oom test_kit_late_writer
KIT_HDRS  := dpmem.h tests/check.h tests/logread.h

$(BUILD)/tests/%: tests/%.c $(KIT_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D) $(BUILD)/tmp
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests $< -o $@ $(LDFLAGS) $(LDLIBS)

# NVTX injection library that records range pushes/pops (how Nsight attaches, without Nsight).
$(BUILD)/tests/libnvtx_inject.so: tests/nvtx_inject.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -shared $< -o $@ $(LDFLAGS)

$(BUILD)/tests/test_kit_nvtx: $(BUILD)/tests/libnvtx_inject.so

$(BUILD)/bench_kit: bench/bench_kit.c dpmem.h | $(DEPS_STAMP)
	$(CC) $(CPPFLAGS) $(CFLAGS) -O2 $< -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/quickstart: samples/quickstart.c dpmem.h | $(DEPS_STAMP)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@ $(LDFLAGS) $(LDLIBS)

ALL     += $(addprefix $(BUILD)/tests/,$(KIT_TESTS)) $(BUILD)/tests/libnvtx_inject.so $(BUILD)/quickstart $(BUILD)/bench_kit
TESTS   += $(addprefix $(BUILD)/tests/,$(KIT_TESTS)) tests/test_kit_compile.sh tests/test_readme_example.sh
BENCHES += $(BUILD)/bench_kit
