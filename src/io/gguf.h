// GGUF v2/v3 reader and writer (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
// The reader memory-maps the file and validates everything before exposing
// it: magic, version, counts, string lengths, value types, nested arrays,
// tensor dims and types, alignment, and that every tensor's data lies inside
// the file without overlapping another. Each failure is a Status naming the
// file, the field and the offending value — never a crash or a huge allocation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tensor/tensor_view.h"
#include "util/mapped_file.h"
#include "util/status.h"

namespace skipkv {

// GGUF metadata value types, numbered as in the format.
enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
const char* GgufTypeName(GgufType t);

// One metadata value. Arrays keep their element type (also for empty arrays)
// and may nest.
struct GgufValue {
  struct Array {
    GgufType elem_type = GgufType::kUint8;
    std::vector<GgufValue> items;
  };
  GgufType type = GgufType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  static GgufValue U8(uint8_t x) { return {GgufType::kUint8, uint64_t{x}}; }
  static GgufValue I8(int8_t x) { return {GgufType::kInt8, int64_t{x}}; }
  static GgufValue U16(uint16_t x) { return {GgufType::kUint16, uint64_t{x}}; }
  static GgufValue I16(int16_t x) { return {GgufType::kInt16, int64_t{x}}; }
  static GgufValue U32(uint32_t x) { return {GgufType::kUint32, uint64_t{x}}; }
  static GgufValue I32(int32_t x) { return {GgufType::kInt32, int64_t{x}}; }
  static GgufValue U64(uint64_t x) { return {GgufType::kUint64, x}; }
  static GgufValue I64(int64_t x) { return {GgufType::kInt64, x}; }
  static GgufValue F32(float x) { return {GgufType::kFloat32, double{x}}; }
  static GgufValue F64(double x) { return {GgufType::kFloat64, x}; }
  static GgufValue Bool(bool x) { return {GgufType::kBool, x}; }
  static GgufValue Str(std::string x) { return {GgufType::kString, std::move(x)}; }
  static GgufValue Arr(GgufType elem, std::vector<GgufValue> items) {
    return {GgufType::kArray, Array{elem, std::move(items)}};
  }
  static GgufValue StrArr(const std::vector<std::string>& xs);
  static GgufValue F32Arr(const std::vector<float>& xs);
  static GgufValue I32Arr(const std::vector<int32_t>& xs);

  bool is_integer() const;  // any signed/unsigned integer type
  bool is_number() const;   // integer or float
  // Conversions; CHECK the kind (callers first validate with the Get* helpers below).
  int64_t AsInt() const;
  double AsDouble() const;
  const std::string& AsString() const { return std::get<std::string>(v); }
  const Array& AsArray() const { return std::get<Array>(v); }
  bool AsBool() const { return std::get<bool>(v); }
  bool operator==(const GgufValue& o) const;
  std::string ToString(size_t max_items = 8) const;  // short human rendering for `skipkv inspect`
};

// Ordered key -> value map (GGUF keys keep file order for printing).
class GgufMetadata {
 public:
  void Set(const std::string& key, GgufValue value);
  const GgufValue* Find(const std::string& key) const;
  bool Has(const std::string& key) const { return Find(key) != nullptr; }
  const std::vector<std::pair<std::string, GgufValue>>& entries() const { return entries_; }

  // Typed getters with clear errors: NotFound naming the key, or
  // CorruptData naming the key, the expected and the actual type.
  StatusOr<int64_t> GetInt(const std::string& key) const;
  StatusOr<double> GetFloat(const std::string& key) const;  // accepts ints too
  StatusOr<bool> GetBool(const std::string& key) const;
  StatusOr<std::string> GetString(const std::string& key) const;
  StatusOr<std::vector<std::string>> GetStringArray(const std::string& key) const;
  StatusOr<std::vector<float>> GetFloatArray(const std::string& key) const;
  StatusOr<std::vector<int64_t>> GetIntArray(const std::string& key) const;
  // The same with a default when the key is absent (a wrong type is still an error).
  StatusOr<int64_t> GetIntOr(const std::string& key, int64_t dflt) const;
  StatusOr<double> GetFloatOr(const std::string& key, double dflt) const;
  StatusOr<bool> GetBoolOr(const std::string& key, bool dflt) const;
  StatusOr<std::string> GetStringOr(const std::string& key, const std::string& dflt) const;

 private:
  std::vector<std::pair<std::string, GgufValue>> entries_;
  std::map<std::string, size_t> index_;
};

// A validated GGUF file, mapped or read into memory (util/mapped_file.h).
// TensorViews point into it and stay valid while the GgufFile lives.
class GgufFile {
 public:
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path, FileLoad load = FileLoad::kMap);
  // Parses an in-memory image (fuzzing, embedded models). `data` must outlive the result.
  static StatusOr<std::unique_ptr<GgufFile>> FromMemory(const uint8_t* data, size_t size, const std::string& name);

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }  // start of the tensor data section
  const std::string& path() const { return path_; }
  const GgufMetadata& metadata() const { return metadata_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* FindTensor(const std::string& name) const;
  // How the file's bytes were loaded (kMap for FromMemory images).
  FileLoad load() const { return file_ ? file_->load() : FileLoad::kMap; }

 private:
  GgufFile() = default;
  std::string path_;
  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  GgufMetadata metadata_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Builds a GGUF v3 file: metadata and tensors in insertion order, data
// aligned to `general.alignment` (default 32).
class GgufWriter {
 public:
  void SetMetadata(const std::string& key, GgufValue value) { metadata_.Set(key, std::move(value)); }
  GgufMetadata& metadata() { return metadata_; }
  // ne in ggml order (ne[0] innermost); `data` holds RowBytes(type, ne[0]) * rows bytes and is copied.
  Status AddTensor(const std::string& name, DType type, const std::vector<int64_t>& ne, const void* data, size_t nbytes);
  Status WriteFile(const std::string& path) const;
  StatusOr<std::vector<uint8_t>> WriteToMemory() const;

 private:
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  GgufMetadata metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace skipkv
