// `skipkv`: one CLI, one subcommand per job (run, inspect, tokenize, convert,
// make-model, perplexity, bench, ...). Subcommands register themselves; see
// command_registry.h.
#include <algorithm>
#include <cstdio>
#include <map>

#include "command_registry.h"

namespace skipkv::cli {
std::vector<CommandInfo>& Commands() {
  static std::vector<CommandInfo> commands;
  return commands;
}
}  // namespace skipkv::cli

int main(int argc, char** argv) {
  using namespace skipkv::cli;
  CLI::App app{
      "skipkv: inference for reasoning models with a KV cache that stays inside a fixed budget.\n"
      "Run `skipkv <command> --help` for the options of each command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "skipkv 0.1.0");

  auto& commands = Commands();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, CommandAction> actions;
  for (auto& cmd : commands) {
    CLI::App* sub = app.add_subcommand(cmd.name, cmd.description);
    actions[sub] = cmd.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, action] : actions) {
    if (sub->parsed()) return action();
  }
  return 2;
}
