"""Streaming reads and writes of the safetensors format, one tensor at a time.

The format: an unsigned little-endian 64-bit header length N, N bytes of JSON
(``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``,
offsets relative to the data buffer), then the raw little-endian, C-ordered bytes.
The ``safetensors`` package needs every tensor in memory to write a file; here the
header is written first (the output's layout is known in advance) and the data
follows tensor by tensor, so a checkpoint far larger than memory can be rewritten.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Mapping

import torch

__all__ = [
    "TensorInfo",
    "SafetensorsFile",
    "StreamingWriter",
    "CheckpointLayout",
    "DTYPES",
]

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U64": torch.uint64,
    "U32": torch.uint32,
    "U16": torch.uint16,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
_CODES = {v: k for k, v in DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024  # the same sanity bound the reference reader uses


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # offset in the data buffer
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


def _is_count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


class SafetensorsFile:
    """A read-only, memory-mapped safetensors file. ``read(name)`` copies one tensor
    into memory; ``raw(name)`` gives its bytes without interpreting them."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            head = fh.read(8)
            if len(head) != 8:
                raise ValueError(f"{self.path}: not a safetensors file (shorter than 8 bytes)")
            (n,) = struct.unpack("<Q", head)
            if n > _MAX_HEADER:
                raise ValueError(f"{self.path}: not a safetensors file (header length {n})")
            try:
                header = json.loads(fh.read(n))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"{self.path}: not a safetensors file (bad JSON header: {exc})") from None
        if not isinstance(header, dict):
            raise ValueError(f"{self.path}: not a safetensors file (the header is a JSON {type(header).__name__}, "
                             "not an object)")
        self._data_start = 8 + n
        self.metadata: dict[str, str] | None = header.pop("__metadata__", None)
        if self.metadata is not None and not isinstance(self.metadata, dict):
            raise ValueError(f"{self.path}: the header's __metadata__ must be an object, got {self.metadata!r}")
        size = self.path.stat().st_size
        infos = {}
        for name, entry in header.items():
            if not isinstance(entry, dict):
                raise ValueError(f"{self.path}: tensor {name!r}: the header entry must be an object with dtype, "
                                 f"shape and data_offsets, got {entry!r}")
            if entry.get("dtype") not in DTYPES:
                raise ValueError(f"{self.path}: tensor {name!r} has unsupported dtype {entry.get('dtype')!r}")
            offsets, shape = entry.get("data_offsets"), entry.get("shape")
            if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
                    and offsets[0] <= offsets[1]):
                raise ValueError(f"{self.path}: tensor {name!r}: data_offsets must be [begin, end] with "
                                 f"0 <= begin <= end, got {offsets!r}")
            if not (isinstance(shape, list) and all(_is_count(s) for s in shape)):
                raise ValueError(f"{self.path}: tensor {name!r}: shape must be a list of non-negative ints, "
                                 f"got {shape!r}")
            begin, end = offsets
            shape = tuple(shape)
            expected = math.prod(shape) * DTYPES[entry["dtype"]].itemsize
            if end - begin != expected or self._data_start + end > size:
                raise ValueError(f"{self.path}: tensor {name!r} has inconsistent offsets (file truncated?)")
            infos[name] = TensorInfo(name, entry["dtype"], shape, begin, end)
        # Keep the order of the data buffer: reading in it streams the file forwards.
        self.tensors: dict[str, TensorInfo] = dict(sorted(infos.items(), key=lambda kv: kv[1].begin))
        self._fh = open(self.path, "rb")
        self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ) if size else None

    def raw(self, name: str) -> memoryview:
        info = self.tensors[name]
        start = self._data_start + info.begin
        return memoryview(self._mm)[start : start + info.nbytes] if info.nbytes else memoryview(b"")

    def read(self, name: str) -> torch.Tensor:
        info = self.tensors[name]
        if info.nbytes == 0:
            return torch.empty(info.shape, dtype=info.torch_dtype)
        buf = bytearray(self.raw(name))
        return torch.frombuffer(buf, dtype=info.torch_dtype).reshape(info.shape)

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self._fh.close()

    def __enter__(self) -> "SafetensorsFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class StreamingWriter:
    """Writes a safetensors file whose tensor list is known in advance.

    ``layout`` gives (name, dtype code, shape) in the order the data will be written;
    then call ``write(name, tensor_or_bytes)`` for each, in that order. The caller
    owns the file object (use :func:`neurips26._atomic.atomic_open`).
    """

    def __init__(
        self,
        fh: BinaryIO,
        layout: Iterable[tuple[str, str, tuple[int, ...]]],
        metadata: Mapping[str, str] | None = None,
    ):
        header: dict[str, object] = {}
        if metadata:
            header["__metadata__"] = dict(metadata)
        offset = 0
        self._order: list[tuple[str, int]] = []
        for name, code, shape in layout:
            if code not in DTYPES:
                raise ValueError(f"tensor {name!r}: unsupported dtype {code!r}")
            nbytes = math.prod(shape) * DTYPES[code].itemsize
            header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            self._order.append((name, nbytes))
            offset += nbytes
        blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
        blob += b" " * (-len(blob) % 8)  # align the data buffer to 8 bytes
        fh.write(struct.pack("<Q", len(blob)))
        fh.write(blob)
        self._fh = fh
        self._next = 0

    def write(self, name: str, data: torch.Tensor | bytes | memoryview) -> None:
        if self._next >= len(self._order):
            raise ValueError(f"tensor {name!r}: all tensors of the layout are already written")
        expected, nbytes = self._order[self._next]
        if name != expected:
            raise ValueError(f"tensors must be written in layout order: expected {expected!r}, got {name!r}")
        if isinstance(data, torch.Tensor):
            data = data.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().data
        if len(data) != nbytes:
            raise ValueError(f"tensor {name!r}: got {len(data)} bytes, the layout says {nbytes}")
        self._fh.write(data)
        self._next += 1

    def close(self) -> None:
        if self._next != len(self._order):
            missing = [n for n, _ in self._order[self._next :]]
            raise ValueError(f"file incomplete: {len(missing)} tensors not written, first {missing[0]!r}")


def dtype_code(dtype: torch.dtype) -> str:
    try:
        return _CODES[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype} cannot be stored in safetensors") from None


INDEX_NAME = "model.safetensors.index.json"


def _read_index(index: Path) -> dict[str, str]:
    """The ``weight_map`` of a shard index, checked: a JSON object whose ``weight_map``
    maps each tensor name to the file name of a shard in the same folder."""
    try:
        doc = json.loads(index.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{index}: not valid JSON ({exc})") from None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        got = (f"a JSON {type(doc).__name__}" if not isinstance(doc, dict) else
               "no weight_map" if "weight_map" not in doc else f"weight_map = {weight_map!r:.80}")
        raise ValueError(f"{index}: expected a JSON object whose \"weight_map\" maps tensor names to shard "
                         f"files, got {got}")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard.endswith(".safetensors") or Path(shard).name != shard:
            raise ValueError(f"{index}: weight_map[{name!r}] must be the name of a .safetensors shard in the "
                             f"same folder, got {shard!r}")
    return weight_map


def _check_index(index: Path, weight_map: Mapping[str, str], where: Mapping[str, "SafetensorsFile"]) -> None:
    """The index and the shards it lists must agree tensor by tensor."""
    for name, shard in weight_map.items():
        held = where.get(name)
        if held is None or held.path.name != shard:
            found = f"it is in {held.path.name}" if held is not None else "no listed shard holds it"
            raise ValueError(f"{index}: weight_map puts tensor {name!r} in {shard}, but {found}")
    for name, f in where.items():
        if name not in weight_map:
            raise ValueError(f"{index}: tensor {name!r} of {f.path.name} is missing from weight_map")


class CheckpointLayout:
    """A checkpoint given as one ``.safetensors`` file or as a Hugging Face model folder
    (``model.safetensors``, or shards listed by ``model.safetensors.index.json``).

    ``files`` are the safetensors files in order, ``where[name]`` the file holding a
    tensor, ``extra_files`` the folder's other files (config, tokenizer, index).
    """

    def __init__(self, path: str | os.PathLike):
        path = Path(path)
        self.path = path
        self.is_folder = path.is_dir()
        if not path.exists():
            raise FileNotFoundError(f"checkpoint not found: {path}")
        if not self.is_folder:
            if path.suffix != ".safetensors":
                raise ValueError(f"{path}: expected a .safetensors file or a model folder")
            files = [path]
            weight_map = None
            self.extra_files: list[Path] = []
        else:
            index = path / INDEX_NAME
            if index.exists():
                weight_map = _read_index(index)
                files = [path / f for f in dict.fromkeys(sorted(set(weight_map.values())))]
                for f in files:
                    if not f.exists():
                        raise FileNotFoundError(f"{index} lists {f.name}, which is missing")
            else:
                weight_map = None
                files = sorted(path.glob("*.safetensors"))
                if not files:
                    raise ValueError(f"{path}: no .safetensors file in this folder (.bin checkpoints are not supported)")
            self.extra_files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix != ".safetensors")
        self.files: list[SafetensorsFile] = []
        try:
            for f in files:
                self.files.append(SafetensorsFile(f))
            self.where: dict[str, SafetensorsFile] = {}
            for f in self.files:
                for name in f.tensors:
                    if name in self.where:
                        raise ValueError(f"{path}: tensor {name!r} appears in two shards")
                    self.where[name] = f
            if weight_map is not None:
                _check_index(path / INDEX_NAME, weight_map, self.where)
        except BaseException:
            self.close()
            raise

    def info(self, name: str) -> TensorInfo:
        return self.where[name].tensors[name]

    def read(self, name: str) -> torch.Tensor:
        return self.where[name].read(name)

    def close(self) -> None:
        for f in self.files:
            f.close()

    def __enter__(self) -> "CheckpointLayout":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
