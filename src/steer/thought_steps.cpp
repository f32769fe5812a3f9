#include "steer/thought_steps.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "util/check.h"

namespace skipkv {

const char* ThoughtKindName(ThoughtKind k) {
  switch (k) {
    case ThoughtKind::kExecution: return "execution";
    case ThoughtKind::kReflection: return "reflection";
    case ThoughtKind::kTransition: return "transition";
  }
  return "?";
}

ThoughtKind ClassifyThoughtStep(std::string_view text) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  std::string s(text.substr(b, e - b));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto starts = [&](const char* p) { return s.rfind(p, 0) == 0; };
  auto has = [&](const char* p) { return s.find(p) != std::string::npos; };
  static const char* kReflection[] = {"verify",   "make sure",    "hold on",     "think again",
                                      "'s correct", "'s incorrect", "let me check", "seems right"};
  static const char* kTransition[] = {"think differenly", "another way",      "another approach", "another method",
                                      "another solution", "another strategy", "another technique"};
  if (starts("wait") || std::any_of(std::begin(kReflection), std::end(kReflection), has)) {
    return ThoughtKind::kReflection;
  }
  if (starts("alternatively") || std::any_of(std::begin(kTransition), std::end(kTransition), has)) {
    return ThoughtKind::kTransition;
  }
  return ThoughtKind::kExecution;
}

std::vector<ThoughtStep> SegmentThought(std::span<const int32_t> ids, int64_t response_begin,
                                        const SkipkvTokenSets& tokens,
                                        const std::function<std::string(std::span<const int32_t>)>& decode) {
  const int64_t n = static_cast<int64_t>(ids.size());
  int64_t begin = -1, end = n;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] == tokens.think_start) {
      begin = i + 1;
      break;
    }
  }
  if (begin < 0) begin = std::clamp<int64_t>(response_begin, 0, n);
  for (int64_t i = begin; i < n; ++i) {
    if (ids[i] == tokens.think_end) {
      end = i;
      break;
    }
  }
  std::vector<int64_t> splits;
  for (int64_t i = begin; i < end; ++i) {
    if (tokens.IsSplit(ids[i])) splits.push_back(i);
  }
  std::vector<ThoughtStep> steps;
  for (size_t k = 0; k < splits.size(); ++k) {
    const int64_t from = splits[k] + 1, to = k + 1 < splits.size() ? splits[k + 1] : end;
    const std::string text = decode(ids.subspan(from, to - from));
    steps.push_back({splits[k], ClassifyThoughtStep(text)});
  }
  return steps;
}

CategoryMeans::CategoryMeans(int n_directions, int64_t width)
    : n_dirs_(n_directions), width_(width), sums_(3 * static_cast<size_t>(n_directions) * width, 0.0) {}

void CategoryMeans::AddRow(ThoughtKind k, int direction, const float* hidden) {
  SKIPKV_CHECK(direction >= 0 && direction < n_dirs_);
  double* s = sums_.data() + (static_cast<size_t>(k) * n_dirs_ + direction) * width_;
  for (int64_t i = 0; i < width_; ++i) s[i] += hidden[i];
}

ControlVector CategoryMeans::Mean(ThoughtKind k) const {
  ControlVector cv;
  cv.width = width_;
  const int64_t c = counts_[static_cast<int>(k)];
  cv.num_vectors_averaged = static_cast<double>(c);
  if (c == 0) return cv;
  for (int l = 0; l < n_dirs_; ++l) {
    const double* s = sums_.data() + (static_cast<size_t>(k) * n_dirs_ + l) * width_;
    std::vector<float> v(width_);
    for (int64_t i = 0; i < width_; ++i) v[i] = static_cast<float>(s[i] / c);
    cv.directions[l] = std::move(v);
  }
  return cv;
}

StatusOr<ControlVector> CategoryMeans::Difference() const {
  const int64_t ne = counts_[0], no = counts_[1] + counts_[2];
  if (ne == 0 || no == 0) {
    return InvalidArgument("steering vector: need execution and non-execution steps (execution " +
                           std::to_string(ne) + ", reflection " + std::to_string(counts_[1]) + ", transition " +
                           std::to_string(counts_[2]) + ")");
  }
  ControlVector cv;
  cv.width = width_;
  cv.num_vectors_averaged = static_cast<double>(ne + no);
  for (int l = 0; l < n_dirs_; ++l) {
    const double* e = sums_.data() + (0 * static_cast<size_t>(n_dirs_) + l) * width_;
    const double* r = sums_.data() + (1 * static_cast<size_t>(n_dirs_) + l) * width_;
    const double* t = sums_.data() + (2 * static_cast<size_t>(n_dirs_) + l) * width_;
    std::vector<float> v(width_);
    for (int64_t i = 0; i < width_; ++i) v[i] = static_cast<float>(e[i] / ne - (r[i] + t[i]) / no);
    cv.directions[l] = std::move(v);
  }
  return cv;
}

namespace {
constexpr char kMagic[8] = {'S', 'K', 'S', 'T', 'E', 'E', 'R', '1'};
}

Status CategoryMeans::Save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return IoError("cannot write " + tmp);
    const int64_t head[6] = {n_dirs_, width_, responses_done, counts_[0], counts_[1], counts_[2]};
    f.write(kMagic, sizeof kMagic);
    f.write(reinterpret_cast<const char*>(head), sizeof head);
    f.write(reinterpret_cast<const char*>(sums_.data()), static_cast<std::streamsize>(sums_.size() * sizeof(double)));
    f.flush();
    if (!f) return IoError("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return IoError("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return Status::Ok();
}

StatusOr<CategoryMeans> CategoryMeans::Load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open checkpoint " + path);
  char magic[sizeof kMagic];
  int64_t head[6];
  f.read(magic, sizeof magic);
  f.read(reinterpret_cast<char*>(head), sizeof head);
  if (!f || std::memcmp(magic, kMagic, sizeof kMagic) != 0) return CorruptData("checkpoint " + path + ": bad header");
  if (head[0] < 1 || head[0] > 4096 || head[1] < 1 || head[1] > (1 << 20) || head[2] < 0 || head[3] < 0 ||
      head[4] < 0 || head[5] < 0) {
    return CorruptData("checkpoint " + path + ": implausible shape (" + std::to_string(head[0]) + " directions of width " +
                       std::to_string(head[1]) + ")");
  }
  CategoryMeans m(static_cast<int>(head[0]), head[1]);
  m.responses_done = head[2];
  m.counts_ = {head[3], head[4], head[5]};
  f.read(reinterpret_cast<char*>(m.sums_.data()), static_cast<std::streamsize>(m.sums_.size() * sizeof(double)));
  if (!f || f.peek() != std::char_traits<char>::eof()) return CorruptData("checkpoint " + path + ": wrong size");
  return m;
}

HiddenStateCollector::HiddenStateCollector(std::vector<ThoughtStep> steps, int n_layers, CategoryMeans* means)
    : steps_(std::move(steps)), n_layers_(n_layers), means_(means) {
  SKIPKV_CHECK(means_ != nullptr && means_->n_directions() == n_layers);
  std::sort(steps_.begin(), steps_.end(), [](const ThoughtStep& a, const ThoughtStep& b) { return a.split_pos < b.split_pos; });
}

void HiddenStateCollector::OnResidual(int layer, std::span<const BatchToken> rows, float* hidden) {
  const int64_t d = means_->width();
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r].valid) continue;
    auto it = std::lower_bound(steps_.begin(), steps_.end(), int64_t{rows[r].pos},
                               [](const ThoughtStep& s, int64_t p) { return s.split_pos < p; });
    if (it == steps_.end() || it->split_pos != rows[r].pos) continue;
    means_->AddRow(it->kind, layer - 1, hidden + r * d);
    if (layer == 1) {
      means_->CountStep(it->kind);
      ++rows_seen_;
    }
  }
}

}  // namespace skipkv
