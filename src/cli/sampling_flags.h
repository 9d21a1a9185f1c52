// The sampling flags of `zaya generate` and `zaya chat`: a flag given on the command line overrides
// the model's own default (generation_config.json, see infer/model_files.h default_sampling),
// which overrides SamplingParams' built-in one.
#pragma once
#include <CLI/CLI.hpp>

#include "infer/sampler.h"

namespace zaya::cli {

struct SamplingFlags {
  SamplingParams values;  // what the flags hold (the built-in defaults where not given)
  CLI::Option *temperature = nullptr, *top_k = nullptr, *top_p = nullptr, *min_p = nullptr,
              *repetition_penalty = nullptr;
};

// --temperature, --top-k, --top-p, --min-p, --repetition-penalty, --seed on `sub`.
void add_sampling_options(CLI::App* sub, SamplingFlags& f);

// `defaults` with every flag that was given put in place; seed, stop, ignore_eos and max_new_tokens
// are always the flags' values.
SamplingParams resolve_sampling(const SamplingFlags& f, SamplingParams defaults);

}  // namespace zaya::cli
