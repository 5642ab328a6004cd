"""The product of float rows by GGUF blocks as an XLA custom call on JAX's CPU backend
(`block_product.cc` beside this file): compiled once per machine with the system's C++
compiler into keras_attn's cache folder, loaded, and registered with `jax.ffi`.

Where it cannot be (another backend, a GPU, no compiler, `KERAS_ATTN_NATIVE=0`) the
layers multiply by the blocks made float in `keras.ops` (`block_formats.dequantize`):
the same result, slower. `status()` says which and why.
"""

import ctypes
import functools
import hashlib
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile

from keras_attn.cache_dir import default_cache_dir

SOURCE = pathlib.Path(__file__).with_name("block_product.cc")
SOURCES = (SOURCE, *(SOURCE.with_name(n) for n in ("block_product_int8.h", "block_threads.h")))
TARGET = "keras_attn_block_product"
_WHY_NOT = []  # the reason the custom call is not in use, once known
_FEATURES = []  # the built library's: 1 AVX-512, 2 the int8 (VNNI) products


def _cpu_flags():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor()


def _library_path(jax_version, compiler):
    key = hashlib.sha256()
    for part in (
        *(source.read_bytes() for source in SOURCES),
        jax_version.encode(),
        compiler.encode(),
        _cpu_flags().encode(),
    ):
        key.update(part)
    return default_cache_dir() / "native" / f"block_product-{key.hexdigest()[:16]}.so"


def _compile(include, library):
    compiler = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
    if compiler is None:
        raise OSError("no C++ compiler (g++ or c++; $CXX) on the PATH")
    library.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
        built = pathlib.Path(scratch) / library.name
        command = [
            compiler, "-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", "-w",
            f"-I{include}", str(SOURCE), "-o", str(built),
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode:
            raise OSError(f"{compiler} failed: {result.stderr.strip()[-2000:]}")
        os.replace(built, library)  # whole or not at all, as other processes may load it


@functools.cache
def _registered():
    """Whether the custom call is registered (compiling it the first time on this
    machine, about 2 s); the reason it is not is kept for `status`."""
    try:
        import jax

        if os.environ.get("KERAS_ATTN_NATIVE", "1") == "0":
            raise OSError("KERAS_ATTN_NATIVE=0")
        if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
            raise OSError(f"built for Linux on x86-64 only (this is {sys.platform}, "
                          f"{platform.machine()})")  # fmt: skip
        compiler = os.environ.get("CXX", "g++")
        library = _library_path(jax.__version__, compiler)
        if not library.exists():
            _compile(jax.ffi.include_dir(), library)
        handle = ctypes.cdll.LoadLibrary(str(library))
        jax.ffi.register_ffi_target(
            TARGET, jax.ffi.pycapsule(handle.KerasAttnBlockProduct), platform="cpu"
        )
        _FEATURES.append(int(handle.KerasAttnBlockFeatures()))
        return True
    except (OSError, subprocess.SubprocessError, AttributeError) as error:
        _WHY_NOT.append(str(error))
        return False


def _jax_on_cpu():
    """Whether Keras runs on JAX and JAX on a CPU, the custom call registered there."""
    import keras

    if keras.backend.backend() != "jax":
        return False
    import jax

    return jax.default_backend() == "cpu" and _registered()


def usable(x):
    """Whether `x` (a tensor of the backend in use) multiplies on the custom call: JAX on
    a CPU, float32, the library built and registered."""
    return str(x.dtype) == "float32" and _jax_on_cpu()


def int8():
    """Whether the custom call rounds the activations to int8 per 32 columns and takes
    integer dot products (AVX-512 VNNI), as llama.cpp's CPU products do, on JAX's CPU
    backend. Where it does, `from_gguf(..., keep_blocks=True)` also repacks Q4_0 and Q4_1
    matrices by eights of rows (`Q4_0x8`, `Q4_1x8`) for it."""
    return _jax_on_cpu() and bool(_FEATURES[-1] & 2)


def status():
    """`(in_use, reason)`: whether JAX's products by GGUF blocks run on the custom call,
    and why not."""
    try:
        import jax  # noqa: F401
    except ImportError:
        return False, "jax is not installed"
    if _registered():
        return True, "registered"
    return False, _WHY_NOT[-1] if _WHY_NOT else "unknown"


def product(x, blocks, code, mode=0):
    """`x` `(n, in)` float32 by the GGUF blocks `(out, row_bytes)` uint8 of format `code`:
    `(n, out)` float32 (JAX arrays; `usable(x)` first). `mode` 0 multiplies by float
    activations; 1 rounds them to int8 per 32 first, as llama.cpp's products do (`int8()`
    first); 2 as 1, the rows repacked by eights."""
    import jax
    import numpy as np

    shape = jax.ShapeDtypeStruct((x.shape[0], blocks.shape[0]), jax.numpy.float32)
    call = jax.ffi.ffi_call(TARGET, shape)
    return call(x, blocks, format=np.int32(code), mode=np.int32(mode))
