// GgufValue and GgufMetadata: the in-memory form of GGUF key/value metadata,
// with typed getters whose errors name the key, the expected and the actual type.
#include <cmath>
#include <cstdio>
#include <limits>

#include "io/gguf.h"
#include "util/check.h"

namespace skipkv {

const char* GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "unknown";
}

GgufValue GgufValue::StrArr(const std::vector<std::string>& xs) {
  std::vector<GgufValue> items;
  items.reserve(xs.size());
  for (const auto& x : xs) items.push_back(Str(x));
  return Arr(GgufType::kString, std::move(items));
}

GgufValue GgufValue::F32Arr(const std::vector<float>& xs) {
  std::vector<GgufValue> items;
  items.reserve(xs.size());
  for (float x : xs) items.push_back(F32(x));
  return Arr(GgufType::kFloat32, std::move(items));
}

GgufValue GgufValue::I32Arr(const std::vector<int32_t>& xs) {
  std::vector<GgufValue> items;
  items.reserve(xs.size());
  for (int32_t x : xs) items.push_back(I32(x));
  return Arr(GgufType::kInt32, std::move(items));
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kUint16: case GgufType::kInt16:
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kUint64: case GgufType::kInt64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_number() const {
  return is_integer() || type == GgufType::kFloat32 || type == GgufType::kFloat64;
}

int64_t GgufValue::AsInt() const {
  SKIPKV_CHECK(is_integer());
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<int64_t>(*u);
  return std::get<int64_t>(v);
}

double GgufValue::AsDouble() const {
  SKIPKV_CHECK(is_number());
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  return static_cast<double>(std::get<int64_t>(v));
}

bool GgufValue::operator==(const GgufValue& o) const {
  if (type != o.type || v.index() != o.v.index()) return false;
  if (type == GgufType::kArray) {
    const Array& a = AsArray();
    const Array& b = o.AsArray();
    return a.elem_type == b.elem_type && a.items == b.items;
  }
  switch (v.index()) {
    case 0: return std::get<0>(v) == std::get<0>(o.v);
    case 1: return std::get<1>(v) == std::get<1>(o.v);
    case 2: return std::get<2>(v) == std::get<2>(o.v);
    case 3: return std::get<3>(v) == std::get<3>(o.v);
    case 4: return std::get<4>(v) == std::get<4>(o.v);
  }
  return false;
}

std::string GgufValue::ToString(size_t max_items) const {
  char buf[64];
  switch (type) {
    case GgufType::kString: {
      std::string s = "\"";
      const std::string& str = AsString();
      const size_t limit = 200;
      for (size_t i = 0; i < str.size() && i < limit; ++i) {
        const char c = str[i];
        if (c == '\n') s += "\\n";
        else if (c == '"') s += "\\\"";
        else if (static_cast<unsigned char>(c) < 0x20) {
          std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
          s += buf;
        } else {
          s += c;
        }
      }
      if (str.size() > limit) s += "...";
      return s + "\"";
    }
    case GgufType::kBool: return AsBool() ? "true" : "false";
    case GgufType::kFloat32: case GgufType::kFloat64:
      std::snprintf(buf, sizeof(buf), "%g", std::get<double>(v));
      return buf;
    case GgufType::kArray: {
      const Array& a = AsArray();
      std::string s = "[";
      for (size_t i = 0; i < a.items.size() && i < max_items; ++i) {
        if (i) s += ", ";
        s += a.items[i].ToString(max_items);
      }
      if (a.items.size() > max_items) s += ", ... (" + std::to_string(a.items.size()) + " items)";
      return s + "]";
    }
    default:
      if (const auto* u = std::get_if<uint64_t>(&v)) return std::to_string(*u);
      return std::to_string(std::get<int64_t>(v));
  }
}

void GgufMetadata::Set(const std::string& key, GgufValue value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_[key] = entries_.size();
  entries_.emplace_back(key, std::move(value));
}

const GgufValue* GgufMetadata::Find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

namespace {

Status WrongType(const std::string& key, const char* expected, const GgufValue& v) {
  std::string actual = GgufTypeName(v.type);
  if (v.type == GgufType::kArray) actual += std::string(" of ") + GgufTypeName(v.AsArray().elem_type);
  return CorruptData("metadata key '" + key + "': expected " + expected + ", found " + actual);
}

StatusOr<const GgufValue*> FindOrNotFound(const GgufMetadata& md, const std::string& key) {
  const GgufValue* v = md.Find(key);
  if (v == nullptr) return NotFound("metadata key '" + key + "' is missing");
  return v;
}

StatusOr<const GgufValue::Array*> FindArray(const GgufMetadata& md, const std::string& key,
                                            const char* expected) {
  SKIPKV_ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(md, key));
  if (v->type != GgufType::kArray) return WrongType(key, expected, *v);
  return &v->AsArray();
}

}  // namespace

StatusOr<int64_t> GgufMetadata::GetInt(const std::string& key) const {
  SKIPKV_ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(*this, key));
  if (!v->is_integer()) return WrongType(key, "an integer", *v);
  if (const auto* u = std::get_if<uint64_t>(&v->v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return OutOfRange("metadata key '" + key + "': value " + std::to_string(*u) + " does not fit int64");
    }
  }
  return v->AsInt();
}

StatusOr<double> GgufMetadata::GetFloat(const std::string& key) const {
  SKIPKV_ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(*this, key));
  if (!v->is_number()) return WrongType(key, "a number", *v);
  return v->AsDouble();
}

StatusOr<bool> GgufMetadata::GetBool(const std::string& key) const {
  SKIPKV_ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(*this, key));
  if (v->type != GgufType::kBool) return WrongType(key, "a bool", *v);
  return v->AsBool();
}

StatusOr<std::string> GgufMetadata::GetString(const std::string& key) const {
  SKIPKV_ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(*this, key));
  if (v->type != GgufType::kString) return WrongType(key, "a string", *v);
  return v->AsString();
}

StatusOr<std::vector<std::string>> GgufMetadata::GetStringArray(const std::string& key) const {
  SKIPKV_ASSIGN_OR_RETURN(const GgufValue::Array* a, FindArray(*this, key, "an array of string"));
  if (a->elem_type != GgufType::kString) return WrongType(key, "an array of string", *Find(key));
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const auto& item : a->items) out.push_back(item.AsString());
  return out;
}

StatusOr<std::vector<float>> GgufMetadata::GetFloatArray(const std::string& key) const {
  SKIPKV_ASSIGN_OR_RETURN(const GgufValue::Array* a, FindArray(*this, key, "an array of numbers"));
  std::vector<float> out;
  out.reserve(a->items.size());
  for (const auto& item : a->items) {
    if (!item.is_number()) return WrongType(key, "an array of numbers", *Find(key));
    out.push_back(static_cast<float>(item.AsDouble()));
  }
  return out;
}

StatusOr<std::vector<int64_t>> GgufMetadata::GetIntArray(const std::string& key) const {
  SKIPKV_ASSIGN_OR_RETURN(const GgufValue::Array* a, FindArray(*this, key, "an array of integers"));
  std::vector<int64_t> out;
  out.reserve(a->items.size());
  for (const auto& item : a->items) {
    if (!item.is_integer()) return WrongType(key, "an array of integers", *Find(key));
    if (const auto* u = std::get_if<uint64_t>(&item.v); u && *u > uint64_t(std::numeric_limits<int64_t>::max())) {
      return OutOfRange("metadata key '" + key + "'[" + std::to_string(out.size()) + "]: value " +
                        std::to_string(*u) + " does not fit int64");
    }
    out.push_back(item.AsInt());
  }
  return out;
}

StatusOr<int64_t> GgufMetadata::GetIntOr(const std::string& key, int64_t dflt) const {
  return Has(key) ? GetInt(key) : StatusOr<int64_t>(dflt);
}
StatusOr<double> GgufMetadata::GetFloatOr(const std::string& key, double dflt) const {
  return Has(key) ? GetFloat(key) : StatusOr<double>(dflt);
}
StatusOr<bool> GgufMetadata::GetBoolOr(const std::string& key, bool dflt) const {
  return Has(key) ? GetBool(key) : StatusOr<bool>(dflt);
}
StatusOr<std::string> GgufMetadata::GetStringOr(const std::string& key, const std::string& dflt) const {
  return Has(key) ? GetString(key) : StatusOr<std::string>(dflt);
}

}  // namespace skipkv
