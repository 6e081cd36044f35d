#include "server/chat_template.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using ::testing::HasSubstr;

constexpr char kChatMl[] =
    R"({"chat_template": "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
        "bos_token": null, "eos_token": "<|im_end|>"})";

TEST(ChatTemplate, RendersAConversation) {
  auto t = ChatTemplate::FromTokenizerConfig(kChatMl, "tokenizer_config.json");
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<jinja::Str> out = (*t)->Render(
      {{"system", "Be brief.", {}}, {"user", "Hi <|im_end|>", {}}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->text,
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi <|im_end|><|im_end|>\n"
            "<|im_start|>assistant\n");
  // The two contents are untrusted; the roles and the template are not.
  ASSERT_EQ(out->untrusted.size(), 2u);
  EXPECT_EQ(out->text.substr(out->untrusted[0].begin,
                             out->untrusted[0].end - out->untrusted[0].begin),
            "Be brief.");
  EXPECT_EQ(out->text.substr(out->untrusted[1].begin,
                             out->untrusted[1].end - out->untrusted[1].begin),
            "Hi <|im_end|>");
  absl::StatusOr<jinja::Str> no_prompt =
      (*t)->Render({{"user", "x", {}}}, /*add_generation_prompt=*/false);
  ASSERT_TRUE(no_prompt.ok());
  EXPECT_EQ(no_prompt->text, "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, TemplatesSeeSpecialTokensToolsAndNames) {
  auto t = ChatTemplate::FromTokenizerConfig(
      R"({"chat_template": "{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ tools }}|{{ documents }}|{{ additional_special_tokens }}|{% for m in messages %}{{ m.name }}{% endfor %}",
          "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
          "eos_token": "</s>", "unk_token": null,
          "additional_special_tokens": ["<a>", {"content": "<b>"}]})",
      "cfg");
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<jinja::Str> out =
      (*t)->Render({{"user", "x", std::string("bob")}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->text, "<s>|</s>||None|None|['<a>', '<b>']|bob");
}

TEST(ChatTemplate, UsesTheDefaultOfNamedTemplates) {
  auto t = ChatTemplate::FromTokenizerConfig(
      R"({"chat_template": [{"name": "tool_use", "template": "tools"},
                            {"name": "default", "template": "default"}]})",
      "cfg");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->Render({{"user", "x", {}}})->text, "default");

  auto none = ChatTemplate::FromTokenizerConfig(
      R"({"chat_template": [{"name": "tool_use", "template": "tools"}]})",
      "cfg");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr("named 'tool_use' but none named 'default'"));
}

TEST(ChatTemplate, AModelWithoutATemplateIsNotFound) {
  for (const char* config : {R"({})", R"({"chat_template": null})"}) {
    auto t = ChatTemplate::FromTokenizerConfig(config, "cfg");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound) << config;
    EXPECT_THAT(std::string(t.status().message()),
                HasSubstr("no chat_template"));
  }
  auto no_config = ModelDir::Open("tests/data/tiny_mamba");
  ASSERT_TRUE(no_config.ok()) << no_config.status();
  auto missing = ChatTemplate::FromModelDir(**no_config);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("tokenizer_config.json does not exist"));
}

TEST(ChatTemplate, BadConfigsAreInvalidAndNamed) {
  struct Case {
    const char* config;
    const char* message;
  };
  for (const Case& c : {
           Case{"not json", "cfg"},
           Case{"[1]", "cfg: must hold a JSON object"},
           Case{R"({"chat_template": 3})",
                "cfg: chat_template must be a string or a list"},
           Case{R"({"chat_template": [{"name": 1}]})",
                "cfg: chat_template entries must be objects"},
           Case{R"({"chat_template": "x", "bos_token": 5})",
                "cfg: bos_token must be a string or an object"},
           Case{R"({"chat_template": "x", "additional_special_tokens": "a"})",
                "cfg: additional_special_tokens must be a list"},
           Case{R"({"chat_template": "a\n{% if %}"})",
                "cfg: chat_template: line 2: "},
       }) {
    auto t = ChatTemplate::FromTokenizerConfig(c.config, "cfg");
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument)
        << c.config;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.message))
        << c.config;
  }
}

TEST(ChatTemplate, ReadsTheModelDirectory) {
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / "chat_template_model";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* file :
       {"config.json", "model.safetensors", "tokenizer.json"}) {
    std::filesystem::copy_file(
        std::filesystem::path("tests/data/tiny_mamba") / file, dir / file);
  }
  std::ofstream(dir / "tokenizer_config.json") << kChatMl;
  auto opened = ModelDir::Open(dir.string());
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto t = ChatTemplate::FromModelDir(**opened);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->special_tokens(),
            (std::vector<std::pair<std::string, std::string>>{
                {"eos_token", "<|im_end|>"}}));
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "{%"})";
  auto reopened = ModelDir::Open(dir.string());
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto bad = ChatTemplate::FromModelDir(**reopened);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("tokenizer_config.json: chat_template: line 1"));
}

TEST(ChatTemplate, RenderLimitsApply) {
  jinja::Limits limits;
  limits.max_output_bytes = 64;
  auto t = ChatTemplate::FromTokenizerConfig(kChatMl, "cfg", limits);
  ASSERT_TRUE(t.ok());
  absl::StatusOr<jinja::Str> out =
      (*t)->Render({{"user", std::string(100, 'x'), {}}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace seqboat
