// Subcommand registry of the `skipkv` CLI. Each cmd_<name>.cpp defines a
// registrar at namespace scope:
//
//   static skipkv::cli::CommandRegistrar reg("inspect", "Show a model file's metadata and tensors",
//       [](CLI::App& sub) { /* add options */ return [opts](){ return Run(opts); }; });
//
// `setup` adds options to the subcommand and returns the action, which
// returns the process exit code. Errors are printed by the action as
// "skipkv <cmd>: <message>" and give a non-zero exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace skipkv::cli {

using CommandAction = std::function<int()>;
using CommandSetup = std::function<CommandAction(CLI::App&)>;

struct CommandInfo {
  std::string name;
  std::string description;
  CommandSetup setup;
};

std::vector<CommandInfo>& Commands();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string description, CommandSetup setup) {
    Commands().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace skipkv::cli
