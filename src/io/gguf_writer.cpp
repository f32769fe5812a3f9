// GGUF v3 serialization: the in-memory GgufWriter and the streaming writer
// share SerializeGgufHeader, so both produce byte-identical files.
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "io/gguf.h"
#include "io/gguf_stream_writer.h"

namespace skipkv {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;

class ByteSink {
 public:
  template <typename T>
  void Put(T x) {
    const size_t n = buf_.size();
    buf_.resize(n + sizeof(T));
    std::memcpy(buf_.data() + n, &x, sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    buf_.insert(buf_.end(), s.begin(), s.end());
  }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

Status PutValue(ByteSink* out, const std::string& key, const GgufValue& v) {
  // The stored variant must match the declared type, else we would write garbage.
  auto mismatch = [&]() {
    return InvalidArgument("metadata key '" + key + "': value does not hold a " + GgufTypeName(v.type));
  };
  switch (v.type) {
    case GgufType::kUint8: case GgufType::kUint16: case GgufType::kUint32: case GgufType::kUint64: {
      const auto* u = std::get_if<uint64_t>(&v.v);
      if (!u) return mismatch();
      if (v.type == GgufType::kUint8) out->Put<uint8_t>(static_cast<uint8_t>(*u));
      if (v.type == GgufType::kUint16) out->Put<uint16_t>(static_cast<uint16_t>(*u));
      if (v.type == GgufType::kUint32) out->Put<uint32_t>(static_cast<uint32_t>(*u));
      if (v.type == GgufType::kUint64) out->Put<uint64_t>(*u);
      return Status::Ok();
    }
    case GgufType::kInt8: case GgufType::kInt16: case GgufType::kInt32: case GgufType::kInt64: {
      const auto* i = std::get_if<int64_t>(&v.v);
      if (!i) return mismatch();
      if (v.type == GgufType::kInt8) out->Put<int8_t>(static_cast<int8_t>(*i));
      if (v.type == GgufType::kInt16) out->Put<int16_t>(static_cast<int16_t>(*i));
      if (v.type == GgufType::kInt32) out->Put<int32_t>(static_cast<int32_t>(*i));
      if (v.type == GgufType::kInt64) out->Put<int64_t>(*i);
      return Status::Ok();
    }
    case GgufType::kFloat32: case GgufType::kFloat64: {
      const auto* d = std::get_if<double>(&v.v);
      if (!d) return mismatch();
      if (v.type == GgufType::kFloat32) out->Put<float>(static_cast<float>(*d));
      else out->Put<double>(*d);
      return Status::Ok();
    }
    case GgufType::kBool: {
      const auto* b = std::get_if<bool>(&v.v);
      if (!b) return mismatch();
      out->Put<uint8_t>(*b ? 1 : 0);
      return Status::Ok();
    }
    case GgufType::kString: {
      const auto* s = std::get_if<std::string>(&v.v);
      if (!s) return mismatch();
      out->PutString(*s);
      return Status::Ok();
    }
    case GgufType::kArray: {
      const auto* a = std::get_if<GgufValue::Array>(&v.v);
      if (!a) return mismatch();
      out->Put<uint32_t>(static_cast<uint32_t>(a->elem_type));
      out->Put<uint64_t>(a->items.size());
      for (const GgufValue& item : a->items) {
        if (item.type != a->elem_type) {
          return InvalidArgument("metadata key '" + key + "': array of " + GgufTypeName(a->elem_type) +
                                 " holds a " + GgufTypeName(item.type));
        }
        SKIPKV_RETURN_IF_ERROR(PutValue(out, key, item));
      }
      return Status::Ok();
    }
  }
  return InvalidArgument("metadata key '" + key + "': unknown type");
}

size_t AlignUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

size_t GgufTensorDecl::NumBytes() const {
  int64_t rows = 1;
  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
  return RowBytes(type, ne.empty() ? 0 : ne[0]) * static_cast<size_t>(rows);
}

StatusOr<std::vector<uint8_t>> SerializeGgufHeader(const GgufMetadata& metadata,
                                                   const std::vector<GgufTensorDecl>& tensors,
                                                   std::vector<uint64_t>* offsets, size_t* alignment) {
  size_t align = 32;
  if (const GgufValue* a = metadata.Find("general.alignment")) {
    if (a->type != GgufType::kUint32) return InvalidArgument("general.alignment must be a uint32");
    const int64_t al = a->AsInt();
    if (al <= 0 || al > (1 << 20) || (al & (al - 1)) != 0) {
      return InvalidArgument("general.alignment " + std::to_string(al) + " is not a power of two");
    }
    align = static_cast<size_t>(al);
  }
  ByteSink out;
  out.Put<uint32_t>(kGgufMagic);
  out.Put<uint32_t>(3);
  out.Put<uint64_t>(tensors.size());
  out.Put<uint64_t>(metadata.entries().size());
  for (const auto& [key, value] : metadata.entries()) {
    if (key.empty()) return InvalidArgument("empty metadata key");
    out.PutString(key);
    out.Put<uint32_t>(static_cast<uint32_t>(value.type));
    SKIPKV_RETURN_IF_ERROR(PutValue(&out, key, value));
  }
  std::set<std::string> names;
  offsets->clear();
  uint64_t offset = 0;
  for (const GgufTensorDecl& t : tensors) {
    const std::string what = "tensor '" + t.name + "'";
    if (t.name.empty()) return InvalidArgument("tensor with an empty name");
    if (!names.insert(t.name).second) return InvalidArgument("duplicate " + what);
    if (t.ne.empty() || t.ne.size() > 4) {
      return InvalidArgument(what + ": " + std::to_string(t.ne.size()) + " dims, expected 1..4");
    }
    for (int64_t d : t.ne) {
      if (d <= 0) return InvalidArgument(what + ": dimension " + std::to_string(d) + " is not positive");
    }
    if (!LookupDType(static_cast<uint32_t>(t.type))) return InvalidArgument(what + ": unknown type");
    if (t.ne[0] % BlockSize(t.type) != 0) {
      return InvalidArgument(what + ": ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " +
                             DTypeName(t.type) + " block size " + std::to_string(BlockSize(t.type)));
    }
    out.PutString(t.name);
    out.Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) out.Put<uint64_t>(static_cast<uint64_t>(d));
    out.Put<uint32_t>(static_cast<uint32_t>(t.type));
    out.Put<uint64_t>(offset);
    offsets->push_back(offset);
    offset = AlignUp(offset + t.NumBytes(), align);
  }
  auto& bytes = out.bytes();
  bytes.resize(AlignUp(bytes.size(), align), 0);
  *alignment = align;
  return std::move(bytes);
}

// ---- GgufWriter (in memory) ------------------------------------------------

Status GgufWriter::AddTensor(const std::string& name, DType type, const std::vector<int64_t>& ne, const void* data,
                             size_t nbytes) {
  GgufTensorDecl decl{name, type, ne};
  if (ne.empty() || ne.size() > 4) return InvalidArgument("tensor '" + name + "': expected 1..4 dims");
  for (int64_t d : ne) {
    if (d <= 0) return InvalidArgument("tensor '" + name + "': dimension " + std::to_string(d) + " is not positive");
  }
  if (ne[0] % BlockSize(type) != 0) {
    return InvalidArgument("tensor '" + name + "': ne[0] = " + std::to_string(ne[0]) +
                           " is not a multiple of the block size of " + DTypeName(type));
  }
  if (decl.NumBytes() != nbytes) {
    return InvalidArgument("tensor '" + name + "': " + std::to_string(nbytes) + " bytes given, shape and type need " +
                           std::to_string(decl.NumBytes()));
  }
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({name, type, ne, std::vector<uint8_t>(p, p + nbytes)});
  return Status::Ok();
}

StatusOr<std::vector<uint8_t>> GgufWriter::WriteToMemory() const {
  std::vector<GgufTensorDecl> decls;
  for (const auto& t : tensors_) decls.push_back({t.name, t.type, t.ne});
  std::vector<uint64_t> offsets;
  size_t align = 32;
  SKIPKV_ASSIGN_OR_RETURN(std::vector<uint8_t> out, SerializeGgufHeader(metadata_, decls, &offsets, &align));
  const size_t data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(data_start + offsets[i], 0);
    out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
  }
  out.resize(AlignUp(out.size(), align), 0);
  return out;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  std::vector<GgufTensorDecl> decls;
  for (const auto& t : tensors_) decls.push_back({t.name, t.type, t.ne});
  SKIPKV_ASSIGN_OR_RETURN(auto writer, GgufStreamWriter::Create(path, metadata_, std::move(decls)));
  for (const auto& t : tensors_) SKIPKV_RETURN_IF_ERROR(writer->Append(t.data.data(), t.data.size()));
  return writer->Finish();
}

// ---- GgufStreamWriter ------------------------------------------------------

StatusOr<std::unique_ptr<GgufStreamWriter>> GgufStreamWriter::Create(const std::string& path,
                                                                     const GgufMetadata& metadata,
                                                                     std::vector<GgufTensorDecl> tensors) {
  std::vector<uint64_t> offsets;
  size_t align = 32;
  SKIPKV_ASSIGN_OR_RETURN(std::vector<uint8_t> header, SerializeGgufHeader(metadata, tensors, &offsets, &align));
  std::unique_ptr<GgufStreamWriter> w(new GgufStreamWriter());
  w->path_ = path;
  w->tensors_ = std::move(tensors);
  w->alignment_ = align;
  w->fp_ = std::fopen(path.c_str(), "wb");
  if (w->fp_ == nullptr) return IoError("cannot create '" + path + "': " + std::strerror(errno));
  SKIPKV_RETURN_IF_ERROR(w->WriteRaw(header.data(), header.size()));
  // A file without tensors is complete after the header.
  return w;
}

GgufStreamWriter::~GgufStreamWriter() {
  if (fp_ != nullptr) std::fclose(fp_);
}

Status GgufStreamWriter::WriteRaw(const void* data, size_t nbytes) {
  if (nbytes > 0 && std::fwrite(data, 1, nbytes, fp_) != nbytes) {
    return IoError("cannot write '" + path_ + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

Status GgufStreamWriter::Append(const void* data, size_t nbytes) {
  if (fp_ == nullptr) return InvalidArgument(path_ + ": writer already finished");
  if (current_ >= tensors_.size()) {
    return InvalidArgument(path_ + ": " + std::to_string(nbytes) + " bytes appended after the last tensor");
  }
  const GgufTensorDecl& t = tensors_[current_];
  const size_t total = t.NumBytes();
  if (nbytes > total - written_in_current_) {
    return InvalidArgument(path_ + ": tensor '" + t.name + "' needs " + std::to_string(total - written_in_current_) +
                           " more bytes, " + std::to_string(nbytes) + " given");
  }
  SKIPKV_RETURN_IF_ERROR(WriteRaw(data, nbytes));
  written_in_current_ += nbytes;
  if (written_in_current_ == total) {
    static const uint8_t kZeros[4096] = {};
    size_t pad = AlignUp(total, alignment_) - total;
    while (pad > 0) {
      const size_t n = std::min(pad, sizeof(kZeros));
      SKIPKV_RETURN_IF_ERROR(WriteRaw(kZeros, n));
      pad -= n;
    }
    ++current_;
    written_in_current_ = 0;
  }
  return Status::Ok();
}

Status GgufStreamWriter::Finish() {
  if (fp_ == nullptr) return InvalidArgument(path_ + ": writer already finished");
  if (current_ < tensors_.size()) {
    return InvalidArgument(path_ + ": tensor '" + tensors_[current_].name + "' was not written (" +
                           std::to_string(written_in_current_) + " of " +
                           std::to_string(tensors_[current_].NumBytes()) + " bytes)");
  }
  const int rc = std::fclose(fp_);
  fp_ = nullptr;
  if (rc != 0) return IoError("cannot close '" + path_ + "': " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace skipkv
