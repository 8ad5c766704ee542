"""Messages between the judge and the candidate worker.

Each message is a frame on a pipe (4-byte length + JSON header) and, when it carries tensors,
their raw bytes in a memfd owned by the sender's side of the channel. The two sides never unpickle
each other's data: the judge treats everything from the worker as untrusted, so tensors are
rebuilt from (dtype, shape, bytes) only, and reading uses pread (a short or shrunk file gives an
error, never a SIGBUS in the judge).

Values that can travel: None, bool, int, float, str, torch.Tensor, and lists, tuples and
str-keyed dicts of these.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

import torch

MAX_HEADER = 64 * 1024 * 1024  # a JSON header is small; anything bigger is garbage
_ALIGN = 64
_CHUNK = 1 << 30  # os.pwrite/pread move at most ~2 GiB per call on Linux

_DTYPES = {
    str(dt): dt
    for dt in (
        torch.float32, torch.float64, torch.float16, torch.bfloat16,
        torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool,
        torch.complex64, torch.complex128,
    )
}


class ProtocolError(RuntimeError):
    """The other side sent something malformed, or went away."""


class PeerClosed(ProtocolError):
    """End of file on the pipe: the other process exited or closed it."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    parts: list[bytes] = []
    remaining = n
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply in time")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError("no reply in time")
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise PeerClosed("peer closed the channel")
        parts.append(chunk)
        remaining -= len(chunk)
    return b"".join(parts)


def _tensor_bytes_view(t: torch.Tensor) -> torch.Tensor:
    """A flat uint8 CPU view of a tensor's contents (copied to the host if needed)."""
    flat = t.detach().contiguous().reshape(-1)
    if flat.device.type != "cpu":
        flat = flat.cpu()
    return flat.view(torch.uint8)


class Channel:
    """One end of a bidirectional judge<->worker channel.

    rfd/wfd: pipe ends for frames; send_mem/recv_mem: memfds for tensor bytes (send_mem is
    written only by this side, recv_mem only by the peer).
    """

    def __init__(self, rfd: int, wfd: int, send_mem: int, recv_mem: int, device: str = "cpu"):
        self.rfd, self.wfd = rfd, wfd
        self.send_mem, self.recv_mem = send_mem, recv_mem
        self.device = device  # where received tensors are placed

    # --- encoding -----------------------------------------------------------------------------
    def _encode(self, value: Any, tensors: list[torch.Tensor]) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, torch.Tensor):
            tensors.append(value)
            return {"__tensor__": len(tensors) - 1}
        if isinstance(value, tuple):
            return {"__tuple__": [self._encode(v, tensors) for v in value]}
        if isinstance(value, list):
            return [self._encode(v, tensors) for v in value]
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise TypeError("only str-keyed dicts can be sent")
            return {"__dict__": {k: self._encode(v, tensors) for k, v in value.items()}}
        raise TypeError(f"cannot send a value of type {type(value).__name__}")

    def _decode(self, value: Any, tensors: list[torch.Tensor]) -> Any:
        if isinstance(value, list):
            return [self._decode(v, tensors) for v in value]
        if isinstance(value, dict):
            if "__tensor__" in value:
                return tensors[int(value["__tensor__"])]
            if "__tuple__" in value:
                return tuple(self._decode(v, tensors) for v in value["__tuple__"])
            if "__dict__" in value:
                return {str(k): self._decode(v, tensors) for k, v in value["__dict__"].items()}
            raise ProtocolError("malformed value")
        return value

    # --- sending ------------------------------------------------------------------------------
    def send(self, header: dict, value: Any = None) -> None:
        tensors: list[torch.Tensor] = []
        encoded = self._encode(value, tensors)
        metas = []
        offset = 0
        if tensors:
            os.ftruncate(self.send_mem, 0)  # drop the previous message's bytes
        for t in tensors:
            data = _tensor_bytes_view(t)
            nbytes = data.numel()
            metas.append({
                "dtype": str(t.dtype),
                "shape": list(t.shape),
                "device": str(t.device),
                "offset": offset,
                "nbytes": nbytes,
            })
            mv = memoryview(data.numpy()) if nbytes else memoryview(b"")
            pos = 0
            while pos < nbytes:
                pos += os.pwrite(self.send_mem, mv[pos:pos + _CHUNK], offset + pos)
            offset += (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
        frame = dict(header)
        frame["value"] = encoded
        frame["tensors"] = metas
        body = json.dumps(frame).encode()
        _write_all(self.wfd, struct.pack("<I", len(body)) + body)

    def release(self) -> None:
        """Free the memory held by the last message sent (after the peer has read it)."""
        os.ftruncate(self.send_mem, 0)

    # --- receiving ----------------------------------------------------------------------------
    def recv(self, timeout: float | None = None, device: str | None = None) -> tuple[dict, Any]:
        """Return (header, value). Tensors are fresh copies placed on `device`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        (length,) = struct.unpack("<I", _read_exact(self.rfd, 4, deadline))
        if length > MAX_HEADER:
            raise ProtocolError("header too large")
        try:
            frame = json.loads(_read_exact(self.rfd, length, deadline))
        except ValueError as exc:
            raise ProtocolError(f"malformed header: {exc}") from None
        if not isinstance(frame, dict):
            raise ProtocolError("malformed header")
        target = device or self.device
        tensors = [self._read_tensor(meta, target) for meta in frame.pop("tensors", []) or []]
        value = self._decode(frame.pop("value", None), tensors)
        return frame, value

    def _read_tensor(self, meta: dict, device: str) -> torch.Tensor:
        try:
            dtype = _DTYPES[meta["dtype"]]
            shape = [int(s) for s in meta["shape"]]
            offset, nbytes = int(meta["offset"]), int(meta["nbytes"])
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("malformed tensor description") from None
        if any(s < 0 for s in shape) or offset < 0:
            raise ProtocolError("malformed tensor description")
        numel = 1
        for s in shape:
            numel *= s
        if numel * dtype.itemsize != nbytes:
            raise ProtocolError("tensor size does not match its shape")
        buf = torch.empty(nbytes, dtype=torch.uint8)
        if nbytes:
            mv = memoryview(buf.numpy())
            pos = 0
            while pos < nbytes:
                n = os.preadv(self.recv_mem, [mv[pos:pos + _CHUNK]], offset + pos)
                if n <= 0:
                    raise ProtocolError("tensor bytes missing")
                pos += n
        out = buf.view(dtype).reshape(shape)
        if device != "cpu":
            out = out.to(device)
        # The device the sender says the tensor was on (checked against the expected device).
        out._kb_device = str(meta.get("device", "cpu"))[:32]
        return out
