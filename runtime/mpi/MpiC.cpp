//===- MpiC.cpp - A C entry to MpiCommunicator (libaotc_mpi.so) ------------===//
//
// What the Python package calls through ctypes (python/aotc/_mpi.py): create an
// aotc::rt::MpiCommunicator on MPI_COMM_WORLD (initializing MPI if needed) and get its abi.h
// aotc_comm table, to hand to aotc_rt_trainer_set_comm; destroy it (MPI_Finalize when it
// initialized MPI). Errors are returned as non-zero with a message in *error (static storage).
//===----------------------------------------------------------------------===//
#include "aotc/mpi.h"

#include <exception>
#include <string>

extern "C" {

__attribute__((visibility("default"))) int aotc_rt_mpi_create(void **handle, const aotc_comm **table,
                                                              const char **error) {
  static thread_local std::string last;
  try {
    auto *c = new aotc::rt::MpiCommunicator();
    *handle = c;
    *table = c->table();
    return 0;
  } catch (const std::exception &e) {
    last = e.what();
    if (error) *error = last.c_str();
    return 1;
  }
}

__attribute__((visibility("default"))) void aotc_rt_mpi_destroy(void *handle) {
  delete static_cast<aotc::rt::MpiCommunicator *>(handle);
}

/** Counters (MpiCommunicator::Stats): started, completed before the wait, bytes. */
__attribute__((visibility("default"))) void aotc_rt_mpi_stats(void *handle, int64_t out[3]) {
  const auto &s = static_cast<aotc::rt::MpiCommunicator *>(handle)->stats();
  out[0] = s.started;
  out[1] = s.completedBeforeWait;
  out[2] = s.bytes;
}
}
