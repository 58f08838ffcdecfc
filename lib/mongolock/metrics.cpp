#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>
#include <mongolock/file_read.hpp>
#include <mongolock/metrics.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace mongolock {

namespace {

// The series of one lock name.
struct NameSeries {
  std::map<std::string, double> runs_total; // by outcome name
  std::optional<double> last_run_timestamp;
  std::optional<double> last_run_duration;
  std::optional<double> last_run_exit_code;
  std::optional<double> last_run_wait;
  std::optional<double> last_success_timestamp;
};

// The wait for the directory's flock: polled (LOCK_NB), at most k_metrics_lock_wait in all.
constexpr Millis k_metrics_lock_poll{50};
constexpr Millis k_metrics_lock_wait{2000};

constexpr std::string_view k_runs_total = "mongolock_runs_total";
constexpr std::string_view k_last_run_timestamp = "mongolock_last_run_timestamp_seconds";
constexpr std::string_view k_last_run_duration = "mongolock_last_run_duration_seconds";
constexpr std::string_view k_last_run_wait = "mongolock_last_run_wait_seconds";
constexpr std::string_view k_last_run_exit_code = "mongolock_last_run_exit_code";
constexpr std::string_view k_last_success_timestamp = "mongolock_last_success_timestamp_seconds";

bool known_outcome(std::string_view name) {
  for (const auto outcome : all_outcomes()) {
    if (outcome_name(outcome) == name) return true;
  }
  return false;
}

// A label value as the text format writes it: backslash, double quote and line feed escaped.
std::string escape_label(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Reads `metric{k="v",...} value` of the text format; false for anything else (comments, other syntax).
bool parse_sample(std::string_view line, std::string& metric, std::map<std::string, std::string>& labels,
                  double& value) {
  const auto brace = line.find('{');
  if (brace == std::string_view::npos) return false;
  metric = std::string(line.substr(0, brace));
  std::size_t i = brace + 1;
  labels.clear();
  while (i < line.size() && line[i] != '}') {
    const auto equals = line.find("=\"", i);
    if (equals == std::string_view::npos) return false;
    const std::string key(line.substr(i, equals - i));
    std::string label_value;
    i = equals + 2;
    for (; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        ++i;
        label_value += line[i] == 'n' ? '\n' : line[i];
      } else {
        label_value += line[i];
      }
    }
    if (i >= line.size()) return false;
    ++i; // the closing quote
    labels[key] = std::move(label_value);
    if (i < line.size() && line[i] == ',') ++i;
  }
  if (i >= line.size()) return false;
  const std::string number(line.substr(i + 1));
  char* end = nullptr;
  errno = 0;
  value = std::strtod(number.c_str(), &end);
  return errno == 0 && end != number.c_str() && std::isfinite(value);
}

std::map<std::string, NameSeries> parse_metrics(const std::string& text) {
  std::map<std::string, NameSeries> out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    std::string metric;
    std::map<std::string, std::string> labels;
    double value = 0;
    if (line.empty() || line.front() == '#' || !parse_sample(line, metric, labels, value)) continue;
    const auto name = labels.find("name");
    if (name == labels.end() || name->second.empty()) continue;
    auto& series = out[name->second];
    if (metric == k_runs_total) {
      const auto outcome = labels.find("outcome");
      if (outcome != labels.end() && known_outcome(outcome->second) && value >= 0) {
        series.runs_total[outcome->second] = value;
      }
    } else if (metric == k_last_run_timestamp) {
      series.last_run_timestamp = value;
    } else if (metric == k_last_run_duration) {
      series.last_run_duration = value;
    } else if (metric == k_last_run_exit_code) {
      series.last_run_exit_code = value;
    } else if (metric == k_last_run_wait) {
      series.last_run_wait = value;
    } else if (metric == k_last_success_timestamp) {
      series.last_success_timestamp = value;
    }
  }
  std::erase_if(out, [](const auto& entry) {
    const auto& s = entry.second;
    return s.runs_total.empty() && !s.last_run_timestamp && !s.last_success_timestamp;
  });
  return out;
}

// One gauge family: HELP, TYPE and a sample per name that has it.
template <typename Field>
void write_gauge(std::string& out, std::string_view metric, std::string_view help,
                 const std::map<std::string, NameSeries>& all, Field field, const char* format) {
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", metric, help, metric);
  for (const auto& [name, series] : all) {
    if (const auto& value = series.*field) {
      out +=
          fmt::format("{}{{name=\"{}\"}} {}\n", metric, escape_label(name), fmt::format(fmt::runtime(format), *value));
    }
  }
}

// The directory a file named by `path` is in ("." for a bare name).
std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

void validate_metrics_path(const std::string& path) {
  if (path.empty())
    throw usage_error("--metrics-file is empty; give a file such as /var/lib/node_exporter/mongolock.prom");
  const auto directory = directory_of(path);
  struct stat st{};
  if (stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw usage_error(fmt::format("--metrics-file '{}': its directory '{}' does not exist; create it (node_exporter's "
                                  "--collector.textfile.directory)",
                                  path, directory));
  }
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw usage_error(
        fmt::format("--metrics-file '{}' is a directory; name a file in it, such as {}/mongolock.prom", path, path));
  }
}

std::string metrics_text(const std::string& previous, const std::vector<RunMetrics>& runs) {
  auto all = parse_metrics(previous);
  for (const auto& run : runs) {
    auto& series = all[run.name];
    series.runs_total[std::string(outcome_name(run.outcome))] += 1;
    if (run.outcome == Outcome::skipped || run.outcome == Outcome::not_due) continue;
    series.last_run_timestamp = run.ended_at;
    series.last_run_duration = run.duration.value_or(0);
    series.last_run_exit_code = run.exit_code;
    series.last_run_wait = run.waited;
    if (run.outcome == Outcome::ok) series.last_success_timestamp = run.ended_at;
  }
  std::string out;
  out += fmt::format("# HELP {} Runs of mongolock run, by lock name and outcome.\n# TYPE {} counter\n", k_runs_total,
                     k_runs_total);
  for (const auto& [name, series] : all) {
    for (const auto outcome : all_outcomes()) {
      const auto found = series.runs_total.find(std::string(outcome_name(outcome)));
      const double value = found == series.runs_total.end() ? 0 : found->second;
      out += fmt::format("{}{{name=\"{}\",outcome=\"{}\"}} {:.0f}\n", k_runs_total, escape_label(name),
                         outcome_name(outcome), value);
    }
  }
  write_gauge(out, k_last_run_timestamp, "When the last run that was not skipped ended, Unix time.", all,
              &NameSeries::last_run_timestamp, "{:.3f}");
  write_gauge(out, k_last_run_duration, "How long the command of that run ran.", all, &NameSeries::last_run_duration,
              "{:.3f}");
  write_gauge(out, k_last_run_exit_code, "The exit status of that run.", all, &NameSeries::last_run_exit_code,
              "{:.0f}");
  write_gauge(out, k_last_run_wait, "How long that run waited for its locks.", all, &NameSeries::last_run_wait,
              "{:.3f}");
  write_gauge(out, k_last_success_timestamp, "When the last run with outcome ok ended, Unix time.", all,
              &NameSeries::last_success_timestamp, "{:.3f}");
  return out;
}

void write_metrics_file(const std::string& path, const std::vector<RunMetrics>& runs) {
  const auto directory = directory_of(path);
  const auto fail = [&](std::string_view what) {
    return Error(k_exit_internal, fmt::format("metrics file '{}': {}: {}", path, what, std::strerror(errno)));
  };
  const int dir_fd = open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) throw fail("cannot open its directory");
  struct DirGuard {
    int fd;
    ~DirGuard() { close(fd); } // also drops the flock
  } guard{dir_fd};
  // Anyone who can open the directory can lock it: the wait is bounded, then the file is not written.
  for (int tries = 0; flock(dir_fd, LOCK_EX | LOCK_NB) != 0; ++tries) {
    if (errno != EWOULDBLOCK && errno != EINTR) throw fail("cannot lock its directory");
    if (tries * k_metrics_lock_poll >= k_metrics_lock_wait) {
      throw Error(k_exit_internal, fmt::format("metrics file '{}' not written: another process has held the lock "
                                               "(flock) on its directory for {}",
                                               path, format_duration(k_metrics_lock_wait)));
    }
    std::this_thread::sleep_for(k_metrics_lock_poll);
  }
  std::string previous;
  struct stat st{};
  if (stat(path.c_str(), &st) == 0) {
    try {
      previous =
          read_bounded_file(path, "metrics file", FileKind::regular, Millis(1000), FileTrust::any, k_max_metrics_bytes);
    } catch (const Error& e) {
      // Never a reset: other names' series and the counters stay as they are.
      throw Error(k_exit_internal, fmt::format("{}; not written, it is kept as it was", e.what()));
    }
  }
  const auto text = metrics_text(previous, runs);
  auto temporary = path + ".XXXXXX"; // not *.prom: the collector skips it
  const int fd = mkstemp(temporary.data());
  if (fd < 0) throw fail("cannot create a temporary file next to it");
  bool written = fchmod(fd, 0644) == 0;
  std::size_t done = 0;
  while (written && done < text.size()) {
    const auto n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    written = n > 0;
    if (written) done += static_cast<std::size_t>(n);
  }
  written = written && fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!written || rename(temporary.c_str(), path.c_str()) != 0) {
    const int cause = written ? errno : saved;
    unlink(temporary.c_str());
    errno = cause;
    throw fail(written ? "cannot rename the temporary file over it" : "cannot write the temporary file");
  }
  fsync(dir_fd);
}

} // namespace mongolock
