#include "config.hpp"

#include <mongolock/config_text.hpp>
#include <mongolock/error.hpp>
#include <mongolock/file_read.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <sstream>

namespace mongolock {

namespace {

// The keys a config file may not set (besides the options that are not configurable).
bool never_configurable(const std::string& name) {
  return name == "help" || name == "h" || name == "version" || name == "config";
}

// The option a key names in `app`: by long name, or by short name for a one-letter key; nullptr when
// there is none or it cannot come from a config file.
CLI::Option* option_for(CLI::App& app, const std::string& name) {
  if (name.empty() || never_configurable(name)) return nullptr;
  CLI::Option* option = app.get_option_no_throw("--" + name);
  if (option == nullptr && name.size() == 1) option = app.get_option_no_throw("-" + name);
  return option;
}

// The keys of `app` (long names of its configurable options), for suggestions.
std::vector<std::string> keys_of(const CLI::App& app) {
  std::vector<std::string> keys;
  for (const auto* option : app.get_options()) {
    if (!option->get_configurable()) continue;
    for (const auto& name : option->get_lnames()) {
      if (!never_configurable(name)) keys.push_back(name);
    }
  }
  return keys;
}

std::string section_of(const CLI::App& app) {
  return app.get_parent() == nullptr ? "before any section" : fmt::format("in [{}]", app.get_name());
}

// The error for a key that `target` does not have: where else it would belong, or the likely typo.
Error unknown_key(App& app, CLI::App& target, const std::string& where, const CLI::ConfigItem& item) {
  const auto& name = item.name;
  std::vector<std::string> places;
  if (&target != &app && option_for(app, name) != nullptr) places.push_back("before any section (a global option)");
  std::vector<std::string> sections;
  for (auto* sub : app.get_subcommands({})) {
    if (sub != &target && option_for(*sub, name) != nullptr) sections.push_back(fmt::format("[{}]", sub->get_name()));
  }
  if (!sections.empty()) {
    const auto last = sections.back();
    sections.pop_back();
    places.push_back(fmt::format("under {}{}{}", fmt::join(sections, ", "), sections.empty() ? "" : " or ", last));
  }
  if (!places.empty()) {
    return usage_error(fmt::format("{}: key '{}' does not belong {}; set it {}", where, name, section_of(target),
                                   fmt::join(places, " or ")));
  }
  const auto suggestion = closest_word(name, keys_of(target));
  return usage_error(fmt::format("{}: unknown key '{}' {}{}", where, name, section_of(target),
                                 suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion)));
}

// The subcommand a section names, or nullptr.
CLI::App* subcommand_for(App& app, const std::vector<std::string>& parents) {
  if (parents.size() != 1) return nullptr;
  for (auto* sub : app.get_subcommands({})) {
    if (sub->get_name() == parents.front()) return sub;
  }
  return nullptr;
}

} // namespace

std::vector<LocatedItem> parse_config_text(std::string_view text, std::string_view file) {
  const auto lines = scan_config_text(text, file);
  // Each line's item name as CLI11 makes it (sections and dotted keys become parents, quotes go).
  std::map<std::string, std::size_t> line_of;
  for (const auto& line : lines) {
    std::string name = line.key;
    if (name.find('.') == std::string::npos) CLI::detail::remove_quotes(name);
    auto parents = CLI::detail::generate_parents(line.section.empty() ? "default" : line.section, name, '.');
    parents.push_back(name);
    const auto fullname = CLI::detail::join(parents, ".");
    const auto [it, inserted] = line_of.emplace(fullname, line.number);
    if (!inserted) {
      throw usage_error(fmt::format("{}:{}: key '{}' is set again (first on line {}); set it once", file, line.number,
                                    fullname, it->second));
    }
  }
  // The line of each "[section]" header, so that a section is checked even when it holds no key.
  std::map<std::string, std::size_t> header_line;
  std::size_t number = 0;
  for (std::size_t start = 0; start <= text.size();) {
    const auto end = std::min(text.find('\n', start), text.size());
    std::string line(text.substr(start, end - start));
    CLI::detail::trim(line);
    ++number;
    if (line.size() > 2 && line.front() == '[' && line.back() == ']') {
      header_line.emplace(line.substr(1, line.size() - 2), number); // as CLI11 names it, spaces and all
    }
    start = end + 1;
  }
  std::istringstream input{std::string(text)};
  std::vector<LocatedItem> located;
  for (auto& item : CLI::ConfigTOML().from_config(input)) {
    if (item.name == "--" && item.inputs.empty()) continue; // section close
    if (item.name == "++" && item.inputs.empty()) {
      // A section opens: kept (with its header's line) so that an unknown one is refused, keys or not.
      const auto section = CLI::detail::join(item.parents, ".");
      auto it = header_line.find(section);
      if (it == header_line.end()) { // a parent of a dotted header ([a.b] opens a, then a.b)
        it = std::find_if(header_line.begin(), header_line.end(),
                          [&](const auto& h) { return h.first.starts_with(section + "."); });
      }
      located.push_back(LocatedItem{std::move(item), it == header_line.end() ? 0 : it->second});
      continue;
    }
    const auto it = line_of.find(item.fullname());
    located.push_back(LocatedItem{std::move(item), it == line_of.end() ? 0 : it->second});
  }
  return located;
}

UriLayer apply_config_file(App& app, const std::string& path, std::string_view what, Millis timeout,
                           std::map<const CLI::Option*, std::string>& lines) {
  const auto text = read_bounded_file(path, what, FileKind::regular, timeout, FileTrust::private_to_user);
  UriLayer uri;
  for (const auto& [item, line] : parse_config_text(text, path)) {
    const auto where = line == 0 ? path : fmt::format("{}:{}", path, line);
    if (item.parents.empty() && (item.name == "uri" || item.name == "uri-file")) {
      if (item.inputs.size() != 1) throw usage_error(fmt::format("{}: '{}' takes one value", where, item.name));
      (item.name == "uri" ? uri.uri : uri.uri_file) = item.inputs.front();
      continue;
    }
    const bool header = item.name == "++" && item.inputs.empty();
    CLI::App* target = item.parents.empty() ? &app : subcommand_for(app, item.parents);
    if (target == nullptr) {
      std::vector<std::string> sections;
      for (const auto* sub : app.get_subcommands({}))
        sections.push_back(sub->get_name());
      const auto section = CLI::detail::join(item.parents, ".");
      const auto suggestion = closest_word(section, sections);
      throw usage_error(fmt::format("{}: unknown section [{}]{}; the sections are [{}]{}", where, section,
                                    header ? std::string() : fmt::format(" of key '{}'", item.name),
                                    fmt::join(sections, "], ["),
                                    suggestion.empty() ? "" : fmt::format(" (did you mean [{}]?)", suggestion)));
    }
    if (header) continue; // a known section, opened
    const auto* option = option_for(*target, item.name);
    if (option == nullptr) throw unknown_key(app, *target, where, item);
    if (!option->get_configurable()) {
      throw usage_error(fmt::format("{}: '{}' cannot be set in a config file; give {} on the command line", where,
                                    item.name, option->get_name()));
    }
    lines.emplace(option, where);
    try {
      app.apply_config_item(item);
    } catch (const CLI::Error& e) {
      throw usage_error(fmt::format("{}: {}: {}", where, item.fullname(), e.what()));
    }
  }
  return uri;
}

} // namespace mongolock
