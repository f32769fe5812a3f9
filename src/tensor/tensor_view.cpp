// TensorView::ShapeString; see tensor_view.h.
#include "tensor/tensor_view.h"

namespace skipkv {

std::string TensorView::ShapeString() const {
  std::string s = "[";
  for (int i = 0; i < n_dims; ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

}  // namespace skipkv
