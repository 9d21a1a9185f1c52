// Where a `--model` argument's weights are. Users name a model directory (config.json +
// safetensors), but also what they have at hand after training: a checkpoint (step_N/, whose
// model/ holds the weights), a whole run (the newest step_N that verifies), or a file inside a
// model directory (its config.json, a .safetensors file, its tokenizer.json) — and a GGUF file,
// which is a whole model in one file (docs/quantization.md, "Running a GGUF"). docs/cli.md lists
// the rules; the commands that read a model resolve their argument here, so they all accept the
// same things and say the same things about them.
#pragma once
#include <string>

namespace zaya {

struct ModelPath {
  std::string dir;   // the model directory: config.json + safetensors ("" for a GGUF file)
  std::string note;  // how `dir` was found from the argument; empty when the argument was `dir`
  // A short name for the model: the run's name for a checkpoint's model (NAME in
  // runs/NAME/step_N/model, or in runs/NAME/checkpoints/step_N/model), else the model
  // directory's own name (a GGUF file's: its name without .gguf). `zaya serve` serves it under
  // this name.
  std::string name;
  std::string gguf;  // the GGUF file when the argument is one ("" otherwise)
};

// True when `path` is a GGUF file: a regular file named *.gguf or starting with the GGUF magic.
bool is_gguf_file(const std::string& path);

// Resolves `arg` as above (a GGUF file first: ModelPath::gguf, and nothing in it is read here);
// throws zaya::Error naming the argument when it is none of them (with a
// "did you mean …?" where a near path is one: a parent that is a model, checkpoint or run, a
// sibling a typo away, the same step written without its zero padding, a model/ inside it, or the
// runs inside a folder of runs), or when the checkpoint named (or every checkpoint of the run
// named) fails to verify. `flag` names the argument in messages (a positional one: "IN").
ModelPath resolve_model_path(const std::string& arg, const std::string& flag = "--model");

// The line a command prints (on stderr) about what it resolved: "model DIR (NOTE)", or "" when
// the argument was the model directory itself (nothing to say).
std::string model_path_line(const ModelPath& p);

}  // namespace zaya
