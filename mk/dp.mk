# DP-SGD math: accountant, noise, per-sample norm kernels, clipping; their tests and tools.
# (samples/train_* join here once the trainer's hooks are in.)

DP_CPU_SRC := $(sort $(wildcard kernels/cpu/dp_*.c))

$(BUILD)/dp-accountant: tools/dp_accountant.c samples/accountant.c samples/accountant.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tools/dp_accountant.c samples/accountant.c $(LDFLAGS) $(LDLIBS)

$(BUILD)/tests/test_accountant: tests/test_accountant.c samples/accountant.c samples/accountant.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_accountant.c samples/accountant.c $(LDFLAGS) $(LDLIBS)

ALL   += $(BUILD)/dp-accountant $(BUILD)/tests/test_accountant
TESTS += $(BUILD)/tests/test_accountant

$(BUILD)/tests/test_noise: tests/test_noise.c samples/noise.c samples/noise.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_noise.c samples/noise.c $(LDFLAGS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_noise
TESTS += $(BUILD)/tests/test_noise
