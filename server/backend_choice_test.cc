// The backend a name asks for, on machines with and without a GPU.
#include "server/backend_choice.h"

#include "gtest/gtest.h"

namespace seqboat {
namespace {

BackendChoice Named(const std::string& name) {
  BackendChoice c;
  c.name = name;
  c.cpu_threads = 1;
  return c;
}

TEST(BackendChoiceTest, UnknownBackendIsNamed) {
  auto be = ChooseBackend(Named("tpu"));
  ASSERT_FALSE(be.ok());
  EXPECT_EQ(be.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(be.status().message().find("unknown backend 'tpu'"),
            std::string::npos)
      << be.status();
}

TEST(BackendChoiceTest, AutoTakesCudaOnlyWhenCudaWorks) {
  // Holds with or without a GPU: auto runs on what it found, and asking for
  // CUDA outright agrees with it (works where auto chose CUDA, fails with a
  // reason where auto fell back to the CPU).
  auto automatic = ChooseBackend(Named("auto"));
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  const std::string chosen = (*automatic)->name();
  ASSERT_TRUE(chosen == "cpu" || chosen == "cuda") << chosen;
  automatic->reset();

  auto cuda = ChooseBackend(Named("cuda"));
  if (chosen == "cuda") {
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    EXPECT_EQ((*cuda)->name(), "cuda");
  } else {
    ASSERT_FALSE(cuda.ok());
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(cuda.status().message().find("backend cuda: "), std::string::npos)
        << cuda.status();
  }
}

TEST(BackendChoiceTest, CpuByNameIsTheCpu) {
  auto be = ChooseBackend(Named("cpu"));
  ASSERT_TRUE(be.ok()) << be.status();
  EXPECT_EQ((*be)->name(), "cpu");
}

TEST(BackendChoiceTest, CpuWeightsFollowTheFileUnlessAsked) {
  BackendChoice c = Named("cpu");
  c.stored_weights = "bf16";
  auto stored = ChooseBackend(c);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_NE((*stored)->DeviceName().find("bf16 weights"), std::string::npos)
      << (*stored)->DeviceName();
  c.cpu_weights = "int8";
  auto asked = ChooseBackend(c);
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_NE((*asked)->DeviceName().find("int8 weights"), std::string::npos)
      << (*asked)->DeviceName();
  c.cpu_weights = "fp8";
  auto bad = ChooseBackend(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'fp8'"), std::string::npos)
      << bad.status();
  c.cpu_weights = "auto";
  c.cpu_isa = "avx1024";
  EXPECT_EQ(ChooseBackend(c).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace seqboat
