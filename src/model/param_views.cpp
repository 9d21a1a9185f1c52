// bind_params (param_views.h): the one place that maps the layout's tensor names to fields.
#include "model/param_views.h"

#include "model/param_names.h"

namespace zaya {

ParamViews bind_params(const ZayaConfig& c, const ParamLayout& layout,
                       const ResolveParam& resolve) {
  // Resolved in layout order, whatever order the fields below are written in.
  std::vector<Tensor> views;
  views.reserve(layout.specs.size());
  for (const ParamSpec& s : layout.specs) views.push_back(resolve(s));
  auto get = [&](const std::string& name) { return views[layout.index.at(name)]; };
  auto res = [&](const std::string& p, bool with_residual) {
    const names::ResNames n = names::res(p);
    ResScale r{get(n.ao), get(n.bo), {}, {}};
    if (with_residual) r.ar = get(n.ar), r.br = get(n.br);
    return r;
  };
  ParamViews w;
  w.embed = get(names::kEmbed);
  w.layers.assign(size_t(c.num_layers()), {});
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerParams& l = w.layers[size_t(i)];
    const names::LayerNames n = names::layer(i);
    l.input_norm = get(n.input_norm);
    l.res = res(n.res_prefix, i > 0);
    if (c.is_attention(i)) {
      AttentionParams& at = l.attn;
      at.wq = get(n.q);
      at.wk = get(n.k);
      at.wv1 = get(n.v1);
      at.wv2 = get(n.v2);
      at.conv0_w = get(n.conv0_w);
      at.conv0_b = get(n.conv0_b);
      at.conv1_w = get(n.conv1_w);
      at.conv1_b = get(n.conv1_b);
      at.temp = get(n.temp);
      at.wo = get(n.o);
    } else {
      MoeParams& e = l.moe;
      e.down_w = get(n.down_w);
      e.down_b = get(n.down_b);
      if (c.has_eda_scale(i)) e.eda_scale = get(n.eda_scale);
      e.norm_w = get(n.eda_norm);
      e.m1_w = get(n.m1_w);
      e.m1_b = get(n.m1_b);
      e.m2_w = get(n.m2_w);
      e.m2_b = get(n.m2_b);
      e.m3_w = get(n.m3_w);
      e.biases = get(n.biases);
      for (int64_t k = 0; k < c.num_experts(i); ++k) {
        e.fc1.push_back(get(n.fc1(k)));
        e.fc2.push_back(get(n.fc2(k)));
      }
    }
  }
  w.final_res = res(names::kFinalRes, true);
  w.final_norm = get(names::kFinalNorm);
  return w;
}

}  // namespace zaya
