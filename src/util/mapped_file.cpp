// MappedFile: opening a file read-only, mapped or read into huge-page memory (errors name the path); see
// mapped_file.h.
#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace skipkv {

namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;  // x86-64 and arm64 (4 KiB granule) PMD size

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Reads `size` bytes of `fd` into anonymous memory aligned to a huge page,
// with huge pages advised, then makes it read-only. On success *region and
// *region_bytes are what munmap releases.
Status ReadIntoHugePages(int fd, size_t size, const std::string& path, void** region, size_t* region_bytes) {
  const size_t bytes = RoundUp(size, kHugePageBytes);
  // Over-allocate by one huge page and trim, so the region starts on a 2 MiB
  // boundary and every 2 MiB of it can be one page.
  void* raw = ::mmap(nullptr, bytes + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    return IoError("cannot allocate " + std::to_string(bytes) + " bytes to read '" + path +
                   "' into memory: " + std::strerror(errno) + " (--weights map keeps the file mapped instead)");
  }
  const uintptr_t raw_begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t begin = RoundUp(raw_begin, kHugePageBytes);
  if (begin > raw_begin) ::munmap(raw, begin - raw_begin);
  const uintptr_t raw_end = raw_begin + bytes + kHugePageBytes;
  if (raw_end > begin + bytes) ::munmap(reinterpret_cast<void*>(begin + bytes), raw_end - (begin + bytes));
  uint8_t* dst = reinterpret_cast<uint8_t*>(begin);
  // Best effort: EINVAL where the kernel has no THP; the copy still works.
  ::madvise(dst, bytes, MADV_HUGEPAGE);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  size_t done = 0;
  while (done < size) {
    const size_t want = std::min<size_t>(size - done, size_t{64} << 20);
    const ssize_t got = ::pread(fd, dst + done, want, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const std::string why = got < 0 ? std::strerror(errno) : "the file ended early (did it shrink while loading?)";
      ::munmap(dst, bytes);
      return IoError("cannot read '" + path + "' at byte " + std::to_string(done) + " of " + std::to_string(size) +
                     ": " + why);
    }
    done += static_cast<size_t>(got);
  }
  ::mprotect(dst, bytes, PROT_READ);  // weights are read-only, as with the mapping
  *region = dst;
  *region_bytes = bytes;
  return Status::Ok();
}

}  // namespace

StatusOr<FileLoad> ParseFileLoad(const std::string& name) {
  if (name == "map" || name == "mmap") return FileLoad::kMap;
  if (name == "read") return FileLoad::kRead;
  if (name == "auto") return FileLoad::kAuto;
  return InvalidArgument("weights load '" + name + "' is not one of auto, map, read");
}

FileLoad ResolveFileLoad(FileLoad load, uint64_t size, int64_t mem_available_bytes) {
  if (load != FileLoad::kAuto) return load;
  if (mem_available_bytes < 0) return FileLoad::kMap;
  return size <= static_cast<uint64_t>(mem_available_bytes) / 4 * 3 ? FileLoad::kRead : FileLoad::kMap;
}

int64_t MemAvailableBytes() {
  // Line by line: some lines (HugePages_Total) have no unit.
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) return kib * 1024;
  }
  return -1;
}

StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path, FileLoad load) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError("cannot stat '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("'" + path + "' is not a regular file");
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  file->load_ = ResolveFileLoad(load, file->size_, load == FileLoad::kAuto ? MemAvailableBytes() : -1);
  if (file->size_ > 0 && file->load_ == FileLoad::kRead) {
    const Status s = ReadIntoHugePages(fd, file->size_, path, &file->region_, &file->region_bytes_);
    ::close(fd);
    if (!s.ok()) return s;
    file->data_ = static_cast<const uint8_t*>(file->region_);
    return file;
  }
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return IoError("cannot mmap '" + path + "': " + std::strerror(err));
    }
    file->data_ = static_cast<const uint8_t*>(p);
    file->region_ = p;
    file->region_bytes_ = file->size_;
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (region_ != nullptr) ::munmap(region_, region_bytes_);
}

Status SetHugePagesWritable(const void* begin, const void* end, bool writable) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(begin) / kHugePageBytes * kHugePageBytes;
  const uintptr_t hi = RoundUp(reinterpret_cast<uintptr_t>(end), kHugePageBytes);
  if (hi <= lo) return Status::Ok();
  if (::mprotect(reinterpret_cast<void*>(lo), hi - lo, writable ? PROT_READ | PROT_WRITE : PROT_READ) != 0) {
    return IoError("cannot make " + std::to_string(hi - lo) + " bytes of weights " +
                   (writable ? "writable" : "read-only") + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("cannot read '" + path + "'");
  return ss.str();
}

}  // namespace skipkv
