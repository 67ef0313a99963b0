# Python: the kit as a shared library for python/dpmem (ctypes), the CUDAPluggableAllocator
# library on dpmem_cuda.h, the virtual environment with torch, transformers, opacus and peft (`make pyenv`),
# and the Python tests. `pip install ./python` builds the same two libraries (python/setup.py).
#
# The virtual environment is .venv/ in the repository root (git-ignored), made by `make pyenv`, which
# `make test` runs first; its stamp is .venv/.dpmem-pyenv-ok. torch comes from PyTorch's CPU-only
# index when that index is reachable, else from PyPI (whose Linux wheel pulls the CUDA wheels: a
# 3.0 GB download, 5.2 GB installed: docs/PYTHON.md; said before it starts, with pip's progress; PYENV_PYPI_TORCH=0 refuses it). When
# the environment cannot be made, the reason goes to .venv/.dpmem-pyenv-failed and the Python tests
# that need torch SKIP with that line; `make test` stays green. Versions pinned to a set that works
# together (opacus 1.6.0 needs torch >= 2.6; transformers 5.24 needs torch >= 2.6; peft 0.21.2 runs on
# both, and brings accelerate: tests/test_classify_torch.py checks LoRA classification against PEFT).

PYENV            := .venv
PYENV_PY         := $(PYENV)/bin/python
PYENV_STAMP      := $(PYENV)/.dpmem-pyenv-ok
PYENV_FAILED     := $(PYENV)/.dpmem-pyenv-failed
PY_TORCH         := torch==2.15.0
PY_OPACUS        := opacus==1.6.0
PY_TRANSFORMERS  := transformers==5.24.0
PY_PEFT          := peft==0.21.2
PY_TORCH_CPU_IDX := https://download.pytorch.org/whl/cpu
PY_HOST          ?= python3
PYENV_PYPI_TORCH ?= 1

PYLIB_DIR        := $(BUILD)/python
PYLIB            := $(PYLIB_DIR)/libdpmem.so
PYLIB_ALLOC      := $(PYLIB_DIR)/libdpmem_torch_alloc.so
PYLIB_SRC        := python/dpmem/native/dpmem_py.c
PYLIB_ALLOC_SRC  := python/dpmem/native/torch_alloc.c

# In the SAN=1 pass the libraries are sanitized too, and the Python tests run with libasan and
# libubsan preloaded into the interpreter (tests/python_env.sh reads this build's marker, san).
PYLIB_CFLAGS     := $(CFLAGS) -fPIC
PYLIB_LDFLAGS    := $(LDFLAGS)

$(PYLIB): $(PYLIB_SRC) dpmem.h mk/python.mk | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(PYLIB_CFLAGS) -shared -Wl,-soname,libdpmem.so -o $@ $< $(PYLIB_LDFLAGS) -ldl -lpthread
	@echo $(SAN) > $(PYLIB_DIR)/san

# Linked with --no-undefined against libdpmem.so and the toolkit's cudart: every symbol resolves
# (the compile-and-link check on a machine without a GPU).
ifneq ($(NVCC),)
$(PYLIB_ALLOC): $(PYLIB_ALLOC_SRC) $(PYLIB) dpmem_cuda.h dpmem.h mk/python.mk | $(DEPS_STAMP)
	$(CC) $(CPPFLAGS) $(PYLIB_CFLAGS) -shared -o $@ $< -L$(PYLIB_DIR) -ldpmem -Wl,-rpath,'$$ORIGIN' \
	    -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -Wl,--no-undefined $(PYLIB_LDFLAGS) -ldl -lpthread
ALL += $(PYLIB_ALLOC)

# The allocator's logic against the simulated GPU (tests/test_cuda_fakert.c in place of libcudart):
# a plain C test, so it runs in the sanitizer pass too.
$(BUILD)/tests/test_python_alloc: tests/test_python_alloc.c $(PYLIB_ALLOC_SRC) tests/test_cuda_fakert.c tests/test_cuda_fakert.h \
                                  tests/check.h tests/logread.h dpmem_cuda.h dpmem.h | $(DEPS_STAMP)
	@mkdir -p $(@D) $(BUILD)/tmp
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_python_alloc.c $(PYLIB_ALLOC_SRC) tests/test_cuda_fakert.c $(LDFLAGS) $(LDLIBS)
ALL   += $(BUILD)/tests/test_python_alloc
TESTS += $(BUILD)/tests/test_python_alloc

# The same allocator library on the simulated GPU, for tests/test_python_torch.py to read its counters
# through dpmem.torch.memory_stats() without a GPU. -Bsymbolic: its cudaMalloc is the simulated one
# even where torch has loaded the real libcudart.
PYLIB_ALLOC_FAKE := $(BUILD)/tests/libdpmem_torch_alloc_fake.so
$(PYLIB_ALLOC_FAKE): $(PYLIB_ALLOC_SRC) tests/test_cuda_fakert.c tests/test_cuda_fakert.h $(PYLIB) dpmem_cuda.h dpmem.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(PYLIB_CFLAGS) -shared -Wl,-Bsymbolic -o $@ $(PYLIB_ALLOC_SRC) tests/test_cuda_fakert.c \
	    -L$(PYLIB_DIR) -ldpmem -Wl,-rpath,$(abspath $(PYLIB_DIR)) $(PYLIB_LDFLAGS) -ldl -lpthread
ALL   += $(PYLIB_ALLOC_FAKE)
endif

ALL += $(PYLIB)
.PHONY: python pyenv
python: $(PYLIB) $(if $(NVCC),$(PYLIB_ALLOC))

# The environment: re-made when this file changes (the pins), or when the last attempt failed.
pyenv: $(PYENV_STAMP)
$(PYENV_STAMP): mk/python.mk
	@rm -f $(PYENV_FAILED); mkdir -p $(PYENV)
	@fail() { echo "$$1" > $(PYENV_FAILED); echo "✗ $$1"; exit 0; }; \
	 [ -x $(PYENV_PY) ] || $(PY_HOST) -m venv $(PYENV) >/dev/null 2>&1 || [ -x $(PYENV_PY) ] \
	     || fail "no Python virtual environment: '$(PY_HOST) -m venv' failed (Debian: apt-get install python3-venv)"; \
	 echo "== make pyenv: $(PY_TORCH) (CPU-only index first), $(PY_OPACUS), $(PY_TRANSFORMERS), $(PY_PEFT) into $(PYENV)/"; \
	 if $(PYENV_PY) -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$(patsubst torch==%,%,$(PY_TORCH))')" 2>/dev/null; then \
	     echo "  $(PY_TORCH) is in $(PYENV)/ already"; \
	 elif $(PYENV_PY) -m pip install -q --retries 0 --timeout 20 --index-url $(PY_TORCH_CPU_IDX) $(PY_TORCH) >$(PYENV)/cpu-index.log 2>&1; then \
	     echo "  torch from PyTorch's CPU-only index"; \
	 else \
	     echo "  PyTorch's CPU-only index did not give $(PY_TORCH): $$(grep -v '^ *$$' $(PYENV)/cpu-index.log | tail -n 1)"; \
	     [ "$(PYENV_PYPI_TORCH)" != 0 ] || fail "PyTorch's CPU-only index is unreachable and PYENV_PYPI_TORCH=0: torch not installed"; \
	     echo "  so $(PY_TORCH) comes from PyPI, whose Linux wheel brings NVIDIA's CUDA wheels: a 3.0 GB download"; \
	     echo "  (measured: torch 0.54 GB, nvidia 2.16 GB, triton 0.29 GB; 5.2 GB once installed in $(PYENV)/); make test PYENV_PYPI_TORCH=0 leaves torch out (its tests SKIP)"; \
	     $(PYENV_PY) -m pip install --progress-bar on $(PY_TORCH) || fail "pip could not install $(PY_TORCH) (no network or no PyPI?)"; \
	 fi; \
	 $(PYENV_PY) -m pip install -q $(PY_OPACUS) $(PY_TRANSFORMERS) $(PY_PEFT) || fail "pip could not install $(PY_OPACUS) $(PY_TRANSFORMERS) $(PY_PEFT)"; \
	 $(PYENV_PY) -c 'import torch, opacus, transformers, peft' || fail "torch, opacus, transformers or peft does not import in $(PYENV)"; \
	 touch $@; echo "✓ $(PYENV)/ ready"

test test-run: pyenv

PY_TESTS := tests/test_python_kit.sh tests/test_python_torch.sh tests/test_python_dist.sh tests/test_python_example.sh tests/test_classify_torch.sh tests/test_classify_ckpt.sh
TESTS    += $(PY_TESTS)
