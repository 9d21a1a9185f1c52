// The training run's samples (sample.h).
#include "train/sample.h"

#include <algorithm>
#include <memory>

#include "core/arena.h"
#include "data/tokenizer.h"
#include "infer/engine.h"
#include "infer/infer_model.h"
#include "io/zaya_config.h"
#include "model/model.h"

namespace zaya {

std::optional<std::string> sample_text(const Model& m, const Tokenizer& tok,
                                       const std::string& prompt, int64_t max_tokens,
                                       double temperature, uint64_t seed) {
  GenerationRequest req;
  if (tok.bos_id() >= 0) req.prompt.push_back(tok.bos_id());
  for (int32_t id : tok.encode(prompt)) req.prompt.push_back(id);
  if (req.prompt.empty()) req.prompt.push_back(tok.eos_id() >= 0 ? tok.eos_id() : 0);
  const int64_t room = m.config().max_position_embeddings - int64_t(req.prompt.size());
  if (room <= 0) return std::nullopt;
  req.sampling.temperature = temperature;
  req.sampling.seed = seed;
  req.sampling.max_new_tokens = std::min(max_tokens, room);
  // infer/ decodes on the host: a GPU model's weights are copied over for the sample. A model
  // whose vocabulary is larger than the tokenizer's is cut to the tokenizer's ids (the first
  // rows of the tied embedding, so of the LM head too): sampling over the rest would emit ids
  // the tokenizer cannot decode.
  std::unique_ptr<Model> host;
  const int64_t tok_v = tok.vocab_size();
  if (m.device() != Device::Cpu || tok_v < m.config().vocab_size) {
    ZayaConfig c = m.config();
    c.vocab_size = std::min(c.vocab_size, tok_v);
    host = std::make_unique<Model>(c);
    for (const ParamSpec& s : host->layout().specs) {
      const Tensor dst = host->param(s.name), src = m.param(s.name);
      const int64_t n = dst.numel();  // a prefix of src: the first vocab rows
      device_copy(Tensor(static_cast<float*>(dst.data), {n}),
                  Tensor(static_cast<float*>(src.data), {n}).on(m.device()));
    }
  }
  const InferModel im = InferModel::from_model(host ? *host : m);  // views of F32 weights
  Engine engine(im, &tok, EngineOptions{1, 0, 512});
  std::string text;
  bool done = false;
  engine.submit(std::move(req), [&](const GenerationEvent& ev) {
    text += ev.text;
    done = ev.done;
  });
  while (!done) engine.step();
  return text;
}

}  // namespace zaya
