"""pip install ./python: the package, and its two libraries built from the kit's headers one level up
(dpmem.h, dpmem_cuda.h) with the C compiler ($CC, else cc), as mk/python.mk builds them:
  dpmem/libdpmem.so              dpmem.h (python/dpmem/native/dpmem_py.c); NVTX when the CUDA
                                 headers are found ($CUDA_HOME, else /usr/local/cuda), else without
  dpmem/libdpmem_torch_alloc.so  the CUDAPluggableAllocator on dpmem_cuda.h, only where the CUDA
                                 toolkit is (headers and libcudart)"""
import os
import shlex
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NATIVE = os.path.join(HERE, "dpmem", "native")


def _run(cmd):
    print(" ".join(shlex.quote(c) for c in cmd))
    subprocess.check_call(cmd)


class BuildNative(build_py):
    def run(self):
        super().run()
        if not os.path.isfile(os.path.join(ROOT, "dpmem.h")):
            raise SystemExit("dpmem: pip install ./python builds from the dpmem checkout: no dpmem.h in %s" % ROOT)
        out = os.path.join(self.build_lib, "dpmem")
        os.makedirs(out, exist_ok=True)
        cc = shlex.split(os.environ.get("CC", "cc"))
        cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
        flags = ["-O2", "-g", "-std=c11", "-Wall", "-Wextra", "-fPIC", "-shared", "-D_GNU_SOURCE", "-I" + ROOT]
        have_nvtx = os.path.isfile(os.path.join(cuda, "include", "nvtx3", "nvToolsExt.h"))
        nvtx = ["-I" + os.path.join(cuda, "include")] if have_nvtx else ["-DDPMEM_NO_NVTX"]
        if not have_nvtx:
            print("dpmem: no NVTX headers under %s/include: libdpmem.so is built without NVTX ranges" % cuda)
        lib = os.path.join(out, "libdpmem.so")
        _run(cc + flags + nvtx + ["-Wl,-soname,libdpmem.so", "-o", lib, os.path.join(NATIVE, "dpmem_py.c"),
                                  "-ldl", "-lpthread"])
        cudart = os.path.join(cuda, "lib64")
        if have_nvtx and os.path.isfile(os.path.join(cuda, "include", "cuda_runtime_api.h")) and \
                os.path.exists(os.path.join(cudart, "libcudart.so")):
            _run(cc + flags + nvtx + ["-o", os.path.join(out, "libdpmem_torch_alloc.so"),
                                      os.path.join(NATIVE, "torch_alloc.c"), "-L" + out, "-ldpmem",
                                      "-Wl,-rpath,$ORIGIN", "-L" + cudart, "-Wl,-rpath," + cudart, "-lcudart",
                                      "-Wl,--no-undefined", "-ldl", "-lpthread"])
        else:
            print("dpmem: no CUDA toolkit under %s: the CUDA allocator library is not built" % cuda)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):   # the wheel carries shared libraries: a platform wheel
        return True


setup(cmdclass={"build_py": BuildNative}, distclass=BinaryDistribution)
