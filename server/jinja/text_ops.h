// Text operations the builtin filters and str methods share, over UTF-8 as
// text.h reads it: Python's strip, replace, title, splitlines, int() and
// float() of a string and round() of a float, and Jinja's own title and
// HTML escape. Pure functions; the callers count what they build against
// the template's limits. Internal to //server/jinja.
#ifndef SEQBOAT_SERVER_JINJA_TEXT_OPS_H_
#define SEQBOAT_SERVER_JINJA_TEXT_OPS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/jinja/value.h"

namespace seqboat::jinja {

// Jinja's escape: & < > " ' as HTML entities.
std::string Escape(std::string_view s);

// Python's str.strip family: code points in `chars` (whitespace when it is
// not a string) off the left and/or right end; the kept bytes, as
// [begin, end).
std::pair<size_t, size_t> StripRange(std::string_view s, const Value& chars,
                                     bool left, bool right);

// Python's str.replace (a negative count replaces all).
std::string Replace(std::string_view s, std::string_view old,
                    std::string_view replacement, int64_t count);
// The size of Replace's result, computed before building it.
size_t ReplacedSize(std::string_view s, std::string_view old,
                    std::string_view replacement, int64_t count);

// Python's str.capitalize() and str.title().
std::string Capitalize(std::string_view s);
std::string PyTitle(std::string_view s);
// Jinja's do_title: words start after runs of "-", whitespace and "([{<".
std::string JinjaTitle(std::string_view s);

// Python's str.splitlines(keepends).
std::vector<std::string> SplitLines(std::string_view s, bool keepends);

// Python's float(str) and int(str, base) for bases 2..36; false when the
// text is not one (or, for int, does not fit 64 bits).
bool ParseFloat(std::string_view text, double* out);
bool ParseInt(std::string_view text, int64_t base, int64_t* out);

// Python's round(x, ndigits) for floats: to the nearest, ties to even, of
// the exact decimal value.
double RoundHalfEven(double x, int64_t digits);

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_TEXT_OPS_H_
