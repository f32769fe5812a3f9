#include "eval/provenance.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "eval_commit.h"  // generated: SKIPKV_EVAL_COMMIT
#include "io/embedded/embedded_model.h"

namespace skipkv::eval {
namespace {

struct Hasher {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  void Word(uint64_t w) {
    h ^= w + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  void Bytes(const char* p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      Word(w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p + i, n - i);
    Word(tail ^ (static_cast<uint64_t>(n - i) << 56));
  }
};

Status HashFile(const std::filesystem::path& p, Hasher& h) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return NotFound("cannot open '" + p.string() + "' to compute its digest");
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    h.Bytes(buf.data(), n);
    total += n;
  }
  if (in.bad()) return IoError("cannot read '" + p.string() + "'");
  h.Word(total);
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> ContentDigest(const std::string& path) {
  if (path.empty() || path == ":default:") return std::string("embedded:stories260K");
  if (path == ":testbed:") {
    const EmbeddedBlob b = EmbeddedTestbedBytes();
    Hasher h;
    h.Bytes(reinterpret_cast<const char*>(b.data), b.size);
    h.Word(b.size);
    char buf[48];
    std::snprintf(buf, sizeof buf, "embedded:testbed:xh64:%016llx", static_cast<unsigned long long>(h.h));
    return std::string(buf);
  }
  std::error_code ec;
  const std::filesystem::path root(path);
  Hasher h;
  if (std::filesystem::is_directory(root, ec)) {
    std::vector<std::filesystem::path> files;
    for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec)) files.push_back(it->path());
    }
    if (ec) return IoError("cannot list '" + path + "': " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const std::string rel = std::filesystem::relative(f, root, ec).generic_string();
      h.Bytes(rel.data(), rel.size());
      SKIPKV_RETURN_IF_ERROR(HashFile(f, h));
    }
  } else {
    SKIPKV_RETURN_IF_ERROR(HashFile(root, h));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "xh64:%016llx", static_cast<unsigned long long>(h.h));
  return std::string(buf);
}

std::string SourceCommit() { return SKIPKV_EVAL_COMMIT; }

}  // namespace skipkv::eval
