// What the comparison's libunified_dlog.so recorded since the last call:
// (level, message) pairs; DLOG_ERROR is 3.
#pragma once

#include <string>
#include <utility>
#include <vector>

std::vector<std::pair<int, std::string>> jax_lngb_take_log();
