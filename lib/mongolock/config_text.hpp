// The text of a config file, before CLI11 parses it: what the lines are, and where each key is.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mongolock {

// A line of a config file that sets a key: its number (from 1), the section it is in (the text between
// the brackets of the last "[section]" line before it, "" before any) and the key as written (trimmed,
// before the '=', or the whole line for a bare flag such as "verbose").
struct ConfigLine {
  std::size_t number = 0;
  std::string section;
  std::string key;
};

// Checks the text of the config file `file` (named in errors) and lists its key lines, in order.
// The lines are classified as CLI11's TOML/INI reader does (white space trimmed; blank lines; lines
// starting with '#' or ';' are comments; "[name]" or "[[name]]" opens a section; anything else is
// "key = value" or a bare key), so that every item CLI11 makes of the text has its line here.
// Refuses, with Error exit 64 "FILE:LINE: ...", what CLI11 would silently skip or misread: bytes that
// are not valid UTF-8; control characters other than tab (and a carriage return at the end of a line);
// a line of one or two characters that is not a comment; a value that starts a list ('['), which no
// option takes and which CLI11 would continue over the next lines.
[[nodiscard]] std::vector<ConfigLine> scan_config_text(std::string_view text, std::string_view file);

// The word of `candidates` closest to `word` by edit distance (insertions, deletions, substitutions and
// transpositions of adjacent characters), when it is close enough to be a likely typo: at most 2 edits,
// and fewer than `word` has characters. "" when there is none. Ties go to the first candidate.
[[nodiscard]] std::string closest_word(std::string_view word, const std::vector<std::string>& candidates);

} // namespace mongolock
