#include <doctest/doctest.h>

#include <mongolock/lease_book.hpp>

#include <chrono>
#include <vector>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

// --ttl 10s --renew-interval 2s --renew-deadline 6s --kill-grace 3s; local times as offsets from t0.
const LeaseTiming timing{Millis(10000), Millis(2000), Millis(6000), Millis(3000)};
const LocalTime t0 = LocalTime{} + std::chrono::hours(1);
LocalTime at(Millis offset) { return t0 + offset; }

} // namespace

TEST_CASE("LeaseBook: a confirmed renewal moves the deadline and the next renewal") {
  LeaseBook book({at(0ms)}, timing);
  CHECK(book.state(0) == LeaseBook::State::held);
  CHECK(book.deadline() == at(6000ms));
  CHECK(book.next_renewal() == at(2000ms));
  CHECK(book.confirmed(0, at(2000ms), at(2005ms)) == LeaseBook::Confirmed::counted);
  CHECK(book.deadline() == at(8000ms));
  CHECK(book.next_renewal() == at(4000ms));
}

TEST_CASE("LeaseBook: the run's deadline and next renewal are the earliest over its locks") {
  LeaseBook book({at(0ms), at(300ms)}, timing);
  CHECK(book.deadline() == at(6000ms));
  (void)book.confirmed(0, at(2000ms), at(2001ms));
  CHECK(book.deadline() == at(6300ms));
  CHECK(book.next_renewal() == at(2300ms));
}

TEST_CASE("LeaseBook: a renewal whose outcome is unknown pins the lease to its send time") {
  LeaseBook book({at(0ms)}, timing);
  (void)book.confirmed(0, at(2000ms), at(2001ms));
  book.unknown(0, at(4000ms), Millis(1000)); // its reply lost: the server may still write it
  CHECK(book.state(0) == LeaseBook::State::pinned);
  CHECK(book.deadline() == at(8000ms)); // still from the confirmed one (earlier than the unknown one)
  // A newer renewal is confirmed: without the pin the deadline would be 4.5 + 6 s; the unknown renewal
  // (sent at 4 s) may still be written after it, so the lease counts from 4 s.
  CHECK(book.confirmed(0, at(4500ms), at(4510ms)) == LeaseBook::Confirmed::clearing);
  CHECK(book.state(0) == LeaseBook::State::clearing);
  CHECK(book.basis(0) == at(4000ms));
  CHECK(book.deadline() == at(10000ms));
  // It can no longer be written 1 s (its server bound) + 1 s after that confirmation: renew then.
  CHECK(book.clear_after(0) == at(6510ms));
  CHECK(book.next_renewal() == at(6500ms)); // the interval comes first here
  // A renewal sent before the clearing time, confirmed, does not lift the pin.
  CHECK(book.confirmed(0, at(6500ms), at(6505ms)) == LeaseBook::Confirmed::clearing);
  CHECK(book.deadline() == at(10000ms));
  CHECK(book.next_renewal() == at(6510ms));
  // One sent at or after it does.
  CHECK(book.confirmed(0, at(6510ms), at(6520ms)) == LeaseBook::Confirmed::lifted);
  CHECK(book.state(0) == LeaseBook::State::held);
  CHECK(book.deadline() == at(12510ms));
}

TEST_CASE("LeaseBook: with the pin, the job stops before the rolled-back expiry; without it, it would not") {
  // The fault case of #19's residual: renewal R1 at S (unknown), R2 at S + 3 s confirmed, R1 written over
  // R2 on the server (the document expires at S + ttl), then a partition: nothing more is confirmed.
  const auto s = at(2000ms);
  LeaseBook book({at(0ms)}, timing);
  book.unknown(0, s, Millis(1000));
  (void)book.confirmed(0, s + 3000ms, s + 3005ms);
  const auto job_dead_by = book.deadline() + timing.kill_grace;
  const auto document_expires = s + timing.ttl;
  CHECK(job_dead_by < document_expires);
  // Counting from the confirmed renewal alone (the rule before), the job would outlive the document.
  CHECK(s + 3000ms + timing.renew_deadline + timing.kill_grace > document_expires);
}

TEST_CASE("LeaseBook: a second unknown renewal while clearing restarts the clearing") {
  LeaseBook book({at(0ms)}, timing);
  book.unknown(0, at(2000ms), Millis(1000));
  (void)book.confirmed(0, at(2500ms), at(2510ms));
  CHECK(book.state(0) == LeaseBook::State::clearing);
  book.unknown(0, at(4510ms), Millis(1500));
  CHECK(book.state(0) == LeaseBook::State::pinned);
  CHECK(book.basis(0) == at(2000ms)); // the earliest unknown one still counts
  CHECK_FALSE(book.clear_after(0));
  CHECK(book.confirmed(0, at(5000ms), at(5010ms)) == LeaseBook::Confirmed::clearing);
  CHECK(book.clear_after(0) == at(7510ms)); // the longest bound (1.5 s) + 1 s
  CHECK(book.deadline() == at(8000ms));
}

TEST_CASE("LeaseBook: the server bound is a quarter of the renew interval, at least 1 s, at most the call") {
  LeaseBook book({at(0ms)}, timing);
  CHECK(book.server_bound(Millis(10000)) == Millis(1000));
  CHECK(book.server_bound(Millis(300)) == Millis(300));
  CHECK(book.server_bound(Millis(0)) == Millis(1));
  LeaseBook slow({at(0ms)}, LeaseTiming{Millis(60000), Millis(20000), Millis(40000), Millis(5000)});
  CHECK(slow.server_bound(Millis(60000)) == Millis(5000));
}

TEST_CASE("LeaseBook: a renewal call is abandoned in time for one more attempt before the deadline") {
  // Renew interval 2 s: the reserve for the next attempt is 250 ms.
  LeaseBook book({at(0ms)}, timing);
  CHECK(book.retry_reserve() == Millis(250));
  // Sent at the renewal time, 4 s before the deadline: abandoned 250 ms before it.
  CHECK(book.call_bound(Millis(4000)) == Millis(3750));
  CHECK(book.call_bound(Millis(500)) == Millis(250));
  // Less than two reserves left: the last attempt gets the time left + kill grace + 500 ms.
  CHECK(book.call_bound(Millis(499)) == Millis(499 + 3000 + 500));
  CHECK(book.call_bound(Millis(0)) == Millis(3500));
  // The default TTL 30 s (interval 10 s, deadline 20 s, kill grace 5 s): a renewal sent at 10 s is
  // abandoned at 18.75 s, and the retry sent then still has 1.25 s (issue 27: it hung until 25.5 s).
  LeaseBook deflt({at(0ms)}, LeaseTiming{Millis(30000), Millis(10000), Millis(20000), Millis(5000)});
  CHECK(deflt.call_bound(Millis(10000)) == Millis(8750));
  CHECK(deflt.call_bound(Millis(1250)) == Millis(1250 + 5000 + 500));
  // A tiny interval: the reserve is at least 100 ms.
  LeaseBook tiny({at(0ms)}, LeaseTiming{Millis(1000), Millis(300), Millis(600), Millis(200)});
  CHECK(tiny.retry_reserve() == Millis(100));
}
