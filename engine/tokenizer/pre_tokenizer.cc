#include "engine/tokenizer/pre_tokenizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/unicode_chars.h"

namespace seqboat {
namespace {

using json = nlohmann::json;

// The GPT-2 split, used by the ByteLevel pre-tokenizer when use_regex is on.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// The lookahead tail RE2 cannot run; replaced by a named group whose matches
// are trimmed by hand.
constexpr std::string_view kWhitespaceTail = R"(\s+(?!\S)|\s+)";
// Unicode White_Space as class members.
constexpr char kWhitespaceMembers[] =
    R"(\x{9}-\x{D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029})"
    R"(\x{202F}\x{205F}\x{3000})";

// Rewrites `\s`/`\S` to Unicode White_Space and refuses lookaround.
absl::StatusOr<std::string> TranslateEscapes(std::string_view pattern,
                                             const std::string& where) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? kWhitespaceMembers
                        : absl::StrCat("[", kWhitespaceMembers, "]");
      } else if (e == 'S') {
        if (in_class) {
          return FieldError(where,
                            "\\S inside a character class is not "
                            "supported");
        }
        out += absl::StrCat("[^", kWhitespaceMembers, "]");
      } else {
        out.push_back(c);
        out.push_back(e);
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^')
        out.push_back('^'), ++i;
      if (i + 1 < pattern.size() && pattern[i + 1] == ']')
        out.push_back(']'), ++i;
      continue;
    }
    if (in_class && c == ']') in_class = false;
    if (!in_class &&
        (pattern.substr(i, 3) == "(?=" || pattern.substr(i, 3) == "(?!" ||
         pattern.substr(i, 4) == "(?<=" || pattern.substr(i, 4) == "(?<!")) {
      return FieldError(where,
                        "lookaround other than the GPT-2 tail \\s+(?!\\S)|\\s+ "
                        "is not supported");
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RegexSplitter>> RegexSplitter::Create(
    std::string_view pattern, const std::string& where) {
  std::string_view body = pattern;
  bool tail = false;
  if (body.size() > kWhitespaceTail.size() &&
      body.substr(body.size() - kWhitespaceTail.size()) == kWhitespaceTail &&
      body[body.size() - kWhitespaceTail.size() - 1] == '|') {
    body.remove_suffix(kWhitespaceTail.size());
    tail = true;
  }
  absl::StatusOr<std::string> translated = TranslateEscapes(body, where);
  if (!translated.ok()) return translated.status();
  if (tail) {
    *translated += absl::StrCat("(?P<seqboat_ws>[", kWhitespaceMembers, "]+)");
  }
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_unique<RE2>(*translated, options);
  if (!re->ok()) {
    return FieldError(where,
                      absl::StrCat("regex does not compile: ", re->error()));
  }
  auto splitter = std::unique_ptr<RegexSplitter>(new RegexSplitter());
  if (tail) splitter->ws_group_ = re->NamedCapturingGroups().at("seqboat_ws");
  splitter->re_ = std::move(re);
  return splitter;
}

void RegexSplitter::Split(std::string_view text,
                          std::vector<std::string_view>* out) const {
  const int n_groups = ws_group_ > 0 ? ws_group_ + 1 : 1;
  std::vector<re2::StringPiece> groups(static_cast<size_t>(n_groups));
  const re2::StringPiece input(text.data(), text.size());
  size_t pos = 0;
  size_t emitted = 0;  // end of the last piece appended
  while (pos < text.size() &&
         re_->Match(input, pos, text.size(), RE2::UNANCHORED, groups.data(),
                    n_groups)) {
    size_t start = static_cast<size_t>(groups[0].data() - text.data());
    size_t end = start + groups[0].size();
    if (end == start) {
      // An empty match splits nothing; move on by one character.
      char32_t cp;
      pos = start + NextChar(text, start, &cp);
      continue;
    }
    if (ws_group_ > 0 && groups[ws_group_].data() != nullptr &&
        end < text.size()) {
      // `\s+(?!\S)`: a run followed by a non-space leaves its last
      // character to the next match, unless it is a single character (then
      // the plain `\s+` alternative takes it).
      const size_t last = PrevCharLength(text, end);
      if (end - start > last) end -= last;
    }
    if (start > emitted) out->push_back(text.substr(emitted, start - emitted));
    out->push_back(text.substr(start, end - start));
    emitted = end;
    pos = end;
  }
  if (emitted < text.size()) out->push_back(text.substr(emitted));
}

absl::Status PreTokenizer::ParseInto(const json& value,
                                     const std::string& where,
                                     std::vector<Step>* steps) {
  if (value.is_null()) return absl::OkStatus();
  std::string type;
  RETURN_IF_ERROR(TypeOf(value, where, &type));
  if (type == "Sequence") {
    auto list = value.find("pretokenizers");
    if (list == value.end() || !list->is_array()) {
      return FieldError(absl::StrCat(where, ".pretokenizers"),
                        "must be an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      absl::Status s = ParseInto(
          (*list)[i], absl::StrCat(where, ".pretokenizers[", i, "]"), steps);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  Step step;
  if (type == "ByteLevel") {
    step.kind = Step::kByteLevel;
    bool use_regex = true;
    RETURN_IF_ERROR(
        OptionalBool(value, "add_prefix_space", where, &step.add_prefix_space));
    RETURN_IF_ERROR(OptionalBool(value, "use_regex", where, &use_regex));
    if (use_regex) {
      auto splitter = RegexSplitter::Create(kGpt2Pattern, where);
      if (!splitter.ok()) return splitter.status();
      step.splitter = *std::move(splitter);
    }
  } else if (type == "Split") {
    step.kind = Step::kSplit;
    std::string behavior;
    RETURN_IF_ERROR(RequiredString(value, "behavior", where, &behavior));
    if (behavior != "Isolated") {
      return FieldError(absl::StrCat(where, ".behavior"),
                        absl::StrCat("\"", behavior,
                                     "\" is not supported (supported: "
                                     "\"Isolated\")"));
    }
    bool invert = false;
    RETURN_IF_ERROR(OptionalBool(value, "invert", where, &invert));
    if (invert) {
      return FieldError(absl::StrCat(where, ".invert"),
                        "true is not supported");
    }
    const std::string field = absl::StrCat(where, ".pattern");
    auto pattern = value.find("pattern");
    if (pattern == value.end() || !pattern->is_object()) {
      return FieldError(field, "must be an object {\"Regex\": ...}");
    }
    std::string regex;
    if (auto r = pattern->find("Regex");
        r != pattern->end() && r->is_string()) {
      regex = r->get<std::string>();
    } else if (auto s = pattern->find("String");
               s != pattern->end() && s->is_string() &&
               !s->get_ref<const std::string&>().empty()) {
      regex = RE2::QuoteMeta(s->get<std::string>());
    } else {
      return FieldError(field, "needs a \"Regex\" or non-empty \"String\"");
    }
    auto splitter = RegexSplitter::Create(regex, field);
    if (!splitter.ok()) return splitter.status();
    step.splitter = *std::move(splitter);
  } else if (type == "Metaspace") {
    step.kind = Step::kMetaspace;
    step.replacement = "\xE2\x96\x81";  // U+2581 "▁"
    RETURN_IF_ERROR(
        OptionalString(value, "replacement", where, &step.replacement));
    char32_t cp;
    if (step.replacement.empty() ||
        NextChar(step.replacement, 0, &cp) != step.replacement.size()) {
      return FieldError(absl::StrCat(where, ".replacement"),
                        "must be one character");
    }
    std::string scheme = "always";
    RETURN_IF_ERROR(OptionalString(value, "prepend_scheme", where, &scheme));
    if (scheme == "always") {
      step.prepend = Step::kAlways;
    } else if (scheme == "first") {
      step.prepend = Step::kFirst;
    } else if (scheme == "never") {
      step.prepend = Step::kNever;
    } else {
      return FieldError(absl::StrCat(where, ".prepend_scheme"),
                        "must be \"always\", \"first\" or \"never\"");
    }
    RETURN_IF_ERROR(OptionalBool(value, "split", where, &step.split));
  } else if (type == "WhitespaceSplit") {
    step.kind = Step::kWhitespaceSplit;
  } else {
    return FieldError(absl::StrCat(where, ".type"),
                      absl::StrCat("unsupported pre-tokenizer \"", type,
                                   "\" (supported: ByteLevel, Split, "
                                   "Metaspace, WhitespaceSplit, Sequence)"));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Parse(
    const json& value, const std::string& where) {
  auto pre = std::unique_ptr<PreTokenizer>(new PreTokenizer());
  RETURN_IF_ERROR(ParseInto(value, where, &pre->steps_));
  return pre;
}

void PreTokenizer::Apply(const Step& step, std::vector<Piece>* pieces) {
  std::vector<Piece> out;
  std::vector<std::string_view> parts;
  for (Piece& piece : *pieces) {
    if (piece.text.empty()) continue;
    switch (step.kind) {
      case Step::kSplit:
        parts.clear();
        step.splitter->Split(piece.text, &parts);
        for (size_t i = 0; i < parts.size(); ++i) {
          out.push_back({std::string(parts[i]), piece.at_start && i == 0});
        }
        break;
      case Step::kByteLevel: {
        if (step.add_prefix_space && piece.text[0] != ' ') {
          piece.text.insert(0, " ");
        }
        parts.clear();
        if (step.splitter != nullptr) {
          step.splitter->Split(piece.text, &parts);
        } else {
          parts.push_back(piece.text);
        }
        for (size_t i = 0; i < parts.size(); ++i) {
          Piece mapped{"", piece.at_start && i == 0};
          ByteLevelEncode(parts[i], &mapped.text);
          out.push_back(std::move(mapped));
        }
        break;
      }
      case Step::kMetaspace: {
        std::string text = ReplaceAll(piece.text, " ", step.replacement);
        const bool starts =
            text.compare(0, step.replacement.size(), step.replacement) == 0;
        if (!starts && (step.prepend == Step::kAlways ||
                        (step.prepend == Step::kFirst && piece.at_start))) {
          text.insert(0, step.replacement);
        }
        if (!step.split) {
          out.push_back({std::move(text), piece.at_start});
          break;
        }
        // MergedWithNext: each replacement character starts a new word.
        size_t begin = 0;
        for (size_t hit = text.find(step.replacement, 1);
             hit != std::string::npos;
             hit = text.find(step.replacement, hit + 1)) {
          out.push_back(
              {text.substr(begin, hit - begin), piece.at_start && begin == 0});
          begin = hit;
        }
        out.push_back({text.substr(begin), piece.at_start && begin == 0});
        break;
      }
      case Step::kWhitespaceSplit: {
        const std::string_view text = piece.text;
        size_t begin = 0;
        for (size_t pos = 0; pos < text.size();) {
          char32_t cp;
          const size_t len = NextChar(text, pos, &cp);
          if (cp != kInvalidChar && IsUnicodeWhitespace(cp)) {
            if (pos > begin) {
              out.push_back({std::string(text.substr(begin, pos - begin)),
                             piece.at_start && begin == 0});
            }
            begin = pos + len;
          }
          pos += len;
        }
        if (begin < text.size()) {
          out.push_back(
              {std::string(text.substr(begin)), piece.at_start && begin == 0});
        }
        break;
      }
    }
  }
  *pieces = std::move(out);
}

void PreTokenizer::Split(std::string_view text, bool at_text_start,
                         std::vector<std::string>* words) const {
  if (text.empty()) return;
  std::vector<Piece> pieces;
  pieces.push_back({std::string(text), at_text_start});
  for (const Step& step : steps_) Apply(step, &pieces);
  for (Piece& piece : pieces) {
    if (!piece.text.empty()) words->push_back(std::move(piece.text));
  }
}

}  // namespace seqboat
