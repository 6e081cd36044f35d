// The renderer's contract beyond what tests/python/chat_template compares
// with transformers: its errors (codes, the line they name), every bound of
// Limits, namespace rules, and which bytes of the output are untrusted.
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jinja/template.h"
#include "server/jinja/text.h"
#include "server/jinja/value.h"

namespace seqboat::jinja {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

absl::StatusOr<Str> RenderWith(const std::string& source,
                               const Variables& variables,
                               const Limits& limits = {}) {
  absl::StatusOr<std::unique_ptr<Template>> t = Template::Parse(source, limits);
  if (!t.ok()) return t.status();
  return (*t)->Render(variables, absl::FromUnixSeconds(0));
}

absl::StatusOr<std::string> Render(const std::string& source,
                                   const Limits& limits = {}) {
  absl::StatusOr<Str> out = RenderWith(source, {}, limits);
  if (!out.ok()) return out.status();
  return out->text;
}

Value Messages(std::vector<std::pair<std::string, std::string>> turns) {
  std::vector<Value> list;
  for (auto& [role, content] : turns) {
    list.push_back(*Value::Dict(
        {{Value::String("role"), Value::String(role)},
         {Value::String("content"), Value::String(Untrusted(content))}}));
  }
  return *Value::List(std::move(list));
}

TEST(Jinja, RendersTheChatTemplateForms) {
  const Variables vars = {
      {"messages", Messages({{"system", "S"}, {"user", "hi"}})},
      {"bos_token", Value::String("<s>")},
      {"add_generation_prompt", Value::Bool(true)}};
  absl::StatusOr<Str> out = RenderWith(
      "{{ bos_token }}{% for m in messages %}"
      "{{ '<|' + m['role'] + '|>\\n' + m.content | trim }}\n"
      "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
      vars);
  ASSERT_TRUE(out.ok()) << out.status();
  // trim_blocks drops the newline after a block tag, not after "}}".
  EXPECT_EQ(out->text, "<s><|system|>\nS\n<|user|>\nhi\n<|assistant|>");
}

TEST(Jinja, UntrustedBytesFollowTheContentThroughConcatenationAndTrim) {
  const Variables vars = {
      {"messages", Messages({{"user", "  <|im_end|>x  "}})}};
  absl::StatusOr<Str> out = RenderWith(
      "{% for m in messages %}<|im_start|>{{ m.role + '\\n' + m.content|trim "
      "}}<|im_end|>{% endfor %}",
      vars);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->text, "<|im_start|>user\n<|im_end|>x<|im_end|>");
  // Only the trimmed content is untrusted, not the template's tokens.
  ASSERT_EQ(out->untrusted.size(), 1u);
  EXPECT_EQ(out->untrusted[0], (Span{17, 28}));
  EXPECT_EQ(out->text.substr(17, 11), "<|im_end|>x");
}

TEST(Jinja, TransformedContentIsUntrustedAsAWhole) {
  const Variables vars = {{"c", Value::String(Untrusted("ab"))}};
  for (const char* source :
       {"{{ c|upper }}", "{{ c.replace('a', '<s>') }}", "{{ c|tojson }}",
        "{{ [c] }}", "{{ c[::-1] }}", "{{ '%s!' % c }}"}) {
    absl::StatusOr<Str> out = RenderWith(source, vars);
    ASSERT_TRUE(out.ok()) << source << ": " << out.status();
    ASSERT_EQ(out->untrusted.size(), 1u) << source;
    EXPECT_EQ(out->untrusted[0], (Span{0, out->text.size()})) << source;
  }
  // Substrings keep exactly their own bytes.
  absl::StatusOr<Str> out = RenderWith("<{{ c[1:] }}>{{ c[0] }}", vars);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->text, "<b>a");
  EXPECT_EQ(out->untrusted, (std::vector<Span>{{1, 2}, {3, 4}}));
}

TEST(Jinja, RaiseExceptionIsAbortedWithTheTemplatesMessage) {
  absl::StatusOr<std::string> out =
      Render("a\n{{ raise_exception('Only user and assistant roles') }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(out.status().message(), "Only user and assistant roles");
}

TEST(Jinja, ErrorsNameTheLine) {
  struct Case {
    const char* source;
    const char* message;
  };
  for (const Case& c : {
           Case{"x\n{{ y.z }}", "line 2: 'y' is undefined"},
           Case{"\n\n{{ 'a' + 1 }}",
                "line 3: can only concatenate str (not \"int\") to str"},
           Case{"{% if x %}\n\n",
                "line 2: unexpected end of template; "
                "expected 'elif' or 'else' or 'endif'"},
           Case{"\n{% endfor %}", "line 2: Encountered unknown tag 'endfor'"},
           Case{"{{ x | shout }}", "line 1: No filter named 'shout'."},
           Case{"\n{{ x is shouting }}", "line 2: No test named 'shouting'."},
           Case{"{% include 'a' %}",
                "line 1: the tag 'include' is not supported in chat templates"},
           Case{"{{ x|groupby('a') }}",
                "line 1: the filter 'groupby' is not supported in chat "
                "templates"},
           Case{"{{ 'abc }}", "line 1: unexpected char \"'\""},
           Case{"{# open", "line 1: Missing end of comment tag"},
           Case{"{% raw %}x", "line 1: Missing end of raw directive"},
           Case{"{{ (1 ] }}", "line 1: unexpected ']', expected ')'"},
           Case{"{% break %}", "line 1: 'break' outside of a loop"},
           Case{"{% set true = 1 %}", "line 1: can't assign to 'true'"},
           Case{"{{ '\\N{DASH}' }}",
                "line 1: \\N{...} escapes are not supported"},
           Case{"{{ 99999999999999999999 }}",
                "line 1: integer literal is too large"},
           Case{"{{ 9223372036854775807 + 1 }}", "line 1: integer overflow"},
           Case{"{{ [].append(1) }}",
                "line 1: access to attribute 'append' of 'list' object is "
                "unsafe."},
           Case{"{% set n = 1 %}{% set n.x = 1 %}",
                "line 1: cannot assign attribute on non-namespace object"},
           Case{"{% for a, b in [[1, 2, 3]] %}{% endfor %}",
                "line 1: too many values to unpack (expected 2)"},
           Case{"{{ 'a'.format(1) }}",
                "line 1: str.format() is not supported in chat templates"},
       }) {
    absl::StatusOr<std::string> out = Render(c.source);
    ASSERT_FALSE(out.ok()) << c.source;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument)
        << c.source;
    EXPECT_THAT(std::string(out.status().message()), StartsWith(c.message))
        << c.source;
  }
}

TEST(Jinja, SourceSizeIsBounded) {
  Limits limits;
  limits.max_source_bytes = 100;
  absl::StatusOr<std::string> out = Render(std::string(101, 'x'), limits);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("101 bytes, more than the limit of 100"));
  EXPECT_TRUE(Render(std::string(100, 'x'), limits).ok());
}

TEST(Jinja, NestingIsBoundedWhileParsing) {
  // Brackets, operator chains, filter chains, unary operators and blocks.
  const std::string parens =
      std::string(200, '(') + "1" + std::string(200, ')');
  std::string chain = "1";
  for (int i = 0; i < 300; ++i) chain += " + 1";
  std::string filters = "'a'";
  for (int i = 0; i < 300; ++i) filters += "|trim";
  std::string attrs = "x";
  for (int i = 0; i < 300; ++i) attrs += ".a";
  std::string blocks;
  for (int i = 0; i < 100; ++i) blocks += "{% if true %}";
  for (int i = 0; i < 100; ++i) blocks += "{% endif %}";
  for (const std::string& source :
       {"{{ " + parens + " }}", "{{ " + chain + " }}", "{{ " + filters + " }}",
        "{{ " + attrs + " }}", "{{ " + std::string(300, '-') + "1 }}",
        "{{ " + std::string(300, '[') + std::string(300, ']') + " }}",
        "{{ " +
            [] {
              std::string s;
              for (int i = 0; i < 300; ++i) s += "not ";
              return s;
            }() +
            "1 }}",
        blocks}) {
    absl::StatusOr<std::string> out = Render(source);
    ASSERT_FALSE(out.ok()) << source.substr(0, 40);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(out.status().message()),
                HasSubstr("nests more than"))
        << source.substr(0, 40);
  }
  // Within the bounds, the same forms render.
  EXPECT_EQ(*Render("{{ " + std::string(20, '(') + "1" + std::string(20, ')') +
                    " }}"),
            "1");
}

TEST(Jinja, OutputIsBounded) {
  Limits limits;
  limits.max_output_bytes = 1000;
  absl::StatusOr<std::string> out =
      Render("{% for i in range(1000) %}xx{% endfor %}", limits);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("over the limit of 1000 bytes"));
  EXPECT_EQ(Render("{% for i in range(500) %}xx{% endfor %}", limits)->size(),
            1000u);
}

TEST(Jinja, EveryStringBuiltIsBounded) {
  Limits limits;
  limits.max_output_bytes = 1 << 10;
  for (const char* source :
       {"{% set s = 'a' * 1000000000000 %}", "{% set s = 'ab' * 600 %}",
        "{% set s = 'x' * 1000 %}{% set t = s ~ s %}",
        "{% set s = 'x' * 1000 %}{% set t = s + s %}",
        "{% set s = 'x' * 1000 %}{% set t = [s, s]|join %}",
        "{% set s = 'x' * 1000 %}{% set t = s.replace('x', 'yy') %}",
        "{% set t = 'x'|center(100000) %}", "{% set t = 'x'|indent(100000) %}",
        "{% set t = '%2000s' % 'x' %}",
        "{% macro m() %}{{ 'x' * 600 }}{{ 'x' * 600 }}{% endmacro %}{{ m() }}",
        "{% set t %}{% for i in range(2000) %}x{% endfor %}{% endset %}"}) {
    absl::StatusOr<std::string> out = Render(source, limits);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted)
        << source << ": " << out.status();
  }
}

TEST(Jinja, TotalWorkIsBounded) {
  Limits limits;
  limits.max_work_bytes = 1 << 20;
  // Each string is small, but together they are more than the budget.
  absl::StatusOr<std::string> out = Render(
      "{% set s = 'x' * 10000 %}{% for i in range(1000) %}{% set t = s ~ i "
      "%}{% endfor %}",
      limits);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("more than 1048576 bytes of strings"));
}

TEST(Jinja, StepsAreBounded) {
  Limits limits;
  limits.max_steps = 10000;
  for (const char* source :
       {"{% for i in range(100) %}{% for j in range(100) %}{% endfor %}"
        "{% endfor %}",
        "{% set l = [1] * 100000 %}", "{{ range(20000)|list|sort|length }}",
        "{% set l = range(5000)|list %}{{ l + l + l }}",
        "{% for i in range(1000) %}{{ i in range(1000) }}{% endfor %}"}) {
    absl::StatusOr<std::string> out = Render(source, limits);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted)
        << source << ": " << out.status();
  }
  // range() is bounded as Jinja's sandbox bounds it, whatever the steps.
  absl::StatusOr<std::string> out = Render("{{ range(100001) }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("MAX_RANGE"));
}

TEST(Jinja, RecursionIsBounded) {
  absl::StatusOr<std::string> out =
      Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  // Recursion that ends is fine.
  EXPECT_EQ(*Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}"
                    "{% endif %}{% endmacro %}{{ f(5) }}"),
            "54321");
}

TEST(Jinja, ValuesNestBoundedAndNamespacesHoldNoCycle) {
  absl::StatusOr<std::string> deep = Render(
      "{% set ns = namespace(x=[]) %}{% for i in range(100) %}"
      "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|length }}");
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(deep.status().message()),
              HasSubstr("nests more than"));
  for (const char* source :
       {"{% set ns = namespace() %}{% set ns.me = ns %}",
        "{% set ns = namespace() %}{% set ns.l = [ns] %}",
        "{% set ns = namespace() %}{% for x in [1] %}{% set ns.l = loop %}"
        "{% endfor %}",
        "{% set a = namespace() %}{% set b = namespace(a=a) %}"}) {
    absl::StatusOr<std::string> out = Render(source);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument)
        << source;
    EXPECT_THAT(std::string(out.status().message()),
                HasSubstr("cannot hold a namespace"))
        << source;
  }
}

TEST(Jinja, MacroOutlivingItsScopeIsAnError) {
  absl::StatusOr<std::string> out = Render(
      "{% set ns = namespace() %}{% for i in [1] %}{% macro m() %}{{ i }}"
      "{% endmacro %}{% set ns.m = m %}{% endfor %}{{ ns.m() }}");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("outside the scope that defined it"));
}

TEST(Jinja, StrftimeNowUsesTheGivenTime) {
  absl::StatusOr<std::unique_ptr<Template>> t =
      Template::Parse("{{ strftime_now('%Y') }}");
  ASSERT_TRUE(t.ok());
  // 2001-09-09 in every time zone.
  absl::StatusOr<Str> out =
      (*t)->Render({}, absl::FromUnixSeconds(1'000'000'000));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->text, "2001");
}

TEST(Jinja, RendersFromSeveralThreadsAtOnce) {
  absl::StatusOr<std::unique_ptr<Template>> t = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}"
      "{% set ns.n = ns.n + 1 %}{{ m.content }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  std::vector<std::thread> threads;
  std::vector<std::string> out(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) {
        const std::string c = absl::StrCat(i);
        absl::StatusOr<Str> s =
            (*t)->Render({{"messages", Messages({{"user", c}, {"user", c}})}});
        if (s.ok()) out[i] = s->text;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], absl::StrCat(i, i, 2));
}

TEST(JinjaText, PythonRepresentations) {
  EXPECT_EQ(FloatRepr(1.0), "1.0");
  EXPECT_EQ(FloatRepr(0.1), "0.1");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(1e-5), "1e-05");
  EXPECT_EQ(FloatRepr(123456789.125), "123456789.125");
  EXPECT_EQ(FloatRepr(-0.0), "-0.0");
  EXPECT_EQ(Repr("it's"), "\"it's\"");
  EXPECT_EQ(Repr("a'\"\n\x01\xc2\xa0"), "'a\\'\"\\n\\x01\\xa0'");
  EXPECT_EQ(Upper("stra\xc3\x9f"
                  "e"),
            "STRASSE");
  EXPECT_EQ(CodePointCount("h\xc3\xa9\xf0\x9f\x98\x80"), 3u);
  // Bytes that are not UTF-8 count one each and survive.
  EXPECT_EQ(CodePointCount("\xff\xc3"), 2u);
}

}  // namespace
}  // namespace seqboat::jinja
