"""A small, validating safetensors reader and writer (standard library only): the one
safetensors implementation of aotc's Python code (package, tools, tests, lit inputs) — only
tests that write malformed files on purpose, or check the format independently, spell the
format themselves.

Format (https://github.com/huggingface/safetensors): an 8-byte little-endian header
length N, N bytes of JSON mapping tensor names to {"dtype", "shape", "data_offsets"}
(plus an optional "__metadata__" string map), then the data section; offsets are
relative to the data section, tensors are dense, row-major, little-endian.

`write(path, tensors, metadata)` / `dumps(...)` write one (`tensor(name, dtype, shape,
values)` builds a tensor from Python numbers).
`read(path)` returns a `SafetensorsFile` whose tensors keep their raw bytes; the
checks are those of the C++ runtime (runtime/src/Safetensors.cpp, docs/runtime.md):
header length within the file, JSON object, entries with exactly dtype/shape/
data_offsets, known dtype, non-negative integer dimensions, begin <= end within the
data section, end - begin == numel * itemsize, no overlapping tensors, no holes.
"""
import json
import math
import struct

#: safetensors dtype -> (aotc dtype name, itemsize, struct/memoryview format)
DTYPES = {
    "F32": ("f32", 4, "f"),
    "F64": ("f64", 8, "d"),
    "I64": ("i64", 8, "q"),
    "BOOL": ("bool", 1, "?"),
    "I32": ("i32", 4, "i"),
    "U8": ("u8", 1, "B"),
}

#: Read only with parse(..., extra_dtypes=True) (tools/check_golden.py: conformance samples of
#: narrow integer dtypes); the runtime's reader (and so the default here) refuses them.
EXTRA_DTYPES = {
    "I16": ("i16", 2, "h"),
    "I8": ("i8", 1, "b"),
}

_MAX_HEADER = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    """A malformed safetensors file; the message starts with the file name."""


class StTensor:
    """One tensor of a safetensors file.

    Attributes: name, dtype ('f32', 'f64', 'i64', 'bool'), shape (tuple of ints),
    data (bytes, little-endian, row-major, numel * itemsize long).
    """

    __slots__ = ("name", "dtype", "shape", "data")

    def __init__(self, name, dtype, shape, data):
        self.name, self.dtype, self.shape, self.data = name, dtype, tuple(shape), data

    @property
    def numel(self):
        return math.prod(self.shape)

    def tolist(self):
        """The values as a flat Python list (float, int or bool)."""
        fmt = next(f for (d, _, f) in [*DTYPES.values(), *EXTRA_DTYPES.values()] if d == self.dtype)
        return list(struct.unpack("<%d%s" % (self.numel, fmt), self.data))

    def __repr__(self):
        return f"StTensor({self.name!r}, {self.dtype}{list(self.shape)})"


class SafetensorsFile:
    """Tensors by name (`tensors`, a dict in offset order) and `metadata` (str -> str)."""

    def __init__(self, path, tensors, metadata):
        self.path, self.tensors, self.metadata = path, tensors, metadata

    def __getitem__(self, name):
        t = self.tensors.get(name)
        if t is None:
            raise KeyError(f"{self.path}: no tensor '{name}'")
        return t

    def __contains__(self, name):
        return name in self.tensors

    def keys(self):
        return self.tensors.keys()


def parse(data, what="<bytes>", extra_dtypes=False):
    """Parses a whole safetensors file held in `data` (bytes). Raises SafetensorsError.
    `extra_dtypes`: also accept EXTRA_DTYPES (I16, I8)."""
    dtypes = {**DTYPES, **EXTRA_DTYPES} if extra_dtypes else DTYPES
    def bad(msg):
        return SafetensorsError(f"{what}: safetensors: {msg}")

    if len(data) < 8:
        raise bad(f"file too short for a header ({len(data)} bytes)")
    (hlen,) = struct.unpack("<Q", data[:8])
    if hlen > len(data) - 8 or hlen > _MAX_HEADER:
        raise bad(f"header length {hlen} exceeds the file size {len(data)}")
    try:
        header = json.loads(bytes(data[8:8 + hlen]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise bad(f"header is not valid JSON: {e}")
    if not isinstance(header, dict):
        raise bad("header is not a JSON object")
    # Exactly as the C++ reader (runtime/src/Safetensors.cpp); the two agree on every input
    # (test/fuzz/libfuzzer/safetensors_readers.py): null or [] metadata is rejected too.
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise bad("__metadata__ must map strings to strings")
    for key in [*header, *meta, *meta.values()]:
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate escape such as "\ud800"
            raise bad(f"header is not valid JSON: invalid string {key!r}")
    body = memoryview(data)[8 + hlen:]
    entries = []
    for name, e in header.items():
        where = f"tensor '{name}'"
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise bad(f"{where}: entry needs exactly dtype, shape, data_offsets")
        dtype, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if not isinstance(dtype, str) or dtype not in dtypes:
            raise bad(f"{where}: unsupported dtype {dtype!r} (F32, F64, I64, BOOL)")
        if (not isinstance(shape, list) or
                not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**63
                        for d in shape)):
            raise bad(f"{where}: shape must be a list of non-negative integers")
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise bad(f"{where}: data_offsets must be [begin, end]")
        begin, end = offs
        if not 0 <= begin <= end <= len(body):
            raise bad(f"{where}: data_offsets [{begin}, {end}] outside the "
                      f"{len(body)}-byte data section")
        adt, size, _ = dtypes[dtype]
        if math.prod(shape) * size != end - begin:
            raise bad(f"{where}: shape {shape} x {size} bytes = {math.prod(shape) * size} "
                      f"bytes but data_offsets span {end - begin}")
        entries.append((begin, end, name, adt, shape))
    entries.sort()
    pos = 0
    for begin, end, name, _, _ in entries:
        if begin < pos:
            raise bad(f"tensor '{name}' overlaps the previous tensor")
        if begin > pos:
            raise bad(f"bytes [{pos}, {begin}) of the data section belong to no tensor")
        pos = end
    if pos != len(body):
        raise bad(f"bytes [{pos}, {len(body)}) of the data section belong to no tensor")
    tensors = {name: StTensor(name, adt, shape, bytes(body[begin:end]))
               for begin, end, name, adt, shape in entries}
    return SafetensorsFile(what, tensors, dict(meta))


def read(path):
    """Reads and validates the safetensors file at `path`. Raises SafetensorsError/OSError."""
    with open(path, "rb") as f:
        data = f.read()
    return parse(data, str(path))


#: aotc dtype name -> safetensors dtype name ("f32" -> "F32"), EXTRA_DTYPES included.
_ST_NAME = {d: st for st, (d, _, _) in {**DTYPES, **EXTRA_DTYPES}.items()}


def tensor(name, dtype, shape, values):
    """An StTensor from a flat list of Python numbers (or bytes of the right length);
    `dtype` in aotc's spelling ('f32', 'f64', 'i64', 'bool', 'i32', 'u8')."""
    if dtype not in _ST_NAME:
        raise ValueError(f"tensor '{name}': unknown dtype {dtype!r}")
    _, size, fmt = {**DTYPES, **EXTRA_DTYPES}[_ST_NAME[dtype]]
    n = math.prod(shape)
    if isinstance(values, (bytes, bytearray, memoryview)):
        data = bytes(values)
    else:
        values = list(values)
        if len(values) != n:
            raise ValueError(f"tensor '{name}': {len(values)} values for shape {list(shape)}")
        if dtype == "bool":
            values = [bool(v) for v in values]
        data = struct.pack("<%d%s" % (n, fmt), *values)
    if len(data) != n * size:
        raise ValueError(f"tensor '{name}': {len(data)} bytes for {dtype}{list(shape)}")
    return StTensor(name, dtype, shape, data)


def dumps(tensors, metadata=None, sort_keys=False):
    """The bytes of a safetensors file: `tensors` (an iterable of StTensor, or a dict name ->
    StTensor) in the order given, the JSON header compact and padded with spaces to a multiple
    of 8 bytes, `metadata` (str -> str) as "__metadata__"; `sort_keys` sorts the header's JSON
    keys at every level (the layout of files written with json.dumps(..., sort_keys=True))."""
    if isinstance(tensors, dict):
        tensors = list(tensors.values())
    header, pos = {}, 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for t in tensors:
        header[t.name] = {"dtype": _ST_NAME[t.dtype], "shape": list(t.shape),
                          "data_offsets": [pos, pos + len(t.data)]}
        pos += len(t.data)
    h = json.dumps(header, separators=(",", ":"), sort_keys=sort_keys).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t.data for t in tensors)


def write(path, tensors, metadata=None, sort_keys=False):
    """Writes dumps(tensors, metadata, sort_keys) to `path` atomically (a temporary file beside
    it, then rename), so a reader never sees half a file."""
    import os
    import tempfile
    data = dumps(tensors, metadata, sort_keys)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".safetensors")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask():
    import os
    m = os.umask(0)
    os.umask(m)
    return m
