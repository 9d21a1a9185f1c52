// Where a `--model` argument's weights are. Users name a model directory (config.json +
// safetensors), but also what they have at hand after training: a checkpoint (step_N/, whose
// model/ holds the weights), a whole run (the newest step_N that verifies), or a file inside a
// model directory (its config.json or a .safetensors file). docs/cli.md lists the rules.
#pragma once
#include <string>

namespace zaya {

struct ModelPath {
  std::string dir;   // the model directory: config.json + safetensors
  std::string note;  // how `dir` was found from the argument; empty when the argument was `dir`
};

// Resolves `arg` as above; throws zaya::Error naming the argument when it is none of them (with a
// "did you mean …?" where a near path is one), or when a run holds checkpoints none of which
// verifies.
ModelPath resolve_model_path(const std::string& arg);

}  // namespace zaya
