#include "cli.hpp"

#include <cstdio>
#include <unistd.h>

int main(int argc, char** argv) {
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
