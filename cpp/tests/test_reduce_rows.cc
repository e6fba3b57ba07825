// reduce_rows, the one gamma/beta reduction, for every dtype, loop and ISA
// variant this CPU can run: bit-exact against the scalar row-order float32
// recurrence over strided windows of tightly sized buffers, and every 16-bit
// pattern widened by the vector loads exactly as dtypes.h widens it.
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "kernels/base/cpu_features.h"
#include "kernels/reduce_rows.h"
#include "kernels/reduce_rows_table.h"
#include "support.h"

namespace jax_lngb::test {
namespace {

using ReduceIsaTable = IsaTable<ReduceRowsTable>;

std::vector<ReduceIsaTable> runnable_reduce_tables() {
  return JAX_LNGB_RUNNABLE_TABLES(ReduceRowsTable, reduce_rows_table);
}

// Elements a [rows, cols] window with leading dimension ld really spans:
// the buffer ends right after the last element read.
int64_t window_elems(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 ? 0 : (rows - 1) * ld + cols; }

// The loops of one dtype in one table, in ReduceLoop's order; nullptr for
// a missing one.
std::vector<ReduceRowsFn> loops_of(const ReduceRowsTable& t, DType d) {
  return {t.blocked[int(d)], t.blocked_prefetch[int(d)], t.rowwise[int(d)]};
}

template <typename T>
void check_dtype(const ReduceIsaTable& isa, std::mt19937_64& gen) {
  const std::vector<ReduceRowsFn> fns = loops_of(isa.table, dtype_of<T>());
  for (size_t k = 0; k < fns.size(); ++k)
    CHECK_MSG(fns[k] != nullptr, isa.name << " lacks loop " << k << " for " << type_name<T>());
  const int64_t rows_list[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 17, 33};
  const int64_t cols_list[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 127, 129, 1000};
  for (int64_t rows : rows_list)
    for (int64_t cols : cols_list)
      for (int64_t pad_r : {0, 3})
        for (int64_t pad_d : {0, 1}) {
          const int64_t ld_r = cols + pad_r, ld_d = cols + pad_d;
          const std::vector<T> res = random_values<T>(gen, window_elems(rows, cols, ld_r));
          const std::vector<T> dy = random_values<T>(gen, window_elems(rows, cols, ld_d), 2.0f);
          // Accumulators start non-zero: the kernel adds into them.
          std::vector<float> acc_g = random_values<float>(gen, cols), acc_b = random_values<float>(gen, cols);
          std::vector<float> want_g = acc_g, want_b = acc_b;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) {
              const float d = to_float(dy[size_t(r * ld_d + c)]);
              want_g[size_t(c)] = want_g[size_t(c)] + to_float(res[size_t(r * ld_r + c)]) * d;
              want_b[size_t(c)] = want_b[size_t(c)] + d;
            }
          // Every loop adds in row order: the same bits as the scalar
          // reference.
          for (size_t k = 0; k < fns.size(); ++k) {
            if (fns[k] == nullptr) continue;
            std::vector<float> got_g = acc_g, got_b = acc_b;
            fns[k](res.data(), dy.data(), rows, cols, ld_r, ld_d, got_g.data(), got_b.data());
            for (int64_t c = 0; c < cols; ++c)
              CHECK_MSG(bits(got_g[size_t(c)]) == bits(want_g[size_t(c)]) &&
                            bits(got_b[size_t(c)]) == bits(want_b[size_t(c)]),
                        isa.name << " loop " << k << " " << type_name<T>() << " rows " << rows << " cols " << cols
                                 << " ld " << ld_r << "/" << ld_d << " col " << c);
          }
        }
}

JAX_LNGB_TEST(reduce_rows_every_dtype_every_isa_bit_exact) {
  std::mt19937_64 gen(42);
  for (const ReduceIsaTable& isa : runnable_reduce_tables()) {
    check_dtype<float>(isa, gen);
    check_dtype<f16_t>(isa, gen);
    check_dtype<bf16_t>(isa, gen);
  }
}

JAX_LNGB_TEST(reduce_rows_loops_are_distinct_and_chosen_by_size) {
  for (ReduceLoop loop : {ReduceLoop::kBlockedPrefetch, ReduceLoop::kRowwise}) {
    CHECK(reduce_rows_fn(DType::kBF16, loop) != nullptr);
    CHECK(reduce_rows_fn(DType::kBF16, loop) != reduce_rows_fn(DType::kBF16));
  }
  // The choice: cache-resident inputs take the blocked loop on every CPU
  // and ISA. From memory, on AMD very short rows take the blocked loop;
  // with the AVX-512 kernels medium rows take the row-wise one and long rows
  // the blocked loop with prefetch, with the AVX2 kernels medium rows the
  // blocked loop with prefetch and long rows the plain blocked loop; on
  // other CPUs every row length takes the blocked loop with prefetch.
  const int64_t big = int64_t(200) << 20;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    for (CpuVendor v : {CpuVendor::kAmd, CpuVendor::kIntel, CpuVendor::kOther}) {
      CHECK(reduce_loop_for(int64_t(1) << 20, 1536, v, isa) == ReduceLoop::kBlocked);
    }
    CHECK(reduce_loop_for(big, 128, CpuVendor::kAmd, isa) == ReduceLoop::kBlocked);
    for (CpuVendor v : {CpuVendor::kIntel, CpuVendor::kOther}) {
      for (int64_t row_bytes : {128, 1536, 8192})
        CHECK(reduce_loop_for(big, row_bytes, v, isa) == ReduceLoop::kBlockedPrefetch);
    }
  }
  CHECK(reduce_loop_for(big, 1536, CpuVendor::kAmd, Isa::kAvx512) == ReduceLoop::kRowwise);
  CHECK(reduce_loop_for(big, 3072, CpuVendor::kAmd, Isa::kAvx512) == ReduceLoop::kRowwise);
  CHECK(reduce_loop_for(big, 8192, CpuVendor::kAmd, Isa::kAvx512) == ReduceLoop::kBlockedPrefetch);
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2}) {
    CHECK(reduce_loop_for(big, 1536, CpuVendor::kAmd, isa) == ReduceLoop::kBlockedPrefetch);
    CHECK(reduce_loop_for(big, 3072, CpuVendor::kAmd, isa) == ReduceLoop::kBlockedPrefetch);
    CHECK(reduce_loop_for(big, 4096, CpuVendor::kAmd, isa) == ReduceLoop::kBlocked);
  }
}

// Every dtype has a kernel in every loop; a DType decoded from foreign bits
// gives nullptr rather than an index past the table.
JAX_LNGB_TEST(reduce_rows_every_dtype_has_a_kernel_invalid_is_null) {
  for (ReduceLoop loop : {ReduceLoop::kBlocked, ReduceLoop::kBlockedPrefetch, ReduceLoop::kRowwise}) {
    for (DType d : {DType::kF32, DType::kF16, DType::kBF16})
      CHECK_MSG(reduce_rows_fn(d, loop) != nullptr, "dtype " << int(d) << " loop " << int(loop));
    CHECK(reduce_rows_fn(DType(kNumDTypes), loop) == nullptr);
    CHECK(reduce_rows_fn(DType(-1), loop) == nullptr);
  }
}

// The vector loads (F16C, AVX-512 conversions, the bf16 shift) against
// to_float for all 65536 patterns, through every loop: with res = 1 (exact
// in 16 bits) and accumulators at -0, acc = -0 + 1 * x = x exactly for
// every x (NaN comes out as some NaN).
template <typename T>
void check_widening_loads(const ReduceIsaTable& isa) {
  const int64_t n = 65536;
  std::vector<T> dy(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) dy[size_t(i)] = T{uint16_t(i)};
  const std::vector<T> ones(static_cast<size_t>(n), from_float<T>(1.0f));
  const std::vector<ReduceRowsFn> fns = loops_of(isa.table, dtype_of<T>());
  for (size_t k = 0; k < fns.size(); ++k) {
    if (fns[k] == nullptr) continue;  // check_dtype reports it
    std::vector<float> g(static_cast<size_t>(n), -0.0f), b(static_cast<size_t>(n), -0.0f);
    fns[k](ones.data(), dy.data(), 1, n, n, n, g.data(), b.data());
    for (int64_t i = 0; i < n; ++i) {
      const float want = to_float(dy[size_t(i)]);
      CHECK_MSG(same_result(b[size_t(i)], want) && same_result(g[size_t(i)], want),
                isa.name << " loop " << k << " " << type_name<T>() << " pattern 0x" << std::hex << i << " loaded as "
                         << b[size_t(i)]);
    }
  }
}

JAX_LNGB_TEST(vector_loads_widen_every_16bit_pattern) {
  for (const ReduceIsaTable& isa : runnable_reduce_tables()) {
    check_widening_loads<f16_t>(isa);
    check_widening_loads<bf16_t>(isa);
  }
}

JAX_LNGB_TEST(dispatch_reports_a_runnable_variant) {
  CHECK(int(active_isa()) <= int(supported_isa()));
  const std::string name = isa_name(active_isa());
  CHECK(name == "generic" || name == "avx2" || name == "avx512");
  std::printf("  active ISA: %s (supported: %s; CPU: %s)\n", isa_name(active_isa()), isa_name(supported_isa()),
              cpu_feature_summary().c_str());
}

}  // namespace
}  // namespace jax_lngb::test
