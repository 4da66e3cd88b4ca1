//===- CApi.cpp - The stable C API over the runtime's classes --------------===//
//
// This file implements aotc/capi.h: each function checks its handle arguments, calls the
// C++ class (DifferentiableFunction, Trainer) and turns what it throws into a status code
// and the calling thread's last error. Nothing else lives here: the checks of tensors,
// descriptors and checkpoints are the classes' own.
//===----------------------------------------------------------------------===//
#include "aotc/capi.h"

#include "aotc/runtime.h"
#include "aotc/safetensors.h"
#include "aotc/trainer.h"

#include "Internal.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <new>
#include <span>

struct aotc_rt_function {
  aotc::rt::DifferentiableFunction fn;
};

struct aotc_rt_trainer {
  aotc::rt::Trainer trainer;
};

namespace {

using namespace aotc::rt;

/// The calling thread's last error (capi.h).
struct LastError {
  aotc_rt_error_info info{};
  std::string message, entry, node, library;
};

thread_local LastError lastError;

int fail(aotc_rt_status status, const std::string &message) {
  LastError &e = lastError;
  e = LastError();
  e.message = message;
  e.info.status = status;
  return status;
}

/// Runs `body`, mapping what it throws to a status (capi.h "Errors").
template <class F> int guarded(F &&body) {
  try {
    body();
    return AOTC_RT_OK;
  } catch (const EntryPointError &x) {
    int rc = fail(AOTC_RT_ERROR_PROGRAM, x.what());
    LastError &e = lastError;
    e.entry = x.entry;
    e.node = x.nodeMessage;
    e.library = x.libraryMessage;
    e.info.entry_code = x.code;
    e.info.value = x.value;
    return rc;
  } catch (const RuntimeError &x) {
    return fail(x.kind(), x.what());
  } catch (const std::bad_alloc &) {
    return fail(AOTC_RT_ERROR_NOMEM, "aotc runtime: out of memory");
  } catch (const std::exception &x) {
    return fail(AOTC_RT_ERROR_INTERNAL, std::string("aotc runtime: internal error: ") + x.what());
  } catch (...) {
    return fail(AOTC_RT_ERROR_INTERNAL, "aotc runtime: internal error (unknown exception)");
  }
}

int nullArgument(const char *fn, const char *arg) {
  return fail(AOTC_RT_ERROR_ARGUMENT, std::string(fn) + ": " + arg + " is NULL");
}

/// A span over n tensors; RuntimeError for a negative count or a NULL array with n > 0.
std::span<const aotc_rt_tensor> tensors(const aotc_rt_tensor *p, int32_t n, const char *what) {
  if (n < 0) throw RuntimeError(std::string(what) + ": negative count " + std::to_string(n));
  if (n > 0 && !p) throw RuntimeError(std::string(what) + ": NULL array of " + std::to_string(n) + " tensors");
  return {p, (size_t)n};
}

nlohmann::json shapeJson(const int64_t *shape, int32_t rank) {
  nlohmann::json s = nlohmann::json::array();
  for (int k = 0; k < rank; ++k) s.push_back(shape[k]);
  return s;
}

nlohmann::json describe(const aotc_program &p) {
  using nlohmann::json;
  auto tensorList = [](const aotc_tensor_desc *d, int32_t n) {
    json a = json::array();
    for (int i = 0; i < n; ++i)
      a.push_back({{"name", d[i].name},
                   {"dtype", d[i].dtype},
                   {"role", d[i].role},
                   {"shape", shapeJson(d[i].shape, d[i].rank)},
                   {"requires_grad", d[i].requires_grad},
                   {"numel", d[i].numel},
                   {"bytes", d[i].bytes},
                   {"updates_input", d[i].updates_input}});
    return a;
  };
  json j = {{"name", detail::progName(p)},
            {"abi_version", p.abi_version},
            {"build_id", p.build_id ? p.build_id : ""},
            {"flags", p.flags},
            {"saved_bytes", p.saved_bytes},
            {"scratch_bytes", p.scratch_bytes},
            {"has_eval", p.eval != nullptr},
            {"inputs", tensorList(p.inputs, p.num_inputs)},
            {"outputs", tensorList(p.outputs, p.num_outputs)},
            {"grads", tensorList(p.grads, p.num_grads)}};
  j["grad_input_index"] = json::array();
  for (int k = 0; k < p.num_grads; ++k) j["grad_input_index"].push_back(p.grad_input_index[k]);
  j["errors"] = json::array();
  for (int k = 0; k < p.num_errors; ++k) j["errors"].push_back(p.errors[k] ? p.errors[k] : "");
  j["kernels"] = json::array(); // the kernel table (ABI 10, docs/profiling.md)
  for (int k = 0; k < p.num_kernels; ++k) {
    const aotc_kernel_desc &d = p.kernels[k];
    auto str = [](const char *c) { return std::string(c ? c : ""); };
    j["kernels"].push_back({{"graph", str(d.graph)},
                            {"name", str(d.name)},
                            {"kind", str(d.kind)},
                            {"ops", str(d.ops)},
                            {"bytes", d.bytes},
                            {"flops", d.flops},
                            {"dtype", d.dtype},
                            {"trans", d.trans},
                            {"shape", {d.m, d.n, d.k, d.batch}}});
  }
  j["train"] = nullptr;
  if (const aotc_train *t = p.train) {
    json tr = {{"optimizer", t->optimizer ? t->optimizer : ""},
               {"config", t->config ? t->config : ""},
               {"clip_grad_norm", t->clip_grad_norm},
               {"skip_nonfinite", t->skip_nonfinite},
               {"grad_accumulation", t->grad_accumulation},
               {"state_bytes", t->state_bytes},
               {"scratch_bytes", t->scratch_bytes}};
    tr["param_inputs"] = json::array();
    for (int k = 0; k < t->num_params; ++k) tr["param_inputs"].push_back(t->param_inputs[k]);
    tr["state"] = json::array();
    for (int k = 0; k < t->num_state; ++k) {
      const aotc_state_desc &s = t->state[k];
      tr["state"].push_back({{"name", s.name},
                             {"dtype", s.dtype},
                             {"kind", s.kind},
                             {"shape", shapeJson(s.shape, s.rank)},
                             {"param_input", s.param_input},
                             {"offset", s.offset},
                             {"numel", s.numel},
                             {"bytes", s.bytes},
                             {"key", s.key ? s.key : ""}});
    }
    tr["hyper"] = json::array();
    for (int k = 0; k < t->num_hyper; ++k) {
      const aotc_hyper_desc &h = t->hyper[k];
      tr["hyper"].push_back(
          {{"name", h.name}, {"value", h.value}, {"min", h.min}, {"max", h.max}, {"max_open", h.max_open}});
    }
    j["train"] = tr;
  }
  return j;
}

} // namespace

extern "C" {

const char *aotc_rt_last_error(void) { return lastError.message.c_str(); }

int aotc_rt_last_error_info(aotc_rt_error_info *info) {
  LastError &e = lastError;
  if (info) {
    *info = e.info;
    info->message = e.message.c_str();
    info->entry = e.entry.c_str();
    info->node_message = e.node.c_str();
    info->library_message = e.library.c_str();
  }
  return e.info.status;
}

uint32_t aotc_rt_abi_version(void) { return AOTC_ABI_VERSION; }

void aotc_rt_profile_reset(void) { resetProfiles(); }

int aotc_rt_program_check(const aotc_program *program) {
  return guarded([&] { detail::checkProgram(program); });
}

int aotc_rt_program_describe(const aotc_program *program, char *buf, size_t cap, size_t *needed) {
  if (!needed) return nullArgument("aotc_rt_program_describe", "needed");
  return guarded([&] {
    detail::checkProgram(program);
    const std::string text = describe(*program).dump();
    *needed = text.size() + 1;
    if (cap < text.size() + 1 || !buf)
      throw RuntimeError("aotc_rt_program_describe: the buffer has " + std::to_string(cap) + " bytes, " +
                         std::to_string(text.size() + 1) + " are needed");
    std::memcpy(buf, text.c_str(), text.size() + 1);
  });
}

int aotc_rt_function_create(const aotc_program *program, aotc_rt_function **out) {
  if (!out) return nullArgument("aotc_rt_function_create", "out");
  *out = nullptr;
  return guarded([&] {
    detail::checkProgram(program);
    *out = new aotc_rt_function{DifferentiableFunction(*program)};
  });
}

void aotc_rt_function_destroy(aotc_rt_function *fn) { delete fn; }

int aotc_rt_forward(aotc_rt_function *fn, const aotc_rt_tensor *in, int32_t n_in, const aotc_rt_tensor *out,
                    int32_t n_out, void *saved, int64_t saved_bytes) {
  if (!fn) return nullArgument("aotc_rt_forward", "fn");
  return guarded([&] {
    fn->fn.forward(tensors(in, n_in, "aotc_rt_forward: in"), tensors(out, n_out, "aotc_rt_forward: out"), saved,
                   saved_bytes);
  });
}

int aotc_rt_backward(aotc_rt_function *fn, const aotc_rt_tensor *in, int32_t n_in, const void *saved,
                     int64_t saved_bytes, const aotc_rt_tensor *tangents, int32_t n_tangents,
                     const aotc_rt_tensor *grads, int32_t n_grads) {
  if (!fn) return nullArgument("aotc_rt_backward", "fn");
  return guarded([&] {
    fn->fn.backward(tensors(in, n_in, "aotc_rt_backward: in"), saved, saved_bytes,
                    tensors(tangents, n_tangents, "aotc_rt_backward: tangents"),
                    tensors(grads, n_grads, "aotc_rt_backward: grads"));
  });
}

int aotc_rt_eval(aotc_rt_function *fn, const aotc_rt_tensor *in, int32_t n_in, const aotc_rt_tensor *out,
                 int32_t n_out) {
  if (!fn) return nullArgument("aotc_rt_eval", "fn");
  return guarded(
      [&] { fn->fn.eval(tensors(in, n_in, "aotc_rt_eval: in"), tensors(out, n_out, "aotc_rt_eval: out")); });
}

int aotc_rt_function_poison_scratch(aotc_rt_function *fn) {
  if (!fn) return nullArgument("aotc_rt_function_poison_scratch", "fn");
  return guarded([&] { fn->fn.poisonScratch(); });
}

int aotc_rt_trainer_create(const aotc_program *program, const aotc_rt_tensor *weights, int32_t n_weights,
                           uint64_t seed, aotc_rt_trainer **out) {
  if (!out) return nullArgument("aotc_rt_trainer_create", "out");
  *out = nullptr;
  return guarded([&] {
    detail::checkProgram(program);
    *out = new aotc_rt_trainer{Trainer(*program, tensors(weights, n_weights, "aotc_rt_trainer_create: weights"), seed)};
  });
}

int aotc_rt_trainer_create_from_file(const aotc_program *program, const char *weights_path, uint64_t seed,
                                     aotc_rt_trainer **out) {
  if (!out) return nullArgument("aotc_rt_trainer_create_from_file", "out");
  *out = nullptr;
  if (!weights_path) return nullArgument("aotc_rt_trainer_create_from_file", "weights_path");
  return guarded([&] {
    detail::checkProgram(program);
    *out = new aotc_rt_trainer{Trainer(*program, readWeights(*program, weights_path), seed)};
  });
}

void aotc_rt_trainer_destroy(aotc_rt_trainer *t) { delete t; }

int aotc_rt_trainer_input(aotc_rt_trainer *t, int32_t index, void **data) {
  if (!t) return nullArgument("aotc_rt_trainer_input", "t");
  if (!data) return nullArgument("aotc_rt_trainer_input", "data");
  return guarded([&] {
    const aotc_program &p = t->trainer.program();
    if (index < 0 || index >= p.num_inputs)
      throw RuntimeError(detail::progName(p) + ": no input " + std::to_string(index) + " (the program has " +
                         std::to_string(p.num_inputs) + ")");
    *data = t->trainer.inputData(index);
  });
}

int aotc_rt_trainer_bind(aotc_rt_trainer *t, int32_t index, const aotc_rt_tensor *weight) {
  if (!t) return nullArgument("aotc_rt_trainer_bind", "t");
  if (!weight) return nullArgument("aotc_rt_trainer_bind", "weight");
  return guarded([&] { t->trainer.bind(index, *weight); });
}

int aotc_rt_trainer_output(aotc_rt_trainer *t, int32_t k, const void **data) {
  if (!t) return nullArgument("aotc_rt_trainer_output", "t");
  if (!data) return nullArgument("aotc_rt_trainer_output", "data");
  return guarded([&] {
    const aotc_program &p = t->trainer.program();
    if (k < 0 || k >= p.num_outputs)
      throw RuntimeError(detail::progName(p) + ": no output " + std::to_string(k) + " (the program has " +
                         std::to_string(p.num_outputs) + ")");
    *data = t->trainer.output(k).data();
  });
}

int aotc_rt_trainer_step(aotc_rt_trainer *t, const aotc_rt_tensor *inputs, int32_t n_inputs, uint32_t flags,
                         double *loss) {
  if (!t) return nullArgument("aotc_rt_trainer_step", "t");
  return guarded([&] {
    if (flags & ~AOTC_STEP_ACCUMULATE)
      throw RuntimeError("aotc_rt_trainer_step: unknown flags " + std::to_string(flags));
    double l = t->trainer.step(tensors(inputs, n_inputs, "aotc_rt_trainer_step: inputs"), flags);
    if (loss) *loss = l;
  });
}

int aotc_rt_trainer_set_hyper(aotc_rt_trainer *t, const char *name, double value) {
  if (!t) return nullArgument("aotc_rt_trainer_set_hyper", "t");
  if (!name) return nullArgument("aotc_rt_trainer_set_hyper", "name");
  return guarded([&] { t->trainer.setHyper(name, value); });
}

int aotc_rt_trainer_get_hyper(const aotc_rt_trainer *t, const char *name, double *value) {
  if (!t) return nullArgument("aotc_rt_trainer_get_hyper", "t");
  if (!name) return nullArgument("aotc_rt_trainer_get_hyper", "name");
  if (!value) return nullArgument("aotc_rt_trainer_get_hyper", "value");
  return guarded([&] { *value = t->trainer.hyper(name); });
}

int aotc_rt_trainer_status(const aotc_rt_trainer *t, aotc_rt_train_status *out) {
  if (!t) return nullArgument("aotc_rt_trainer_status", "t");
  if (!out) return nullArgument("aotc_rt_trainer_status", "out");
  return guarded([&] {
    Trainer::Status s = t->trainer.status();
    *out = aotc_rt_train_status{};
    out->grad_norm = s.gradNorm;
    out->steps = t->trainer.steps();
    out->nonfinite = s.nonfinite;
    out->skipped = s.skipped;
    out->accumulating = t->trainer.accumulating();
  });
}

int aotc_rt_trainer_on_nonfinite(aotc_rt_trainer *t, int32_t policy) {
  if (!t) return nullArgument("aotc_rt_trainer_on_nonfinite", "t");
  return guarded([&] {
    switch (policy) {
    case AOTC_RT_NONFINITE_WARN: t->trainer.setOnNonfinite(Trainer::OnNonfinite::Warn); break;
    case AOTC_RT_NONFINITE_RAISE: t->trainer.setOnNonfinite(Trainer::OnNonfinite::Raise); break;
    case AOTC_RT_NONFINITE_SKIP: t->trainer.setOnNonfinite(Trainer::OnNonfinite::Skip); break;
    default:
      throw RuntimeError("aotc_rt_trainer_on_nonfinite: unknown policy " + std::to_string(policy) +
                         " (AOTC_RT_NONFINITE_WARN 0, _RAISE 1, _SKIP 2)");
    }
  });
}

int aotc_rt_trainer_set_comm(aotc_rt_trainer *t, const aotc_comm *comm) {
  if (!t) return nullArgument("aotc_rt_trainer_set_comm", "t");
  return guarded([&] { t->trainer.setCommunicator(comm); });
}

int aotc_rt_trainer_nonfinite_count(const aotc_rt_trainer *t, int64_t *count) {
  if (!t) return nullArgument("aotc_rt_trainer_nonfinite_count", "t");
  if (!count) return nullArgument("aotc_rt_trainer_nonfinite_count", "count");
  *count = t->trainer.nonfiniteSteps();
  return AOTC_RT_OK;
}

int aotc_rt_trainer_checkpoint(const aotc_rt_trainer *t, void **bytes, int64_t *size) {
  if (!t) return nullArgument("aotc_rt_trainer_checkpoint", "t");
  if (!bytes || !size) return nullArgument("aotc_rt_trainer_checkpoint", "bytes or size");
  *bytes = nullptr;
  *size = 0;
  return guarded([&] {
    SafetensorsFile f = t->trainer.checkpoint();
    std::vector<NamedTensorRef> refs;
    for (auto &[name, x] : f.tensors) refs.push_back({name, &x});
    std::vector<uint8_t> image = serializeSafetensors(refs, f.metadata);
    void *p = std::malloc(image.empty() ? 1 : image.size());
    if (!p) throw std::bad_alloc();
    std::memcpy(p, image.data(), image.size());
    *bytes = p;
    *size = (int64_t)image.size();
  });
}

int aotc_rt_trainer_restore(aotc_rt_trainer *t, const void *bytes, int64_t size, const char *what) {
  if (!t) return nullArgument("aotc_rt_trainer_restore", "t");
  if (!bytes && size > 0) return nullArgument("aotc_rt_trainer_restore", "bytes");
  return guarded([&] {
    if (size < 0) throw RuntimeError("aotc_rt_trainer_restore: negative size " + std::to_string(size));
    const std::string name = what ? what : "checkpoint";
    t->trainer.restore(parseSafetensors(static_cast<const uint8_t *>(bytes), (size_t)size, name), name);
  });
}

int aotc_rt_trainer_save(const aotc_rt_trainer *t, const char *path) {
  if (!t) return nullArgument("aotc_rt_trainer_save", "t");
  if (!path) return nullArgument("aotc_rt_trainer_save", "path");
  return guarded([&] { t->trainer.save(path); });
}

int aotc_rt_trainer_load(aotc_rt_trainer *t, const char *path) {
  if (!t) return nullArgument("aotc_rt_trainer_load", "t");
  if (!path) return nullArgument("aotc_rt_trainer_load", "path");
  return guarded([&] { t->trainer.load(path); });
}

int aotc_rt_trainer_poison_scratch(aotc_rt_trainer *t) {
  if (!t) return nullArgument("aotc_rt_trainer_poison_scratch", "t");
  return guarded([&] { t->trainer.poisonScratch(); });
}

void aotc_rt_free(void *p) { std::free(p); }

} // extern "C"
