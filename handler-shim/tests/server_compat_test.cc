/*
  server_compat.h's handlerton adapter on both shapes of slot the servers declare:
  10.11's, whose callbacks take the handlerton first, and 11.8's, which dropped it
  from some. The engine's callback is written once, without it; each slot must get
  a function of its own type that reaches that callback with the right arguments.
  Built and run by `make test-shim-compat` (no server needed: only the adapter's
  template logic is under test here; the shim itself is tested by the mtr suites).
*/
#include <cstdio>
#include <cstdlib>
#include <type_traits>

struct handlerton;
struct THD;
#define TIDESDB_COMPAT_ADAPTER_ONLY 1
#include "server_compat.h"

namespace {
struct slots_10_11 {
  int (*commit)(handlerton *, THD *, bool);
  bool (*can_release)(handlerton *, THD *);
  int (*recover)(handlerton *, int *, unsigned);
};
struct slots_11_8 {
  int (*commit)(THD *, bool);
  bool (*can_release)(THD *);
  int (*recover)(handlerton *, int *, unsigned);
};

THD *const a_thd = reinterpret_cast<THD *>(0x1000);
int commits_all = 0, commits_stmt = 0, recovered = 0;

int engine_commit(THD *thd, bool all) {
  if (thd != a_thd) return -1;
  (all ? commits_all : commits_stmt)++;
  return 7;
}
bool engine_can_release(THD *thd) { return thd == a_thd; }
int engine_recover(int *list, unsigned len) {
  recovered += (int)len;
  return list ? 0 : -1;
}

int failures = 0, passes = 0;
void check(bool ok, const char *what) {
  if (ok) {
    passes++;
  } else {
    std::fprintf(stderr, "FAIL: %s\n", what);
    failures++;
  }
}
}  // namespace

int main() {
  slots_10_11 old_api{};
  TIDESDB_HTON_SET(&old_api, commit, engine_commit);
  TIDESDB_HTON_SET(&old_api, can_release, engine_can_release);
  TIDESDB_HTON_SET(&old_api, recover, engine_recover);
  slots_11_8 new_api{};
  TIDESDB_HTON_SET(&new_api, commit, engine_commit);
  TIDESDB_HTON_SET(&new_api, can_release, engine_can_release);
  TIDESDB_HTON_SET(&new_api, recover, engine_recover);

  handlerton *const hton = reinterpret_cast<handlerton *>(0x2000);
  int xids[3] = {0, 0, 0};
  check(old_api.commit(hton, a_thd, true) == 7, "10.11 commit(all) returns the engine's status");
  check(old_api.commit(hton, a_thd, false) == 7, "10.11 commit(stmt)");
  check(new_api.commit(a_thd, true) == 7, "11.8 commit(all) returns the engine's status");
  check(commits_all == 2 && commits_stmt == 1, "each commit reached the engine once, with its flag");
  check(old_api.can_release(hton, a_thd) && new_api.can_release(a_thd),
        "a bool callback passes THD through on both shapes");
  check(old_api.recover(hton, xids, 3) == 0 && new_api.recover(hton, xids, 2) == 0 &&
            recovered == 5,
        "a callback that keeps the handlerton on both servers");
  std::printf("server_compat: %d passed, %d failed\n", passes, failures);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
