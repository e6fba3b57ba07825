// XLA FFI handler of the benchmark's streaming-read probe
// (bench/stream_read.h): any number of operands of any byte-sized dtype,
// read once on XLA's intra-op pool; the result is their wrapping 64-bit word
// sum as uint32[2] (low word first), so it needs no 64-bit mode in JAX.
#include "bench/stream_read.h"
#include "ffi/ffi_common.h"
#include "ffi/registry.h"

#include <vector>

namespace jax_lngb {
namespace {

namespace ffi = xla::ffi;
using ffi_util::invalid;

// Types whose elements are packed below a byte: ByteWidth() rounds them up
// to one byte, so their buffer size in bytes cannot be derived from it.
bool sub_byte(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::S1:
    case ffi::DataType::S2:
    case ffi::DataType::S4:
    case ffi::DataType::U1:
    case ffi::DataType::U2:
    case ffi::DataType::U4:
    case ffi::DataType::F4E2M1FN:
      return true;
    default:
      return false;
  }
}

ffi::Error StreamReadCpuImpl(ffi::ThreadPool pool, ffi::RemainingArgs args, ffi::Result<ffi::AnyBuffer> out) {
  if (out->element_type() != ffi::DataType::U32 || out->element_count() != 2)
    return invalid("stream_read returns uint32[2]");
  std::vector<StreamReadSpan> spans;
  spans.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto buf = args.get<ffi::AnyBuffer>(i);
    if (buf.has_error()) return buf.error();
    if (sub_byte(buf->element_type()))
      return invalid("stream_read: operand " + std::to_string(i) + " has a sub-byte dtype");
    spans.push_back({buf->untyped_data(), int64_t(buf->size_bytes())});
  }
  const uint64_t sum = stream_read(spans.data(), int64_t(spans.size()), ffi_util::make_executor(pool));
  uint32_t* o = static_cast<uint32_t*>(out->untyped_data());
  o[0] = uint32_t(sum);
  o[1] = uint32_t(sum >> 32);
  return ffi::Error::Success();
}

}  // namespace
}  // namespace jax_lngb

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxLngbStreamReadCpu, jax_lngb::StreamReadCpuImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .RemainingArgs()             // the buffers to read
                                  .Ret<xla::ffi::AnyBuffer>()  // uint32[2] word sum
);

JAX_LNGB_CPU_HANDLER("jax_lngb_stream_read", JaxLngbStreamReadCpu);
