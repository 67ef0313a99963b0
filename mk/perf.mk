# CPU performance: the per-phase, per-op profile of a training step (bench/profile_step.c,
# docs/PERFORMANCE.md) and the side-by-side comparison with PyTorch eager and Opacus in `make bench`
# (bench/torch_baseline.py; skipped with one line when .venv/ lacks torch, transformers or opacus).
# dp.mk is read before this file (its DP_* lists are set); trainer.mk after it (its flags are used
# in recipes only).

$(BUILD)/bench/profile_step: bench/profile_step.c $(DP_LIB_SRC) $(DP_LIB_HDR) $(DP_TRAINER_DEPS) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(TRAINER_CFLAGS) -o $@ $< $(DP_LIB_SRC) $(BUILD)/libtrainer.a $(LDFLAGS) $(TRAINER_LDLIBS) $(LDLIBS)

ALL     += $(BUILD)/bench/profile_step
BENCHES += bench/torch_baseline.py
# The plan's predicted step time against measured steps (issue 47): this CPU (interleaved rounds) and
# the recorded GPU rows (no GPU needed). Ratios, never timed tests.
BENCHES += bench/plan_time.sh bench/plan_time_gpu.sh
