//===- safetensors.h - A small, validating safetensors reader/writer -*- C++ -*-===//
//
// Format (https://github.com/huggingface/safetensors, "Format" section):
//   bytes [0, 8)     : N, the header length, unsigned 64-bit little endian;
//   bytes [8, 8+N)   : a UTF-8 JSON object
//                        { "<name>": {"dtype": "F32", "shape": [2, 3],
//                                     "data_offsets": [begin, end]}, ...,
//                          "__metadata__": {"<key>": "<string>", ...} }   (optional)
//   bytes [8+N, EOF) : the data buffer; offsets are relative to its start.
// aotc supports dtypes F32, F64, I64 and BOOL (1 byte per element).
//
// The reader validates, and reports as RuntimeError ("<file>: safetensors: ..."):
// a file shorter than 8 bytes, a header length beyond the file, invalid JSON (also a
// leading byte-order mark) or a non-object header, an entry that does not have exactly
// the keys dtype/shape/data_offsets, an unsupported
// dtype, a negative dimension, end < begin or end beyond the buffer,
// (end - begin) != numel * itemsize, overlapping tensors, and bytes of the buffer
// not covered by any tensor (the format forbids holes).
// The writer pads the header with spaces to a multiple of 8 bytes (as the Python
// library does) and stores tensors contiguously in the order given, so equal
// inputs give byte-identical files.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/runtime.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace aotc::rt {

struct SafetensorsFile {
  /// Tensors in file order (ascending data offset).
  std::vector<std::pair<std::string, Tensor>> tensors;
  /// The "__metadata__" entries (string to string).
  std::map<std::string, std::string> metadata;

  /// The tensor named `name`, or nullptr.
  const Tensor *find(const std::string &name) const;
  Tensor *find(const std::string &name);
  /// The tensor named `name`; RuntimeError "<what>: no tensor '<name>'" when absent.
  const Tensor &get(const std::string &name, const std::string &what = "safetensors") const;
};

/// Parses a safetensors image held in memory. `what` names it in messages.
SafetensorsFile parseSafetensors(const uint8_t *data, size_t size, const std::string &what);
/// Reads and parses a file; RuntimeError when it cannot be opened.
SafetensorsFile readSafetensors(const std::string &path);

/// Reads the weights file `aotc IN -o OUT.o` wrote next to the object (OUT.weights.safetensors)
/// for `program`, refusing a file from another aotc run: its "aotc.build_id" metadata, when
/// present, must equal program.build_id (RuntimeError naming the file, both ids and the
/// program; a file without one, e.g. a checkpoint written by another tool, is accepted),
/// and every parameter and buffer of the program must be present with its dtype and shape.
SafetensorsFile readWeights(const aotc_program &program, const std::string &path);

/// One tensor to write: a name and a (non-owned) tensor.
using NamedTensorRef = std::pair<std::string, const Tensor *>;
/// Serializes tensors (in the order given; names must be unique and not
/// "__metadata__") and metadata into a safetensors image.
std::vector<uint8_t> serializeSafetensors(const std::vector<NamedTensorRef> &tensors,
                                          const std::map<std::string, std::string> &metadata = {});
/// Serializes and writes `path` (RuntimeError when it cannot be written).
void writeSafetensors(const std::string &path, const std::vector<NamedTensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

} // namespace aotc::rt
