//===- fuzz_pt2.cpp - libFuzzer harness: the .pt2 archive -------------------===//
//
// The input is `aotc IN`'s file, a torch.export .pt2 zip: capture() reads it through
// readPt2 (libzip), weights included. Beyond crashes: every weight holds its type's bytes
// and the --emit=capture text parses back to the same text (FuzzCommon.h).
//
// Byte-level mutations of a zip mostly die at libzip's CRC/consistency checks, so the
// custom mutator works *inside* the archive (docs/fuzzing.md): it unzips the input from
// memory, then either mutates one member's bytes with LLVMFuzzerMutate (the member's CRC
// is recomputed when the archive is written again), drops a member, duplicates one under
// a new or existing name, truncates one, or adds an empty one; and re-zips, stored or
// deflated. One mutant in 16, and every input libzip cannot open, gets plain byte
// mutations instead, so the reader's handling of corrupt zips is fuzzed too.
//===----------------------------------------------------------------------===//
#include "FuzzCommon.h"

#include <zip.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using Members = std::vector<std::pair<std::string, std::string>>; // (name, bytes)

/// The members of a zip held in memory; false when libzip cannot open it.
bool unzip(const uint8_t *data, size_t size, Members &out) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(data, size, 0, &ze);
  if (!src) {
    zip_error_fini(&ze);
    return false;
  }
  zip_t *za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
  zip_error_fini(&ze);
  if (!za) {
    zip_source_free(src);
    return false;
  }
  bool ok = true;
  zip_int64_t n = zip_get_num_entries(za, 0);
  for (zip_int64_t i = 0; i < n && ok; ++i) {
    zip_stat_t st;
    if (zip_stat_index(za, (zip_uint64_t)i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE) || st.size > (1u << 20)) {
      ok = false;
      break;
    }
    zip_file_t *f = zip_fopen_index(za, (zip_uint64_t)i, 0);
    if (!f) {
      ok = false;
      break;
    }
    std::string bytes(st.size, '\0');
    zip_int64_t got = st.size ? zip_fread(f, bytes.data(), st.size) : 0;
    zip_fclose(f);
    ok = got == (zip_int64_t)st.size;
    out.push_back({st.name, std::move(bytes)});
  }
  zip_discard(za);
  return ok;
}

/// A zip of `members` (in order), each stored or deflated; empty on failure.
std::vector<uint8_t> rezip(const Members &members, bool deflate) {
  std::vector<uint8_t> result;
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(nullptr, 0, 0, &ze);
  if (!src) {
    zip_error_fini(&ze);
    return result;
  }
  zip_source_keep(src);
  zip_t *za = zip_open_from_source(src, ZIP_TRUNCATE, &ze);
  zip_error_fini(&ze);
  if (!za) {
    zip_source_free(src);
    zip_source_free(src);
    return result;
  }
  bool ok = true;
  for (const auto &[name, bytes] : members) {
    zip_source_t *m = zip_source_buffer(za, bytes.data(), bytes.size(), 0);
    zip_int64_t idx = m ? zip_file_add(za, name.c_str(), m, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (m)
        zip_source_free(m);
      continue; // e.g. a duplicate name: that mutation is simply not made
    }
    zip_set_file_compression(za, (zip_uint64_t)idx, deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 1);
    zip_file_set_mtime(za, (zip_uint64_t)idx, 0, 0); // deterministic bytes
  }
  if (zip_close(za) != 0) {
    zip_discard(za);
    ok = false;
  }
  if (ok && zip_source_open(src) == 0) {
    zip_source_seek(src, 0, SEEK_END);
    zip_int64_t n = zip_source_tell(src);
    zip_source_seek(src, 0, SEEK_SET);
    if (n > 0) {
      result.resize((size_t)n);
      if (zip_source_read(src, result.data(), (zip_uint64_t)n) != n)
        result.clear();
    }
    zip_source_close(src);
  }
  zip_source_free(src);
  return result;
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t maxSize,
                                          unsigned int seed) {
  std::mt19937 rng(seed);
  Members members;
  if (rng() % 16 == 0 || !unzip(data, size, members) || members.empty())
    return LLVMFuzzerMutate(data, size, maxSize);
  size_t k = rng() % members.size();
  switch (rng() % 16) {
  case 0: // drop a member
    members.erase(members.begin() + (long)k);
    break;
  case 1: { // duplicate a member under another member's name or a sibling name
    auto copy = members[k];
    copy.first = rng() % 2 ? members[rng() % members.size()].first : copy.first + "_" + std::to_string(rng() % 3);
    members.insert(members.begin() + (long)(rng() % (members.size() + 1)), copy);
    break;
  }
  case 2: // truncate a member
    members[k].second.resize(members[k].second.empty() ? 0 : rng() % members[k].second.size());
    break;
  case 3: // rename a member (e.g. move it out of the root folder)
    members[k].first = rng() % 2 ? members[k].first.substr(members[k].first.find('/') + 1)
                                 : "x/" + members[k].first;
    break;
  case 4: // swap two members' order (the root folder comes from the first one)
    std::swap(members[k], members[rng() % members.size()]);
    break;
  default: { // mutate one member's bytes in place
    std::string &b = members[k].second;
    size_t cap = std::max<size_t>(b.size() * 2 + 64, 256);
    std::string buf(b);
    buf.resize(cap);
    size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t *>(buf.data()), b.size(), cap);
    buf.resize(n);
    b = std::move(buf);
    break;
  }
  }
  std::vector<uint8_t> out = rezip(members, rng() % 4 == 0);
  if (out.empty() || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static aotc::fuzz::InputFile file("model.pt2");
  aotc::fuzz::captureAndCheck(file.write(data, size), "pt2");
  return 0;
}
