"""Messages between the judge and the candidate worker.

Each message is a frame on a pipe (4-byte length + JSON header) and, when it carries tensors,
their raw bytes. The two sides never unpickle each other's data: the judge treats everything from
the worker as untrusted, so tensors are rebuilt from (dtype, shape, bytes) only.

Where the bytes travel:
- host memory (always available): a memfd owned by the sender's side of the channel; reading
  uses pread, so a short or shrunk file gives an error, never a SIGBUS in the judge.
- GPU memory (CUDA tensors, when CUDA IPC works between the two processes): two device buffers
  ("boxes") that the judge allocates outside torch's caching allocator and exports with
  cuIpcGetMemHandle: the in-box carries the judge's messages to the worker, the out-box the
  worker's outputs to the judge. The judge only ever exports memory, never maps the worker's,
  so no offset or size from the worker can point the judge at memory it did not mean to share;
  the boxes hold nothing but inputs and the candidate's own outputs (never the judge's private
  inputs or expected outputs, which live in torch's allocator), and are not freed before the
  judge exits, so no memory the worker mapped is ever reused for anything else. Each side
  copies what it receives out of the box into its own memory, so the worker still works on
  copies. A probe at the first message checks both directions; if anything about IPC fails,
  the channel falls back to host memory.

This module imports torch lazily, so that the judge can start its worker before paying for its
own torch import.

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

from evaluator.ipc import _MAX_BOX, Box, free_boxes, open_box

MAX_HEADER = 64 * 1024 * 1024  # a JSON header is small; anything bigger is garbage
# What the judge accepts from the worker (whose replies are the candidate's to forge): a reply's
# header (its final state, its profile: kilobytes when honest; one of 40 MB was once stored
# whole), and by default the tensors of one reply (the judge should set max_tensor_bytes from
# the reference's own outputs: a sparse reply that declared gigabytes made the judge allocate
# them). Checked before anything is allocated.
JUDGE_MAX_HEADER = 8 * 1024 * 1024
_ALIGN = 256  # offsets of tensors in a message (a CUDA box needs more than 64-byte alignment)
_CHUNK = 1 << 30  # os.pwrite/pread move at most ~2 GiB per call on Linux
_IPC_KEY = "__ipc__"  # header key of the frames the channel exchanges on its own (not messages)
_MIN_BOX = 2 << 20
_PROBE_BYTES = 256
BOX_SHARE = 16  # a box holds more than its message asks only while it is under 1/16 of memory

_DTYPE_NAMES = (
    "float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
    "bool", "complex64", "complex128",
)
_dtype_table: dict[str, Any] = {}


def _dtypes() -> dict[str, Any]:
    if not _dtype_table:
        import torch

        _dtype_table.update({str(getattr(torch, n)): getattr(torch, n) for n in _DTYPE_NAMES})
    return _dtype_table


class ProtocolError(RuntimeError):
    """The other side sent something malformed, or went away."""


class PeerClosed(ProtocolError):
    """End of file on the pipe: the other process exited or closed it."""


def default_max_tensor_bytes() -> int:
    """The judge's default cap on one reply's tensors: half of the host's memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        return 64 << 30


def ipc_allowed() -> bool:
    """CUDA IPC is used unless KB_HARNESS_CUDA_IPC=0 (the slow path, kept for comparison)."""
    return os.environ.get("KB_HARNESS_CUDA_IPC", "1") != "0"


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


def _tensor_bytes_view(t: Any) -> Any:
    """A flat uint8 CPU view of a tensor's contents (copied to the host if needed)."""
    flat = t.detach().contiguous().reshape(-1)
    if flat.device.type != "cpu":
        flat = flat.cpu()
    return flat.view(_dtypes()["torch.uint8"])


def _device_bytes(t: Any) -> Any:
    """A flat uint8 view of a CUDA tensor's contents, on its device."""
    return t.detach().contiguous().reshape(-1).view(_dtypes()["torch.uint8"])


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


# Tensors on these devices travel through the boxes. A test adds "cpu" (with host-memory boxes
# in place of Box and open_box) to run this protocol's GPU path where there is no GPU.
IPC_DEVICE_TYPES = ["cuda"]


def _in_box_kind(t: Any) -> bool:
    return t.device.type in IPC_DEVICE_TYPES


def _sync(device: Any) -> None:
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _device_memory(device: Any) -> int:
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.get_device_properties(dev).total_memory)
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


# --- the channel ------------------------------------------------------------------------------

class Channel:
    """One end of a bidirectional judge<->worker channel.

    rfd/wfd: pipe ends for frames; send_mem/recv_mem: memfds for tensor bytes (send_mem is
    written only by this side, recv_mem only by the peer). `role` is "judge" (the default: the
    judge builds its end without saying) or "worker"; the judge owns the CUDA boxes.
    """

    def __init__(self, rfd: int, wfd: int, send_mem: int, recv_mem: int, device: str = "cpu",
                 role: str = "judge"):
        self.rfd, self.wfd = rfd, wfd
        self.send_mem, self.recv_mem = send_mem, recv_mem
        self.device = device  # where received tensors are placed
        self.role = role
        # CUDA IPC: None = not tried yet, True = works both ways, False = host memory only.
        self.ipc: bool | None = None if (device != "cpu" and ipc_allowed()) else False
        self.ipc_error = ""
        self.in_box: Any = None  # judge: its Box; worker: the mapped tensor
        self.out_box: Any = None
        self._probe: Any = None
        self.stats = {"ipc_bytes": 0, "host_bytes": 0, "messages": 0}
        self.note_as = "transfer"  # its key in environment (the profiling worker's has another)
        self._held: dict | None = None  # a message's frame read by ready(), for recv()
        # The largest frame header, and the most tensor bytes of one message (each tensor and
        # all of them together), that this end accepts. The worker trusts the judge; the judge
        # caps what the worker sends, by default at half of the host's memory for tensors.
        judge = role == "judge"
        self.max_header_bytes = JUDGE_MAX_HEADER if judge else MAX_HEADER
        self.max_tensor_bytes: int | None = default_max_tensor_bytes() if judge else None

    # --- encoding -----------------------------------------------------------------------------
    def _encode(self, value: Any, tensors: list[Any]) -> Any:
        import torch

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

    def _decode(self, value: Any, tensors: list[Any]) -> Any:
        if isinstance(value, list):
            return [self._decode(v, tensors) for v in value]
        if isinstance(value, dict):
            if "__tensor__" in value:
                index = value["__tensor__"]
                if not isinstance(index, int) or not 0 <= index < len(tensors):
                    raise ProtocolError("malformed value")
                return tensors[index]
            # The peer may be the candidate's process: whatever it wrote, a value that is not
            # one of ours is its malformed reply (never an error of the reader's own).
            if "__tuple__" in value and isinstance(value["__tuple__"], list):
                return tuple(self._decode(v, tensors) for v in value["__tuple__"])
            if "__dict__" in value and isinstance(value["__dict__"], dict):
                return {str(k): self._decode(v, tensors) for k, v in value["__dict__"].items()}
            raise ProtocolError("malformed value")
        return value

    def _frame(self, frame: dict) -> None:
        body = json.dumps(frame).encode()
        _write_all(self.wfd, struct.pack("<I", len(body)) + body)

    def _read_frame(self, deadline: float | None) -> dict:
        (length,) = struct.unpack("<I", _read_exact(self.rfd, 4, deadline))
        if length > min(self.max_header_bytes, MAX_HEADER):
            raise ProtocolError(
                f"a message header of {length} bytes, more than the "
                f"{min(self.max_header_bytes, MAX_HEADER)} bytes accepted")
        try:
            frame = json.loads(_read_exact(self.rfd, length, deadline))
        except (ValueError, RecursionError) as exc:
            raise ProtocolError(f"malformed header: {exc}") from None
        if not isinstance(frame, dict):
            raise ProtocolError("malformed header")
        return frame

    # --- sending ------------------------------------------------------------------------------
    def send(self, header: dict, value: Any = None) -> None:
        tensors: list[Any] = []
        encoded = self._encode(value, tensors)
        on_device = [t for t in tensors if _in_box_kind(t)]
        frame = dict(header)
        if self.role == "judge" and self.ipc is None and header.get("cmd") != "exit":
            # The first message (the candidate to load) carries the probe, so that the
            # answer is in before the first inputs travel.
            self._start_probe(frame)
        use_ipc = False
        if on_device and self.ipc:
            if self.role == "judge":
                use_ipc = self._judge_prepare(frame, on_device)
            else:
                use_ipc = self._worker_prepare(on_device)
        in_box: dict[int, int] = {}  # tensor index -> offset in the box
        if use_ipc:
            try:
                box = self.in_box.tensor if self.role == "judge" else self.out_box
                box_offset = 0
                for i, t in enumerate(tensors):
                    if _in_box_kind(t):
                        nbytes = t.numel() * t.element_size()
                        if nbytes:
                            box[box_offset:box_offset + nbytes].copy_(_device_bytes(t))
                        in_box[i] = box_offset
                        box_offset += _aligned(nbytes)
                # Written before the frame says so: the peer reads the box once it has it.
                _sync(box.device)
            except Exception as exc:  # the GPU path broke: this and later messages by host
                self._disable(exc)
                return self.send(header, value)
        metas = []
        offset = 0  # in the memfd
        if len(in_box) < len(tensors):
            os.ftruncate(self.send_mem, 0)  # drop the previous message's bytes
        for i, t in enumerate(tensors):
            nbytes = t.numel() * t.element_size()
            meta = {"dtype": str(t.dtype), "shape": list(t.shape), "device": str(t.device),
                    "nbytes": nbytes}
            if i in in_box:
                meta.update(ipc=True, offset=in_box[i])
                self.stats["ipc_bytes"] += nbytes
            else:
                data = _tensor_bytes_view(t)
                mv = memoryview(data.numpy()) if nbytes else memoryview(b"")
                pos = 0
                while pos < nbytes:
                    pos += os.pwrite(self.send_mem, mv[pos:pos + _CHUNK], offset + pos)
                meta["offset"] = offset
                offset += _aligned(nbytes)
                self.stats["host_bytes"] += nbytes
            metas.append(meta)
        frame["value"] = encoded
        frame["tensors"] = metas
        self.stats["messages"] += 1
        self._frame(frame)
        if tensors:
            self._note()

    def _note(self) -> None:
        """How tensors travelled, in the judge's result (environment["transfer"])."""
        if self.role != "judge":
            return
        from evaluator.environment import note

        note(self.note_as, {"cuda_ipc": bool(self.ipc), **self.stats,
                          **({"ipc_error": self.ipc_error} if self.ipc_error else {})})

    def _judge_prepare(self, frame: dict, on_device: list[Any]) -> bool:
        """Judge: make sure the in-box can hold this message; announce a new box in the frame."""
        need = sum(_aligned(t.numel() * t.element_size()) for t in on_device)
        if need <= self.in_box.nbytes:
            return True
        device = on_device[0].device
        # Room for a few messages like this one (the timing sets travel together), so that
        # the box rarely grows again; never a large share of the device for it, though: a
        # box is kept until the judge exits, and on a problem of several GB a tensor a box of
        # four messages took a fifth of an H200 that the worker then lacked.
        total = _device_memory(device)
        sizes = [4 * need, need] if 4 * need <= total // BOX_SHARE else [need]
        for size in sizes:
            try:
                self.in_box = Box(str(device), size)
            except Exception:
                continue
            frame[_IPC_KEY] = {"in": self.in_box.describe()}
            return True
        return False  # no room on the device for a box this big: host memory this time

    def _worker_prepare(self, on_device: list[Any]) -> bool:
        """Worker: make sure the judge's out-box can hold our outputs (asking it to grow)."""
        if not self.ipc or self.out_box is None:
            return False
        need = sum(_aligned(t.numel() * t.element_size()) for t in on_device)
        if need <= self.out_box.numel():
            return True
        self._frame({_IPC_KEY: {"grow": need}})
        answer = self._read_frame(None).get(_IPC_KEY)
        box = answer.get("out") if isinstance(answer, dict) else None
        if not box:
            return False  # the judge has no room: host memory this time
        try:
            self.out_box = open_box(self.device, box)
        except Exception as exc:
            self._disable(exc)
            return False
        return need <= self.out_box.numel()

    def _disable(self, exc: BaseException) -> None:
        self.ipc = False
        self.ipc_error = f"{type(exc).__name__}: {exc}"[:500]

    # --- the probe (judge side) ---------------------------------------------------------------
    def _start_probe(self, frame: dict) -> None:
        """Judge: export two small boxes with random bytes in the in-box; the worker is to map
        both and echo those bytes into the out-box (checked in _finish_probe)."""
        try:
            import torch

            self.in_box = Box(self.device, _MIN_BOX)
            self.out_box = Box(self.device, _MIN_BOX)
            device = self.in_box.tensor.device
            pattern = torch.randint(0, 256, (_PROBE_BYTES,), dtype=torch.uint8, device=device)
            self.in_box.tensor[:_PROBE_BYTES].copy_(pattern)
            _sync(device)
        except Exception as exc:
            self._disable(exc)
            self.in_box = self.out_box = None
            return
        self._probe = pattern
        self.ipc = False  # until the worker's echo proves that both directions work
        frame[_IPC_KEY] = {"probe": self._probe_description()}

    def _probe_description(self) -> dict:
        return {"in": self.in_box.describe(), "out": self.out_box.describe(),
                "bytes": _PROBE_BYTES}

    def _finish_probe(self, ok: bool, error: str) -> None:
        import torch

        pattern, self._probe = self._probe, None
        if pattern is None:
            return
        if ok:
            _sync(pattern.device)
            echoed = self.out_box.tensor[:_PROBE_BYTES].clone()
            ok = bool(torch.equal(echoed, pattern))
            error = "" if ok else "the worker's echo did not match"
        self.ipc = ok
        self.ipc_error = "" if ok else (error or "probe failed")[:500]

    # --- receiving ----------------------------------------------------------------------------
    def release(self) -> None:
        """Free the host memory held by the last message sent (after the peer has read it)."""
        os.ftruncate(self.send_mem, 0)

    def free_boxes(self) -> None:
        """Judge: the boxes given back once the peer's processes have all ended (workers.py)."""
        boxes, self.in_box, self.out_box, self.ipc = (self.in_box, self.out_box), None, None, False
        if self.role == "judge":
            self.ipc_error = free_boxes(boxes, self.device) or self.ipc_error

    @property
    def holding(self) -> bool:
        """A message read by ready() waits for recv()."""
        return self._held is not None

    def ready(self, timeout: float | None = None) -> bool:
        """Whether a message has arrived, without waiting for one: frames that are the channel's
        own business (the IPC probe's answer) are handled on the way. A frame begun is read
        whole (`timeout` bounds that); recv() then returns the message."""
        if self._held is not None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while select.select([self.rfd], [], [], 0)[0]:
            frame = self._read_frame(deadline)
            ipc = frame.pop(_IPC_KEY, None)
            if ipc is not None and self._channel_frame(ipc):
                continue
            self._held = frame
            return True
        return False

    def recv(self, timeout: float | None = None, device: str | None = None) -> tuple[dict, Any]:
        """Return (header, value). Tensors are fresh copies placed on `device`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._held is not None:
                frame, self._held = self._held, None
                break
            frame = self._read_frame(deadline)
            ipc = frame.pop(_IPC_KEY, None)
            if ipc is not None and self._channel_frame(ipc):
                continue  # the channel's own business, not a message
            break
        target = device or self.device
        metas = frame.pop("tensors", []) or []
        if not isinstance(metas, list):
            raise ProtocolError("malformed tensor description")
        self._check_sizes(metas)
        tensors = [self._read_tensor(meta, target) for meta in metas]
        if tensors:
            self._note()
        for t in tensors:
            if _in_box_kind(t):
                # Our copies are complete before the peer may write the box again.
                _sync(t.device)
                break
        try:
            value = self._decode(frame.pop("value", None), tensors)
        except RecursionError:
            raise ProtocolError("malformed value (nested too deeply)") from None
        return frame, value

    def _check_sizes(self, metas: list[Any]) -> None:
        """Refuse a message whose tensors, one or all together, declare more bytes than this
        end accepts (max_tensor_bytes), before any of them is allocated."""
        cap = self.max_tensor_bytes
        if cap is None:
            return
        total = 0
        for meta in metas:
            try:
                nbytes = int(meta["nbytes"])
            except (KeyError, TypeError, ValueError):
                raise ProtocolError("malformed tensor description") from None
            if nbytes > cap:
                raise ProtocolError(f"a tensor of {nbytes} bytes, more than the {cap} bytes "
                                    "the judge accepts for this reply")
            total += max(nbytes, 0)
        if total > cap:
            raise ProtocolError(f"tensors of {total} bytes in one reply, more than the {cap} "
                                "bytes the judge accepts for it")

    def _channel_frame(self, ipc: Any) -> bool:
        """Handle the IPC part of a frame. True when the frame carried nothing else."""
        if not isinstance(ipc, dict):
            raise ProtocolError("malformed channel frame")
        if self.role == "judge":
            if "probe_result" in ipc:
                self._finish_probe(ipc.get("probe_result") is True, str(ipc.get("error", "")))
                return True
            if "grow" in ipc:
                self._grow_out_box(ipc.get("grow"))
                return True
            raise ProtocolError("malformed channel frame")
        # Worker side: the judge announces boxes, alongside a message or alone.
        if "probe" in ipc:
            self._answer_probe(ipc["probe"])
        elif "in" in ipc:
            self.in_box = None
            try:
                self.in_box = open_box(self.device, ipc["in"])
            except Exception as exc:
                # The message's tensors cannot be read: recv raises, the worker says so.
                raise ProtocolError(f"the judge's GPU buffer cannot be mapped: {exc}") from None
        return False

    def _grow_out_box(self, need: Any) -> None:
        reply: dict[str, Any] = {"out": None}
        cap = _MAX_BOX if self.max_tensor_bytes is None else min(self.max_tensor_bytes, _MAX_BOX)
        # A box larger than what the judge accepts is never made (the worker asks; its reply
        # then travels by host memory, where its declared size is refused).
        if self.ipc and isinstance(need, int) and 0 < need <= cap:
            try:
                device = str(self.out_box.tensor.device)
                room = min(2 * self.out_box.nbytes, _device_memory(device) // BOX_SHARE)
                self.out_box = Box(device, max(need, room))
                reply["out"] = self.out_box.describe()
            except Exception:
                pass  # the worker falls back to host memory for this message
        self._frame({_IPC_KEY: reply})

    def _answer_probe(self, probe: Any) -> None:
        """Worker: map both boxes, echo the judge's bytes from the in-box into the out-box."""

        try:
            self.in_box = open_box(self.device, probe["in"])
            self.out_box = open_box(self.device, probe["out"])
            n = int(probe["bytes"])
            self.out_box[:n].copy_(self.in_box[:n])
            _sync(self.out_box.device)
            self.ipc = True
            answer: dict[str, Any] = {"probe_result": True}
        except Exception as exc:
            self._disable(exc)
            self.in_box = self.out_box = None
            answer = {"probe_result": False, "error": self.ipc_error}
        self._frame({_IPC_KEY: answer})

    def _read_tensor(self, meta: dict, device: str) -> Any:
        import torch

        try:
            dtype = _dtypes()[meta["dtype"]]
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
        if meta.get("ipc") is True:
            out = self._read_from_box(offset, nbytes, dtype, shape, device)
            self.stats["ipc_bytes"] += nbytes
        else:
            self.stats["host_bytes"] += nbytes
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

    def _read_from_box(self, offset: int, nbytes: int, dtype: Any, shape: list[int],
                       device: str) -> Any:
        """A private copy of a tensor the peer put in a box (bounds checked: the worker is
        untrusted, and the judge reads only its own out-box)."""
        import torch

        if self.role == "judge":
            # Reading the judge's own box is always safe (bounds checked below), even when
            # the probe failed on this side but the worker thinks it passed.
            box = self.out_box.tensor if self.out_box is not None else None
        else:
            box = self.in_box
        if box is None:
            raise ProtocolError("a tensor in GPU memory, but no box to read it from")
        if offset % _ALIGN or offset + nbytes > box.numel():
            raise ProtocolError("tensor outside the box")
        try:
            if not nbytes:
                out = torch.empty(shape, dtype=dtype, device=box.device)
            else:
                out = box[offset:offset + nbytes].view(dtype).reshape(shape).clone()
            if device != "cpu" and torch.device(device) != out.device:
                out = out.to(device)
        except Exception as exc:  # a CUDA error: say what broke, as a protocol failure
            raise ProtocolError(f"reading a tensor from GPU memory failed: {exc}") from None
        return out
