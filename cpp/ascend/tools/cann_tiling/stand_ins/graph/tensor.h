// Stand-in for CANN's graph/tensor.h, written for this repository: the
// ge::Shape that the tiling sources know as AscendC::TensorShape. They ask
// it for its dimensions, their number and their product, nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "graph/types.h"

namespace ge {

class Shape {
 public:
  Shape() = default;
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  size_t GetDimNum() const { return dims_.size(); }
  int64_t GetDim(size_t i) const { return i < dims_.size() ? dims_[i] : 0; }
  std::vector<int64_t> GetDims() const { return dims_; }

  // The element count: 0 without dimensions, -1 when a dimension is
  // negative (unknown). The comparison only passes known shapes.
  int64_t GetShapeSize() const {
    if (dims_.empty()) return 0;
    int64_t n = 1;
    for (int64_t d : dims_) {
      if (d < 0) return -1;
      n *= d;
    }
    return n;
  }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace ge
