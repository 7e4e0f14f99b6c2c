// The commands of `shardsim`, each with its synopsis and the flags it
// reads: what `shardsim help COMMAND` and `COMMAND --help` print, and
// what the command line is checked against, so that a flag a command
// does not read is an error rather than quietly ignored.
#ifndef SHARDSIM_SIM_CLI_COMMANDS_H_
#define SHARDSIM_SIM_CLI_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sim/runner/distribute.h"

namespace shardsim {

// What a command is run with, flags already parsed.
struct Invocation {
  std::string command;            // "run"
  std::vector<std::string> args;  // the words after it: "quickstart.textproto"
  Launch launch;                  // this process's MPI rank, if launched so
};

// Each command's entry, in a file of its own (sim/cli/*_command.cc): the
// process's exit code, 0 on success, 1 for an error it printed, 2 for a
// command line it could not take (usage printed).
using CommandMain = int (*)(const Invocation& invocation);
int RunMain(const Invocation& invocation);
int EstimateMain(const Invocation& invocation);
int PlanMain(const Invocation& invocation);
int GoodputMain(const Invocation& invocation);
int MemoryMain(const Invocation& invocation);
int VolumeMain(const Invocation& invocation);
int ScheduleMain(const Invocation& invocation);
int CollectiveMain(const Invocation& invocation);
int CalibrateMain(const Invocation& invocation);
int ValidateMain(const Invocation& invocation);
int PlatformMain(const Invocation& invocation);
int HelpMain(const Invocation& invocation);

struct Command {
  const char* name;
  const char* synopsis;            // "run SCENARIO [flags]"
  const char* summary;             // what it answers
  std::vector<const char*> flags;  // as defined: "memory_cap"
  CommandMain main;
};

const std::vector<Command>& Commands();
const Command* FindCommand(absl::string_view name);

// The overview: every command's synopsis and summary.
std::string Usage();

// " (did you mean \"run\"?)" for a misspelt command, or "".
std::string CommandHint(absl::string_view name);

// One command's synopsis, summary and flags, each with its help text
// and default (from the flag's definition).
std::string CommandHelp(const Command& command);

// Checks the flags given (`names`, as Undash returns them: underscores,
// "noX" for a false bool X) before Abseil parses them: an unknown flag is
// an error with the nearest known one; with `command` known, one it does
// not read is an error naming it. Abseil's own flags (--help, --version,
// --flagfile, ...) pass everywhere.
absl::Status CheckFlags(const std::vector<std::string>& names,
                        const Command* command);

}  // namespace shardsim

#endif  // SHARDSIM_SIM_CLI_COMMANDS_H_
