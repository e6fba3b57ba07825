// Stand-in for CANN's dlog_pub.h (the logging layer, which the asc-devkit
// does not ship), written for this repository: what
// impl/adv_api/detail/host_log.h uses. CANN's host_log.cpp loads
// libunified_dlog.so and looks these two functions up in it; the
// comparison builds its own libunified_dlog.so (dlog_stand_in.cc) that
// records every message, so an error CANN's tiling code logs is seen.
#pragma once

#include <cstdint>

enum { DLOG_DEBUG = 0, DLOG_INFO = 1, DLOG_WARN = 2, DLOG_ERROR = 3 };
enum { ASCENDCKERNEL = 57 };  // a module id; only passed back to DlogRecord
#define DEBUG_LOG_MASK 0x00010000

extern "C" {
int32_t CheckLogLevel(int32_t module_id, int32_t level);
void DlogRecord(int32_t module_id, int32_t level, const char* fmt, ...);
}
