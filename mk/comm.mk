# Data parallelism (issue 17): the trainers' MPI ranks and NCCL device sums are built with the trainer
# library (mk/trainer.mk: samples/llama/comm.c, dist.c; comm_nccl.c with the CUDA backend). Here: the
# end-to-end test, `mpirun -np 2` against one process.

$(BUILD)/tests/test_comm_mpi: tests/test_comm_mpi.c tests/test_dp_common.h tests/test_saved_model.h tests/test_mpi_launch.h \
                              $(BUILD)/train_vanilla $(addprefix $(BUILD)/,train_dpsgd train_ghost train_flash train_lora) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_comm_mpi.c $(LDFLAGS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_comm_mpi
TESTS += $(BUILD)/tests/test_comm_mpi

# make bench: weak scaling of 1 vs 2 ranks on this machine (a script: it launches mpirun)
BENCHES += bench/bench_ranks.sh bench/bench_overlap.sh

# Sharded state (--zero 1|2, samples/llama/shard.h): 2 and 4 ranks against unsharded ranks and one process,
# and the plan of the rank that holds the most against each rank's measured peak.
$(BUILD)/tests/test_comm_zero: tests/test_comm_zero.c tests/test_dp_common.h tests/test_saved_model.h tests/test_mpi_launch.h $(BUILD)/tests/libmpi_die_at.so \
                               $(addprefix $(BUILD)/,train_vanilla train_flash train_ghost train_dpsgd train_lora dpmem-report dpmem-trace dpmem-charts) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_comm_zero.c $(LDFLAGS) $(LDLIBS)

# --zero 3 with a sample dropped on one rank alone (ghost two-pass fp32): the ranks agree on the second pass's forward.
$(BUILD)/tests/test_comm_zero_drop: tests/test_comm_zero_drop.c tests/test_dp_common.h tests/test_saved_model.h tests/test_mpi_launch.h \
                                    $(addprefix $(BUILD)/,train_vanilla train_ghost dpmem-trace) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_comm_zero_drop.c $(LDFLAGS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_comm_zero_drop
TESTS += $(BUILD)/tests/test_comm_zero_drop

# The numbers a 2-rank run prints are the job's (phase table, dpmem-report's allreduce, --poisson's loss and norms),
# the suite's plan of a rank without --threads is exact, and ranks that differ in --save, --print-params or
# --init-from's weights are refused before the first step.
$(BUILD)/tests/test_comm_ranks: tests/test_comm_ranks.c tests/test_dp_common.h tests/test_mpi_launch.h \
                                $(addprefix $(BUILD)/,train_vanilla train_flash dpmem-report dpmem-charts) | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ tests/test_comm_ranks.c $(LDFLAGS) $(LDLIBS)

ALL   += $(BUILD)/tests/test_comm_ranks
TESTS += $(BUILD)/tests/test_comm_ranks

# comm_nccl.c's streams, events and requests against a fake CUDA runtime and NCCL (no GPU, no libnccl): wherever
# the toolkit's nccl.h is.
$(BUILD)/tests/test_comm_nccl_fake: tests/test_comm_nccl_fake.c samples/llama/comm_nccl.c samples/llama/comm.c samples/llama/comm.h dpmem.h \
                                    | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -isystem $(CUDA_HOME)/include -o $@ tests/test_comm_nccl_fake.c samples/llama/comm_nccl.c samples/llama/comm.c \
	    $(LDFLAGS) $(LDLIBS)
ifneq ($(wildcard $(CUDA_HOME)/include/nccl.h),)
ALL   += $(BUILD)/tests/test_comm_nccl_fake
TESTS += $(BUILD)/tests/test_comm_nccl_fake
endif

# A rank killed inside its Nth all-gather (preloaded into one rank by test_comm_zero; MPI's profiling interface).
$(BUILD)/tests/libmpi_die_at.so: tests/mpi_die_at.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(filter-out $(SANFLAGS),$(CFLAGS)) -I$(MPI_PREFIX)/include -I$(MPI_PREFIX)/include/openmpi -shared -fPIC -o $@ $< \
	    -L$(MPI_PREFIX)/lib -Wl,-rpath,$(MPI_PREFIX)/lib -lmpi

ALL   += $(BUILD)/tests/test_comm_zero
TESTS += $(BUILD)/tests/test_comm_zero
