"""CUDA IPC through the driver API: the judge's device buffers ("boxes") that carry tensors
between the judge and the worker without a copy through host memory (protocol.py says how
the channel uses them, and why the judge only ever exports memory, never maps the worker's).

libcuda is loaded by torch already; nothing here runs until a channel on a GPU asks for a box.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from typing import Any

_MAX_BOX = 1 << 44  # larger than any device: a box request beyond it is garbage


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * 64)]


class CudaIpcError(RuntimeError):
    pass


class _Driver:
    """The few CUDA driver calls the boxes need (libcuda, loaded by torch already)."""

    _instance: _Driver | None = None

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")

        def fn(names: tuple[str, ...], argtypes: list[Any]) -> Any:
            for name in names:
                f = getattr(lib, name, None)
                if f is not None:
                    f.restype = ctypes.c_int
                    f.argtypes = argtypes
                    return f
            raise CudaIpcError(f"libcuda has no {names[0]}")

        ptr = ctypes.c_uint64
        self.mem_alloc = fn(("cuMemAlloc_v2", "cuMemAlloc"), [ctypes.POINTER(ptr), ctypes.c_size_t])
        self.mem_free = fn(("cuMemFree_v2", "cuMemFree"), [ptr])
        self.get_handle = fn(("cuIpcGetMemHandle",), [ctypes.POINTER(_IpcHandle), ptr])
        self.open_handle = fn(("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"),
                              [ctypes.POINTER(ptr), _IpcHandle, ctypes.c_uint])
        self.close_handle = fn(("cuIpcCloseMemHandle",), [ptr])
        self.ctx_current = fn(("cuCtxGetCurrent",), [ctypes.POINTER(ctypes.c_void_p)])
        self.error_name = fn(("cuGetErrorName",), [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])

    @classmethod
    def get(cls) -> _Driver:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def check(self, code: int, what: str) -> None:
        if code != 0:
            name = ctypes.c_char_p()
            self.error_name(code, ctypes.byref(name))
            raise CudaIpcError(f"{what} failed: {(name.value or b'').decode() or code}")


class _CudaArray:
    """Device memory described by __cuda_array_interface__, so torch can wrap it as a tensor
    (the tensor keeps this object, and so the memory's owner, alive)."""

    def __init__(self, ptr: int, nbytes: int, owner: Any = None):
        self.owner = owner
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 2,
            "strides": None,
        }


@contextlib.contextmanager
def _on_device(device: str) -> Iterator[Any]:
    """Make the device's primary context current on this thread for the driver calls inside
    (torch binds it on its first runtime call there), and give the device with its index."""
    import torch

    dev = torch.device(device)
    if dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    with torch.cuda.device(dev):
        torch.empty(1, device=dev).zero_()
        torch.cuda.synchronize(dev)
        context = ctypes.c_void_p()
        drv = _Driver.get()
        drv.check(drv.ctx_current(ctypes.byref(context)), "cuCtxGetCurrent")
        if not context.value:
            raise CudaIpcError("no current CUDA context")
        yield dev


def wrap_device_memory(ptr: int, nbytes: int, dev: Any, owner: Any = None) -> Any:
    """A uint8 tensor over memory torch did not allocate (and will not free): through torch's
    storage-from-pointer constructor (what its CUDA graph trees use), else through
    __cuda_array_interface__ (which needs numpy). `owner` is kept alive with the tensor."""
    import torch

    tensor = None
    make = getattr(torch._C, "_construct_storage_from_data_pointer", None)
    if make is not None:
        try:
            storage = make(ptr, dev, nbytes)
            tensor = torch.empty(0, dtype=torch.uint8, device=dev).set_(storage)
        except Exception:
            tensor = None
    if tensor is None and torch.device(dev).type == "cuda":
        tensor = torch.as_tensor(_CudaArray(ptr, nbytes, owner), device=dev)
    if tensor is None or tensor.data_ptr() != ptr or tensor.numel() != nbytes or (
            tensor.device != torch.device(dev)):
        raise CudaIpcError("torch could not wrap the device memory in place")
    tensor._kb_owner = owner  # e.g. the IPC mapping, closed when the box is dropped
    return tensor


class Box:
    """A device buffer of the judge, exported to the worker. Freed only once the process that
    mapped it is gone (`free`): memory freed while a peer still maps it could be handed to the
    judge's next allocation and stay readable and writable from the candidate's process."""

    def __init__(self, device: str, nbytes: int):
        drv = _Driver.get()
        with _on_device(device) as dev:
            ptr = ctypes.c_uint64()
            drv.check(drv.mem_alloc(ctypes.byref(ptr), nbytes), "cuMemAlloc")
            self.ptr, self.nbytes = ptr.value, nbytes
            handle = _IpcHandle()
            drv.check(drv.get_handle(ctypes.byref(handle), self.ptr), "cuIpcGetMemHandle")
            self.handle = bytes(handle.reserved).hex()
            self.tensor = wrap_device_memory(self.ptr, nbytes, dev)

    def describe(self) -> dict[str, Any]:
        return {"handle": self.handle, "bytes": self.nbytes}

    def free(self, device: str) -> None:
        """Give the memory back. Only for a box whose peer process has ended (its mapping went
        with it): the caller knows that, this cannot."""
        if not self.ptr:
            return
        self.tensor = None
        drv = _Driver.get()
        with _on_device(device):
            drv.check(drv.mem_free(self.ptr), "cuMemFree")
        self.ptr, self.nbytes = 0, 0


def free_boxes(boxes: Any, device: str) -> str:
    """Free each box (None for none): what failed, in words, else "" (a box not freed is kept,
    as before boxes were freed at all: a leak, never a fault)."""
    failed = ""
    for box in boxes:
        try:
            if box is not None:
                box.free(device)
        except Exception as exc:
            failed = f"freeing a box: {type(exc).__name__}: {exc}"[:500]
    return failed


class _Mapping:
    """A judge's box opened in the worker (closed when no tensor uses it any more)."""

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __del__(self) -> None:
        try:
            _Driver.get().close_handle(self.ptr)
        except Exception:
            pass


def open_box(device: str, description: Any) -> Any:
    """Map a judge's box in this (the worker's) process; returns a uint8 tensor over it."""
    if not isinstance(description, dict):
        raise CudaIpcError("malformed box")
    raw = bytes.fromhex(str(description.get("handle", "")))
    nbytes = int(description.get("bytes", 0))
    if len(raw) != 64 or not 0 < nbytes <= _MAX_BOX:
        raise CudaIpcError("malformed box")
    drv = _Driver.get()
    with _on_device(device) as dev:
        handle = _IpcHandle()
        ctypes.memmove(ctypes.addressof(handle), raw, 64)
        ptr = ctypes.c_uint64()
        flags = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
        drv.check(drv.open_handle(ctypes.byref(ptr), handle, flags), "cuIpcOpenMemHandle")
        mapping = _Mapping(ptr.value)
        return wrap_device_memory(ptr.value, nbytes, dev, owner=mapping)
