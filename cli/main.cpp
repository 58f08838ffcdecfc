#include "cli.hpp"

#include <mongolock/mongo_store.hpp>

#include <cstdio>
#include <unistd.h>

namespace {

// Before any shared library's initializer (an entry of the executable's .preinit_array: glibc's _dl_init runs
// those first), so that libmongoc's own, which Debian's build runs when the library is loaded, cannot print on
// stderr, keeps its counters in memory, not in /dev/shm, and loads no SASL plugin unless the URI asks for
// GSSAPI (mongo_store.hpp).
void before_library_initializers(int /*argc*/, char** /*argv*/, char** /*envp*/) {
  mongolock::route_driver_log_early();
  mongolock::keep_driver_counters_in_memory();
  mongolock::defer_sasl_plugins();
}

[[gnu::used,
  gnu::section(".preinit_array")]] void (*const g_before_library_initializers)(int, char**,
                                                                               char**) = before_library_initializers;

} // namespace

int main(int argc, char** argv) {
  mongolock::drop_driver_counters_placeholder(); // the driver's initializer has run
  const int code = mongolock::cli_main(argc, argv);
#ifndef __SANITIZE_ADDRESS__
  // Everything of the run is done here: its stores destroyed (endSessions sent), its files, cgroup and
  // guardian cleaned up. What exit() would still do is the libraries' teardown: mongoc_cleanup(),
  // OpenSSL's atexit handler, static destructors, about 0.5-0.7 ms of a one-shot run (issue 30). The
  // driver's counters file is removed at start-up (mongo_store.cpp). Only the output is left to flush.
  std::fflush(nullptr);
  _exit(code);
#else
  return code; // the leak check runs at exit
#endif
}
