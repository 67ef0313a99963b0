# dpmem — top-level build.  `make` builds what this machine can build, `make test` runs the suite
# (then again under ASan+UBSan), `make bench` prints the benchmark tables (QUICK=1: the short run),
# `make demo` is the main job (it builds only what it runs).
# Each area of the tree has its own fragment in mk/ that appends to ALL, TESTS and BENCHES.
#
# Variables: CC, CXX, CUDA_HOME (/usr/local/cuda), BUILD (build), DEPS (a prefix such as .deps/usr
# where Debian packages were unpacked with dpkg -x, for machines where nothing can be installed),
# SAN=1 (sanitizers), CUDA_ARCH (e.g. sm_90; default: the GPU found, else a portable build).

CC        ?= cc
CXX       ?= c++
CUDA_HOME ?= /usr/local/cuda
BUILD     ?= build
DEPS      ?=
SAN       ?= 0
OPT       ?= -O2

NVCC := $(shell test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc)
HAVE_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
ifeq ($(CUDA_ARCH),)
  ifeq ($(HAVE_GPU),1)
    CUDA_ARCH := sm_$(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
  endif
endif

comma := ,
DEPS_INC := $(if $(DEPS),-I$(DEPS)/include -I$(DEPS)/include/x86_64-linux-gnu -I$(DEPS)/include/x86_64-linux-gnu/openblas-pthread)
DEPS_LIB := $(if $(DEPS),-L$(DEPS)/lib/x86_64-linux-gnu -L$(DEPS)/lib/x86_64-linux-gnu/openblas-pthread -Wl$(comma)-rpath$(comma)$(abspath $(DEPS))/lib/x86_64-linux-gnu -Wl$(comma)-rpath$(comma)$(abspath $(DEPS))/lib/x86_64-linux-gnu/openblas-pthread)

WARN      := -Wall -Wextra -Werror
SANFLAGS  := $(if $(filter 1,$(SAN)),-fsanitize=address$(comma)undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
CPPFLAGS  += -I. -Ikernels -Isamples -Itools -I$(CUDA_HOME)/include -I/usr/include/stb $(DEPS_INC)
CFLAGS    ?= $(OPT) -g
CFLAGS    += -std=c11 $(WARN) $(SANFLAGS) -D_GNU_SOURCE
CXXFLAGS  ?= $(OPT) -g
CXXFLAGS  += -std=c++17 $(WARN) $(SANFLAGS)
LDFLAGS   += $(SANFLAGS) $(DEPS_LIB)
LDLIBS    += -ldl -lpthread -lm
NVCCFLAGS ?= -O2 -g -std=c++17 $(if $(CUDA_ARCH),-arch=$(CUDA_ARCH)) -Xcompiler -Wall$(comma)-Wextra$(comma)-Werror

ALL     :=
TESTS   :=
BENCHES :=

.PHONY: all test test-run sanitize bench demo clean deps
all: deps

# Debian packages the build needs (the file that proves each one is there; A,B: either). OpenBLAS by
# its own openblas_config.h: the alternatives link of an installed variant, or the pthread variant as
# dpkg -x unpacks it under DEPS; cblas.h proves nothing, netlib's libblas-dev has one too (without the
# cblas_somatcopy kernels/cpu/attention.c calls).
DEB_HEADERS := libstb-dev:/usr/include/stb/stb_image_write.h \
               libopenblas-dev:/usr/include/x86_64-linux-gnu/openblas_config.h,/usr/include/x86_64-linux-gnu/openblas-pthread/openblas_config.h \
               librandom123-dev:/usr/include/Random123/philox.h \
               libcjson-dev:/usr/include/cjson/cJSON.h \
               libopenmpi-dev:/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h \
               openmpi-bin:/usr/bin/orterun \
               libcairo2-dev:/usr/include/cairo/cairo.h \
               fonts-dejavu-core:/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf \
               poppler-utils:/usr/bin/pdffonts
# Where `make demo-picture` and `make tools-pictures` write: results/, or the committed docs/ with DOCS=1.
PICTURES_OUT := $(if $(filter 1,$(DOCS)),docs,results/pictures-$(shell date -u +%Y%m%d-%H%M%S))
DEPS_STAMP := $(BUILD)/.deps-ok
deps: $(DEPS_STAMP)
$(DEPS_STAMP):
	@DEPS="$(DEPS)" sh tools/check_deps.sh $(DEB_HEADERS)
	@echo "$(if $(NVCC),✓ nvcc found: $(NVCC),✗ no nvcc under $(CUDA_HOME): CUDA parts are not built)"
	@echo "$(if $(HAVE_GPU),✓ GPU found ($(CUDA_ARCH)),✗ no GPU: tests that need one will SKIP)"
	@mkdir -p $(@D) && touch $@
TESTS += tests/test_include_floors.sh tests/test_check_deps.sh tests/test_make_targets.sh tests/test_outputs_words.sh tests/test_bench_plan.sh
# no function of samples/ or tools/ over 200 lines
TESTS += tests/test_function_length.sh

include $(sort $(wildcard mk/*.mk))

all: $(ALL)

# The suite, then the same suite built with ASan+UBSan into $(BUILD)/san. The builds use every core
# (a plain `make test` would build one file at a time), and the sanitized build runs while the first
# suite does (its output in $(BUILD)/san-build.log, shown if it fails); the tests run one after another.
# The sanitized pass runs even when the first failed (its failures are worth seeing too), and the last
# line gives both passes' tallies (each pass's own tally closes its list of tests); make test fails if
# either pass did.
test: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@mkdir -p $(BUILD)/san; rm -f $(BUILD)/tally.txt $(BUILD)/san/tally.txt; \
	 $(MAKE) --no-print-directory BUILD=$(BUILD)/san SAN=1 OPT=-O1 all >$(BUILD)/san-build.log 2>&1 & san=$$!; \
	 DPMEM_BUILD=$(BUILD) DPMEM_TALLY=$(BUILD)/tally.txt sh tests/run_tests.sh $(TESTS); rc=$$?; \
	 if wait $$san; then $(MAKE) --no-print-directory TALLY=$(BUILD)/san/tally.txt sanitize; src=$$?; \
	 else cat $(BUILD)/san-build.log; echo "the sanitized build failed (above)"; src=1; fi; \
	 echo "make test: $$(cat $(BUILD)/tally.txt 2>/dev/null || echo 'no tally') (the suite); $$(cat $(BUILD)/san/tally.txt 2>/dev/null || echo 'no tally') (again under ASan+UBSan)"; \
	 [ $$rc -eq 0 ] && [ $$src -eq 0 ]

test-run: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@DPMEM_BUILD=$(BUILD) DPMEM_TALLY=$(TALLY) sh tests/run_tests.sh $(TESTS)

sanitize:
	@echo "== the suite again under AddressSanitizer + UndefinedBehaviorSanitizer"
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/san SAN=1 OPT=-O1 TALLY=$(TALLY) test-run

# make demo builds what the demo runs (the trainers, dpmem-report, dpmem-charts) and the programs the README
# goes on to use (dpmem-render, dpmem-trace, quickstart, dp-accountant), all cores at once; the
# CUDA backend only where the demo will run on a GPU (or where an earlier build made it already).
NPROC     := $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
DEMO_BINS  = $(addprefix $(BUILD)/,train_vanilla train_dpsgd train_ghost train_flash train_lora dpmem-report dpmem-charts \
               dpmem-render dpmem-trace quickstart dp-accountant)
DEMO_CUDA  = $(if $(or $(HAVE_GPU),$(wildcard $(BUILD)/libkcuda.a)),1,0)
demo: deps
	@$(MAKE) --no-print-directory -j$(NPROC) TRAINER_CUDA=$(DEMO_CUDA) $(DEMO_BINS)
	@sh samples/demo.sh $(BUILD)

# The plan (each program's time last time here), progress lines, and QUICK=1 for the short variants.
bench: all $(BENCHES)
	@sh bench/run_benches.sh $(if $(filter 1,$(QUICK)),--quick) $(BUILD) $(BENCHES)

clean:
	rm -rf $(BUILD)
