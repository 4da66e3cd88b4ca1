//===- Outputs.cpp - Writing a compile's files atomically ---------------------===//
//
// OutputSet (Driver.h) writes each file to a temporary file in its own folder
// ("<dir>/.<name>.aotc-tmp-XXXXXX", so rename stays within one file system), flushes
// it, and only when every file is complete renames them into place. An existing
// target is first hard-linked to a backup, so a rename that fails halfway puts back
// what was there: a compile that fails leaves earlier outputs untouched.
//
// Fault injection for tests (docs/testing.md): AOTC_FAULT_INJECT=write:K makes the
// K-th temporary-file write fail after half its bytes, rename:K the K-th rename.
//===----------------------------------------------------------------------===//
#include "Driver.h"

#include "aotc/Diagnostics.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace aotc::driver {

namespace {

/// AOTC_FAULT_INJECT=<kind>:<k>: true when this is the k-th event of `kind`.
bool injectFault(const char *kind, int &counter) {
  ++counter;
  const char *env = std::getenv("AOTC_FAULT_INJECT");
  if (!env) return false;
  std::string s = env;
  size_t c = s.find(':');
  if (c == std::string::npos || s.substr(0, c) != kind) return false;
  return std::atoi(s.c_str() + c + 1) == counter;
}

/// Writes all `size` bytes to fd (retrying short writes and EINTR); 0 or an errno.
int writeAll(int fd, const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  for (size_t left = size; left > 0;) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    p += n;
    left -= (size_t)n;
  }
  return 0;
}

std::string folderOf(const std::string &path) {
  std::filesystem::path p = std::filesystem::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

} // namespace

OutputSet::~OutputSet() {
  for (const Pending &f : files_)
    if (!f.tmp.empty()) ::unlink(f.tmp.c_str());
}

void refuseToOverwriteInput(const std::string &out, const std::vector<std::string> &inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const std::string &in : inputs)
    if (out == in || (fs::exists(out, ec) && fs::exists(in, ec) && fs::equivalent(out, in, ec)))
      userError("refusing to overwrite input file '" + in + "' with output '" + out + "'");
}

void OutputSet::add(const std::string &pathIn, const void *data, size_t size) {
  namespace fs = std::filesystem;
  std::error_code ec;
  refuseToOverwriteInput(pathIn, inputs_);
  // A symlink is followed: the file it names is replaced, the link kept. A target that
  // exists and is not a regular file (/dev/null, a FIFO) is written in place: renaming
  // over it would replace the device node itself.
  std::string path = pathIn;
  if (fs::is_symlink(pathIn, ec)) {
    fs::path real = fs::weakly_canonical(pathIn, ec);
    if (!ec) path = real.string();
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) userError(SourceLoc{pathIn, 0, 0}, "is a directory");
    writeInPlace(pathIn, data, size);
    return;
  }
  std::string name = fs::path(path).filename().string();
  std::string tmpl = folderOf(path) + "/." + name + ".aotc-tmp-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0)
    userError(SourceLoc{pathIn, 0, 0}, std::string("cannot create a file in its folder: ") + std::strerror(errno));
  files_.push_back({path, buf.data(), pathIn});
  // mkstemp creates 0600; outputs get the usual 0666 & ~umask.
  mode_t um = ::umask(0);
  ::umask(um);
  ::fchmod(fd, 0666 & ~um);
  bool fault = injectFault("write", writes_);
  int err = writeAll(fd, data, fault ? size / 2 : size);
  if (fault && !err) err = EIO;
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (err) userError(SourceLoc{pathIn, 0, 0}, std::string("write error: ") + std::strerror(err));
}

void OutputSet::writeInPlace(const std::string &path, const void *data, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0) userError(SourceLoc{path, 0, 0}, std::string("cannot open for writing: ") + std::strerror(errno));
  int err = writeAll(fd, data, size);
  if (::close(fd) != 0 && !err) err = errno;
  if (err) userError(SourceLoc{path, 0, 0}, std::string("write error: ") + std::strerror(err));
}

void OutputSet::commit() {
  // Back up what each target holds now (a hard link: no copy), then rename every
  // temporary into place; on a failure, restore the backups of the targets already replaced.
  namespace fs = std::filesystem;
  std::vector<std::string> backups(files_.size());
  auto cleanupBackups = [&] {
    for (const std::string &b : backups)
      if (!b.empty()) ::unlink(b.c_str());
  };
  for (size_t i = 0; i < files_.size(); ++i) {
    if (::access(files_[i].path.c_str(), F_OK) != 0) continue; // nothing to keep
    // A hard link where the file system allows one, else a copy; without a backup no
    // rename may start (a failure halfway could not put the old file back).
    std::string tmpl = folderOf(files_[i].path) + "/." + fs::path(files_[i].path).filename().string() +
                       ".aotc-bak-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    int fd = ::mkstemp(buf.data());
    bool ok = fd >= 0;
    if (ok) {
      ::close(fd);
      ::unlink(buf.data());
      std::error_code ec;
      ok = ::link(files_[i].path.c_str(), buf.data()) == 0 ||
           fs::copy_file(files_[i].path, buf.data(), fs::copy_options::none, ec);
    }
    if (!ok) {
      cleanupBackups();
      userError(SourceLoc{files_[i].shown, 0, 0}, "cannot keep a backup of the existing file while replacing "
                                                  "it (nothing was changed)");
    }
    backups[i] = buf.data();
  }
  for (size_t i = 0; i < files_.size(); ++i) {
    int err = injectFault("rename", renames_) ? EIO : 0;
    if (!err && ::rename(files_[i].tmp.c_str(), files_[i].path.c_str()) != 0) err = errno;
    if (err) {
      for (size_t j = 0; j < i; ++j) {
        if (!backups[j].empty()) ::rename(backups[j].c_str(), files_[j].path.c_str());
        else ::unlink(files_[j].path.c_str()); // it did not exist before
        backups[j].clear();
      }
      cleanupBackups();
      userError(SourceLoc{files_[i].shown, 0, 0}, std::string("cannot move the new file into place: ") +
                                                     std::strerror(err) + " (earlier outputs kept)");
    }
    files_[i].tmp.clear();
  }
  cleanupBackups();
}

} // namespace aotc::driver
