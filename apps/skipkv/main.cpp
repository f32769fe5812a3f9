// `skipkv`: one CLI, one subcommand per job (run, inspect, tokenize, convert,
// make-model, perplexity, bench, ...). Subcommands register themselves; see
// command_registry.h.
#include <algorithm>
#include <cstdio>
#include <exception>
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
    if (!sub->parsed()) continue;
    // Last line of defence: readers return Status for bad input, but an
    // exception that slips through (a library throwing, std::bad_alloc) must
    // end in a message and exit status 1, not an abort and a core dump.
    try {
      return action();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "skipkv %s: internal error: %s\n", sub->get_name().c_str(), e.what());
    } catch (...) {
      std::fprintf(stderr, "skipkv %s: internal error: unknown exception\n", sub->get_name().c_str());
    }
    return 1;
  }
  return 2;
}
