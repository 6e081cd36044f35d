// Prints what the C++ tokenizer makes of a file, for parity checks against
// Hugging Face's `tokenizers` (tests/python/tokenizer).
//   tokenize_tool encode TOKENIZER FILE [--parse_special]
//       ids of the whole file, space-separated, on one line
//   tokenize_tool lines TOKENIZER FILE [--parse_special]
//       ids of each '\n'-separated line of the file, one output line each
//   tokenize_tool chat TOKENIZER FILE [BEGIN:END,...]
//       EncodeChat of the whole file, the byte ranges given as literal
//   tokenize_tool stream TOKENIZER IDS_FILE
//       pushes the ids (whitespace-separated) through IncrementalDetokenizer
//       from the start of a text; prints one line per id: the hex of the
//       text that push emitted ("-" if none), then one line for Flush()
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

void PrintIds(const std::vector<int32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
}

std::string Hex(const std::string& bytes) {
  if (bytes.empty()) return "-";
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out += kDigits[static_cast<unsigned char>(c) >> 4];
    out += kDigits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

int Main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s encode|lines|stream TOKENIZER FILE "
                 "[--parse_special]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  TokenizerOptions options;
  options.parse_special = argc > 4 && std::string(argv[4]) == "--parse_special";
  auto tok = LoadTokenizer(argv[2], options);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::string text;
  if (!ReadFile(argv[3], &text)) {
    std::fprintf(stderr, "%s: cannot read\n", argv[3]);
    return 1;
  }
  if (mode == "encode") {
    PrintIds((*tok)->Encode(text));
  } else if (mode == "chat") {
    std::vector<TextRange> literal;
    if (argc > 4) {
      std::istringstream ranges(argv[4]);
      std::string range;
      while (std::getline(ranges, range, ',')) {
        TextRange r;
        if (std::sscanf(range.c_str(), "%zu:%zu", &r.begin, &r.end) != 2) {
          std::fprintf(stderr, "bad range %s\n", range.c_str());
          return 2;
        }
        literal.push_back(r);
      }
    }
    PrintIds((*tok)->EncodeChat(text, literal));
  } else if (mode == "lines") {
    size_t start = 0;
    while (true) {
      const size_t end = text.find('\n', start);
      PrintIds((*tok)->Encode(std::string_view(text).substr(
          start, end == std::string::npos ? std::string::npos : end - start)));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  } else if (mode == "stream") {
    IncrementalDetokenizer detok(**tok, /*at_text_start=*/true);
    std::istringstream ids(text);
    int64_t id;
    while (ids >> id) {
      std::printf("%s\n", Hex(detok.Push(static_cast<int32_t>(id))).c_str());
    }
    std::printf("%s\n", Hex(detok.Flush()).c_str());
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) { return seqboat::Main(argc, argv); }
