// The sampling flags (sampling_flags.h).
#include "cli/sampling_flags.h"

namespace zaya::cli {

void add_sampling_options(CLI::App* sub, SamplingFlags& f) {
  SamplingParams& v = f.values;
  f.temperature =
      sub->add_option("--temperature", v.temperature,
                      "0 = greedy (default: the model's generation_config.json, else 1)");
  f.top_k = sub->add_option(
      "--top-k", v.top_k, "keep the k most likely tokens (0 = off; default: the model's, else 0)");
  f.top_p =
      sub->add_option("--top-p", v.top_p, "nucleus mass (1 = off; default: the model's, else 1)");
  f.min_p = sub->add_option("--min-p", v.min_p,
                            "drop tokens below min-p × the top probability (default: the model's, "
                            "else 0)");
  f.repetition_penalty = sub->add_option("--repetition-penalty", v.repetition_penalty,
                                         "1 = off (default: the model's, else 1)");
  sub->add_option("--seed", v.seed, "sampling seed")->capture_default_str();
}

SamplingParams resolve_sampling(const SamplingFlags& f, SamplingParams defaults) {
  const SamplingParams& v = f.values;
  if (f.temperature->count()) defaults.temperature = v.temperature;
  if (f.top_k->count()) defaults.top_k = v.top_k;
  if (f.top_p->count()) defaults.top_p = v.top_p;
  if (f.min_p->count()) defaults.min_p = v.min_p;
  if (f.repetition_penalty->count()) defaults.repetition_penalty = v.repetition_penalty;
  defaults.seed = v.seed;
  defaults.stop = v.stop;
  defaults.ignore_eos = v.ignore_eos;
  defaults.max_new_tokens = v.max_new_tokens;
  return defaults;
}

}  // namespace zaya::cli
