#include <mongolock/check.hpp>

#include <doctest/doctest.h>

#include <algorithm>

using namespace mongolock;

namespace {

const ServerTime k_now{Millis(1'800'000'000'000)};

RunRecord run(std::string outcome, Millis ago, std::string host = "web1") {
  RunRecord r;
  r.name = "job";
  r.host = std::move(host);
  r.outcome = std::move(outcome);
  r.ended_at = k_now - ago;
  r.duration = Millis(1500);
  r.exit_code = r.outcome == "ok" ? 0 : 1;
  return r;
}

} // namespace

TEST_CASE("check_name: states from the newest runs") {
  const CheckPolicy policy{.max_age = Millis(3'600'000)};
  CHECK(check_name("job", {}, k_now, policy).state == CheckState::critical);
  CHECK(check_name("job", {run("ok", Millis(60'000))}, k_now, policy).state == CheckState::ok);
  // Too old a success.
  CHECK(check_name("job", {run("ok", Millis(7'200'000))}, k_now, policy).state == CheckState::critical);
  // The newest executed run failed; skipped and not-due runs before it do not count.
  const std::vector<RunRecord> failed{run("skipped", Millis(1000)), run("not-due", Millis(2000)),
                                      run("failed", Millis(3000)), run("ok", Millis(60'000))};
  const auto c = check_name("job", failed, k_now, policy);
  CHECK(c.state == CheckState::warning);
  REQUIRE(c.last_run);
  CHECK(c.last_run->outcome == "failed");
  REQUIRE(c.last_success);
  CHECK(c.age == Millis(60'000));
  CHECK(
      check_name("job", failed, k_now, CheckPolicy{.max_age = Millis(3'600'000), .on_failed = CheckState::ok}).state ==
      CheckState::ok);
}

TEST_CASE("check_line: the worst state wins, its clause first; perfdata with quoted labels") {
  const CheckPolicy policy{.max_age = Millis(93'600'000)};
  const auto good = check_name("a'b", {run("ok", Millis(11'520'412))}, k_now, policy);
  const auto never = check_name("never", {}, k_now, policy);
  CHECK(worst_state({good, never}) == CheckState::critical);
  const auto line = check_line({good, never}, policy);
  CHECK(line == "MONGOLOCK CRITICAL - 'never' has never run; 'a'b' succeeded on web1 3h12m ago | "
                "'a''b_age'=11520.412s;;93600;0 'a''b_duration'=1.500s;;;0 'never_age'=U;;93600;0 "
                "'never_duration'=U;;;0");
  // UNKNOWN ranks below CRITICAL and above WARNING.
  NameCheck unknown;
  unknown.state = CheckState::unknown;
  NameCheck warning;
  warning.state = CheckState::warning;
  CHECK(worst_state({warning, unknown}) == CheckState::unknown);
  CHECK(worst_state({unknown, never}) == CheckState::critical);
}

TEST_CASE("check_line: a '|' in a name or host never reaches the line; '=' never a label (issue 29)") {
  const CheckPolicy policy{.max_age = Millis(93'600'000)};
  const auto hostile =
      check_name("a|b=c' d", {run("failed", Millis(1000), "h|x"), run("ok", Millis(2000), "w|1")}, k_now, policy);
  const auto line = check_line({hostile}, policy);
  CHECK(line == "MONGOLOCK WARNING - 'a_b=c' d' failed on h_x 1s ago (exit 1; last success: w_1 2s ago) | "
                "'a_b_c'' d_age'=2.000s;;93600;0 'a_b_c'' d_duration'=1.500s;;;0");
  // Exactly one '|': the one that starts the perfdata.
  CHECK(std::count(line.begin(), line.end(), '|') == 1);
  CHECK(check_unknown_line("a|b") == "MONGOLOCK UNKNOWN - cannot read the run history: a_b");
}

TEST_CASE("check_unknown_line: one line, escaped") {
  CHECK(check_unknown_line("down\nnow") == "MONGOLOCK UNKNOWN - cannot read the run history: down\\nnow");
}
