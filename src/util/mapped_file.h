// MappedFile: a read-only view of a whole file, used in place by the loaders
// (tensor views point into it). Its bytes reach memory one of two ways
// (FileLoad): memory-mapped from the page cache, or read into anonymous memory
// with transparent huge pages advised. An empty file has size 0 and
// data() == nullptr either way.
//
// Why the second way exists: decode streams every weight once per token, and
// with 4 KiB pages that is one TLB miss per 4 KiB. On a 2-vCPU VM whose guest
// page tables are shadowed by the host, that halved decode speed and made it
// swing by a third between runs; the same file in 2 MiB pages ran 1.5-5x
// faster with a spread under 2 % (BENCHMARKS.md, "Weights in huge pages").
// A file mapping cannot get huge pages on ordinary file systems; anonymous
// memory can (THP in "always" or "madvise" mode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "skipkv/types.h"  // FileLoad, ParseFileLoad
#include "util/status.h"

namespace skipkv {

// kAuto's rule: kRead when size <= 3/4 of mem_available_bytes, else kMap
// (mem_available_bytes < 0: unknown, then kMap). Other loads are returned as is.
FileLoad ResolveFileLoad(FileLoad load, uint64_t size, int64_t mem_available_bytes);
// MemAvailable from /proc/meminfo in bytes, or -1 where it cannot be read.
int64_t MemAvailableBytes();

class MappedFile {
 public:
  // Errors name the path: missing or unreadable file, not a regular file, a
  // failed mmap, a read that ends early (the file shrank while being read).
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path, FileLoad load = FileLoad::kMap);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // kMap or kRead: how the bytes were loaded (kAuto resolved).
  FileLoad load() const { return load_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  FileLoad load_ = FileLoad::kMap;
  void* region_ = nullptr;  // what munmap releases (kRead: the aligned anonymous region)
  size_t region_bytes_ = 0;
};

// Makes the bytes [begin, end) writable (or read-only again), widened to
// whole 2 MiB pages so that huge pages are not split: for rewriting weights
// read with FileLoad::kRead in place, whose region is 2 MiB aligned and a
// whole number of 2 MiB long. Errors name the range and errno's text.
Status SetHugePagesWritable(const void* begin, const void* end, bool writable);

// Reads a whole (small) file into a string, e.g. config.json.
StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace skipkv
