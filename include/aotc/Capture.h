//===- Capture.h - Readers behind capture() ----------------------*- C++ -*-===//
//
// The pieces of stage 1 (lib/Capture), exposed for tests and tools. capture()
// in Stages.h is the entry point the pipeline uses; it detects the format from
// the content and calls one of these.
//
// Formats (docs/formats.md, ../shared/reference/torch-export-format.md):
//  * .pt2 zip (torch.export.save, torch >= 2.9): <root>/archive_format = "pt2",
//    <root>/models/model.json, <root>/data/weights/model_weights_config.json +
//    raw data/weights/weight_N payloads.
//  * bare ExportedProgram JSON (schema_version major 8, ATEN dialect).
//  * FX graph code / aotc textual IR (TextIR.h).
// Every problem with the input is a user error (exit 1) naming the archive
// member, the node and its stack_trace where known.
//===----------------------------------------------------------------------===//
#pragma once

#include "aotc/Graph.h"
#include "aotc/Stages.h"

#include <string>
#include <vector>

namespace aotc {

enum class InputFormat { Pt2Zip, ExportJson, FxText, Unknown };

/// Detects the format from the first bytes: zip magic "PK\x03\x04" (or the
/// empty-archive "PK\x05\x06"), a JSON object (first non-blank byte '{'), or
/// FX graph code (a `def forward(` line).
InputFormat detectFormat(const std::string &bytes);

/// Reads an ExportedProgram JSON document (torch/_export/serde/schema.py,
/// SCHEMA_VERSION 8.x). `where` names it in diagnostics ("x.json" or
/// "m.pt2:models/model.json"). Checks: schema_version major 8, not the
/// TRAINING dialect, static shapes, dtypes f32/f64/i64/bool, known ops and
/// argument names, no dangling references or cycles, unique names, and each
/// node's tensor_values meta against the inferred type. Parameters require grad,
/// buffers and user inputs do not. buffer/user-input mutation outputs are
/// recorded in Program::mutatedInputs. Result: stage "capture".
/// A dynamic export (torch.export.Dim) is read at the sizes `specialize` gives its symbols
/// ("SYMBOL=N" or "INPUT:DIM=N"; lib/Capture/Sizes.h): its size computations and asserts are
/// evaluated there. The symbols it gives no value stay run-time sizes (TensorType::sym,
/// Node::symArgs, Program::sizeChecks; docs/dynamic-shapes.md), bounded by their range or by
/// `maxSize` ("SYMBOL=N" or "INPUT:DIM=N").
Program readExportedProgram(const std::string &jsonText, const std::string &where,
                            const std::vector<std::string> &specialize = {},
                            const std::vector<std::string> &maxSize = {});

/// Reads a .pt2 archive (libzip): the program from models/model.json and, when
/// `weights` is non-null, the raw bytes of every Parameter/Buffer placeholder
/// (in placeholder order, made contiguous). Weight payloads are validated
/// (present, not pickled, dtype/shape as the graph input, file large enough for
/// shape x strides x itemsize) even when `weights` is null. The torch 2.6/2.7
/// layout (serialized_exported_program.json) and legacy pickled weights are
/// recognised and rejected with a re-export hint.
/// A weight whose view expands its storage (stride 0) beyond `maxTensorBytes` is a user error.
Program readPt2(const std::string &path, std::vector<Weight> *weights,
                int64_t maxTensorBytes = kDefaultMaxTensorBytes, const std::vector<std::string> &specialize = {},
                const std::vector<std::string> &maxSize = {});

/// Applies --requires-grad / --freeze: each name is a placeholder name or a
/// parameter/buffer FQN of `p.forward`. Unknown names, names in both lists and
/// non-floating inputs in `requiresGrad` are user errors.
void applyRequiresGradFlags(Program &p, const CaptureOptions &opts);

/// --max-tensor-bytes: a user error naming the first value (of either graph) whose type is
/// larger than `maxTensorBytes` bytes. capture() calls it; so does --start-from.
void checkTensorBytes(const Program &p, int64_t maxTensorBytes);
/// `path`'s file name up to its first '.', made a C identifier ("ln_gelu.pt2" -> "ln_gelu").
std::string programNameFromPath(const std::string &path);

} // namespace aotc
