// shardsim: one binary, one subcommand per question. sim/cli/commands.h
// lists them with the flags each reads (`shardsim help COMMAND`); each
// runs from a file of its own, sim/cli/*_command.cc.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "sim/cli/commands.h"
#include "sim/cli/heap.h"
#include "sim/cli/options.h"
#include "sim/cli/revision.h"  // generated: SHARDSIM_VERSION, SHARDSIM_REVISION
#include "sim/runner/distribute.h"
#include "sim/scenario/args.h"

int main(int argc, char** argv) {
  shardsim::SetUpHeap();
  absl::SetProgramUsageMessage(shardsim::UsageText().c_str());
  // --version (absl's own flag): the version and the git revision it was
  // built from (sim/cli/revision.cmake).
  absl::FlagsUsageConfig usage;
  usage.version_string = [] {
    return std::string("shardsim " SHARDSIM_VERSION " (git " SHARDSIM_REVISION
                       ")\n");
  };
  absl::SetFlagsUsageConfig(usage);
  std::vector<std::string> keep, names;
  std::vector<char*> args_in = shardsim::Undash(argc, argv, &keep, &names);
  if (argc < 2) {
    std::fputs(shardsim::UsageText().c_str(), stderr);
    return 2;
  }
  // The command, as far as can be told before parsing: the first word
  // that is not a flag.
  const shardsim::Command* guess = nullptr;
  for (int i = 1; i < argc && guess == nullptr; ++i) {
    if (argv[i][0] != '-') guess = shardsim::FindCommand(argv[i]);
  }
  // --help and -h print the command's help and succeed (Abseil's own
  // --help would list every flag of the binary and exit 1).
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "-help") {
      std::fputs(guess != nullptr && std::string(guess->name) != "help"
                     ? shardsim::CommandHelp(*guess).c_str()
                     : shardsim::UsageText().c_str(),
                 stdout);
      return 0;
    }
  }
  if (absl::Status s = shardsim::CheckFlags(names, guess); !s.ok()) {
    std::fprintf(stderr, "shardsim: error: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  std::vector<char*> args =
      absl::ParseCommandLine(static_cast<int>(args_in.size()), args_in.data());
  shardsim::Invocation invocation;
  invocation.command = args.size() > 1 ? args[1] : "help";
  for (size_t i = 2; i < args.size(); ++i) invocation.args.push_back(args[i]);
  // Under mpirun or srun with several ranks (sim/runner/distribute.h), `run`
  // and `plan` spread their points over them. Every other command is cheap:
  // rank 0 runs it alone, and the others leave at once, silently and with
  // 0, never starting MPI.
  invocation.launch = shardsim::DetectLaunch();
  const std::string& command = invocation.command;
  if (invocation.launch.size > 1 && command != "run" && command != "plan" &&
      invocation.launch.rank != 0) {
    return 0;
  }
  const shardsim::Command* c = shardsim::FindCommand(command);
  if (c == nullptr) {
    std::fprintf(stderr, "shardsim: unknown command \"%s\"%s\n\n%s",
                 command.c_str(), shardsim::CommandHint(command).c_str(),
                 shardsim::UsageText().c_str());
    return 2;
  }
  return c->main(invocation);
}
