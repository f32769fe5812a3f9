// GgufFile: parses and validates a GGUF v2/v3 image (mmapped file or memory).
// Every count and length read from the file is checked against the bytes
// that remain before anything is allocated, so a hostile file cannot make us
// allocate more than a small multiple of its own size.
#include <algorithm>
#include <cstring>
#include <limits>

#include "io/gguf.h"

namespace skipkv {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 8;            // nested arrays deeper than this are rejected
// Upper bound on metadata values held in memory (each costs ~64 bytes);
// real vocabularies hold < 1M items.
constexpr uint64_t kMaxTotalValues = uint64_t{1} << 25;

// Minimum encoded size of one value of type t (arrays/strings: their headers).
uint64_t MinEncodedSize(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
  }
  return 1;
}

bool IsKnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

// Bounds-checked little-endian reader over the image.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name) : data_(data), size_(size), name_(name) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  Status Error(const std::string& what) const {
    return CorruptData(name_ + ": " + what + " (at byte offset " + std::to_string(pos_) + ")");
  }

  template <typename T>
  Status Read(T* out, const char* field) {
    if (remaining() < sizeof(T)) {
      return Error(std::string("truncated: ") + field + " needs " + std::to_string(sizeof(T)) +
                   " bytes, " + std::to_string(remaining()) + " left");
    }
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string* out, const std::string& field) {
    uint64_t len = 0;
    SKIPKV_RETURN_IF_ERROR(Read(&len, (field + " length").c_str()));
    if (len > remaining()) {
      return Error(field + ": string length " + std::to_string(len) + " exceeds the " +
                   std::to_string(remaining()) + " bytes left in the file");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

class Parser {
 public:
  Parser(Cursor* cur) : cur_(cur) {}

  Status ReadValue(GgufType type, const std::string& key, int depth, GgufValue* out) {
    out->type = type;
    switch (type) {
      case GgufType::kUint8: return ReadUnsigned<uint8_t>(key, out);
      case GgufType::kUint16: return ReadUnsigned<uint16_t>(key, out);
      case GgufType::kUint32: return ReadUnsigned<uint32_t>(key, out);
      case GgufType::kUint64: return ReadUnsigned<uint64_t>(key, out);
      case GgufType::kInt8: return ReadSigned<int8_t>(key, out);
      case GgufType::kInt16: return ReadSigned<int16_t>(key, out);
      case GgufType::kInt32: return ReadSigned<int32_t>(key, out);
      case GgufType::kInt64: return ReadSigned<int64_t>(key, out);
      case GgufType::kFloat32: {
        float f;
        SKIPKV_RETURN_IF_ERROR(cur_->Read(&f, key.c_str()));
        out->v = static_cast<double>(f);
        return Status::Ok();
      }
      case GgufType::kFloat64: {
        double d;
        SKIPKV_RETURN_IF_ERROR(cur_->Read(&d, key.c_str()));
        out->v = d;
        return Status::Ok();
      }
      case GgufType::kBool: {
        uint8_t b;
        SKIPKV_RETURN_IF_ERROR(cur_->Read(&b, key.c_str()));
        if (b > 1) return cur_->Error("metadata key '" + key + "': bool value " + std::to_string(b) + " is not 0 or 1");
        out->v = b != 0;
        return Status::Ok();
      }
      case GgufType::kString: {
        std::string s;
        SKIPKV_RETURN_IF_ERROR(cur_->ReadString(&s, "metadata key '" + key + "'"));
        out->v = std::move(s);
        return Status::Ok();
      }
      case GgufType::kArray: return ReadArray(key, depth, out);
    }
    return cur_->Error("metadata key '" + key + "': unknown value type");
  }

 private:
  template <typename T>
  Status ReadUnsigned(const std::string& key, GgufValue* out) {
    T x;
    SKIPKV_RETURN_IF_ERROR(cur_->Read(&x, key.c_str()));
    out->v = static_cast<uint64_t>(x);
    return Status::Ok();
  }
  template <typename T>
  Status ReadSigned(const std::string& key, GgufValue* out) {
    T x;
    SKIPKV_RETURN_IF_ERROR(cur_->Read(&x, key.c_str()));
    out->v = static_cast<int64_t>(x);
    return Status::Ok();
  }

  Status ReadArray(const std::string& key, int depth, GgufValue* out) {
    if (depth >= kMaxArrayDepth) {
      return cur_->Error("metadata key '" + key + "': arrays nested deeper than " + std::to_string(kMaxArrayDepth));
    }
    uint32_t elem_raw;
    uint64_t count;
    SKIPKV_RETURN_IF_ERROR(cur_->Read(&elem_raw, (key + " array element type").c_str()));
    if (!IsKnownType(elem_raw)) {
      return cur_->Error("metadata key '" + key + "': unknown array element type " + std::to_string(elem_raw));
    }
    SKIPKV_RETURN_IF_ERROR(cur_->Read(&count, (key + " array length").c_str()));
    const GgufType elem = static_cast<GgufType>(elem_raw);
    if (count > cur_->remaining() / MinEncodedSize(elem)) {
      return cur_->Error("metadata key '" + key + "': array length " + std::to_string(count) + " of " +
                         GgufTypeName(elem) + " cannot fit in the " + std::to_string(cur_->remaining()) +
                         " bytes left");
    }
    total_values_ += count;
    if (total_values_ > kMaxTotalValues) {
      return cur_->Error("metadata key '" + key + "': more than " + std::to_string(kMaxTotalValues) +
                         " metadata values in total");
    }
    GgufValue::Array arr;
    arr.elem_type = elem;
    arr.items.resize(count);
    for (uint64_t i = 0; i < count; ++i) {
      SKIPKV_RETURN_IF_ERROR(ReadValue(elem, key, depth + 1, &arr.items[i]));
    }
    out->v = std::move(arr);
    return Status::Ok();
  }

  Cursor* cur_;
  uint64_t total_values_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path, FileLoad load) {
  SKIPKV_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path, load));
  const uint8_t* data = mapped->data();
  const size_t size = mapped->size();
  SKIPKV_ASSIGN_OR_RETURN(auto file, FromMemory(data, size, path));
  file->file_ = std::move(mapped);
  return file;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromMemory(const uint8_t* data, size_t size,
                                                         const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  Cursor cur(data, size, name);
  Parser parser(&cur);

  uint32_t magic = 0;
  SKIPKV_RETURN_IF_ERROR(cur.Read(&magic, "magic"));
  if (magic != kGgufMagic) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "0x%08x", magic);
    return CorruptData(name + ": not a GGUF file (magic " + buf + ", expected 0x46554747 \"GGUF\")");
  }
  SKIPKV_RETURN_IF_ERROR(cur.Read(&f->version_, "version"));
  if (f->version_ != 2 && f->version_ != 3) {
    return Unsupported(name + ": GGUF version " + std::to_string(f->version_) + " (supported: 2, 3)");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  SKIPKV_RETURN_IF_ERROR(cur.Read(&n_tensors, "tensor count"));
  SKIPKV_RETURN_IF_ERROR(cur.Read(&n_kv, "metadata count"));
  // A key/value needs >= 13 bytes (key length, type, 1-byte value); a tensor
  // info >= 32 (name length, n_dims, one dim, type, offset).
  if (n_kv > cur.remaining() / 13) {
    return cur.Error("metadata count " + std::to_string(n_kv) + " cannot fit in the " +
                     std::to_string(cur.remaining()) + " bytes left");
  }
  if (n_tensors > cur.remaining() / 32) {
    return cur.Error("tensor count " + std::to_string(n_tensors) + " cannot fit in the " +
                     std::to_string(cur.remaining()) + " bytes left");
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    SKIPKV_RETURN_IF_ERROR(cur.ReadString(&key, "metadata key #" + std::to_string(i)));
    if (key.empty()) return cur.Error("metadata key #" + std::to_string(i) + " is empty");
    if (f->metadata_.Has(key)) return cur.Error("duplicate metadata key '" + key + "'");
    uint32_t type_raw;
    SKIPKV_RETURN_IF_ERROR(cur.Read(&type_raw, ("type of metadata key '" + key + "'").c_str()));
    if (!IsKnownType(type_raw)) {
      return cur.Error("metadata key '" + key + "': unknown value type " + std::to_string(type_raw));
    }
    GgufValue value;
    SKIPKV_RETURN_IF_ERROR(parser.ReadValue(static_cast<GgufType>(type_raw), key, 0, &value));
    f->metadata_.Set(key, std::move(value));
  }

  if (const GgufValue* a = f->metadata_.Find("general.alignment")) {
    if (!a->is_integer()) {
      return CorruptData(name + ": general.alignment has type " + GgufTypeName(a->type) + ", expected uint32");
    }
    const int64_t al = a->AsInt();
    if (al <= 0 || al > (1 << 20) || (al & (al - 1)) != 0) {
      return CorruptData(name + ": general.alignment " + std::to_string(al) +
                         " is not a power of two in [1, 1048576]");
    }
    f->alignment_ = static_cast<size_t>(al);
  }

  struct Extent {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Extent> extents;
  extents.reserve(n_tensors);
  f->tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorView t;
    SKIPKV_RETURN_IF_ERROR(cur.ReadString(&t.name, "name of tensor #" + std::to_string(i)));
    const std::string what = "tensor '" + t.name + "'";
    if (t.name.empty()) return cur.Error("tensor #" + std::to_string(i) + " has an empty name");
    if (f->tensor_index_.count(t.name)) return cur.Error("duplicate " + what);
    uint32_t n_dims;
    SKIPKV_RETURN_IF_ERROR(cur.Read(&n_dims, (what + " n_dims").c_str()));
    if (n_dims < 1 || n_dims > 4) return cur.Error(what + ": n_dims " + std::to_string(n_dims) + " not in 1..4");
    t.n_dims = static_cast<int>(n_dims);
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne;
      SKIPKV_RETURN_IF_ERROR(cur.Read(&ne, (what + " ne").c_str()));
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n_elems) {
        return cur.Error(what + ": ne[" + std::to_string(d) + "] = " + std::to_string(ne) +
                         (ne == 0 ? " is zero" : " overflows the element count"));
      }
      n_elems *= ne;
      t.ne[d] = static_cast<int64_t>(ne);
    }
    uint32_t type_raw;
    SKIPKV_RETURN_IF_ERROR(cur.Read(&type_raw, (what + " type").c_str()));
    const auto info = LookupDType(type_raw);
    if (!info) return cur.Error(what + ": unknown ggml type " + std::to_string(type_raw));
    t.type = info->type;
    if (t.ne[0] % info->block_size != 0) {
      return cur.Error(what + ": ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " +
                       info->name + " block size " + std::to_string(info->block_size));
    }
    uint64_t offset;
    SKIPKV_RETURN_IF_ERROR(cur.Read(&offset, (what + " offset").c_str()));
    if (offset % f->alignment_ != 0) {
      return cur.Error(what + ": data offset " + std::to_string(offset) + " is not a multiple of the alignment " +
                       std::to_string(f->alignment_));
    }
    // Bytes: blocks per row * block bytes * rows, all bounded by int64 elements
    // and block_bytes <= 292, so only the final multiply needs a check.
    const uint64_t blocks = n_elems / static_cast<uint64_t>(info->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes) {
      return cur.Error(what + ": byte size overflows");
    }
    const uint64_t nbytes = blocks * info->block_bytes;
    if (offset > std::numeric_limits<uint64_t>::max() - nbytes) return cur.Error(what + ": offset + size overflows");
    extents.push_back({offset, offset + nbytes, f->tensors_.size()});
    f->tensor_index_[t.name] = f->tensors_.size();
    f->tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t pos = cur.pos();
  const uint64_t data_offset = (pos + f->alignment_ - 1) / f->alignment_ * f->alignment_;
  f->data_offset_ = static_cast<size_t>(data_offset);
  const uint64_t data_size = data_offset <= size ? size - data_offset : 0;
  for (const Extent& e : extents) {
    if (e.end > data_size) {
      const TensorView& t = f->tensors_[e.tensor];
      return CorruptData(name + ": tensor '" + t.name + "' data [" + std::to_string(e.begin) + ", " +
                         std::to_string(e.end) + ") lies outside the " + std::to_string(data_size) +
                         "-byte data section (file truncated?)");
    }
  }
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].begin < extents[i - 1].end) {
      return CorruptData(name + ": tensors '" + f->tensors_[extents[i - 1].tensor].name + "' and '" +
                         f->tensors_[extents[i].tensor].name + "' overlap (data offsets " +
                         std::to_string(extents[i - 1].begin) + " and " + std::to_string(extents[i].begin) + ")");
    }
  }
  for (const Extent& e : extents) f->tensors_[e.tensor].data = data + data_offset + e.begin;
  return f;
}

const TensorView* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace skipkv
