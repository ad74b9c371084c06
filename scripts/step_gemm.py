"""How fast MKL runs the products an LSTM's forward and backward are made of.

Every thread of an OpenMP team runs `steps` products (rows x inner) @ (inner x cols) in a C++
loop, with a barrier after each, as a recurrence's time loop would; printed is the time a step
takes and the GFLOP/s of the team. Plain `sgemm` and MKL's packed GEMM (the weight packed once
with cblas_sgemm_pack, then cblas_sgemm_compute) side by side, for fused's split of the batch
between threads and for a split of the hidden units instead (every thread all the rows, a
share of the columns). Then, with torch.mm, the products over all steps at once at (b): the
input projection, the input gradient and the two weight gradients. The goals' workloads (a) and
(b), forward and backward, on two threads:

    .venv/bin/python scripts/step_gemm.py

Needs torch built with MKL (torch's x86 CPU wheels are). Time on a quiet machine.
"""
from __future__ import annotations

import sys
import tempfile

import torch
from torch.utils import benchmark, cpp_extension

SOURCE = r"""
#include <torch/extension.h>
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <vector>
extern "C" {
size_t cblas_sgemm_pack_get_size(int, int, int, int);
void cblas_sgemm_pack(int, int, int, int, int, int, float, const float*, int, float*);
void cblas_sgemm_compute(int, int, int, int, int, int, const float*, int, const float*, int,
                         float, float*, int);
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*,
            const float*, const int*, const float*, const int*, const float*, float*, const int*);
}
// Seconds a step takes, best of five runs: every thread `steps` times c += a @ b.
double step_seconds(int threads, int rows, int inner, int cols, int steps, bool packed) {
  double best = 1e9;
  for (int run = 0; run < 5; ++run) {
    double elapsed = 0;
#pragma omp parallel num_threads(threads)
    {
      std::vector<float> a(rows * inner, 0.01f), b(inner * cols, 0.02f), c(rows * cols, 0.f), p;
      if (packed) {
        p.resize(cblas_sgemm_pack_get_size(162, rows, cols, inner) / sizeof(float) + 1);
        cblas_sgemm_pack(101, 162, 111, rows, cols, inner, 1.f, b.data(), cols, p.data());
      }
      const float one = 1;
#pragma omp barrier
      const auto start = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) {
        if (packed) {
          cblas_sgemm_compute(101, 111, 151, rows, cols, inner, a.data(), inner, p.data(), cols,
                              1.f, c.data(), cols);
        } else {  // row-major c = a @ b is column-major c^T = b^T a^T
          sgemm_("N", "N", &cols, &rows, &inner, &one, b.data(), &cols, a.data(), &inner, &one,
                 c.data(), &cols);
        }
#pragma omp barrier
      }
      if (omp_get_thread_num() == 0) {
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
    }
    best = std::min(best, elapsed);
  }
  return best / steps;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("step_seconds", &step_seconds); }
"""

THREADS = 2
# label, steps, per-thread product (rows, inner, cols): the LSTM's at (a) T=100 B=32 H=256 and
# (b) T=50 B=64 H=512; forward h @ W_hh^T, backward dgates @ W_hh.
SHAPES = (
    ("(a) forward, batch split", 100, (16, 256, 1024)),
    ("(a) forward, unit split", 100, (32, 256, 512)),
    ("(b) forward, batch split", 50, (32, 512, 2048)),
    ("(b) forward, unit split", 50, (64, 512, 1024)),
    ("(b) backward, batch split", 50, (32, 2048, 512)),
    ("(b) backward, unit split", 50, (64, 2048, 256)),
)


# The products over all steps at (b), T=50 B=64 I=H=512 (G = 4H gate rows): name, a, b of a @ b.
T, B, H = 50, 64, 512
WHOLE_SEQUENCE = (
    ("input projection x @ W_ih^T", (T * B, H), (H, 4 * H), False),
    ("input gradient dgates @ W_ih", (T * B, 4 * H), (4 * H, H), False),
    ("weight gradient dgates^T @ x", (4 * H, T * B), (T * B, H), True),
    ("weight gradient dgates^T @ h", (4 * H, T * B), (T * B, H), True),
)


def whole_sequence_seconds(a_shape, b_shape, transposed: bool) -> float:
    """Median seconds of torch.mm(a, b); `transposed`: a is a transposed view, as the weight
    gradients read the gate gradients."""
    a = torch.randn(a_shape[::-1]).t() if transposed else torch.randn(a_shape)
    timer = benchmark.Timer("torch.mm(a, b)", globals={"torch": torch, "a": a,
                                                     "b": torch.randn(b_shape)},
                            num_threads=THREADS)
    return timer.blocked_autorange(min_run_time=1).median


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        module = cpp_extension.load_inline("rnnbench_step_gemm", cpp_sources=SOURCE,
                                           extra_cflags=["-O3", "-fopenmp"],
                                           extra_ldflags=["-fopenmp"], build_directory=folder)
        for label, steps, (rows, inner, cols) in SHAPES:
            cells = []
            for packed in (False, True):
                seconds = module.step_seconds(THREADS, rows, inner, cols, steps, packed)
                gflops = THREADS * 2 * rows * inner * cols / seconds / 1e9
                cells.append(f"{'packed' if packed else 'sgemm'} {seconds * 1e6:6.1f} us "
                             f"({gflops:3.0f} GFLOP/s)")
            print(f"{label:26s} {'   '.join(cells)}", flush=True)
    for label, a_shape, b_shape, transposed in WHOLE_SEQUENCE:
        seconds = whole_sequence_seconds(a_shape, b_shape, transposed)
        gflops = 2 * a_shape[0] * a_shape[1] * b_shape[1] / seconds / 1e9
        print(f"(b) {label:32s} torch.mm {seconds * 1e3:6.2f} ms ({gflops:3.0f} GFLOP/s)",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
