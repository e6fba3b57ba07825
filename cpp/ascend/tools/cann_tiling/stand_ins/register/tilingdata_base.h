// Stand-in for CANN's register/tilingdata_base.h, written for this
// repository: the macros that *_tilingdata.h use to declare the host-side
// tiling classes (optiling::LayerNormTiling and friends).
//
// Each class holds its fields as plain members in declaration order, with
// set_/get_ accessors; SaveToBuffer copies them out as the packed struct the
// kernel reads. That is the layout of the AscendC::tiling structs that
// asc-devkit's gen_kernel_tiling_data_def.py generates from the same
// headers, for the 4-byte fields the normalization tilings have; the
// comparison reads CANN's results through those generated structs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#define BEGIN_TILING_DATA_DEF(class_name) \
  class class_name {                      \
   public:

#define TILING_DATA_FIELD_DEF(type, field) \
  type field = 0;                          \
  void set_##field(type v) { field = v; }  \
  type get_##field() const { return field; }

#define TILING_DATA_FIELD_DEF_ARR(type, count, field)                       \
  type field[count] = {};                                                   \
  void set_##field(const type* v) { std::memcpy(field, v, sizeof(field)); } \
  const type* get_##field() const { return field; }

#define TILING_DATA_FIELD_DEF_STRUCT(type, field) type field;

#define END_TILING_DATA_DEF                                                                                          \
  void SaveToBuffer(void* dst, size_t capacity) const { std::memcpy(dst, this, std::min(capacity, sizeof(*this))); } \
  size_t GetDataSize() const { return sizeof(*this); }                                                               \
  }

// Registration feeds CANN's operator registry, which the comparison does
// not need.
#define REGISTER_TILING_DATA_CLASS(op_type, class_name)
