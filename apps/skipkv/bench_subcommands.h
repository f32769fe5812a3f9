// Subcommands of `skipkv bench` that live in their own files
// (bench_throughput.cpp). Each adds itself to the `bench` app and returns
// the action to run when it was parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace skipkv::cli {

struct BenchSubcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// `skipkv bench throughput`: the paper's Table 1 protocol.
BenchSubcommand AddBenchThroughput(CLI::App& bench);

}  // namespace skipkv::cli
