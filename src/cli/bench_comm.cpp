// zaya bench comm [--min-bytes 8] [--max-bytes 256M] [--factor 2] [--iters 20] [--warmup 5]
//                 [--ops all|all_reduce,reduce_scatter,all_gather,broadcast] [--dtype f32]
//                 [--max-time 1] [--group auto|single|mpi|nccl] [--timeout 300]
// Collective bandwidth in the format of nccl-tests, one table per collective, printed by rank 0
// a line at a time: size S (bytes), count (elements in S), type, time per call (us), algbw = S/t
// and busbw = algbw × 2(n−1)/n (all_reduce), × (n−1)/n (reduce_scatter, all_gather; S = n ×
// chunk), × 1 (broadcast), in GB/s = 1e9 B/s; #wrong counts result elements that differ from the
// expected values, over all ranks. Exits non-zero if any element was wrong. Launch with
// `mpirun -np N zaya bench comm …`; without a launcher it measures the 1-rank (copy) group.
// --group nccl (or --backend nccl) measures the NCCL group on GPU buffers, one GPU per rank (the
// CUDA build). The formulas and the check are documented in perf/comm.h.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "core/assert.h"
#include "dist/group.h"
#include "perf/comm.h"

namespace zaya::cli {

namespace {

struct BenchCommArgs {
  std::string min_bytes = "8", max_bytes = "256M", ops = "all", dtype = "f32", group = "auto";
  int64_t factor = 2;
  int iters = 20, warmup = 5;
  double max_time = 1, timeout_s = 300;
};

DType parse_dtype(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "f64") return DType::F64;
  if (s == "i32") return DType::I32;
  fail("--dtype '{}' is not supported: use f32, f64 or i32", s);
}

std::string byte_label(int64_t b) {
  if (b >= (int64_t(1) << 30) && b % (int64_t(1) << 30) == 0) return fmt::format("{}G", b >> 30);
  if (b >= (int64_t(1) << 20) && b % (int64_t(1) << 20) == 0) return fmt::format("{}M", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{}K", b >> 10);
  return fmt::format("{}", b);
}

int run_bench_comm(const BenchCommArgs& a) {
  dist::CommBenchOptions opt;
  opt.min_bytes = dist::parse_byte_size(a.min_bytes);
  opt.max_bytes = dist::parse_byte_size(a.max_bytes);
  opt.factor = a.factor;
  opt.iters = a.iters;
  opt.warmup = a.warmup;
  opt.max_seconds = a.max_time;
  opt.ops = dist::parse_comm_ops(a.ops);
  opt.dtype = parse_dtype(a.dtype);
  dist::validate(opt);  // before the group exists: a bad flag fails alike on every rank

  std::unique_ptr<dist::Group> group = dist::make_group(a.group, a.timeout_s);
  opt.device =
      group->backend() == dist::Backend::Nccl ? Device::Gpu : Device::Cpu;  // NCCL: GPU buffers
  const bool printer = group->rank() == 0;
  const std::string type = a.dtype;
  if (printer) {
    fmt::print(
        "# zaya bench comm: {} rank{} ({} group{}), {} elements, sizes {}..{} bytes ×{}, "
        "{} timed calls after {} warm-up\n",
        group->size(), group->size() == 1 ? "" : "s", enum_word(group->backend()),
        opt.device == Device::Gpu ? ", GPU buffers" : "", type, byte_label(opt.min_bytes),
        byte_label(opt.max_bytes), opt.factor, opt.iters, opt.warmup);
    fmt::print(
        "# busbw = algbw × 2(n-1)/n (all_reduce), × (n-1)/n (reduce_scatter, "
        "all_gather), × 1 (broadcast); GB/s = 1e9 B/s\n#\n");
    fmt::print("# {:>14} {:>12} {:>6} {:>6} {:>12} {:>9} {:>9} {:>7}\n", "size", "count", "type",
               "redop", "time", "algbw", "busbw", "#wrong");
    fmt::print("# {:>14} {:>12} {:>6} {:>6} {:>12} {:>9} {:>9} {:>7}\n", "(B)", "(elements)", "",
               "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }
  dist::CommOp current{};
  bool first = true;
  double busbw_sum = 0;
  int rows_in_op = 0;
  int64_t wrong = 0;
  auto op_footer = [&] {
    if (printer && rows_in_op)
      fmt::print("# {} avg busbw {:.3f} GB/s\n", dist::comm_op_name(current),
                 busbw_sum / rows_in_op);
  };
  dist::run_comm_bench(*group, opt, [&](const dist::CommBenchRow& row) {
    if (first || row.op != current) {
      op_footer();
      current = row.op, first = false, busbw_sum = 0, rows_in_op = 0;
      if (printer) fmt::print("# {}\n", dist::comm_op_name(row.op));
    }
    busbw_sum += row.busbw_gbs, ++rows_in_op, wrong += row.wrong;
    if (!printer) return;
    const bool reduces = row.op == dist::CommOp::AllReduce || row.op == dist::CommOp::ReduceScatter;
    fmt::print("  {:>14} {:>12} {:>6} {:>6} {:>12.2f} {:>9.3f} {:>9.3f} {:>7}\n", row.bytes,
               row.count, type, reduces ? "sum" : "none", row.time_us, row.algbw_gbs, row.busbw_gbs,
               row.wrong);
    std::fflush(stdout);
  });
  op_footer();
  if (printer) {
    fmt::print("# wrong elements: {}\n", wrong);
    std::fflush(stdout);
  }
  ZAYA_CHECK_INPUT(wrong == 0,
                   "bench comm: {} result elements were wrong — the {} collectives returned "
                   "corrupt data; do not train on this setup",
                   wrong, enum_word(group->backend()));
  group->barrier();
  return 0;
}

}  // namespace

Action add_bench_comm_command(CLI::App& bench) {
  auto a = std::make_shared<BenchCommArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "comm",
      "Collective bandwidth (all_reduce, reduce_scatter, all_gather, broadcast) in the "
      "nccl-tests format; launch with mpirun -np N");
  cmd->add_option("--min-bytes", a->min_bytes, "Smallest size S, e.g. 8, 64K (default 8)");
  cmd->add_option("--max-bytes", a->max_bytes, "Largest size S, e.g. 1M, 256M (default 256M)");
  cmd->add_option("--factor", a->factor, "Size multiplier between rows (default 2)");
  cmd->add_option("--iters", a->iters, "Timed calls per size (default 20)");
  cmd->add_option("--warmup", a->warmup, "Untimed calls before timing (default 5)");
  cmd->add_option("--ops", a->ops,
                  "all, or a comma-separated list of all_reduce, reduce_scatter, all_gather, "
                  "broadcast (default all)");
  cmd->add_option("--dtype", a->dtype, "f32, f64 or i32 (default f32)");
  cmd->add_option("--max-time", a->max_time,
                  "Seconds of timed calls per size: fewer than --iters calls where one call is "
                  "slow (default 1)");
  cmd->add_option("--group,--backend", a->group,
                  "auto (mpi under mpirun/srun), single, mpi, or nccl (GPU buffers, one GPU per "
                  "rank; CUDA build)");
  cmd->add_option("--timeout", a->timeout_s,
                  "Seconds a collective waits for the other ranks before failing (default 300)");
  return [a] { return run_bench_comm(*a); };
}

}  // namespace zaya::cli
