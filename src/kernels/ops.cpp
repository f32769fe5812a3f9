// Default kernel entry points. Temporary: every entry point forwards to the
// scalar reference (single-threaded) until the Highway kernels land.
#include "kernels/ops.h"

namespace skipkv::kernels {

void MatVec(const TensorView& w, const float* x, float* y, ThreadPool& pool) {
  ref::MatVec(w, x, y);
}
void MatMul(const TensorView& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  ref::MatMul(w, x, n, y);
}
void GetRow(const TensorView& w, int64_t row, float* out) { ref::GetRow(w, row, out); }
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  ref::RmsNorm(x, weight, n, eps, out);
}
void Rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p) {
  ref::Rope(x, n_heads, head_dim, pos, p);
}
void Softmax(float* x, int64_t n) { ref::Softmax(x, n); }
void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  ref::SiluMul(gate, up, out, n);
}
void Add(float* y, const float* x, int64_t n) { ref::Add(y, x, n); }
void Attention(const AttentionShape& shape, std::span<const AttentionTask> tasks,
               ThreadPool& pool) {
  ref::Attention(shape, tasks);
}
const char* SimdTargetName() { return "scalar-ref"; }

}  // namespace skipkv::kernels
