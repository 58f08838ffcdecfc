// The config file: read with a bound, parsed by CLI11, applied to the options below the command line and
// the environment, every error naming the file, the line and the key.
#pragma once

#include <mongolock/duration.hpp>
#include <mongolock/uri.hpp>

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mongolock {

// CLI11's App, able to apply one config item after the command line and the environment were parsed,
// the way CLI11 applies a config file: only to an option that has no value yet (so the command line and
// the environment win), with the option's conversion and checks. Uses CLI11's own protected
// _parse_single_config() and _process_callbacks() (CLI11 2.1, Debian's libcli11-dev): CLI11 has no public
// call that applies config items next to a command line, and its set_config() would open the file itself,
// unbounded and before --help/--version.
class App : public CLI::App {
public:
  using CLI::App::App;
  // Applies `item` to its option (of this app, or of the subcommand its parent names) and runs the
  // option's callback. Throws CLI::Error (conversion, validation) as parsing would.
  void apply_config_item(const CLI::ConfigItem& item) {
    _parse_single_config(item);
    _process_callbacks();
  }
};

// One item of a config file as CLI11 parsed it, with the number of the line that sets it (0: unknown).
struct LocatedItem {
  CLI::ConfigItem item;
  std::size_t line = 0;
};

// Parses the text of config file `file` (named in errors) with CLI11's TOML reader, after
// scan_config_text() has checked it, and locates each item's line. Section markers are left out.
// Throws Error (exit 64) "FILE:LINE: ..." for what scan_config_text() refuses and for a key set twice.
[[nodiscard]] std::vector<LocatedItem> parse_config_text(std::string_view text, std::string_view file);

// Reads the config file at `path` (read_bounded_file(): a regular file of at most 64 KiB, not writable by
// others nor owned by another user than the reader and root (FileTrust::private_to_user), within
// `timeout` ms; `what` names its source in errors, e.g. "config file (MONGOLOCK_CONFIG)") and applies
// its items to `app` (App::apply_config_item()), except uri and uri-file, which it returns: the URI's
// config file layer (choose_uri_source()). Throws Error (exit 64) "FILE:LINE: ..." naming the key for an
// unknown key or section (with the likely meant one), a key that a config file may not set, and a value
// the option refuses.
// Records in `lines` the "FILE:LINE" of each option it applied, for errors found after parsing (a
// duration's format) to name the line.
UriLayer apply_config_file(App& app, const std::string& path, std::string_view what, Millis timeout,
                           std::map<const CLI::Option*, std::string>& lines);

} // namespace mongolock
