// The comparison's driver, written for this repository: calls CANN's own
// host tiling functions (compiled unchanged from asc-devkit) for each case
// read from stdin and prints what they returned, one JSON object a line.
//
// Input, one case a line, whitespace separated:
//   API ID ARCH TYPE_SIZE FLAG STACK_BYTES N d1..dN M o1..oM
// API: lngb (LayerNormGradBeta), lng (LayerNormGrad), ln (LayerNorm, [B, S,
// H] form), rms (RmsNorm). ARCH: the NpuArch the platform stand-in reports
// (2002, 2201, 3510). FLAG: isReuseSource, or isBasicBlock for rms. d: the
// srcShape; o: RmsNorm's originSrcShape (M = 0 for the others).
//
// Output: {"id", "max_min": {"ret", "max", "min", "errors"}, "tiling":
// {"ret", "errors", "words"}}. "ret" is the bool CANN returned (RmsNorm) or
// null (the others return void); "errors" the messages CANN's code logged
// at error level during that call; "words" the AscendC::tiling struct the
// function filled, as uint32 words (float fields as their bits), in the
// order of asc-devkit's *_tilingdata.h.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "adv_api/normalization/layernorm_grad_beta_tiling.h"
#include "adv_api/normalization/layernorm_grad_tiling.h"
#include "adv_api/normalization/layernorm_tiling.h"
#include "adv_api/normalization/rmsnorm_tiling.h"
#include "dlog_pub.h"
#include "log_capture.h"
#include "utils/tiling/platform/platform_ascendc.h"

// ---------------------------------------------------------------- platform
// The platform layer is a library CANN ships in binary form; the tiling
// sources ask it only for the NPU architecture (and, in code the
// comparison does not reach, the vector register length). These are our
// definitions of the members platform_ascendc.h declares.

namespace {
NpuArch g_arch = NpuArch::DAV_2201;
}

namespace platform_ascendc {
PlatformAscendC* PlatformAscendCManager::platformInfo = nullptr;
std::mutex PlatformAscendCManager::platformInitMtx;

PlatformAscendC* PlatformAscendCManager::PlatformAscendCManagerInit(const char*) {
  static PlatformAscendC instance(nullptr);
  platformInfo = &instance;
  return platformInfo;
}

NpuArch PlatformAscendC::GetCurNpuArch() const { return g_arch; }

// 256-byte vector registers (dav-3510); only the [A, R] LayerNorm reads it.
uint32_t PlatformAscendC::GetVecRegLen() const { return 256; }
}  // namespace platform_ascendc

// ------------------------------------------------------------------ output

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string errors_json() {
  std::string out = "[";
  bool first = true;
  for (const auto& [level, text] : jax_lngb_take_log()) {
    if (level < DLOG_ERROR) continue;
    out += (first ? "" : ",") + json_string(text);
    first = false;
  }
  return out + "]";
}

template <typename T>
std::string words_json(const T& t) {
  static_assert(sizeof(T) % 4 == 0, "tiling structs are 4-byte words");
  uint32_t w[sizeof(T) / 4];
  std::memcpy(w, &t, sizeof(T));
  std::string out = "[";
  for (size_t i = 0; i < sizeof(T) / 4; ++i) out += (i ? "," : "") + std::to_string(w[i]);
  return out + "]";
}

const char* ret_json(int ret) { return ret < 0 ? "null" : (ret ? "true" : "false"); }

struct Case {
  std::string api;
  std::string id;
  uint32_t arch = 0;
  uint32_t type_size = 0;
  bool flag = false;
  uint32_t stack = 0;
  std::vector<int64_t> dims, orig;
};

bool parse(const std::string& line, Case& c) {
  std::istringstream in(line);
  int flag = 0;
  size_t n = 0, m = 0;
  if (!(in >> c.api >> c.id >> c.arch >> c.type_size >> flag >> c.stack >> n)) return false;
  c.flag = flag != 0;
  c.dims.resize(n);
  for (auto& d : c.dims)
    if (!(in >> d)) return false;
  if (!(in >> m)) return false;
  c.orig.resize(m);
  for (auto& d : c.orig)
    if (!(in >> d)) return false;
  return true;
}

}  // namespace

int main() {
  std::string line;
  int bad = 0;
  jax_lngb_take_log();  // anything logged while loading
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    Case c;
    if (!parse(line, c)) {
      std::fprintf(stderr, "driver: cannot parse case line: %s\n", line.c_str());
      ++bad;
      continue;
    }
    switch (c.arch) {
      case 2002:
        g_arch = NpuArch::DAV_2002;
        break;
      case 2201:
        g_arch = NpuArch::DAV_2201;
        break;
      case 3510:
        g_arch = NpuArch::DAV_3510;
        break;
      default:
        std::fprintf(stderr, "driver: unknown arch %u in case %s\n", c.arch, c.id.c_str());
        ++bad;
        continue;
    }
    const AscendC::TensorShape shape(c.dims);
    uint32_t mx = 0, mn = 0;
    int ret_mm = -1, ret_nd = -1;
    std::string err_mm, err_nd, words;
    if (c.api == "lngb") {
      AscendC::GetLayerNormGradBetaMaxMinTmpSize(shape, c.type_size, c.flag, mx, mn);
      err_mm = errors_json();
      AscendC::tiling::LayerNormGradBetaTiling t;
      AscendC::GetLayerNormGradBetaNDTilingInfo(shape, c.stack, c.type_size, c.flag, t);
      err_nd = errors_json();
      words = words_json(t);
    } else if (c.api == "lng") {
      AscendC::GetLayerNormGradMaxMinTmpSize(shape, c.type_size, c.flag, mx, mn);
      err_mm = errors_json();
      AscendC::tiling::LayerNormGradTiling t;
      AscendC::GetLayerNormGradNDTilingInfo(shape, c.stack, c.type_size, c.flag, t);
      err_nd = errors_json();
      words = words_json(t);
    } else if (c.api == "ln") {
      AscendC::GetLayerNormMaxMinTmpSize(shape, c.type_size, c.flag, mx, mn);
      err_mm = errors_json();
      AscendC::tiling::LayerNormTiling t;
      AscendC::GetLayerNormNDTilingInfo(shape, c.stack, c.type_size, c.flag, t);
      err_nd = errors_json();
      words = words_json(t);
    } else if (c.api == "rms") {
      const AscendC::TensorShape orig(c.orig);
      ret_mm = AscendC::GetRmsNormMaxMinTmpSize(shape, c.type_size, mx, mn, c.flag);
      err_mm = errors_json();
      AscendC::tiling::RmsNormTiling t;
      ret_nd = AscendC::GetRmsNormTilingInfo(shape, orig, c.stack, c.type_size, t, c.flag);
      err_nd = errors_json();
      words = words_json(t);
    } else {
      std::fprintf(stderr, "driver: unknown API '%s' in case %s\n", c.api.c_str(), c.id.c_str());
      ++bad;
      continue;
    }
    std::printf(
        "{\"id\":%s,\"max_min\":{\"ret\":%s,\"max\":%u,\"min\":%u,\"errors\":%s},"
        "\"tiling\":{\"ret\":%s,\"errors\":%s,\"words\":%s}}\n",
        json_string(c.id).c_str(), ret_json(ret_mm), mx, mn, err_mm.c_str(), ret_json(ret_nd), err_nd.c_str(),
        words.c_str());
  }
  return bad ? 2 : 0;
}
