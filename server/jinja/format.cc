// Python's printf-style formatting, str % args (and the format filter):
// %(key)s from a mapping, flags "-+ #0", width, precision, and the
// conversions s r d i x X o f F e E g G c %.
#include <cmath>
#include <cstdio>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/builtins.h"

namespace seqboat::jinja {
namespace {

// One conversion specifier: %[(key)][flags][width][.precision]conversion.
struct Spec {
  const Value* keyed = nullptr;  // the mapping's value for (key), if any
  std::string flags;
  int64_t width = 0;
  int precision = -1;
  char conversion = 0;

  bool has(char flag) const { return flags.find(flag) != std::string::npos; }
};

// The specifier after a '%' at f[*i], leaving *i past it.
absl::StatusOr<Spec> ParseSpec(const std::string& f, size_t* pos,
                               const DictData* mapping) {
  size_t& i = *pos;
  Spec spec;
  if (i >= f.size()) return Invalid("incomplete format");
  if (f[i] == '(') {
    const size_t close = f.find(')', i);
    if (close == std::string::npos) return Invalid("incomplete format key");
    if (mapping == nullptr) return Invalid("format requires a mapping");
    const std::string key = f.substr(i + 1, close - i - 1);
    spec.keyed = mapping->Find(Value::String(key));
    if (spec.keyed == nullptr) {
      return Invalid(absl::StrCat("KeyError: ", Repr(key)));
    }
    i = close + 1;
  }
  while (i < f.size() &&
         std::string_view("-+ #0").find(f[i]) != std::string_view::npos) {
    spec.flags.push_back(f[i++]);
  }
  while (i < f.size() && absl::ascii_isdigit(f[i])) {
    spec.width = std::min<int64_t>(spec.width * 10 + (f[i++] - '0'), 1 << 20);
  }
  if (i < f.size() && f[i] == '.') {
    ++i;
    spec.precision = 0;
    while (i < f.size() && absl::ascii_isdigit(f[i])) {
      spec.precision = std::min(spec.precision * 10 + (f[i++] - '0'), 1 << 10);
    }
  }
  if (i >= f.size()) return Invalid("incomplete format");
  spec.conversion = f[i++];
  return spec;
}

// %s and %r: str() or repr(), cut to `precision` code points.
std::string Text(const Spec& spec, const Value& arg) {
  std::string piece = spec.conversion == 's' ? StrOf(arg).text : ReprOf(arg);
  if (spec.precision >= 0) {
    const std::vector<size_t> offsets = CodePointOffsets(piece);
    if (static_cast<size_t>(spec.precision) + 1 < offsets.size()) {
      piece.resize(offsets[static_cast<size_t>(spec.precision)]);
    }
  }
  return piece;
}

// %d %i %x %X %o: the integer (a float truncated), at least `precision`
// digits, with its sign.
absl::StatusOr<std::string> Integer(const Spec& spec, const Value& arg) {
  if (!arg.is_number()) {
    return Invalid(absl::StrCat("%", std::string(1, spec.conversion),
                                " format: a number is required, not ",
                                arg.TypeName()));
  }
  int64_t n = 0;
  if (arg.is_integral()) {
    n = arg.int_value();
  } else if (std::fabs(arg.number()) < 9.2e18) {
    n = static_cast<int64_t>(arg.number());
  } else {
    return Invalid("the number is too large to format as an integer");
  }
  const char* format = spec.conversion == 'x'   ? "%llx"
                       : spec.conversion == 'X' ? "%llX"
                       : spec.conversion == 'o' ? "%llo"
                                                : "%llu";
  const unsigned long long magnitude =
      n < 0 ? 0ULL - static_cast<unsigned long long>(n)
            : static_cast<unsigned long long>(n);
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, magnitude);
  std::string piece = buf;
  if (spec.precision >= 0 &&
      piece.size() < static_cast<size_t>(spec.precision)) {
    piece.insert(0, static_cast<size_t>(spec.precision) - piece.size(), '0');
  }
  if (n < 0) {
    piece.insert(0, "-");
  } else if (spec.has('+')) {
    piece.insert(0, "+");
  } else if (spec.has(' ')) {
    piece.insert(0, " ");
  }
  return piece;
}

// %f %F %e %E %g %G, as C's printf writes them.
absl::StatusOr<std::string> Real(const Spec& spec, const Value& arg) {
  if (!arg.is_number()) {
    return Invalid(absl::StrCat("must be real number, not ", arg.TypeName()));
  }
  const std::string format = absl::StrCat(
      "%", spec.has('+') ? "+" : "", spec.has(' ') ? " " : "",
      spec.has('#') ? "#" : "", ".", spec.precision < 0 ? 6 : spec.precision,
      std::string(1, spec.conversion));
  char buf[1200];
  std::snprintf(buf, sizeof(buf), format.c_str(), arg.number());
  return std::string(buf);
}

// %c: a code point, or a string of one.
absl::StatusOr<std::string> Char(const Value& arg) {
  std::string piece;
  if (arg.is_integral() && arg.int_value() >= 0 &&
      arg.int_value() <= 0x10FFFF) {
    AppendUtf8(static_cast<uint32_t>(arg.int_value()), &piece);
  } else if (arg.is_string() && CodePointCount(arg.text()) == 1) {
    piece = arg.text();
  } else {
    return Invalid("%c requires an int or a unicode character");
  }
  return piece;
}

absl::StatusOr<std::string> Convert(const Spec& spec, const Value& arg) {
  switch (spec.conversion) {
    case 's':
    case 'r':
      return Text(spec, arg);
    case 'd':
    case 'i':
    case 'x':
    case 'X':
    case 'o':
      return Integer(spec, arg);
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G':
      return Real(spec, arg);
    case 'c':
      return Char(arg);
    default:
      return Invalid(absl::StrCat("unsupported format character '",
                                  std::string(1, spec.conversion), "'"));
  }
}

// Pads `piece` to the spec's width: left-aligned with "-", with zeros after
// the sign with "0" (numbers only), else right-aligned.
void PadToWidth(const Spec& spec, std::string* piece) {
  const int64_t len = static_cast<int64_t>(CodePointCount(*piece));
  if (spec.width <= len) return;
  const size_t pad = static_cast<size_t>(spec.width - len);
  const bool left = spec.has('-');
  const bool numeric = spec.conversion != 's' && spec.conversion != 'r' &&
                       spec.conversion != 'c';
  if (left) {
    piece->append(pad, ' ');
  } else if (spec.has('0') && numeric) {
    const char c = piece->empty() ? 0 : (*piece)[0];
    const size_t sign = c == '-' || c == '+' || c == ' ' ? 1 : 0;
    piece->insert(sign, pad, '0');
  } else {
    piece->insert(0, pad, ' ');
  }
}

}  // namespace

absl::StatusOr<Value> Renderer::Format(const Value& format,
                                       const Value& arguments) {
  const std::string& f = format.text();
  std::vector<Value> positional;
  const DictData* mapping = nullptr;
  if (arguments.kind() == Value::Kind::kTuple) {
    positional = arguments.items();
  } else if (arguments.is_dict()) {
    mapping = &arguments.dict();
  } else {
    positional.push_back(arguments);
  }
  size_t next = 0;
  std::string out;
  size_t i = 0;
  while (i < f.size()) {
    if (f[i] != '%') {
      out.push_back(f[i++]);
      continue;
    }
    ++i;
    ASSIGN_OR_RETURN(const Spec spec, ParseSpec(f, &i, mapping));
    if (spec.conversion == '%') {
      out.push_back('%');
      continue;
    }
    const Value* arg = spec.keyed;
    if (arg == nullptr && mapping != nullptr) {
      arg = &arguments;
    } else if (arg == nullptr) {
      if (next >= positional.size()) {
        return Invalid("not enough arguments for format string");
      }
      arg = &positional[next++];
    }
    ASSIGN_OR_RETURN(std::string piece, Convert(spec, *arg));
    PadToWidth(spec, &piece);
    RETURN_IF_ERROR(Reserve(out.size() + piece.size()));
    out += piece;
  }
  if (mapping == nullptr && next < positional.size()) {
    return Invalid("not all arguments converted during string formatting");
  }
  return MakeString(Derived(std::move(out), {&format, &arguments}));
}

}  // namespace seqboat::jinja
