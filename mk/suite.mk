# The experiment suite (tools/run_experiments, a POSIX sh script; its charts are build/dpmem-charts), `make demo`'s
# content (samples/demo.sh), the demo picture (results/, or docs/demo/ with DOCS=1) and the suite's tests.
# tools.mk is read after this file: the tools library is named by its path here.

SUITE_TOOLS_LIB := $(BUILD)/tools-obj/libdpmemtools.a

# A helper of the tests: decodes a PNG and counts pixels per category colour.
$(BUILD)/tests/test_suite_pngstat: tests/test_suite_pngstat.c $(SUITE_TOOLS_LIB) tools/charts/palette.h tools/charts/figure.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(SUITE_TOOLS_LIB) $(LDFLAGS) $(TOOLS_LDLIBS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_suite_pngstat
TESTS += tests/test_suite_cli.sh tests/test_suite_plan.sh tests/test_suite_oom.sh tests/test_suite_sweep.sh \
         tests/test_demo.sh tests/test_readme_commands.sh tests/test_hostile_cli.sh tests/test_suite_numbers.sh \
         tests/test_readme_method_names.sh

# `make demo-picture`: the demo at its default configuration (5 rounds: times as medians with min..max), its pictures
# and summary, and the planned 1b sweep over T = 64 ... 16384, under $(PICTURES_OUT)/demo/ (and the tools'
# pictures under $(PICTURES_OUT)/tools/: tools-pictures): results/pictures-<UTC time>/ unless DOCS=1, which
# refreshes the committed ones in docs/demo/ and docs/tools/ (the README shows docs/demo/breakdown.png; commit them).
.PHONY: demo-picture
demo-picture: all tools-pictures
	@rm -rf $(BUILD)/demo-picture
	@sh tools/run_experiments --build $(BUILD) --out $(BUILD)/demo-picture --quiet --repeat 5
	@rm -rf $(BUILD)/demo-sweep
	@sh tools/run_experiments --build $(BUILD) --out $(BUILD)/demo-sweep --quiet --plan --device cpu --model 1b \
	    --batch-size 4 --physical-batch 4 --steps 1 --sweep seq-len=64,256,1024,4096,16384 > /dev/null
	@mkdir -p $(PICTURES_OUT)/demo
	cp $(BUILD)/demo-picture/breakdown.png $(BUILD)/demo-picture/timeline.png $(BUILD)/demo-picture/tradeoff.png \
	   $(BUILD)/demo-picture/summary.txt $(PICTURES_OUT)/demo/
	cp $(BUILD)/demo-sweep/sweep.png $(PICTURES_OUT)/demo/sweep-1b-plan.png
	cp $(BUILD)/demo-sweep/sweep.txt $(PICTURES_OUT)/demo/sweep-1b-plan.txt
	@echo "the demo's pictures: $(PICTURES_OUT)/demo/, the tools': $(PICTURES_OUT)/tools/$(if $(filter 1,$(DOCS)), (commit them),$(comma) DOCS=1 refreshes docs/)"
