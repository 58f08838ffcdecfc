// Shell completion scripts for bash, zsh and fish, generated from the CLI11 definition of mongolock's
// command line, so that the options, commands and values they offer are always those the program takes.
#pragma once

#include <CLI/CLI.hpp>

#include <set>
#include <string>
#include <string_view>

namespace mongolock {

// The shells completion_script() knows, for the `completion` command's check: bash, zsh, fish.
[[nodiscard]] const std::vector<std::string>& completion_shells();

// The completion script of `app` (and its subcommands) for `shell` ("bash", "zsh" or "fish"), as the
// shell's completion loader expects it: bash `complete -F`, zsh `#compdef`, fish `complete -c`. Derived
// from the definition: every command and option with its help text; options whose value is a set
// (CLI::IsMember, e.g. --on-lost) complete to its members; options whose type name is PATH complete to
// files; the NAME of the commands in `lock_name_commands` completes to the held locks' names, which the
// script asks the server for with `mongolock --connect-timeout 1s --quiet list --names`, silent on any
// failure. Throws Error (exit 64) for another shell.
[[nodiscard]] std::string completion_script(CLI::App& app, std::string_view shell,
                                            const std::set<std::string>& lock_name_commands);

} // namespace mongolock
