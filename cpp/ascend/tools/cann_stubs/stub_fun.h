// Stand-ins for the closed CPU-debug intrinsic header of CANN ("stub_fun.h",
// shipped only in binary CANN packages), written for this repository.
//
// check_against_cann.sh type-checks grad_beta_kernel.asc against CANN's
// real, public AscendC headers (asc-devkit) in their CPU-debug mode. Those
// headers sit on top of compiler intrinsics (copy_gm_to_ubuf, vadd,
// set_flag, ...) that the CPU-debug mode takes from stub_fun.h. This file
// declares just enough of that layer for g++ -fsyntax-only: the types and
// enumerators the headers name, and one catch-all declaration per intrinsic.
// Nothing here runs, and nothing here checks the intrinsics' arguments: the
// check is about the kernel's use of the AscendC API above them.
#pragma once

#include <cstdint>

// ------------------------------------------------------------------ types

enum pipe_t : uint8_t {
  PIPE_S,
  PIPE_V,
  PIPE_M,
  PIPE_MTE1,
  PIPE_MTE2,
  PIPE_MTE3,
  PIPE_ALL,
  PIPE_MTE4,
  PIPE_MTE5,
  PIPE_V2,
  PIPE_FIX
};
enum event_t : uint8_t { EVENT_ID0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };
enum mem_t : uint8_t { L1, L0A, L0B, L0C, UB, BT };
enum mem_dsb_t : uint8_t { DSB_ALL, DSB_DDR, DSB_UB, DSB_SEQ };
enum atomic_type_t : uint8_t { ATOMIC_NONE_TYPE, ATOMIC_F32_TYPE, ATOMIC_F16_TYPE };
enum atomic_op_t : uint8_t { ATOMIC_NONE_OP, ATOMIC_SUM_OP };
enum pad_t : uint8_t { PAD_NONE, PAD_MODE1, PAD_MODE2, PAD_MODE3, PAD_MODE4 };
enum addr_cal_mode_t : uint8_t { inc, dec };
enum ub_addr8_t : uint8_t { VA0, VA1, VA2, VA3, VA4, VA5, VA6, VA7 };
enum vld_va_part_t : uint8_t { L128, H128 };
enum csize_t : uint8_t { CSIZE0, CSIZE1 };
enum ConvRelu_t : uint8_t {
  CRMODE_NONE,
  CRMODE_F32toF16_NONE,
  CRMODE_F32toF16_RELU,
  CRMODE_S32toF16_NONE,
  CRMODE_F16toF32_NONE,
  CRMODE_NONE_RELU,
  CRMODE_F16_MUL,
  CRMODE_S32toF16_DEQSCALE_SPR,
  CRMODE_DEQSCALE_VDEQ8,
  CRMODE_DEQSCALE_DEQ8,
  CRMODE_DEQSCALE_VDEQ16,
  CRMODE_DEQSCALE_DEQ16,
  CRMODE_DEQSCALE_VDEQS16,
  CRMODE_DEQSCALE_DEQS16
};
enum QuantMode_t : uint64_t {
  NoQuant,
  F322F16,
  F322BF16,
  DEQF16,
  VDEQF16,
  DEQS16,
  VDEQS16,
  REQ8,
  VREQ8,
  REQ4,
  VREQ4,
  QF322B8_PRE,
  VQF322B8_PRE,
  QF322F16_PRE,
  VQF322F16_PRE,
  QF322BF16_PRE,
  VQF322BF16_PRE,
  QF322F32_PRE,
  VQF322F32_PRE,
  QF322FP8_PRE,
  VQF322FP8_PRE,
  QF322HIF8_PRE,
  VQF322HIF8_PRE,
  QF322HIF8_PRE_HYBRID,
  VQF322HIF8_PRE_HYBRID,
  QS322BF16_PRE,
  VQS322BF16_PRE,
  QF162B8_PRE,
  VQF162B8_PRE,
  QF162S4_PRE,
  VQF162S4_PRE,
  QF162S16_PRE,
  VQF162S16_PRE
};
enum class Order_t : uint8_t { VALUE_INDEX, INDEX_VALUE, ONLY_VALUE, ONLY_INDEX };
enum class cache_line_t : uint8_t { SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE };
enum class dcci_dst_t : uint8_t { CACHELINE_ALL, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
enum class ROUND : uint8_t {
  R,
  A,
  F,
  C,
  Z,
  O,
  H,
  CAST_RINT,
  CAST_ROUND,
  CAST_FLOOR,
  CAST_CEIL,
  CAST_TRUNC,
  CAST_ODD,
  CAST_HYBRID
};

// dav-3510 register-level intrinsic operands.
enum CpuMode : uint8_t { MODE_ZEROING, MODE_MERGING, MODE_UNKNOWN };
enum class RoundingSaturation : uint8_t { RS_DISABLE_VALUE, RS_ENABLE_VALUE };
enum SatMode_t : uint8_t { RS_DISABLE, RS_ENABLE };
enum RoundMode_t : uint8_t { ROUND_R, ROUND_A, ROUND_F, ROUND_C, ROUND_Z, ROUND_O, ROUND_H };
enum Part_t : uint8_t { PART_EVEN, PART_ODD, PART_P0, PART_P1, PART_P2, PART_P3 };
enum HiLo_t : uint8_t { LOWER, HIGHER };
enum Pat_t : uint8_t {
  PAT_ALL,
  PAT_ALLF,
  PAT_VL1,
  PAT_VL2,
  PAT_VL4,
  PAT_VL8,
  PAT_VL16,
  PAT_VL32,
  PAT_VL64,
  PAT_VL128,
  PAT_M3,
  PAT_M4,
  PAT_H,
  PAT_Q
};
enum PostUpdate_t : uint8_t { NO_POST_UPDATE, POST_UPDATE };
enum MemBar_t : uint8_t {
  VV_ALL,
  VST_VLD,
  VLD_VST,
  VST_VST,
  VS_ALL,
  VST_LD,
  VLD_ST,
  VST_ST,
  SV_ALL,
  ST_VLD,
  LD_VST,
  ST_VST
};
enum class QuantMode_post : uint8_t { NoConv };
// Operand kinds the dav-3510 headers name as ::Kind and build with
// static_cast<::Kind>(value) (std::integral_constant template arguments).
enum Spr : uint8_t {};
enum Part : uint8_t {};
enum Part_T : uint8_t {};
enum Bin : uint8_t {};
enum Dist : uint8_t {};
enum DistVST : uint8_t {};
enum HiloPart : uint8_t {};
enum Order : uint8_t {};
enum Pat : uint8_t {};
enum Pos : uint8_t {};
enum Post : uint8_t {};
enum StoreMode : uint8_t {};
enum class MaskDist : uint8_t { DIST_PACK, DIST_US };
enum class PostLiteral : uint8_t { POST_MODE_NORMAL, POST_MODE_UPDATE };

struct dim3 {
  uint32_t x = 1, y = 1, z = 1;
  constexpr dim3(uint32_t x_ = 1, uint32_t y_ = 1, uint32_t z_ = 1) : x(x_), y(y_), z(z_) {}
};
namespace cce {
using ::dim3;
}

#define JLS_INTRINSIC_RETURNING(type, name) \
  template <typename... Args>               \
  inline type name(Args&&...) {             \
    return type{};                          \
  }
#define JLS_INTRINSIC(name) JLS_INTRINSIC_RETURNING(int64_t, name)

// Address-register generators (dav-3510); vector_address is stub_def.h's.
JLS_INTRINSIC_RETURNING(vector_address, VagCpuSim)
JLS_INTRINSIC_RETURNING(vector_address, vag_b8)
JLS_INTRINSIC_RETURNING(vector_address, vag_b16)
JLS_INTRINSIC_RETURNING(vector_address, vag_b32)

// Hooks of the CPU-debug runtime (buffer and queue bookkeeping of TPipe,
// cross-core synchronisation), which the CPU-debug library implements.
JLS_INTRINSIC(AscendCBufAbsAddr)
JLS_INTRINSIC(AscendCBufAlloc)
JLS_INTRINSIC(AscendCBufDeque)
JLS_INTRINSIC(AscendCBufEnque)
JLS_INTRINSIC(AscendCBufFree)
JLS_INTRINSIC(AscendCBufGet)
JLS_INTRINSIC(AscendCBufInit)
JLS_INTRINSIC(AscendCQueCreate)
JLS_INTRINSIC(AscendCRecordPoolHierarchy)
JLS_INTRINSIC(AscendCTBufPoolInit)
JLS_INTRINSIC(AscendCTBufPoolResetCheck)
JLS_INTRINSIC(AscendCUpdateTbufPoolStatus)
JLS_INTRINSIC(__ib_set_stub)
JLS_INTRINSIC(__ib_wait_stub)
JLS_INTRINSIC(__sync_all_stub)

// The compiler intrinsics the API's implementation calls, for every
// architecture it supports. Each accepts any arguments and does nothing:
// the argument checking that matters happens one level up, in the AscendC
// API templates the kernel calls.
JLS_INTRINSIC(__isfinite)
JLS_INTRINSIC(bcnt0)
JLS_INTRINSIC(bcnt1)
JLS_INTRINSIC(chistv2)
JLS_INTRINSIC(clz)
JLS_INTRINSIC(conv_f322f16o)
JLS_INTRINSIC(conv_f322s32a)
JLS_INTRINSIC(conv_f322s32c)
JLS_INTRINSIC(conv_f322s32f)
JLS_INTRINSIC(conv_f322s32r)
JLS_INTRINSIC(copy_cbuf_to_bt)
JLS_INTRINSIC(copy_cbuf_to_fbuf)
JLS_INTRINSIC(copy_cbuf_to_gm)
JLS_INTRINSIC(copy_cbuf_to_ubuf)
JLS_INTRINSIC(copy_gm_to_cbuf)
JLS_INTRINSIC(copy_gm_to_cbuf_align_v2)
JLS_INTRINSIC(copy_gm_to_cbuf_multi_nd2nz)
JLS_INTRINSIC(copy_gm_to_cbuf_multi_nd2nz_b16)
JLS_INTRINSIC(copy_gm_to_cbuf_multi_nd2nz_b32s)
JLS_INTRINSIC(copy_gm_to_cbuf_multi_nd2nz_b8)
JLS_INTRINSIC(copy_gm_to_ubuf)
JLS_INTRINSIC(copy_gm_to_ubuf_align_b32)
JLS_INTRINSIC(copy_gm_to_ubuf_align_v2)
JLS_INTRINSIC(copy_matrix_cc_to_ubuf)
JLS_INTRINSIC(copy_matrix_ubuf_to_cc)
JLS_INTRINSIC(copy_ubuf_to_cbuf)
JLS_INTRINSIC(copy_ubuf_to_gm)
JLS_INTRINSIC(copy_ubuf_to_gm_align_v2)
JLS_INTRINSIC(copy_ubuf_to_ubuf)
JLS_INTRINSIC(copy_vector_cc_to_ubuf)
JLS_INTRINSIC(copy_vector_ubuf_to_cc)
JLS_INTRINSIC(create_ca_matrix)
JLS_INTRINSIC(create_cb_matrix)
JLS_INTRINSIC(create_cbuf_matrix)
JLS_INTRINSIC(dc_preload)
JLS_INTRINSIC(dcci)
JLS_INTRINSIC(dhistv2)
JLS_INTRINSIC(dsb)
JLS_INTRINSIC(ffts_cross_core_sync)
JLS_INTRINSIC(get_acc_val)
JLS_INTRINSIC(get_ar)
JLS_INTRINSIC(get_arch_ver)
JLS_INTRINSIC(get_block_idx)
JLS_INTRINSIC(get_block_num)
JLS_INTRINSIC(get_buf)
JLS_INTRINSIC(get_ctrl)
JLS_INTRINSIC(get_icache_prl_st)
JLS_INTRINSIC(get_imm)
JLS_INTRINSIC(get_max_min_cnt)
JLS_INTRINSIC(get_pc)
JLS_INTRINSIC(get_rsvd_cnt)
JLS_INTRINSIC(get_st_atomic_cfg)
JLS_INTRINSIC(get_status)
JLS_INTRINSIC(get_vms4_sr)
JLS_INTRINSIC(hset_flag)
JLS_INTRINSIC(hwait_flag)
JLS_INTRINSIC(img2colv2_cbuf_to_ca)
JLS_INTRINSIC(img2colv2_cbuf_to_ca_s4)
JLS_INTRINSIC(img2colv2_cbuf_to_cb)
JLS_INTRINSIC(img2colv2_cbuf_to_cb_s4)
JLS_INTRINSIC(ld_dev)
JLS_INTRINSIC(ldva)
JLS_INTRINSIC(load_cbuf_to_ca_mx)
JLS_INTRINSIC(load_cbuf_to_ca_s4)
JLS_INTRINSIC(load_cbuf_to_cb_mx)
JLS_INTRINSIC(load_cbuf_to_cb_s4)
JLS_INTRINSIC(load_cbuf_to_cb_sp)
JLS_INTRINSIC(load_cbuf_to_cb_transpose_s4)
JLS_INTRINSIC(load_gm_to_cb_unzip)
JLS_INTRINSIC(load_gm_to_cbuf_unzip)
JLS_INTRINSIC(load_unzip_index_from_gm)
JLS_INTRINSIC(mad_sp)
JLS_INTRINSIC(mem_bar)
JLS_INTRINSIC(movp_b16)
JLS_INTRINSIC(movp_b32)
JLS_INTRINSIC(movvp)
JLS_INTRINSIC(pand)
JLS_INTRINSIC(pdintlv_b16)
JLS_INTRINSIC(pdintlv_b32)
JLS_INTRINSIC(pdintlv_b8)
JLS_INTRINSIC(pintlv_b16)
JLS_INTRINSIC(pintlv_b32)
JLS_INTRINSIC(pintlv_b8)
JLS_INTRINSIC(pipe_barrier)
JLS_INTRINSIC(pld)
JLS_INTRINSIC(plds)
JLS_INTRINSIC(plt_b16)
JLS_INTRINSIC(plt_b32)
JLS_INTRINSIC(plt_b8)
JLS_INTRINSIC(pmov)
JLS_INTRINSIC(pnot)
JLS_INTRINSIC(por)
JLS_INTRINSIC(ppack)
JLS_INTRINSIC(preload)
JLS_INTRINSIC(psel)
JLS_INTRINSIC(pset_b16)
JLS_INTRINSIC(pset_b32)
JLS_INTRINSIC(pset_b8)
JLS_INTRINSIC(pst)
JLS_INTRINSIC(psts)
JLS_INTRINSIC(pstu)
JLS_INTRINSIC(punpack)
JLS_INTRINSIC(pxor)
JLS_INTRINSIC(rls_buf)
JLS_INTRINSIC(sbitset0)
JLS_INTRINSIC(sbitset1)
JLS_INTRINSIC(scatter_vnchwconv_b16)
JLS_INTRINSIC(scatter_vnchwconv_b32)
JLS_INTRINSIC(scatter_vnchwconv_b8)
JLS_INTRINSIC(set_aipp_spr_0)
JLS_INTRINSIC(set_aipp_spr_1)
JLS_INTRINSIC(set_aipp_spr_18)
JLS_INTRINSIC(set_aipp_spr_19)
JLS_INTRINSIC(set_aipp_spr_2)
JLS_INTRINSIC(set_aipp_spr_20)
JLS_INTRINSIC(set_aipp_spr_21)
JLS_INTRINSIC(set_aipp_spr_3)
JLS_INTRINSIC(set_aipp_spr_4)
JLS_INTRINSIC(set_aipp_spr_5)
JLS_INTRINSIC(set_aipp_spr_6)
JLS_INTRINSIC(set_aipp_spr_7)
JLS_INTRINSIC(set_aipp_spr_8)
JLS_INTRINSIC(set_aipp_spr_9)
JLS_INTRINSIC(set_atomic_add)
JLS_INTRINSIC(set_atomic_bf16)
JLS_INTRINSIC(set_atomic_f16)
JLS_INTRINSIC(set_atomic_f32)
JLS_INTRINSIC(set_atomic_max)
JLS_INTRINSIC(set_atomic_min)
JLS_INTRINSIC(set_atomic_none)
JLS_INTRINSIC(set_atomic_s16)
JLS_INTRINSIC(set_atomic_s32)
JLS_INTRINSIC(set_atomic_s8)
JLS_INTRINSIC(set_channel_para)
JLS_INTRINSIC(set_cmpmask)
JLS_INTRINSIC(set_ctrl)
JLS_INTRINSIC(set_data_exp_0)
JLS_INTRINSIC(set_data_exp_1)
JLS_INTRINSIC(set_data_exp_2)
JLS_INTRINSIC(set_data_exp_3)
JLS_INTRINSIC(set_deqscale)
JLS_INTRINSIC(set_ffts_base_addr)
JLS_INTRINSIC(set_flag)
JLS_INTRINSIC(set_fmatrix)
JLS_INTRINSIC(set_fmatrix_b)
JLS_INTRINSIC(set_fpc)
JLS_INTRINSIC(set_intra_block)
JLS_INTRINSIC(set_l1_3d_size)
JLS_INTRINSIC(set_l3d_rpt)
JLS_INTRINSIC(set_loop0_stride_nddma)
JLS_INTRINSIC(set_loop1_stride_nddma)
JLS_INTRINSIC(set_loop1_stride_outtoub)
JLS_INTRINSIC(set_loop1_stride_ubtoout)
JLS_INTRINSIC(set_loop2_stride_nddma)
JLS_INTRINSIC(set_loop2_stride_outtoub)
JLS_INTRINSIC(set_loop2_stride_ubtoout)
JLS_INTRINSIC(set_loop3_para)
JLS_INTRINSIC(set_loop3_stride_nddma)
JLS_INTRINSIC(set_loop4_stride_nddma)
JLS_INTRINSIC(set_loop_size_outtoub)
JLS_INTRINSIC(set_loop_size_ubtoout)
JLS_INTRINSIC(set_mask_count)
JLS_INTRINSIC(set_mask_norm)
JLS_INTRINSIC(set_mov_pad_val)
JLS_INTRINSIC(set_mte2_nz_para)
JLS_INTRINSIC(set_mte2_src_para)
JLS_INTRINSIC(set_nd_para)
JLS_INTRINSIC(set_pad_cnt_nddma)
JLS_INTRINSIC(set_pad_val_nddma)
JLS_INTRINSIC(set_padding)
JLS_INTRINSIC(set_pcie_rd_ctrl)
JLS_INTRINSIC(set_quant_pre)
JLS_INTRINSIC(set_st_atomic_cfg)
JLS_INTRINSIC(set_va_reg_sb)
JLS_INTRINSIC(set_vector_mask)
JLS_INTRINSIC(sff0)
JLS_INTRINSIC(sff1)
JLS_INTRINSIC(sflbits)
JLS_INTRINSIC(sprclr)
JLS_INTRINSIC(st_dev)
JLS_INTRINSIC(trap)
JLS_INTRINSIC(v4dtrans)
JLS_INTRINSIC(vabs)
JLS_INTRINSIC(vadd)
JLS_INTRINSIC(vaddc)
JLS_INTRINSIC(vaddcs)
JLS_INTRINSIC(vadddeqrelu)
JLS_INTRINSIC(vadds)
JLS_INTRINSIC(vand)
JLS_INTRINSIC(vaxpy)
JLS_INTRINSIC(vbr)
JLS_INTRINSIC(vbrcb)
JLS_INTRINSIC(vcadd)
JLS_INTRINSIC(vcbd_s322s16)
JLS_INTRINSIC(vcgadd)
JLS_INTRINSIC(vcgmax)
JLS_INTRINSIC(vci)
JLS_INTRINSIC(vcmax)
JLS_INTRINSIC(vcmin)
JLS_INTRINSIC(vcmp_eq)
JLS_INTRINSIC(vcmp_ge)
JLS_INTRINSIC(vcmp_gt)
JLS_INTRINSIC(vcmp_le)
JLS_INTRINSIC(vcmp_lt)
JLS_INTRINSIC(vcmp_ne)
JLS_INTRINSIC(vcmps_eq)
JLS_INTRINSIC(vcmps_ge)
JLS_INTRINSIC(vcmps_gt)
JLS_INTRINSIC(vcmps_le)
JLS_INTRINSIC(vcmps_lt)
JLS_INTRINSIC(vcmps_ne)
JLS_INTRINSIC(vcmpv_eq)
JLS_INTRINSIC(vcmpv_ge)
JLS_INTRINSIC(vcmpv_gt)
JLS_INTRINSIC(vcmpv_le)
JLS_INTRINSIC(vcmpv_lt)
JLS_INTRINSIC(vcmpv_ne)
JLS_INTRINSIC(vcmpvs_eq)
JLS_INTRINSIC(vcmpvs_ge)
JLS_INTRINSIC(vcmpvs_gt)
JLS_INTRINSIC(vcmpvs_le)
JLS_INTRINSIC(vcmpvs_lt)
JLS_INTRINSIC(vcmpvs_ne)
JLS_INTRINSIC(vconv_bf162f32)
JLS_INTRINSIC(vconv_bf162s32a)
JLS_INTRINSIC(vconv_bf162s32c)
JLS_INTRINSIC(vconv_bf162s32f)
JLS_INTRINSIC(vconv_bf162s32r)
JLS_INTRINSIC(vconv_bf162s32z)
JLS_INTRINSIC(vconv_deq)
JLS_INTRINSIC(vconv_f162f32)
JLS_INTRINSIC(vconv_f162s16a)
JLS_INTRINSIC(vconv_f162s16c)
JLS_INTRINSIC(vconv_f162s16f)
JLS_INTRINSIC(vconv_f162s16r)
JLS_INTRINSIC(vconv_f162s16z)
JLS_INTRINSIC(vconv_f162s32a)
JLS_INTRINSIC(vconv_f162s32c)
JLS_INTRINSIC(vconv_f162s32f)
JLS_INTRINSIC(vconv_f162s32r)
JLS_INTRINSIC(vconv_f162s32z)
JLS_INTRINSIC(vconv_f162s4)
JLS_INTRINSIC(vconv_f162s4a)
JLS_INTRINSIC(vconv_f162s4c)
JLS_INTRINSIC(vconv_f162s4f)
JLS_INTRINSIC(vconv_f162s4r)
JLS_INTRINSIC(vconv_f162s4z)
JLS_INTRINSIC(vconv_f162s8)
JLS_INTRINSIC(vconv_f162s8a)
JLS_INTRINSIC(vconv_f162s8c)
JLS_INTRINSIC(vconv_f162s8f)
JLS_INTRINSIC(vconv_f162s8r)
JLS_INTRINSIC(vconv_f162s8z)
JLS_INTRINSIC(vconv_f162u8)
JLS_INTRINSIC(vconv_f162u8a)
JLS_INTRINSIC(vconv_f162u8c)
JLS_INTRINSIC(vconv_f162u8f)
JLS_INTRINSIC(vconv_f162u8r)
JLS_INTRINSIC(vconv_f162u8z)
JLS_INTRINSIC(vconv_f322bf16a)
JLS_INTRINSIC(vconv_f322bf16c)
JLS_INTRINSIC(vconv_f322bf16f)
JLS_INTRINSIC(vconv_f322bf16r)
JLS_INTRINSIC(vconv_f322bf16z)
JLS_INTRINSIC(vconv_f322f16)
JLS_INTRINSIC(vconv_f322f16a)
JLS_INTRINSIC(vconv_f322f16c)
JLS_INTRINSIC(vconv_f322f16f)
JLS_INTRINSIC(vconv_f322f16o)
JLS_INTRINSIC(vconv_f322f16r)
JLS_INTRINSIC(vconv_f322f16z)
JLS_INTRINSIC(vconv_f322f32a)
JLS_INTRINSIC(vconv_f322f32c)
JLS_INTRINSIC(vconv_f322f32f)
JLS_INTRINSIC(vconv_f322f32r)
JLS_INTRINSIC(vconv_f322f32z)
JLS_INTRINSIC(vconv_f322s16a)
JLS_INTRINSIC(vconv_f322s16c)
JLS_INTRINSIC(vconv_f322s16f)
JLS_INTRINSIC(vconv_f322s16r)
JLS_INTRINSIC(vconv_f322s16z)
JLS_INTRINSIC(vconv_f322s32a)
JLS_INTRINSIC(vconv_f322s32c)
JLS_INTRINSIC(vconv_f322s32f)
JLS_INTRINSIC(vconv_f322s32r)
JLS_INTRINSIC(vconv_f322s32z)
JLS_INTRINSIC(vconv_f322s64a)
JLS_INTRINSIC(vconv_f322s64c)
JLS_INTRINSIC(vconv_f322s64f)
JLS_INTRINSIC(vconv_f322s64r)
JLS_INTRINSIC(vconv_f322s64z)
JLS_INTRINSIC(vconv_s162f16)
JLS_INTRINSIC(vconv_s162f16a)
JLS_INTRINSIC(vconv_s162f16c)
JLS_INTRINSIC(vconv_s162f16f)
JLS_INTRINSIC(vconv_s162f16r)
JLS_INTRINSIC(vconv_s162f16z)
JLS_INTRINSIC(vconv_s162f32)
JLS_INTRINSIC(vconv_s322f32)
JLS_INTRINSIC(vconv_s322f32a)
JLS_INTRINSIC(vconv_s322f32c)
JLS_INTRINSIC(vconv_s322f32f)
JLS_INTRINSIC(vconv_s322f32r)
JLS_INTRINSIC(vconv_s322f32z)
JLS_INTRINSIC(vconv_s322s16)
JLS_INTRINSIC(vconv_s322s64)
JLS_INTRINSIC(vconv_s42f16)
JLS_INTRINSIC(vconv_s642f32a)
JLS_INTRINSIC(vconv_s642f32c)
JLS_INTRINSIC(vconv_s642f32f)
JLS_INTRINSIC(vconv_s642f32r)
JLS_INTRINSIC(vconv_s642f32z)
JLS_INTRINSIC(vconv_s642s32)
JLS_INTRINSIC(vconv_s82f16)
JLS_INTRINSIC(vconv_u82f16)
JLS_INTRINSIC(vcopy)
JLS_INTRINSIC(vcvt)
JLS_INTRINSIC(vdintlv)
JLS_INTRINSIC(vdiv)
JLS_INTRINSIC(vdup)
JLS_INTRINSIC(vector_dup)
JLS_INTRINSIC(vexp)
JLS_INTRINSIC(vgather)
JLS_INTRINSIC(vgather2)
JLS_INTRINSIC(vintlv)
JLS_INTRINSIC(vld)
JLS_INTRINSIC(vld_va_reg)
JLS_INTRINSIC(vlda)
JLS_INTRINSIC(vldas)
JLS_INTRINSIC(vlds)
JLS_INTRINSIC(vldu)
JLS_INTRINSIC(vldus)
JLS_INTRINSIC(vln)
JLS_INTRINSIC(vmadd)
JLS_INTRINSIC(vmax)
JLS_INTRINSIC(vmaxs)
JLS_INTRINSIC(vmin)
JLS_INTRINSIC(vmins)
JLS_INTRINSIC(vmov)
JLS_INTRINSIC(vmul)
JLS_INTRINSIC(vmula)
JLS_INTRINSIC(vmulconv_f162s8)
JLS_INTRINSIC(vmulconv_f162u8)
JLS_INTRINSIC(vmull)
JLS_INTRINSIC(vmuls)
JLS_INTRINSIC(vneg)
JLS_INTRINSIC(vnot)
JLS_INTRINSIC(vor)
JLS_INTRINSIC(vpack)
JLS_INTRINSIC(vpadding)
JLS_INTRINSIC(vrec)
JLS_INTRINSIC(vreduce)
JLS_INTRINSIC(vreducev2)
JLS_INTRINSIC(vscatter)
JLS_INTRINSIC(vsel)
JLS_INTRINSIC(vselr)
JLS_INTRINSIC(vshl)
JLS_INTRINSIC(vshls)
JLS_INTRINSIC(vshr)
JLS_INTRINSIC(vshrs)
JLS_INTRINSIC(vsldb)
JLS_INTRINSIC(vsqrt)
JLS_INTRINSIC(vsqz)
JLS_INTRINSIC(vsstb)
JLS_INTRINSIC(vst)
JLS_INTRINSIC(vsta)
JLS_INTRINSIC(vstar)
JLS_INTRINSIC(vstas)
JLS_INTRINSIC(vsts)
JLS_INTRINSIC(vstu)
JLS_INTRINSIC(vstur)
JLS_INTRINSIC(vstus)
JLS_INTRINSIC(vsub)
JLS_INTRINSIC(vsubc)
JLS_INTRINSIC(vsubcs)
JLS_INTRINSIC(vtranspose)
JLS_INTRINSIC(vtrc)
JLS_INTRINSIC(vxor)
JLS_INTRINSIC(wait_flag)
JLS_INTRINSIC(wait_flag_dev)
JLS_INTRINSIC(wait_intra_block)

#undef JLS_INTRINSIC
#undef JLS_INTRINSIC_RETURNING
