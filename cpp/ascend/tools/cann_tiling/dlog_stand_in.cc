// The logging layer for the comparison, written for this repository: built
// as libunified_dlog.so, the library CANN's host_log.cpp loads. It accepts
// every level and records each message, so the driver can tell whether
// CANN's tiling code reported an error for the call it just made.
#include <cstdarg>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "dlog_pub.h"
#include "log_capture.h"

namespace {

std::vector<std::pair<int, std::string>>& records() {
  static std::vector<std::pair<int, std::string>> r;
  return r;
}

}  // namespace

extern "C" int32_t CheckLogLevel(int32_t, int32_t) { return 1; }

extern "C" void DlogRecord(int32_t, int32_t level, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::string text(buf);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  records().emplace_back(level, std::move(text));
}

std::vector<std::pair<int, std::string>> jax_lngb_take_log() {
  std::vector<std::pair<int, std::string>> out;
  out.swap(records());
  return out;
}
