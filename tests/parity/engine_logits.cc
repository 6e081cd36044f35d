// Runs a token sequence through the C++ engine's model on the CPU backend and
// writes the logits of every position as a .npy file, so the parity tests can
// compare them with the PyTorch reference's full-sequence forward.
//
//   engine_logits --model DIR --tokens 1,2,3 --out logits.npy
//                 [--chunk N]       feed N tokens per step (1 = pure decode)
//                 [--state_out F]   the sequence's final state, raw bytes
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/model/model.h"
#include "kernels/cpu/cpu_backend.h"

ABSL_FLAG(std::string, model, "", "canonical model directory");
ABSL_FLAG(std::string, tokens, "", "comma-separated token ids");
ABSL_FLAG(std::string, out, "", "output .npy of float32 [T, vocab]");
ABSL_FLAG(int, chunk, 1, "tokens per engine step");
ABSL_FLAG(std::string, state_out, "",
          "optional file for the final state bytes");

namespace seqboat {
namespace {

bool WriteNpy(const std::string& path, const std::vector<float>& data,
              int64_t rows, int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) +
                       "), }";
  // Magic (6) + version (2) + length (2) + header + '\n' padded to 64 bytes.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  const char magic[] = "\x93NUMPY\x01\x00";
  f.write(magic, 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header.data(), header.size());
  f.write(reinterpret_cast<const char*>(data.data()),
          data.size() * sizeof(float));
  return static_cast<bool>(f);
}

int Run() {
  std::vector<int32_t> tokens;
  for (absl::string_view piece :
       absl::StrSplit(absl::GetFlag(FLAGS_tokens), ',')) {
    int32_t id;
    if (!absl::SimpleAtoi(piece, &id)) {
      std::fprintf(stderr, "bad token id '%s'\n", std::string(piece).c_str());
      return 2;
    }
    tokens.push_back(id);
  }
  const int chunk = absl::GetFlag(FLAGS_chunk);
  const int t_total = static_cast<int>(tokens.size());
  if (chunk < 1 || t_total == 0) {
    std::fprintf(stderr, "need --chunk >= 1 and at least one token\n");
    return 2;
  }
  auto backend = MakeCpuBackend();
  ModelLimits limits;
  limits.max_slots = std::max(chunk, 2);
  limits.max_rows_per_step = chunk;
  auto model = Model::Load(absl::GetFlag(FLAGS_model), *backend, limits);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  // Slot 1, not 0, so a layer that ignored the slot index would show up.
  (*model)->arena().Acquire();
  const int slot = *(*model)->arena().Acquire();
  const int vocab = (*model)->vocab_size();
  std::vector<float> logits(static_cast<size_t>(t_total) * vocab);
  for (int start = 0; start < t_total; start += chunk) {
    const int len = std::min(chunk, t_total - start);
    StepRows step{{tokens.begin() + start, tokens.begin() + start + len},
                  {{slot, 0, len}},
                  {}};
    for (int i = 0; i < len; ++i) step.logit_rows.push_back(i);
    absl::Status s = (*model)->Forward(
        step, logits.data() + static_cast<size_t>(start) * vocab);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  if (!WriteNpy(absl::GetFlag(FLAGS_out), logits, t_total, vocab)) {
    std::fprintf(stderr, "cannot write %s\n", absl::GetFlag(FLAGS_out).c_str());
    return 1;
  }
  if (const std::string path = absl::GetFlag(FLAGS_state_out); !path.empty()) {
    const std::vector<uint8_t> state = (*model)->arena().Snapshot(slot);
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(state.data()), state.size());
  }
  return 0;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::Run();
}
