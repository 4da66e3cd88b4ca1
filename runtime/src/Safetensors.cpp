//===- Safetensors.cpp - Validating safetensors reader and writer ----------===//
//
// This file implements safetensors.h on nlohmann/json. The checks follow the
// format description of huggingface/safetensors (README "Format") and the
// validation its Rust reader performs (safetensors/src/tensor.rs: header size,
// "MetadataIncompleteBuffer", "TensorInvalidInfo").
//===----------------------------------------------------------------------===//
#include "aotc/safetensors.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace aotc::rt {

namespace {

[[noreturn]] void fail(const std::string &what, const std::string &msg) {
  throw RuntimeError(what + ": safetensors: " + msg, AOTC_RT_ERROR_IO);
}

/// A header value for a message: scalars as JSON text, containers by type name (dump()
/// recurses once per nesting level and would overflow the stack on a hostile header).
std::string scalarText(const nlohmann::json &v) {
  return v.is_primitive() ? v.dump() : std::string(v.type_name());
}

bool parseDTypeName(const std::string &s, DType &out) {
  if (s == "F32") out = DType::F32;
  else if (s == "F64") out = DType::F64;
  else if (s == "I64") out = DType::I64;
  else if (s == "BOOL") out = DType::Bool;
  else if (s == "I32") out = DType::I32;
  else if (s == "U8") out = DType::U8;
  else return false;
  return true;
}

uint64_t readU64LE(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

/// A non-negative JSON integer, or an error naming the tensor and field.
uint64_t getIndex(const nlohmann::json &j, const std::string &what, const std::string &name,
                  const char *field) {
  if (j.is_number_unsigned())
    return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0)
    return (uint64_t)j.get<int64_t>();
  fail(what, "tensor '" + name + "': " + field + " must hold non-negative integers, got " +
                 scalarText(j));
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

} // namespace

const Tensor *SafetensorsFile::find(const std::string &name) const {
  for (auto &[n, t] : tensors)
    if (n == name)
      return &t;
  return nullptr;
}

Tensor *SafetensorsFile::find(const std::string &name) {
  for (auto &[n, t] : tensors)
    if (n == name)
      return &t;
  return nullptr;
}

const Tensor &SafetensorsFile::get(const std::string &name, const std::string &what) const {
  if (const Tensor *t = find(name))
    return *t;
  throw RuntimeError(what + ": no tensor '" + name + "'", AOTC_RT_ERROR_IO);
}

SafetensorsFile parseSafetensors(const uint8_t *data, size_t size, const std::string &what) {
  if (size < 8)
    fail(what, "file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  uint64_t headerLen = readU64LE(data);
  if (headerLen > size - 8)
    fail(what, "header length " + std::to_string(headerLen) + " exceeds the file size (" +
                   std::to_string(size) + " bytes)");
  const char *hb = reinterpret_cast<const char *>(data + 8);
  // nlohmann skips a UTF-8 byte-order mark; the format (and the Python reader,
  // python/aotc/_safetensors.py) does not allow one.
  if (headerLen >= 3 && std::memcmp(hb, "\xEF\xBB\xBF", 3) == 0)
    fail(what, "header is not valid JSON: it starts with a UTF-8 byte-order mark");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(hb, hb + headerLen);
  } catch (const nlohmann::json::exception &e) {
    // parse_error, and out_of_range.406 (a number such as 1e400 that overflows a double).
    fail(what, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object())
    fail(what, "header must be a JSON object");

  const uint8_t *buf = data + 8 + headerLen;
  const uint64_t bufSize = size - 8 - headerLen;
  SafetensorsFile file;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const nlohmann::json &v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        fail(what, "__metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail(what, "__metadata__ entry '" + m.key() + "' is not a string");
        file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    // Exactly these three keys, as the Python reader requires (the two readers agree on
    // every input: test/fuzz/libfuzzer/safetensors_readers.py).
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets") || v.size() != 3)
      fail(what, "tensor '" + name + "': entry needs dtype, shape and data_offsets, and no other key");
    Entry e{name, DType::F32, {}, 0, 0};
    if (!v["dtype"].is_string() || !parseDTypeName(v["dtype"].get<std::string>(), e.dtype))
      fail(what, "tensor '" + name + "': unsupported dtype " + scalarText(v["dtype"]) +
                     " (aotc supports F32, F64, I64, BOOL, I32, U8)");
    if (!v["shape"].is_array())
      fail(what, "tensor '" + name + "': shape must be an array");
    uint64_t numel = 1;
    for (const auto &d : v["shape"]) {
      uint64_t dim = getIndex(d, what, name, "shape");
      if (dim > (uint64_t)INT64_MAX || (dim != 0 && numel > UINT64_MAX / 16 / dim))
        fail(what, "tensor '" + name + "': shape is too large");
      numel *= dim;
      e.shape.push_back((int64_t)dim);
    }
    const auto &off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2)
      fail(what, "tensor '" + name + "': data_offsets must be [begin, end]");
    e.begin = getIndex(off[0], what, name, "data_offsets");
    e.end = getIndex(off[1], what, name, "data_offsets");
    if (e.end < e.begin)
      fail(what, "tensor '" + name + "': data_offsets end " + std::to_string(e.end) +
                     " is before begin " + std::to_string(e.begin));
    if (e.end > bufSize)
      fail(what, "tensor '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " +
                     std::to_string(e.end) + "] exceed the data buffer (" +
                     std::to_string(bufSize) + " bytes)");
    uint64_t expect = numel * (uint64_t)itemSize(e.dtype);
    if (e.end - e.begin != expect)
      fail(what, "tensor '" + name + "': " + typeString(e.dtype, e.shape) + " needs " +
                     std::to_string(expect) + " bytes but data_offsets span " +
                     std::to_string(e.end - e.begin));
    entries.push_back(std::move(e));
  }

  // Sort by offset (an empty tensor before a non-empty one at its offset; names break the
  // remaining ties), then require the tensors to tile the buffer exactly: no overlap, no hole.
  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t pos = 0;
  const Entry *prev = nullptr;
  for (const Entry &e : entries) {
    if (e.begin < pos)
      fail(what, "tensors '" + prev->name + "' and '" + e.name + "' overlap (bytes " +
                     std::to_string(e.begin) + " to " + std::to_string(pos) + ")");
    if (e.begin > pos)
      fail(what, "bytes " + std::to_string(pos) + " to " + std::to_string(e.begin) +
                     " of the data buffer belong to no tensor");
    pos = e.end;
    prev = &e;
  }
  if (pos != bufSize)
    fail(what, "bytes " + std::to_string(pos) + " to " + std::to_string(bufSize) +
                   " of the data buffer belong to no tensor");

  for (const Entry &e : entries)
    file.tensors.emplace_back(
        e.name, Tensor::fromBytes(e.dtype, e.shape, buf + e.begin, (int64_t)(e.end - e.begin)));
  return file;
}

SafetensorsFile readSafetensors(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw RuntimeError(path + ": cannot open file: " + std::strerror(errno), AOTC_RT_ERROR_IO);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    throw RuntimeError(path + ": read error: " + std::strerror(errno), AOTC_RT_ERROR_IO);
  return parseSafetensors(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> serializeSafetensors(const std::vector<NamedTensorRef> &tensors,
                                          const std::map<std::string, std::string> &metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t pos = 0;
  for (const auto &[name, t] : tensors) {
    if (!t)
      throw RuntimeError("safetensors: tensor '" + name + "' is null");
    if (name == "__metadata__" || header.contains(name))
      throw RuntimeError("safetensors: duplicate or reserved tensor name '" + name + "'");
    header[name] = {{"dtype", safetensorsDTypeName(t->dtype())},
                    {"shape", t->shape()},
                    {"data_offsets", {pos, pos + (uint64_t)t->bytes()}}};
    pos += (uint64_t)t->bytes();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8 + h.size() + pos);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i)
    out[i] = (uint8_t)(n >> (8 * i));
  std::memcpy(out.data() + 8, h.data(), h.size());
  uint8_t *p = out.data() + 8 + h.size();
  for (const auto &[name, t] : tensors) {
    if (t->bytes())
      std::memcpy(p, t->data(), (size_t)t->bytes());
    p += t->bytes();
  }
  return out;
}

void writeSafetensors(const std::string &path, const std::vector<NamedTensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  std::vector<uint8_t> bytes = serializeSafetensors(tensors, metadata);
  // Atomically: a temporary file beside `path`, renamed over it once complete, so a reader
  // never sees half a file and a failed write leaves the old one.
  const std::string tmp = path + ".aotc-tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw RuntimeError(path + ": cannot open " + tmp + " for writing: " + std::strerror(errno), AOTC_RT_ERROR_IO);
    out.write(reinterpret_cast<const char *>(bytes.data()), (std::streamsize)bytes.size());
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw RuntimeError(path + ": write error", AOTC_RT_ERROR_IO);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeError(path + ": cannot rename " + tmp + " into place", AOTC_RT_ERROR_IO);
  }
}

} // namespace aotc::rt
