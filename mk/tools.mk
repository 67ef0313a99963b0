# tools/: dpmem-render, dpmem-report, dpmem-trace, dpmem-charts, their tests, fuzzers and bench.
# The reader, drawing and chart code is one small static library that every tool links; it draws
# through cairo (libcairo2-dev) with a font of fonts-dejavu-core, so whatever links it links
# $(TOOLS_LDLIBS).

TOOLS_LIB_SRC := tools/read/dpmem_read.c common/io_guard.c tools/charts/figure.c tools/charts/fonts.c tools/charts/palette.c tools/read/units.c \
                 tools/charts/timeline.c tools/charts/timeline_replay.c tools/read/args.c tools/read/runstats.c tools/read/runmeta.c tools/read/ranks.c \
                 tools/charts/charts.c tools/charts/chartdata.c tools/charts/chartkit.c tools/charts/chart_breakdown.c tools/charts/chart_tradeoff.c \
                 tools/charts/chart_sweep.c tools/read/csvread.c tools/read/json_out.c tools/trace/trace.c tools/charts/axes.c \
                 common/timestats.c tools/read/steplog.c tools/read/outpath.c tools/read/shown.c tools/read/threadtracks.c tools/read/threadsteps.c
TOOLS_LIB_OBJ := $(patsubst %.c,$(BUILD)/tools-obj/%.o,$(TOOLS_LIB_SRC))
TOOLS_LIB     := $(BUILD)/tools-obj/libdpmemtools.a
TOOLS_HDRS    := $(wildcard tools/*/*.h common/*.h)
# cairo's and FreeType's headers (under $(DEPS) too), and where fonts.c looks for the font there
TOOLS_CAIRO_INC := -I/usr/include/cairo -I/usr/include/freetype2 \
                   $(if $(DEPS),-I$(DEPS)/include/cairo -I$(DEPS)/include/freetype2 -DDPMEM_FONT_PREFIX='"$(abspath $(DEPS))"')
TOOLS_LDLIBS  := -lcairo -lfreetype

$(BUILD)/tools-obj/%.o: %.c $(TOOLS_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(TOOLS_CAIRO_INC) $(CFLAGS) -c $< -o $@

$(TOOLS_LIB): $(TOOLS_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# build/dpmem-render from tools/dpmem_render.c, and so on.
TOOLS_NAMES := render report trace charts
TOOLS_BIN   := $(foreach t,$(TOOLS_NAMES),$(BUILD)/dpmem-$(t))
define tools_program
$(BUILD)/dpmem-$(1): tools/dpmem_$(1).c $(TOOLS_LIB) $(TOOLS_HDRS) | $(DEPS_STAMP)
	@mkdir -p $$(@D)
	$$(CC) $$(CPPFLAGS) $$(CFLAGS) $$< $(TOOLS_LIB) -o $$@ $$(LDFLAGS) $(TOOLS_LDLIBS) $$(LDLIBS)
endef
$(foreach t,$(TOOLS_NAMES),$(eval $(call tools_program,$(t))))
ALL += $(TOOLS_BIN)
.PHONY: tools
tools: $(TOOLS_BIN)

# Tests: C programs that write known logs (tools/read/synthlog.h), run the tools and check the results.
TOOLS_TESTS := render report trace kit hostile charts
define tools_test
$(BUILD)/tests/test_tools_$(1): tests/test_tools_$(1).c tests/test_tools_common.h tests/test_tools_png.h dpmem.h $(TOOLS_LIB) $(TOOLS_HDRS) | $(DEPS_STAMP)
	@mkdir -p $$(@D)
	$$(CC) $$(CPPFLAGS) $$(CFLAGS) $$< $(TOOLS_LIB) -o $$@ $$(LDFLAGS) $(TOOLS_LDLIBS) $$(LDLIBS)
endef
$(foreach t,$(TOOLS_TESTS),$(eval $(call tools_test,$(t))))
ALL   += $(foreach t,$(TOOLS_TESTS),$(BUILD)/tests/test_tools_$(t))
TESTS += $(foreach t,$(TOOLS_TESTS),$(BUILD)/tests/test_tools_$(t))

# The hostile-file test writes its logs with tests/forge_logs.h; `make stress-readers` runs the same
# logs at full size through the three tools and prints time and peak RSS (tests/stress_readers.c).
$(BUILD)/tests/test_tools_hostile: tests/forge_logs.h
$(BUILD)/tests/stress_readers: tests/stress_readers.c tests/forge_logs.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS) $< -o $@ $(LDFLAGS) $(LDLIBS)
ALL += $(BUILD)/tests/stress_readers
.PHONY: stress-readers
stress-readers: $(TOOLS_BIN) $(BUILD)/tests/stress_readers
	$(BUILD)/tests/stress_readers

# The kit under hostile conditions (a full string table, a full disk, two runs on one log path, short-
# lived threads, open/close cycles): each case in a fresh process, its log read back with the reader.
$(BUILD)/tests/test_kit_hostile: tests/test_kit_hostile.c tests/test_tools_common.h dpmem.h $(TOOLS_LIB) $(TOOLS_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< $(TOOLS_LIB) -o $@ $(LDFLAGS) $(LDLIBS)
ALL   += $(BUILD)/tests/test_kit_hostile
TESTS += $(BUILD)/tests/test_kit_hostile

# A second copy of the kit in a dlopen'd plugin: without -rdynamic each copy writes its own log (and
# says so), with -rdynamic the plugin uses the program's copy.
$(BUILD)/tests/libkit_plugin.so: tests/kit_plugin.c dpmem.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -shared $< -o $@ $(LDFLAGS) -lpthread
$(BUILD)/tests/test_kit_plugin: tests/test_kit_plugin.c tests/test_tools_common.h dpmem.h $(TOOLS_LIB) $(TOOLS_HDRS) $(BUILD)/tests/libkit_plugin.so | $(DEPS_STAMP)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< $(TOOLS_LIB) -o $@ $(LDFLAGS) $(LDLIBS)
$(BUILD)/tests/test_kit_plugin_rdynamic: tests/test_kit_plugin.c tests/test_tools_common.h dpmem.h $(TOOLS_LIB) $(TOOLS_HDRS) $(BUILD)/tests/libkit_plugin.so | $(DEPS_STAMP)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DRDYNAMIC -rdynamic $< $(TOOLS_LIB) -o $@ $(LDFLAGS) $(LDLIBS)
ALL   += $(BUILD)/tests/test_kit_plugin $(BUILD)/tests/test_kit_plugin_rdynamic
TESTS += $(BUILD)/tests/test_kit_plugin $(BUILD)/tests/test_kit_plugin_rdynamic

# The corruption test (in make test) and the libFuzzer target (make fuzz-tools, clang only).
$(BUILD)/tests/fuzz_tools_corrupt: tests/fuzz_tools_corrupt.c tests/fuzz_tools_exercise.h tests/test_tools_common.h $(TOOLS_LIB) $(TOOLS_HDRS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< $(TOOLS_LIB) -o $@ $(LDFLAGS) $(TOOLS_LDLIBS) $(LDLIBS)
ALL   += $(BUILD)/tests/fuzz_tools_corrupt
TESTS += $(BUILD)/tests/fuzz_tools_corrupt

CLANG        ?= $(shell command -v clang-14 || command -v clang)
FUZZ_SECONDS ?= 60
.PHONY: fuzz-tools
fuzz-tools: $(BUILD)/tests/test_tools_render
	@test -n "$(CLANG)" || { echo "✗ no clang: the libFuzzer target needs clang"; exit 1; }
	@mkdir -p $(BUILD)/fuzz/corpus
	$(CLANG) $(CPPFLAGS) $(TOOLS_CAIRO_INC) -std=c11 -g -O1 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
	  tests/fuzz_tools_libfuzzer.c $(filter-out tools/read/args.c,$(TOOLS_LIB_SRC)) -o $(BUILD)/fuzz/fuzz_tools $(TOOLS_LDLIBS) -lm
	DPMEM_BUILD=$(BUILD) DPMEM_KEEP=1 $(BUILD)/tests/test_tools_render >/dev/null && cp $(BUILD)/test-out/render/*.log $(BUILD)/fuzz/corpus/
	$(BUILD)/fuzz/fuzz_tools -max_total_time=$(FUZZ_SECONDS) -max_len=200000 $(BUILD)/fuzz/corpus

# make bench: render/report/trace times and peak RSS on 10^5..10^7-event logs (bench/bench_tools.c).
$(BUILD)/bench_tools: bench/bench_tools.c $(TOOLS_LIB) $(TOOLS_HDRS) $(TOOLS_BIN) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< $(TOOLS_LIB) -o $@ $(LDFLAGS) $(TOOLS_LDLIBS) $(LDLIBS)
BENCHES += $(BUILD)/bench_tools

# `make tools-pictures`: timeline.png and breakdown.png from the synthetic showcase logs of
# tools/showcase_logs.c (a GPU run's shape and sizes; no GPU needed), under $(PICTURES_OUT)/tools/:
# results/pictures-<UTC time>/tools/, or docs/tools/ with DOCS=1 (then commit them).
$(BUILD)/showcase-logs: tools/showcase_logs.c tools/read/synthlog.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@ $(LDFLAGS) $(LDLIBS)
ALL += $(BUILD)/showcase-logs
.PHONY: tools-pictures
tools-pictures: $(BUILD)/showcase-logs $(BUILD)/dpmem-render $(BUILD)/dpmem-report
	@rm -rf $(BUILD)/showcase && mkdir -p $(BUILD)/showcase/charts $(PICTURES_OUT)/tools
	$(BUILD)/showcase-logs $(BUILD)/showcase
	$(BUILD)/dpmem-render $(BUILD)/showcase/ghost.log -o $(PICTURES_OUT)/tools/timeline.png
	$(BUILD)/dpmem-report $(BUILD)/showcase/vanilla.log $(BUILD)/showcase/dpsgd.log $(BUILD)/showcase/ghost.log -q --charts $(BUILD)/showcase/charts
	cp $(BUILD)/showcase/charts/breakdown.png $(PICTURES_OUT)/tools/breakdown.png
