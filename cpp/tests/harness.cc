// The driver's main(): runs the registered cases.
//
//   jax_lngb_kernel_tests [--list] [SUBSTRING ...] [-SUBSTRING ...]
//
// With substrings, only cases whose name contains one of them run; a
// leading '-' excludes the cases whose name contains the rest.
#include "harness.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace jax_lngb::test {

std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

namespace {
int64_t g_case_failures = 0;
constexpr int64_t kMaxReportedPerCase = 20;
}  // namespace

void fail(const char* file, int line, const std::string& what) {
  if (g_case_failures < kMaxReportedPerCase) std::fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, what.c_str());
  if (g_case_failures == kMaxReportedPerCase) std::fprintf(stderr, "  (further failures of this case not shown)\n");
  ++g_case_failures;
}

int64_t failures_in_case() { return g_case_failures; }

namespace {

bool selected(const char* name, const std::vector<std::string>& filters) {
  bool any_include = false, included = false;
  for (const auto& f : filters) {
    if (f[0] == '-') {
      if (std::strstr(name, f.c_str() + 1) != nullptr) return false;
    } else {
      any_include = true;
      included = included || std::strstr(name, f.c_str()) != nullptr;
    }
  }
  return !any_include || included;
}

// Runs a known-failure case in a child process; true if it failed there
// (checks failed, it crashed, or a sanitizer aborted it).
bool fails_in_child(const Case& c) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return false;
  }
  if (pid == 0) {
    // The expected failure's report (a sanitizer's, say) is noise in a
    // passing run; JAX_LNGB_TEST_VERBOSE=1 shows it.
    const char* verbose = std::getenv("JAX_LNGB_TEST_VERBOSE");
    if (verbose == nullptr || *verbose == '\0' || *verbose == '0') {
      const int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) dup2(devnull, 2);
    }
    g_case_failures = 0;
    c.fn();
    std::fflush(stderr);
    _exit(g_case_failures == 0 ? 0 : 1);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return false;
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace jax_lngb::test

int main(int argc, char** argv) {
  using namespace jax_lngb::test;
  std::vector<std::string> filters;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--list") == 0)
      list = true;
    else if (argv[i][0] != '\0' && std::strcmp(argv[i], "-") != 0)
      filters.emplace_back(argv[i]);
  }
  int run = 0, failed = 0, xfailed = 0;
  const auto t_all = std::chrono::steady_clock::now();
  for (const Case& c : registry()) {
    if (!selected(c.name, filters)) continue;
    if (list) {
      std::printf("%s%s\n", c.name, c.xfail_reason ? " (known failure)" : "");
      continue;
    }
    ++run;
    const auto t0 = std::chrono::steady_clock::now();
    bool ok;
    if (c.xfail_reason != nullptr) {
      std::printf("[ xfail ] %s: %s\n", c.name, c.xfail_reason);
      std::fflush(stdout);
      ok = fails_in_child(c);
      if (ok)
        ++xfailed;
      else
        std::fprintf(stderr, "  XPASS %s: the known defect is fixed; turn it into a plain case\n", c.name);
    } else {
      std::printf("[ run   ] %s\n", c.name);
      std::fflush(stdout);
      g_case_failures = 0;
      c.fn();
      ok = g_case_failures == 0;
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ %s ] %s (%.0f ms)\n", ok ? "   ok" : "FAIL ", c.name, ms);
    std::fflush(stdout);
    if (!ok) ++failed;
  }
  if (list) return 0;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  std::printf("%d cases, %d failed, %d known failures, %.1f s\n", run, failed, xfailed, s);
  if (run == 0) {
    std::fprintf(stderr, "no case matched\n");
    return 2;
  }
  return failed == 0 ? 0 : 1;
}
