/* fuzz_tools_libfuzzer.c — libFuzzer entry point for the tools' readers (clang -fsanitize=fuzzer):
   `make fuzz-tools` builds it into $(BUILD)/fuzz and runs it for FUZZ_SECONDS (60) on a corpus seeded
   with the known logs. Not part of `make test` (the corruption test, fuzz_tools_corrupt.c, is). */
#include "fuzz_tools_exercise.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    fuzz_exercise(data, size, sink, NULL);
    return 0;
}
