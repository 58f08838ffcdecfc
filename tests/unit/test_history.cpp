#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/history.hpp>
#include <mongolock/metrics.hpp>

#include <string>
#include <vector>

using namespace mongolock;

TEST_SUITE_BEGIN("History");

TEST_CASE("Outcomes have the documented names") {
  std::vector<std::string> names;
  for (const auto outcome : all_outcomes())
    names.emplace_back(outcome_name(outcome));
  CHECK(names == std::vector<std::string>{"ok", "failed", "timeout", "lease-lost", "not-executable", "skipped",
                                          "not-due", "replaced", "error"});
}

TEST_CASE("The recorded command is redacted and bounded") {
  const auto recorded =
      recorded_command({"backup", "--uri", "mongodb://app:hunter2@db:27017/", "--password-is", "hunter2"},
                       "mongodb://app:hunter2@db:27017/");
  REQUIRE(recorded.size() == 5);
  CHECK(recorded[2] == "mongodb://app:***@db:27017/");
  CHECK(recorded[4] == "***"); // the configured URI's password, wherever it appears

  const std::string long_arg(300, 'x');
  CHECK(recorded_command({"x", long_arg}, "")[1] == std::string(253, 'x') + "\u2026");
  // A cut never splits a UTF-8 sequence: 126 two-byte characters = 252 bytes, the 127th would end at 254.
  std::string accents;
  for (int i = 0; i < 200; ++i)
    accents += "\u00e9";
  const auto cut = recorded_command({"x", accents}, "")[1];
  CHECK(cut == accents.substr(0, 252) + "\u2026");

  std::vector<std::string> many(40, "a");
  const auto bounded = recorded_command(many, "");
  REQUIRE(bounded.size() == 32);
  CHECK(bounded[30] == "a");
  CHECK(bounded[31] == "\u2026 9 more");
  CHECK(recorded_command(std::vector<std::string>(32, "a"), "").size() == 32); // exactly 32: all kept
}

TEST_CASE("The summary counts outcomes and takes the median and max of the durations") {
  auto run = [](std::string outcome, std::optional<Millis> duration) {
    RunRecord r;
    r.outcome = std::move(outcome);
    r.duration = duration;
    return HistoryRow{.run = r, .skips = {}};
  };
  const auto summary = summarize({run("ok", Millis(300)), run("failed", Millis(100)), run("skipped", std::nullopt),
                                  run("timeout", Millis(900)), run("something-new", Millis(200))});
  CHECK(summary.runs == 5);
  CHECK(summary.ok == 1);
  CHECK(summary.skipped == 1);
  CHECK(summary.failures == 3);                  // failed, timeout and an outcome this version does not know
  CHECK(summary.median_duration == Millis(250)); // 100 200 300 900: mean of the middle two
  CHECK(summary.max_duration == Millis(900));
  const auto odd = summarize({run("ok", Millis(5)), run("ok", Millis(1)), run("ok", Millis(3))});
  CHECK(odd.median_duration == Millis(3));
  const auto none = summarize({run("skipped", std::nullopt)});
  CHECK_FALSE(none.median_duration.has_value());
  CHECK_FALSE(none.max_duration.has_value());
}

TEST_CASE("Folded skips count in the summary: a run's skips, a group's attempts") {
  RunRecord ok;
  ok.outcome = "ok";
  ok.duration = Millis(1000);
  RunRecord skipped;
  skipped.outcome = "skipped";
  const auto summary = summarize({HistoryRow{.run = ok, .skips = {.count = 198, .hosts = 198, .names = {}}},
                                  HistoryRow{.run = skipped, .skips = {.count = 5, .hosts = 1, .names = {}}}});
  CHECK(summary.runs == 1 + 198 + 5);
  CHECK(summary.ok == 1);
  CHECK(summary.skipped == 203);
  CHECK(summary.failures == 0);
}

namespace {

RunRecord executed(std::string id, std::string lock, std::int64_t ended_s) {
  RunRecord r;
  r.id = std::move(id);
  r.name = "herd";
  r.outcome = "ok";
  r.lock = std::move(lock);
  r.started_at = ServerTime(std::chrono::seconds(ended_s - 1));
  r.ended_at = ServerTime(std::chrono::seconds(ended_s));
  return r;
}

RunRecord skip(std::string host, std::string held_lock, std::int64_t ended_s, std::string held_by = "h:1") {
  RunRecord r;
  r.id = host + std::to_string(ended_s);
  r.name = "herd";
  r.outcome = "skipped";
  r.host = std::move(host);
  r.held_lock = std::move(held_lock);
  r.held_by = std::move(held_by);
  r.ended_at = ServerTime(std::chrono::seconds(ended_s));
  return r;
}

} // namespace

TEST_CASE("Skipped attempts fold into the run whose lock they met") {
  const std::vector<RunRecord> runs{executed("r2", "L2", 20), executed("r1", "L1", 10)};
  std::vector<RunRecord> attempts;
  for (int i = 0; i < 7; ++i)
    attempts.push_back(skip("host" + std::to_string(i), "L1", 9));
  attempts.push_back(skip("host0", "L1", 9)); // a second attempt from one host
  attempts.push_back(skip("a", "L2", 19));

  SUBCASE("each run gets its attempts, hosts counted once, a sorted sample of them") {
    const auto rows = fold_history(runs, attempts, 20);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].run.id == "r2");
    CHECK(rows[0].skips.count == 1);
    CHECK(rows[1].run.id == "r1");
    CHECK(rows[1].skips.count == 8);
    CHECK(rows[1].skips.hosts == 7);
    CHECK(rows[1].skips.names == std::vector<std::string>{"host0", "host1", "host2", "host3", "host4"});
  }
  SUBCASE("the count a run stored when it ended stands when its attempts were purged since") {
    auto counted = runs;
    counted[1].skips = 198;
    counted[1].skip_hosts = 198;
    counted[1].skipped_on = {"w1", "w2"};
    const auto rows = fold_history(counted, {}, 20);
    CHECK(rows[1].skips.count == 198);
    CHECK(rows[1].skips.hosts == 198);
    CHECK(rows[1].skips.names == std::vector<std::string>{"w1", "w2"});
  }
  SUBCASE("attempts whose holder's run is not listed are one row per holder, the newest attempt shown") {
    auto more = attempts;
    more.push_back(skip("b", "L9", 30, "other:7"));
    more.push_back(skip("c", "L9", 31, "other:7"));
    more.push_back(skip("d", "", 25, "old:1")); // an older version's record: no held_lock
    more.push_back(skip("e", "", 24, "old:1"));
    const auto rows = fold_history(runs, more, 20);
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].run.host == "c");
    CHECK(rows[0].skips.count == 2);
    CHECK(rows[1].run.host == "d");
    CHECK(rows[1].skips.count == 2);
    CHECK(rows[2].run.id == "r2");
    CHECK(fold_history(runs, more, 1).size() == 1);
  }
  SUBCASE("not-due attempts stay one row each") {
    auto not_due = skip("n", "", 15);
    not_due.outcome = "not-due";
    const auto rows = fold_history(runs, {not_due, not_due}, 20);
    CHECK(rows.size() == 4);
  }
}

TEST_CASE("Executed runs and attempts are told apart") {
  CHECK(is_attempt("skipped"));
  CHECK(is_attempt("not-due"));
  CHECK_FALSE(is_attempt("ok"));
  CHECK_FALSE(is_attempt("lease-lost"));
  CHECK_FALSE(is_attempt("something-new"));
}

TEST_CASE("History bounds are checked") {
  CHECK_NOTHROW(validate_history_policy(HistoryPolicy{}));
  HistoryPolicy zero;
  zero.keep = 0;
  CHECK_THROWS_AS(validate_history_policy(zero), Error);
  HistoryPolicy purge;
  purge.purge_every = 0;
  CHECK_THROWS_AS(validate_history_policy(purge), Error);
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("Metrics");

namespace {

RunMetrics metrics_of(std::string name, Outcome outcome, double ended, std::optional<double> duration, int code) {
  return RunMetrics{
      .name = std::move(name), .outcome = outcome, .ended_at = ended, .duration = duration, .exit_code = code};
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.starts_with(line + "\n");
}

} // namespace

TEST_CASE("Metrics start every counter at zero and set the gauges") {
  const auto text = metrics_text("", {metrics_of("nightly", Outcome::ok, 1700000000.5, 12.25, 0)});
  CHECK(has_line(text, "# TYPE mongolock_runs_total counter"));
  CHECK(has_line(text, R"(mongolock_runs_total{name="nightly",outcome="ok"} 1)"));
  CHECK(has_line(text, R"(mongolock_runs_total{name="nightly",outcome="skipped"} 0)"));
  CHECK(has_line(text, R"(mongolock_runs_total{name="nightly",outcome="error"} 0)"));
  CHECK(has_line(text, R"(mongolock_last_run_timestamp_seconds{name="nightly"} 1700000000.500)"));
  CHECK(has_line(text, R"(mongolock_last_run_duration_seconds{name="nightly"} 12.250)"));
  CHECK(has_line(text, R"(mongolock_last_run_exit_code{name="nightly"} 0)"));
  CHECK(has_line(text, R"(mongolock_last_success_timestamp_seconds{name="nightly"} 1700000000.500)"));
  CHECK(text.ends_with("\n"));
}

TEST_CASE("Metrics continue the previous file: counters add up, other names stay, a skip changes no gauge") {
  auto text = metrics_text("", {metrics_of("a", Outcome::ok, 100, 1, 0), metrics_of("b", Outcome::failed, 100, 2, 3)});
  text = metrics_text(text, {metrics_of("a", Outcome::failed, 200, 5, 1)});
  text = metrics_text(text, {metrics_of("a", Outcome::skipped, 300, std::nullopt, 75)});
  CHECK(has_line(text, R"(mongolock_runs_total{name="a",outcome="ok"} 1)"));
  CHECK(has_line(text, R"(mongolock_runs_total{name="a",outcome="failed"} 1)"));
  CHECK(has_line(text, R"(mongolock_runs_total{name="a",outcome="skipped"} 1)"));
  CHECK(has_line(text, R"(mongolock_last_run_exit_code{name="a"} 1)"));
  CHECK(has_line(text, R"(mongolock_last_run_timestamp_seconds{name="a"} 200.000)"));
  CHECK(has_line(text, R"(mongolock_last_success_timestamp_seconds{name="a"} 100.000)"));
  CHECK(has_line(text, R"(mongolock_runs_total{name="b",outcome="failed"} 1)"));
  CHECK(has_line(text, R"(mongolock_last_run_exit_code{name="b"} 3)"));
  CHECK(text.find(R"(mongolock_last_success_timestamp_seconds{name="b"})") == std::string::npos);
  // Without a duration (not started), the duration gauge is 0.
  text = metrics_text(text, {metrics_of("a", Outcome::error, 400, std::nullopt, 69)});
  CHECK(has_line(text, R"(mongolock_last_run_duration_seconds{name="a"} 0.000)"));
}

TEST_CASE("Metrics escape label values and drop what they cannot read") {
  const auto text = metrics_text("", {metrics_of(R"(we"ird\name)", Outcome::ok, 1, 1, 0)});
  CHECK(has_line(text, R"(mongolock_runs_total{name="we\"ird\\name",outcome="ok"} 1)"));
  // The escaped name reads back as the same name.
  const auto again = metrics_text(text, {metrics_of(R"(we"ird\name)", Outcome::ok, 2, 1, 0)});
  CHECK(has_line(again, R"(mongolock_runs_total{name="we\"ird\\name",outcome="ok"} 2)"));
  const auto junk = metrics_text("garbage line\nmongolock_runs_total{name=\"x\",outcome=\"ok\"} NaN\n"
                                 "mongolock_runs_total{name=\"x\",outcome=\"bogus\"} 4\nother_metric{name=\"y\"} 1\n"
                                 "mongolock_runs_total{name=\"x\",outcome=\"ok\"\n",
                                 {});
  CHECK(junk.find("name=\"x\"") == std::string::npos);
  CHECK(junk.find("other_metric") == std::string::npos);
  CHECK(junk.find("bogus") == std::string::npos);
}

TEST_CASE("A metrics path must name a file in a directory that exists") {
  CHECK_THROWS_AS(validate_metrics_path(""), Error);
  CHECK_THROWS_AS(validate_metrics_path("/nonexistent-dir/x.prom"), Error);
  CHECK_THROWS_AS(validate_metrics_path("/tmp"), Error);
  CHECK_NOTHROW(validate_metrics_path("/tmp/mongolock-unit.prom"));
  CHECK_NOTHROW(validate_metrics_path("relative.prom"));
}

TEST_SUITE_END();
