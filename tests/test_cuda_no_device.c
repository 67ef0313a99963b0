/* test_cuda_no_device.c — the words for "no CUDA device" (kernels/cuda/cuda_no_device.h), which the
   CUDA backend (kbackend_cuda_init: the trainers' --device cuda) and the GPU tests' SKIP lines use.
   cudaErrorInsufficientDriver on a machine without a driver and cudaErrorNoDevice say "no NVIDIA GPU
   or driver found", the CUDA error's name in parentheses; before, such a machine read "CUDA driver
   version is insufficient for CUDA runtime version". Then the real cudaGetDeviceCount here: with no
   GPU, its reason says so and never blames the driver's version unless a driver is loaded. */
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kernels/cuda/cuda_no_device.h"

static int same(const char *got, const char *want) {
    if (!strcmp(got, want)) return 1;
    fprintf(stderr, "  got:  %s\n  want: %s\n", got, want);
    return 0;
}

int main(void) {
    char b[160];
    int driver = access("/proc/driver/nvidia/version", F_OK) == 0;
    CHECK(same(kcuda_no_device_reason(cudaErrorNoDevice, b, sizeof b), "no NVIDIA GPU or driver found (cudaErrorNoDevice)"));
    CHECK(same(kcuda_no_device_reason(cudaErrorInsufficientDriver, b, sizeof b),
               driver ? "the NVIDIA driver is older than this CUDA runtime needs (cudaErrorInsufficientDriver)"
                      : "no NVIDIA GPU or driver found (cudaErrorInsufficientDriver)"));
    CHECK(same(kcuda_no_device_reason(cudaSuccess, b, sizeof b), "no NVIDIA GPU found (cudaGetDeviceCount found 0)"));
    kcuda_no_device_reason(cudaErrorInvalidValue, b, sizeof b);
    CHECK(strstr(b, " (cudaErrorInvalidValue)") != NULL && strncmp(b, "no NVIDIA", 9) != 0);
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaSuccess && n > 0) printf("(this machine has %d CUDA device(s): the no-device path is not exercised for real)\n", n);
    else {
        kcuda_no_device_reason(err, b, sizeof b);
        printf("this machine: %s\n", b);
        CHECK(strstr(b, "version is insufficient") == NULL);
        CHECK(driver || !strncmp(b, "no NVIDIA GPU", 13));
        CHECK(strstr(b, err == cudaSuccess ? "(cudaGetDeviceCount found 0)" : cudaGetErrorName(err)) != NULL);
    }
    return check_exit("test_cuda_no_device");
}
