// The command-line front end: parses arguments with CLI11 into the option structs of
// <mongolock/commands.hpp>, runs one command, and maps every error to a one-line message and exit code.
#pragma once

namespace mongolock {

// Runs mongolock with these arguments; returns the process exit code (exit_codes.hpp). Never throws.
int cli_main(int argc, char** argv);

} // namespace mongolock
