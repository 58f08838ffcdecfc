// mongolock-sim: runs seeded schedules of the lock protocol on the in-memory store (world.hpp) and checks
// its invariants after every step. Usage (scripts/simulate wraps it):
//   mongolock-sim [--seed N] [--schedules K] [--semantics mongodb|ferretdb] [--plant BUG] [--expect-violation]
//                 [--edge] [--multi] [--same-host] [--operator] [--strict-steps] [--strict-drift] [--trace]
// Schedule i runs seed N + i (default: seeds 1..10000; --seed N alone: that one schedule, as a replay,
// with its whole trace). Exit 0 when every schedule kept the invariants; 1 on the first violation, after
// its seed, the last steps and the command that replays it; 2 on a usage error. With --expect-violation
// (the planted-bug tests) the other way round: 0 once a violation was found. --trace prints every step;
// --edge draws only schedules at the edge of the accepted timings (short TTL, late renew deadline, a grace
// of milliseconds, many faults); --multi only schedules of several names per run (run A B -- CMD: acquire_all);
// --same-host only schedules whose clients share one host (the instant takeover of a provably dead holder);
// --operator only schedules with an operator's renew/release commands from outside the runs (Config::operator_every);
// --strict-steps: a violation after a step of the server's clock beyond --grace fails too (else it is the man
// page's limit, counted as expected); --strict-drift: the same for a client's clock rate drifting beyond --grace.
#include "world.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

struct Args {
  std::uint64_t seed = 1;
  long schedules = 10'000;
  bool seed_given = false;
  bool schedules_given = false;
  std::optional<mongolock::WriteSemantics> semantics;
  std::string semantics_text;
  sim::Plant plant = sim::Plant::none;
  bool expect_violation = false;
  bool trace = false;
  bool edge = false;
  bool multi = false;
  bool same_host = false;
  bool operators = false;
  bool strict_steps = false;
  bool strict_drift = false;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--seed") {
      args.seed = std::stoull(value());
      args.seed_given = true;
    } else if (arg == "--schedules") {
      args.schedules = std::stol(value());
      args.schedules_given = true;
    } else if (arg == "--semantics") {
      args.semantics_text = value();
      if (args.semantics_text == "mongodb")
        args.semantics = mongolock::WriteSemantics::mongodb;
      else if (args.semantics_text == "ferretdb")
        args.semantics = mongolock::WriteSemantics::ferretdb_v1;
      else
        throw std::invalid_argument("--semantics is mongodb or ferretdb");
    } else if (arg == "--plant") {
      args.plant = sim::parse_plant(value());
    } else if (arg == "--expect-violation") {
      args.expect_violation = true;
    } else if (arg == "--edge") {
      args.edge = true;
    } else if (arg == "--multi") {
      args.multi = true;
    } else if (arg == "--same-host") {
      args.same_host = true;
    } else if (arg == "--operator") {
      args.operators = true;
    } else if (arg == "--strict-steps") {
      args.strict_steps = true;
    } else if (arg == "--strict-drift") {
      args.strict_drift = true;
    } else if (arg == "--trace") {
      args.trace = true;
    } else {
      throw std::invalid_argument("unknown argument '" + arg + "'");
    }
  }
  if (args.seed_given && !args.schedules_given) args.schedules = 1; // a replay
  if (args.schedules < 1) throw std::invalid_argument("--schedules must be at least 1");
  return args;
}

std::string replay_command(const Args& args, std::uint64_t seed) {
  auto command = fmt::format("scripts/simulate --seed {}", seed);
  if (args.semantics) command += " --semantics " + args.semantics_text;
  if (args.plant != sim::Plant::none) command += fmt::format(" --plant {}", sim::plant_name(args.plant));
  if (args.edge) command += " --edge";
  if (args.multi) command += " --multi";
  if (args.same_host) command += " --same-host";
  if (args.operators) command += " --operator";
  if (args.strict_steps) command += " --strict-steps";
  if (args.strict_drift) command += " --strict-drift";
  return command;
}

} // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "mongolock-sim: error: {}\n", e.what());
    return 2;
  }
  const auto started = std::chrono::steady_clock::now();
  std::map<std::string, long> totals;
  for (long i = 0; i < args.schedules; ++i) {
    const auto seed = args.seed + static_cast<std::uint64_t>(i);
    sim::World world(seed, args.semantics, args.plant, args.edge, args.multi, args.same_host, args.operators);
    if (args.trace || args.schedules == 1) world.keep_trace();
    if (args.strict_steps) world.strict_steps();
    if (args.strict_drift) world.strict_drift();
    const auto violation = world.run();
    for (const auto& [what, n] : world.counts())
      totals[what] += n;
    if (args.trace) fmt::print("schedule {}:\n{}", seed, world.trace());
    if (violation.empty()) continue;
    fmt::print("mongolock-sim: invariant violated in schedule {} (plant: {}): {}\nlast steps:\n{}replay: {}\n", seed,
               sim::plant_name(args.plant), violation, world.trace(), replay_command(args, seed));
    if (args.expect_violation) {
      if (args.plant == sim::Plant::none) {
        fmt::print("mongolock-sim: the expected violation came after {} schedules\n", i + 1);
      } else {
        fmt::print("mongolock-sim: the planted bug '{}' was caught after {} schedules\n", sim::plant_name(args.plant),
                   i + 1);
      }
      return 0;
    }
    return 1;
  }
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string summary;
  for (const auto& [what, n] : totals)
    summary += fmt::format(", {} {}", n, what);
  fmt::print("mongolock-sim: {} schedules (seeds {}..{}) kept every invariant in {:.1f} s{}\n", args.schedules,
             args.seed, args.seed + static_cast<std::uint64_t>(args.schedules) - 1, seconds, summary);
  if (args.expect_violation) {
    fmt::print("mongolock-sim: error: {} was not caught\n",
               args.plant == sim::Plant::none ? std::string("the expected violation")
                                              : fmt::format("the planted bug '{}'", sim::plant_name(args.plant)));
    return 1;
  }
  return 0;
}
