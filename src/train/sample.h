// A sample of what the model in training writes: a continuation of a prompt from the current
// weights, through infer/'s KV-cached decoder and sampler (the step line's "sample @ step N").
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace zaya {

class Model;
class Tokenizer;

// Up to max_tokens tokens after `prompt` (the tokenizer's BOS first when it has one), sampled at
// `temperature` with `seed`; std::nullopt when the prompt leaves no room in the model's context.
// A model on a GPU is copied to the host for it. Only the tokenizer's ids are ever drawn: a model
// with a larger vocabulary samples from its first tok.vocab_size() ids (the rest are never
// trained, and the tokenizer could not decode them).
std::optional<std::string> sample_text(const Model& m, const Tokenizer& tok,
                                       const std::string& prompt, int64_t max_tokens,
                                       double temperature, uint64_t seed);

}  // namespace zaya
