//===- CudaFatbin.cpp - PTX -> one cubin per arch -> fatbin (CUDA toolkit) ----===//
//
// The CUDA target's binary step (docs/cuda.md): the PTX that GpuGen.cpp built once
// for the lowest --cuda-arch is assembled by the toolkit's `ptxas -O3 -v` for every
// arch, and `fatbinary` packs the cubins together with the PTX (for newer GPUs to
// JIT) into one fatbin. Both tools come from --cuda-toolkit; their version lines and
// ptxas's resource report are returned. Files live in a fresh temporary directory
// that is removed afterwards; the fatbin does not depend on its paths (measured:
// byte-identical from two directories).
//===----------------------------------------------------------------------===//
#include "CodegenInternal.h"

#include "aotc/Diagnostics.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <fstream>
#include <optional>
#include <regex>

namespace aotc::cg {
namespace {

std::string readText(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  return buf ? (*buf)->getBuffer().str() : std::string();
}

/// Runs `tool args...`; returns {exit code, stdout+stderr}. A tool that is not there is a
/// user error naming --cuda-toolkit.
std::pair<int, std::string> run(const std::string &tool, const std::vector<std::string> &args,
                                const std::string &dir) {
  if (!llvm::sys::fs::can_execute(tool))
    userError("--cuda-toolkit: '" + tool + "' not found (or not executable)");
  std::vector<llvm::StringRef> argv{tool};
  for (auto &a : args) argv.push_back(a);
  std::string log = dir + "/tool.log";
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log), llvm::StringRef(log)};
  std::string err;
  int rc = llvm::sys::ExecuteAndWait(tool, argv, std::nullopt, redirects, 0, 0, &err);
  if (rc < 0) internalError("codegen (cuda): cannot run " + tool + ": " + err);
  return {rc, readText(log)};
}

std::string lastLine(const std::string &s) {
  size_t end = s.find_last_not_of("\n");
  if (end == std::string::npos) return "";
  size_t begin = s.rfind('\n', end);
  return s.substr(begin == std::string::npos ? 0 : begin + 1, end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

} // namespace

std::string ptxArch(const CudaOptions &o) {
  const std::string &lowest = o.archs.front();
  return std::stoi(lowest.substr(3)) > 90 ? "sm_90" : lowest;
}

CudaBinary buildFatbin(const std::string &ptx, const CudaOptions &o) {
  std::string ptxas = o.toolkit + "/bin/ptxas", fatbinary = o.toolkit + "/bin/fatbinary";
  llvm::SmallString<128> dirBuf;
  if (llvm::sys::fs::createUniqueDirectory("aotc-cuda", dirBuf))
    internalError("codegen (cuda): cannot create a temporary directory");
  std::string dir = dirBuf.str().str();
  CudaBinary out;
  auto cleanup = [&] { llvm::sys::fs::remove_directories(dir); };
  try {
    {
      std::ofstream f(dir + "/kernels.ptx", std::ios::binary);
      f << ptx;
    }
    out.ptxasVersion = lastLine(run(ptxas, {"--version"}, dir).second);
    out.fatbinaryVersion = lastLine(run(fatbinary, {"--version"}, dir).second);
    std::vector<std::string> images;
    for (const std::string &arch : o.archs) {
      std::string cubin = dir + "/" + arch + ".cubin";
      auto [rc, log] = run(ptxas, {"-arch=" + arch, "-O3", "-v", dir + "/kernels.ptx", "-o", cubin}, dir);
      if (rc != 0 && log.find("is not defined for option 'gpu-name'") != std::string::npos)
        userError("--cuda-arch: " + arch + " is not supported by " + ptxas + " (" + out.ptxasVersion +
                  "); `ptxas --help` lists the supported sm_NN values");
      if (rc != 0) internalError("codegen (cuda): ptxas -arch=" + arch + " failed:\n" + log);
      PtxasReport r;
      r.arch = arch;
      r.log = log;
      static const std::regex spill(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
      for (auto it = std::sregex_iterator(log.begin(), log.end(), spill); it != std::sregex_iterator(); ++it)
        r.spillBytes += std::stoll((*it)[1]) + std::stoll((*it)[2]);
      out.reports.push_back(r);
      images.push_back("--image3=kind=elf,sm=" + arch.substr(3) + ",file=" + cubin);
    }
    images.push_back("--image3=kind=ptx,sm=" + ptxArch(o).substr(3) + ",file=" + dir + "/kernels.ptx");
    std::vector<std::string> args{"--create=" + dir + "/kernels.fatbin"};
    args.insert(args.end(), images.begin(), images.end());
    auto [rc, log] = run(fatbinary, args, dir);
    if (rc != 0) internalError("codegen (cuda): fatbinary failed:\n" + log);
    auto buf = llvm::MemoryBuffer::getFile(dir + "/kernels.fatbin");
    if (!buf) internalError("codegen (cuda): fatbinary wrote no file");
    out.fatbin.assign((*buf)->getBufferStart(), (*buf)->getBufferEnd());
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  return out;
}

} // namespace aotc::cg
