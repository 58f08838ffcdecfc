#include <mongolock/config_text.hpp>
#include <mongolock/error.hpp>
#include <mongolock/text.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace mongolock {

namespace {

// White space as CLI11 trims it (std::isspace in the C locale).
constexpr std::string_view k_space = " \t\n\v\f\r";

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(k_space);
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(k_space);
  return s.substr(first, last - first + 1);
}

// Checks the characters of one line (without its '\n'); `number` is its line number.
void check_characters(std::string_view line, std::size_t number, std::string_view file) {
  for (std::size_t i = 0; i < line.size();) {
    char32_t code_point = 0;
    const auto len = decode_utf8(line, i, code_point);
    if (len == 0) {
      throw usage_error(fmt::format("{}:{}: byte 0x{:02x} at column {} is not valid UTF-8; a config file is text", file,
                                    number, static_cast<unsigned char>(line[i]), i + 1));
    }
    const bool allowed = code_point == '\t' || (code_point == '\r' && i + 1 == line.size());
    if (is_control(code_point) && !allowed) {
      throw usage_error(fmt::format("{}:{}: control character 0x{:02x} at column {}; a config file is text", file,
                                    number, static_cast<std::uint32_t>(code_point), i + 1));
    }
    i += len;
  }
}

} // namespace

std::vector<ConfigLine> scan_config_text(std::string_view text, std::string_view file) {
  std::vector<ConfigLine> lines;
  std::string section;
  std::size_t number = 0;
  for (std::size_t start = 0; start < text.size();) {
    auto end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const auto raw = text.substr(start, end - start);
    start = end + 1;
    ++number;
    check_characters(raw, number, file);
    const auto line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.size() < 3) {
      throw usage_error(
          fmt::format("{}:{}: '{}' is not a 'key = value' line, a section or a comment", file, number, line));
    }
    if (line.front() == '[' && line.back() == ']') {
      auto name = line.substr(1, line.size() - 2);
      if (name.size() > 1 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
      section = std::string(name);
      continue;
    }
    const auto equals = line.find('=');
    std::string_view key;
    if (equals == std::string_view::npos) {
      key = trim(line.substr(0, line.find('#')));
    } else {
      key = trim(line.substr(0, equals));
      auto value = line.substr(equals + 1);
      value = trim(value.substr(0, value.find('#')));
      if (!value.empty() && value.front() == '[') {
        throw usage_error(fmt::format("{}:{}: '{}' is set to a list; no option takes one", file, number, key));
      }
    }
    lines.push_back(ConfigLine{number, section, std::string(key)});
  }
  return lines;
}

std::string closest_word(std::string_view word, const std::vector<std::string>& candidates) {
  // Optimal string alignment distance, capped: words longer than any key are never close.
  const auto distance = [](std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i)
      d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j)
      d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
          d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
    return d[a.size()][b.size()];
  };
  constexpr std::size_t k_max_edits = 2;
  if (word.size() > 64) return {};
  std::string best;
  std::size_t best_distance = k_max_edits + 1;
  for (const auto& candidate : candidates) {
    const auto dist = distance(word, candidate);
    if (dist < best_distance && dist < word.size()) {
      best = candidate;
      best_distance = dist;
    }
  }
  return best;
}

} // namespace mongolock
