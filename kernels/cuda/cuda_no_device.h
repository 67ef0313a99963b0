/* cuda_no_device.h — why there is no CUDA device, in words a user can act on. On a machine with no
   NVIDIA GPU or driver, cudaGetDeviceCount fails with cudaErrorInsufficientDriver ("CUDA driver
   version is insufficient for CUDA runtime version"), which reads as if an old driver were the
   problem: that error is "no NVIDIA GPU or driver found" unless a driver is loaded
   (/proc/driver/nvidia/version), and so is cudaErrorNoDevice. The CUDA error's name stays in
   parentheses. Host C or C++; needs only the CUDA runtime API. */
#ifndef CUDA_NO_DEVICE_H
#define CUDA_NO_DEVICE_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <unistd.h>

/* The reason for err (a failed cudaGetDeviceCount; cudaSuccess: it found 0 devices) into buf. */
static inline const char *kcuda_no_device_reason(cudaError_t err, char *buf, size_t n) {
    int driver = access("/proc/driver/nvidia/version", F_OK) == 0;
    if (err == cudaSuccess) snprintf(buf, n, "no NVIDIA GPU found (cudaGetDeviceCount found 0)");
    else if (err == cudaErrorNoDevice || (err == cudaErrorInsufficientDriver && !driver))
        snprintf(buf, n, "no NVIDIA GPU or driver found (%s)", cudaGetErrorName(err));
    else if (err == cudaErrorInsufficientDriver)
        snprintf(buf, n, "the NVIDIA driver is older than this CUDA runtime needs (%s)", cudaGetErrorName(err));
    else snprintf(buf, n, "%s (%s)", cudaGetErrorString(err), cudaGetErrorName(err));
    return buf;
}

#endif
