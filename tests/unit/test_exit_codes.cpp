#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/exit_codes.hpp>
#include <mongolock/log.hpp>

#include <csignal>
#include <stdexcept>
#include <string>
#include <type_traits>

using namespace mongolock;

TEST_SUITE_BEGIN("ExitCodes");

TEST_CASE("Exit codes have the documented values") {
  CHECK(k_exit_ok == 0);
  CHECK(k_exit_not_held == 1);
  CHECK(k_exit_usage == 64);
  CHECK(k_exit_not_holder == 65);
  CHECK(k_exit_token_gone == 66);
  CHECK(k_exit_unavailable == 69);
  CHECK(k_exit_internal == 70);
  CHECK(k_exit_held == 75);
  CHECK(k_exit_lease_lost == 76);
  CHECK(k_exit_timeout == 124);
  CHECK(k_exit_cannot_execute == 126);
  CHECK(k_exit_not_found == 127);
}

TEST_CASE("Exit codes fit in an exit status and do not collide with signal statuses") {
  for (const int code :
       {k_exit_ok, k_exit_not_held, k_exit_usage, k_exit_not_holder, k_exit_token_gone, k_exit_unavailable,
        k_exit_internal, k_exit_held, k_exit_lease_lost, k_exit_timeout, k_exit_cannot_execute, k_exit_not_found}) {
    CAPTURE(code);
    CHECK(code >= 0);
    CHECK(code <= 127);
  }
}

TEST_CASE("A child killed by a signal exits with 128 plus the signal number") {
  static_assert(exit_code_for_signal(9) == 137); // usable at compile time
  CHECK(exit_code_for_signal(9) == 137);
  CHECK(exit_code_for_signal(SIGKILL) == 128 + SIGKILL);
  CHECK(exit_code_for_signal(SIGTERM) == 143);
  CHECK(exit_code_for_signal(SIGINT) == 130);
  CHECK(exit_code_for_signal(SIGHUP) == 129);
}

TEST_CASE("Error carries its exit code and message") {
  static_assert(std::is_base_of_v<std::runtime_error, Error>);
  const Error e(k_exit_held, "lock 'x' is held");
  CHECK(e.exit_code() == k_exit_held);
  CHECK(std::string(e.what()) == "lock 'x' is held");
}

TEST_CASE("The error shorthands carry 64, 69 and 70") {
  SUBCASE("usage_error") {
    const auto e = usage_error("bad --ttl");
    CHECK(e.exit_code() == k_exit_usage);
    CHECK(e.exit_code() == 64);
    CHECK(std::string(e.what()) == "bad --ttl");
  }
  SUBCASE("unavailable_error") {
    const auto e = unavailable_error("no server");
    CHECK(e.exit_code() == k_exit_unavailable);
    CHECK(e.exit_code() == 69);
    CHECK(std::string(e.what()) == "no server");
  }
  SUBCASE("internal_error") {
    const auto e = internal_error("bug");
    CHECK(e.exit_code() == k_exit_internal);
    CHECK(e.exit_code() == 70);
    CHECK(std::string(e.what()) == "bug");
  }
}

TEST_CASE("An Error thrown is caught as std::exception with its code intact") {
  try {
    throw unavailable_error("cannot reach MongoDB");
  } catch (const std::exception& e) {
    CHECK(std::string(e.what()) == "cannot reach MongoDB");
    const auto* error = dynamic_cast<const Error*>(&e);
    REQUIRE(error != nullptr);
    CHECK(error->exit_code() == k_exit_unavailable);
  }
}

TEST_CASE("The top-level handler maps each failure to its exit code") {
  const Log log(Verbosity::quiet);
  CHECK(guarded_main(log, [] { return 42; }) == 42);
  CHECK(guarded_main(log, []() -> int { throw usage_error("bad option"); }) == k_exit_usage);
  CHECK(guarded_main(log, []() -> int { throw Error(k_exit_held, "held"); }) == k_exit_held);
  CHECK(guarded_main(log, []() -> int { throw unavailable_error("no server"); }) == k_exit_unavailable);
  // Anything that is not an Error is a bug in mongolock: exit 70, never a crash.
  CHECK(guarded_main(log, []() -> int { throw std::logic_error("bug"); }) == k_exit_internal);
  CHECK(guarded_main(log, []() -> int { throw 7; }) == k_exit_internal);
}

TEST_SUITE_END();
