// Fused CPU kernels of the `fused` implementation: one layer and direction of an Elman, LSTM or
// GRU recurrence, forward and backward, for float32 and float64.
//
// The work is arranged so that most FLOPs are large GEMMs:
//   forward:  the input projection of every time step is one GEMM before the loop ("premul"),
//             run by BLAS, oneDNN or our own kernel below (built for AVX2 or AVX-512),
//             whichever measured faster for its shape;
//             the loop does one small GEMM per step (h_{t-1} @ W_hh^T) and the gate arithmetic
//             in place in the premul buffer. Every GEMM reads its weight transposed and
//             row-major, the layout fused.py stores its parameters in; in float32 the per-step
//             product reads W_hh reordered once per call (StepWeight): packed for MKL, or
//             into panels for our own kernel, whichever measured faster.
//   backward: the loop does one small GEMM per step (dgates_t @ W_hh) and keeps the gate
//             gradients transposed; the weight gradients (in their weights' layout), bias
//             gradients and the input gradient are each one GEMM (or sum) over all steps, the
//             GEMMs chosen like the premul's.
// From a batch of 16 the threads share either loop (run_shares): each takes a share of the
// hidden units and meets the others once per step, or, with a projection, of the batch rows.
// Small per-step products (batch 1 or 2) skip ATen's dispatcher and BLAS call overhead and run
// in a plain loop the compiler vectorises; activations use vectorisable exp-based formulas in
// float32 (the libm calls do not vectorise) and libm in float64.
//
// A Python module (pybind11: its call costs half of a torch.ops call, which matters at batch 1)
// with `forward` and `backward`; the Python side (fused.py) wraps them in an autograd.Function.
// Only the headers it uses, one per operator: parsing torch/extension.h took 29 CPU-seconds of
// the build here, more than these and the kernels together (the whole build: 58 s -> 30 s).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/utils/pybind.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

using at::Tensor;

// Activations are inlined into every loop that uses them, or the loops do not vectorise.
#define RNNBENCH_INLINE inline __attribute__((always_inline))

// ---- activations ------------------------------------------------------------------------------

RNNBENCH_INLINE float exp_approx(float x) {
  // exp(x) = 2^n exp(r) with n = round(x / ln 2) and |r| <= ln(2)/2; exp(r) from its Taylor
  // polynomial up to r^7 (truncation error < 1e-8 relative). Clamped to the normal range.
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = std::floor(std::fma(x, 1.44269504f, 0.5f));
  float r = std::fma(n, -0.693359375f, x);  // ln 2 split in two (Cody-Waite): exact high part
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.0f / 5040;
  p = std::fma(p, r, 1.0f / 720);
  p = std::fma(p, r, 1.0f / 120);
  p = std::fma(p, r, 1.0f / 24);
  p = std::fma(p, r, 1.0f / 6);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

RNNBENCH_INLINE float tanh_approx(float x) {
  // Small |x|: the Taylor series to x^13 (error < 1e-8 below 0.4). Otherwise
  // 1 - 2 / (exp(2|x|) + 1), which loses no relative accuracy there. Both are computed so the
  // loop stays branch-free and vectorises.
  const float a = std::fabs(x);
  const float x2 = x * x;
  float p = 21844.0f / 6081075;
  p = std::fma(p, x2, -1382.0f / 155925);
  p = std::fma(p, x2, 62.0f / 2835);
  p = std::fma(p, x2, -17.0f / 315);
  p = std::fma(p, x2, 2.0f / 15);
  p = std::fma(p, x2, -1.0f / 3);
  const float small = std::fma(p * x2, x, x);
  const float large = std::copysign(1.0f - 2.0f / (exp_approx(2.0f * a) + 1.0f), x);
  return a < 0.4f ? small : large;
}

RNNBENCH_INLINE float sigmoid_approx(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

RNNBENCH_INLINE float act_tanh(float x) { return tanh_approx(x); }
RNNBENCH_INLINE double act_tanh(double x) { return std::tanh(x); }
RNNBENCH_INLINE float act_sigmoid(float x) { return sigmoid_approx(x); }
RNNBENCH_INLINE double act_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// ---- matrix products -------------------------------------------------------------------------

// The Fortran BLAS torch links (MKL, OpenBLAS) exports these; weak, so the extension still loads
// where torch exports none, and ATen's mm is used instead.
extern "C" {
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*,
            const float*, const int*, const float*, const int*, const float*, float*, const int*)
    __attribute__((weak));
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*,
            const double*, const int*, const double*, const int*, const double*, double*,
            const int*) __attribute__((weak));
}

// Row-major c (rows, cols) = a (rows, inner) @ b (inner, cols) [+ c] is, column-major,
// c^T = b^T a^T: BLAS with the operands swapped and nothing transposed. (MKL runs this layout
// up to 1.5x faster than a transposed weight at the few rows of a time step.)
template <typename T, typename Gemm>
bool blas_matmul(Gemm* gemm, T* c, const T* a, const T* b, int64_t rows, int64_t inner,
                 int64_t cols, T beta) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (!gemm || rows > kMax || inner > kMax || cols > kMax) return false;
  const int m = cols, n = rows, k = inner;
  const T one = 1;
  gemm("N", "N", &m, &n, &k, &one, b, &m, a, &k, &beta, c, &m);
  return true;
}

bool blas_matmul(float* c, const float* a, const float* b, int64_t rows, int64_t inner,
                 int64_t cols, float beta) {
  return blas_matmul(sgemm_, c, a, b, rows, inner, cols, beta);
}

bool blas_matmul(double* c, const double* a, const double* b, int64_t rows, int64_t inner,
                 int64_t cols, double beta) {
  return blas_matmul(dgemm_, c, a, b, rows, inner, cols, beta);
}

// Rows up to which a per-step product runs in the plain loop below instead of BLAS: at batch 1
// the BLAS call costs more than the arithmetic.
constexpr int64_t kSmallRows = 2;

template <typename T>
void small_matmul(T* out, const T* a, const T* bt, int64_t rows, int64_t inner, int64_t cols,
                  bool accumulate) {
  // out[r, :] (+)= sum_k a[r, k] * bt[k, :]; bt is row-major (inner, cols), so the inner loop
  // runs along contiguous rows of bt and out and vectorises. Four k at a time cut the loads
  // and stores of the output row by four. (At batch 1 this reads all of bt once per step and
  // runs at the cache's bandwidth; keeping column tiles in registers measured no faster.)
  for (int64_t r = 0; r < rows; ++r) {
    T* o = out + r * cols;
    const T* ar = a + r * inner;
    if (!accumulate) std::fill(o, o + cols, T(0));
    int64_t k = 0;
    for (; k + 4 <= inner; k += 4) {
      const T s0 = ar[k], s1 = ar[k + 1], s2 = ar[k + 2], s3 = ar[k + 3];
      const T* b0 = bt + k * cols;
      const T* b1 = b0 + cols;
      const T* b2 = b1 + cols;
      const T* b3 = b2 + cols;
      for (int64_t j = 0; j < cols; ++j) o[j] += s0 * b0[j] + s1 * b1[j] + s2 * b2[j] + s3 * b3[j];
    }
    for (; k < inner; ++k) {
      const T s = ar[k];
      const T* b = bt + k * cols;
      for (int64_t j = 0; j < cols; ++j) o[j] += s * b[j];
    }
  }
}

// out (+)= a @ b on contiguous row-major blocks: out (rows, cols), a (rows, inner),
// b (inner, cols).
template <typename T>
void matmul(T* out, const T* a, const T* b, int64_t rows, int64_t inner, int64_t cols,
            bool accumulate) {
  if (rows <= kSmallRows) {
    small_matmul(out, a, b, rows, inner, cols, accumulate);
  } else if (!blas_matmul(out, a, b, rows, inner, cols, accumulate ? T(1) : T(0))) {
    const auto options = at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value);
    Tensor o = at::from_blob(out, {rows, cols}, options);
    const Tensor a_ = at::from_blob(const_cast<T*>(a), {rows, inner}, options);
    const Tensor b_ = at::from_blob(const_cast<T*>(b), {inner, cols}, options);
    if (accumulate) {
      o.addmm_(a_, b_);
    } else {
      at::mm_out(o, a_, b_);
    }
  }
}

// How a product of a shape was chosen to run, as the *_choices functions list it.
std::string choice_line(int64_t rows, int64_t inner, int64_t cols, int threads, const char* way,
                        bool team = false) {
  return std::to_string(rows) + " x " + std::to_string(inner) + " x " + std::to_string(cols) +
         ", " + std::to_string(threads) + " threads" + (team ? " in a team" : "") + ": " + way;
}

// MKL's packed GEMM (cblas_sgemm_pack/compute), which torch's MKL builds export: the weight a
// step multiplies is reordered once into the layout MKL's kernel reads, instead of on every
// call. Weak, so the extension loads where torch has no MKL, and the plain BLAS call is used.
// The enum arguments are C enums (int); the values are CBLAS's.
extern "C" {
size_t cblas_sgemm_pack_get_size(int identifier, int m, int n, int k) __attribute__((weak));
void cblas_sgemm_pack(int layout, int identifier, int trans, int m, int n, int k, float alpha,
                      const float* src, int ld, float* dest) __attribute__((weak));
void cblas_sgemm_compute(int layout, int transa, int transb, int m, int n, int k, const float* a,
                         int lda, const float* b, int ldb, float beta, float* c, int ldc)
    __attribute__((weak));
}
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasPacked = 151, kCblasBMatrix = 162;

// MKL packs b for its own kernel, and in float32 is what a step multiplies with unless the
// panels below measured faster.
class MklPacked {
 public:
  MklPacked(const float* b, int64_t rows, int64_t inner, int64_t cols)
      : rows_(rows), inner_(inner), cols_(cols) {
    constexpr int64_t kMax = std::numeric_limits<int>::max();
    if (!cblas_sgemm_pack || !cblas_sgemm_compute || !cblas_sgemm_pack_get_size || rows > kMax ||
        inner > kMax || cols > kMax) {
      return;
    }
    const size_t bytes = cblas_sgemm_pack_get_size(kCblasBMatrix, rows, cols, inner);
    packed_ = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
    cblas_sgemm_pack(kCblasRowMajor, kCblasBMatrix, kCblasNoTrans, rows, cols, inner, 1.0f, b,
                     cols, data());
  }

  bool available() const { return packed_.defined(); }

  void multiply(float* out, const float* a, bool accumulate) const {
    cblas_sgemm_compute(kCblasRowMajor, kCblasNoTrans, kCblasPacked, rows_, cols_, inner_, a,
                        inner_, data(), cols_, accumulate ? 1.0f : 0.0f, out, cols_);
  }

 private:
  float* data() const { return reinterpret_cast<float*>(packed_.data_ptr()); }

  int64_t rows_, inner_, cols_;
  Tensor packed_;
};

// The ways a product can run: on BLAS (a time step's product in float32 on MKL's packed GEMM
// where torch has MKL), on oneDNN (products over all time steps only: its result as it comes,
// or transposed), or on a kernel of our own, for AVX2 or for AVX-512, where built.
enum class Product { kBlas, kOneDnn, kOneDnnTransposed, kAvx2, kAvx512 };
constexpr Product kProducts[] = {Product::kBlas, Product::kOneDnn, Product::kOneDnnTransposed,
                                 Product::kAvx2, Product::kAvx512};
// Those a time step's product can run on.
constexpr Product kStepWays[] = {Product::kBlas, Product::kAvx2, Product::kAvx512};

const char* product_name(Product product) {
  switch (product) {
    case Product::kBlas: return "blas";
    case Product::kOneDnn: return "onednn";
    case Product::kOneDnnTransposed: return "onednn_transposed";
    case Product::kAvx2: return "avx2";
    case Product::kAvx512: return "avx512";
  }
  return "";
}

#if defined(__AVX2__) && defined(__FMA__)
#define RNNBENCH_OWN_KERNEL 1
constexpr bool kAvx2Built = true;
#else
constexpr bool kAvx2Built = false;
#endif
#if defined(RNNBENCH_OWN_KERNEL) && defined(__AVX512F__)
constexpr bool kAvx512Built = true;
#else
constexpr bool kAvx512Built = false;
#endif

// Whether `product` can run here: our own kernels where the build's instruction sets have them.
constexpr bool built(Product product) {
  return product == Product::kAvx2 ? kAvx2Built
         : product == Product::kAvx512 ? kAvx512Built : true;
}

// The kernel of our own timed against the libraries: the widest built. (The AVX2 kernel runs on
// an AVX-512 machine only where forced, which is how tests there check it.)
constexpr std::optional<Product> kOwnKernel =
    kAvx512Built ? std::optional<Product>(Product::kAvx512)
    : kAvx2Built ? std::optional<Product>(Product::kAvx2) : std::nullopt;

// The ways products can run here besides oneDNN: "blas", then our own kernels built.
std::vector<std::string> kernel_ways() {
  std::vector<std::string> ways;
  for (const Product way : kStepWays) {
    if (built(way)) ways.push_back(product_name(way));
  }
  return ways;
}

// The way of `ways` built here that `policy` names, none for "auto" (timed); for any other
// policy an error that lists the policies there are, in one line.
template <size_t N>
std::optional<Product> policy_way(const char* what, const std::string& policy,
                                  const Product (&ways)[N]) {
  if (policy == "auto") return std::nullopt;
  std::string known = "auto";
  for (const Product way : ways) {
    if (!built(way)) continue;
    if (policy == product_name(way)) return way;
    known += std::string(", ") + product_name(way);
  }
  TORCH_CHECK(false, "rnnbench_fused: unknown ", what, " policy ", policy, " (here: ", known, ")");
}

#ifdef RNNBENCH_OWN_KERNEL
// A product of our own, for CPUs on which MKL may not run its fastest code: on a 2-core AMD
// EPYC (Zen 5, AVX-512) torch's MKL ran a one-thread (32 x 256) @ (256 x 1024) at 78 GFLOP/s
// and oneDNN at 160, and with this kernel's AVX-512 build instead of MKL's packed GEMM fused's
// LSTM forward at T=100 B=32 H=256 took 8.4 instead of 14.0 ms. One kernel, built for each
// instruction set below (their vector operations are all that differs): out is computed
// kBlockRows rows by a panel of two vectors' columns at a time, 2 x kBlockRows accumulators in
// registers, and each step along the inner dimension two loads of b and a broadcast of a per
// row.
constexpr int64_t kDepth = 256;  // of inner at a time: a panel's rows of b in L1 (16 or 32 KiB)

// AVX2 with FMA: vectors of 8 floats, 16 registers: blocks of 6 rows (12 accumulators, two
// vectors of b and a broadcast).
struct Avx2 {
  using Vec = __m256;
  // Lanes under a mask, and whether that is all of them: whole vectors go through plain loads
  // and stores (AVX2's masked stores are slow on AMD's CPUs).
  struct Mask {
    __m256i lanes;
    bool full;
  };
  static constexpr int64_t kLanes = 8;
  static constexpr int kBlockRows = 6;

  // The first `count` lanes (none for count <= 0, all from count 8).
  static Mask first(int64_t count) {
    const int n = static_cast<int>(std::clamp<int64_t>(count, 0, kLanes));
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return {_mm256_cmpgt_epi32(_mm256_set1_epi32(n), index), n == kLanes};
  }
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec load(const Mask& m, const float* p) {
    return m.full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m.lanes);
  }
  static void store(const Mask& m, float* p, Vec v) {
    if (m.full) {
      _mm256_storeu_ps(p, v);
    } else {
      _mm256_maskstore_ps(p, m.lanes, v);
    }
  }
  static Vec broadcast(float x) { return _mm256_set1_ps(x); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
};

#ifdef __AVX512F__
// AVX-512: vectors of 16 floats, 32 registers: blocks of 8 rows (16 accumulators).
struct Avx512 {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int64_t kLanes = 16;
  static constexpr int kBlockRows = 8;

  // The first `count` lanes (none for count <= 0, all from count 16).
  static Mask first(int64_t count) {
    return count <= 0 ? 0 : count >= kLanes ? 0xFFFF : static_cast<Mask>((1u << count) - 1);
  }
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec load(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(Mask m, float* p, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
  static Vec broadcast(float x) { return _mm512_set1_ps(x); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
};
#endif

// c (Rows, a panel's columns, those of the masks) (+)= a (Rows, depth) @ b (depth, panel),
// b's rows ldb apart, read under the masks where `MaskB` (b's last columns, at the end of its
// rows).
template <typename S, int Rows, bool MaskB>
RNNBENCH_INLINE void product_block(float* c, int64_t ldc, const float* a, int64_t lda,
                                   const float* b, int64_t ldb, int64_t depth,
                                   typename S::Mask low, typename S::Mask high, bool add) {
  constexpr int64_t kLanes = S::kLanes;
  typename S::Vec left[Rows], right[Rows];
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    left[r] = add ? S::load(low, c + r * ldc) : S::zero();
    right[r] = add ? S::load(high, c + r * ldc + kLanes) : S::zero();
  }
  for (int64_t k = 0; k < depth; ++k) {
    const float* bk = b + k * ldb;
    const auto b0 = MaskB ? S::load(low, bk) : S::load(bk);
    const auto b1 = MaskB ? S::load(high, bk + kLanes) : S::load(bk + kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < Rows; ++r) {
      const auto ar = S::broadcast(a[r * lda + k]);
      left[r] = S::fma(ar, b0, left[r]);
      right[r] = S::fma(ar, b1, right[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < Rows; ++r) {
    S::store(low, c + r * ldc, left[r]);
    S::store(high, c + r * ldc + kLanes, right[r]);
  }
}

// product_block for a block of `count` rows (1 to S::kBlockRows: a whole block, or the last
// rows), unrolled for each count.
template <typename S, bool MaskB, int Rows = S::kBlockRows>
void product_rows(int64_t count, float* c, int64_t ldc, const float* a, int64_t lda,
                  const float* b, int64_t ldb, int64_t depth, typename S::Mask low,
                  typename S::Mask high, bool add) {
  if constexpr (Rows > 1) {
    if (count < Rows) {
      return product_rows<S, MaskB, Rows - 1>(count, c, ldc, a, lda, b, ldb, depth, low, high,
                                              add);
    }
  }
  product_block<S, Rows, MaskB>(c, ldc, a, lda, b, ldb, depth, low, high, add);
}

// out (rows, cols) (+)= a (rows, inner; its rows lda apart) @ b, where row k of b's columns
// [p * panel, (p + 1) * panel) starts at b + p * block_step + k * ldb: b itself (block_step a
// panel, ldb cols: `direct`, its last columns read under a mask) or b reordered into Panels
// (block_step inner x panel, ldb a panel, zeros past the last column).
template <typename S>
void simd_product(float* out, const float* a, int64_t lda, const float* b, int64_t rows,
                  int64_t inner, int64_t cols, int64_t block_step, int64_t ldb, bool direct,
                  bool accumulate) {
  constexpr int64_t kPanel = 2 * S::kLanes;
  for (int64_t p = 0; p * kPanel < cols; ++p) {
    const int64_t width = std::min(kPanel, cols - p * kPanel);
    const auto low = S::first(width), high = S::first(width - S::kLanes);
    const bool masked = direct && width < kPanel;
    for (int64_t k0 = 0; k0 < inner; k0 += kDepth) {
      const int64_t depth = std::min(kDepth, inner - k0);
      const float* b0 = b + p * block_step + k0 * ldb;
      const bool add = accumulate || k0 > 0;
      for (int64_t r0 = 0; r0 < rows; r0 += S::kBlockRows) {
        const int64_t count = std::min<int64_t>(S::kBlockRows, rows - r0);
        float* c0 = out + r0 * cols + p * kPanel;
        const float* a0 = a + r0 * lda + k0;
        if (masked) {
          product_rows<S, true>(count, c0, cols, a0, lda, b0, ldb, depth, low, high, add);
        } else {
          product_rows<S, false>(count, c0, cols, a0, lda, b0, ldb, depth, low, high, add);
        }
      }
    }
  }
}

// The columns of a panel of `kernel` (kAvx2 or kAvx512): two of its vectors.
constexpr int64_t panel_width(Product kernel) {
#ifdef __AVX512F__
  if (kernel == Product::kAvx512) return 2 * Avx512::kLanes;
#endif
  return 2 * Avx2::kLanes;
}

// simd_product on `kernel`'s instruction set.
void own_product(Product kernel, float* out, const float* a, int64_t lda, const float* b,
                 int64_t rows, int64_t inner, int64_t cols, int64_t block_step, int64_t ldb,
                 bool direct, bool accumulate) {
#ifdef __AVX512F__
  if (kernel == Product::kAvx512) {
    return simd_product<Avx512>(out, a, lda, b, rows, inner, cols, block_step, ldb, direct,
                                accumulate);
  }
#endif
  // Only a built kernel is ever asked for: another's panels would be of another width.
  TORCH_CHECK(kernel == Product::kAvx2, "rnnbench_fused: no ", product_name(kernel), " kernel");
  simd_product<Avx2>(out, a, lda, b, rows, inner, cols, block_step, ldb, direct, accumulate);
}

// b (inner, cols) reordered once for `kernel`, for the products every time step does with it:
// each panel's rows contiguous, zeros past the last column, so that a panel's depth of rows is
// one run of memory in L1.
class Panels {
 public:
  Panels(Product kernel, const float* b, int64_t inner, int64_t cols)
      : kernel_(kernel), width_(panel_width(kernel)), inner_(inner), cols_(cols),
        packed_(at::zeros({(cols + width_ - 1) / width_ * inner * width_},
                          at::TensorOptions().dtype(at::kFloat))) {
    float* packed = packed_.data_ptr<float>();
    for (int64_t p = 0; p * width_ < cols; ++p) {
      const int64_t width = std::min(width_, cols - p * width_);
      for (int64_t k = 0; k < inner; ++k) {
        std::copy(b + k * cols + p * width_, b + k * cols + p * width_ + width,
                  packed + (p * inner + k) * width_);
      }
    }
  }

  Product kernel() const { return kernel_; }

  // out (rows, cols) (+)= a (rows, inner) @ b.
  void multiply(float* out, const float* a, int64_t rows, bool accumulate) const {
    own_product(kernel_, out, a, inner_, packed_.data_ptr<float>(), rows, inner_, cols_,
                inner_ * width_, width_, /*direct=*/false, accumulate);
  }

 private:
  Product kernel_;
  int64_t width_, inner_, cols_;
  Tensor packed_;
};
#endif

// How a time step's product runs in float32: on BLAS (MKL's packed GEMM where torch has MKL), or
// on panels for our own kernel where built. Neither is the faster on every CPU (MKL runs its
// AVX-512 code on some), so each thread times both the first time it meets a shape, and the
// faster runs that shape from then on.
//
// One way forced for every step product (tests run each), or none: timed.
std::optional<Product> forced_step_way;
// Rows, inner, cols, threads at once, whether a team -> the way that measured fastest. Threads
// of a team choose at the same time, hence the lock.
using StepKey = std::tuple<int64_t, int64_t, int64_t, int, bool>;
std::mutex step_choices_lock;
std::map<StepKey, Product> step_choices;

// out (rows, cols) (+)= a (rows, inner) @ b (inner, cols), the product every time step does
// with the same b. In float32 b is reordered when this is made for the way chosen (MKL's
// packed layout, or the panels), and every multiply reads the reordered copy. Made by the
// thread that multiplies: MKL's packed layout depends on the number of threads it packs with,
// which must be the number it computes with.
template <typename T>
class StepWeight {
 public:
  StepWeight(const T* b, int64_t rows, int64_t inner, int64_t cols)
      : b_(b), rows_(rows), inner_(inner), cols_(cols) {
    if constexpr (std::is_same_v<T, float>) {
      if (rows <= kSmallRows || cols == 0 || inner == 0) return;
      // Each way reorders b its own way: only the way chosen does, unless both are to be timed.
      std::optional<Product> way = Product::kBlas;
#ifdef RNNBENCH_OWN_KERNEL
      way = known_way();
      if (way != Product::kBlas) panels_.emplace(way.value_or(*kOwnKernel), b, inner, cols);
#endif
      if (way == Product::kBlas || !way) {
        const MklPacked mkl(b, rows, inner, cols);
        if (mkl.available()) mkl_ = mkl;
      }
#ifdef RNNBENCH_OWN_KERNEL
      if (!way && time_ways() == Product::kBlas) {
        panels_.reset();
      } else if (!way) {
        mkl_.reset();
      }
#endif
    }
  }

  void multiply(T* out, const T* a, bool accumulate) const {
#ifdef RNNBENCH_OWN_KERNEL
    if (panels_) return multiply_by(panels_->kernel(), out, a, accumulate);
#endif
    multiply_by(Product::kBlas, out, a, accumulate);
  }

 private:
  // The product run `way`'s way: on the panels, or on BLAS (MKL's packed copy where made).
  void multiply_by([[maybe_unused]] Product way, T* out, const T* a, bool accumulate) const {
    if constexpr (std::is_same_v<T, float>) {
#ifdef RNNBENCH_OWN_KERNEL
      if (way != Product::kBlas) return panels_->multiply(out, a, rows_, accumulate);
#endif
      if (mkl_) return mkl_->multiply(out, a, accumulate);
    }
    matmul(out, a, b_, rows_, inner_, cols_, accumulate);
  }

#ifdef RNNBENCH_OWN_KERNEL
  // This shape's key in step_choices: its sizes, the threads at work at once, and whether they
  // are a team, each thread with its own product (BLAS then runs on one thread), or BLAS's own.
  StepKey key() const {
#ifdef _OPENMP
    if (omp_in_parallel()) return std::make_tuple(rows_, inner_, cols_, omp_get_num_threads(), true);
#endif
    return std::make_tuple(rows_, inner_, cols_, at::get_num_threads(), false);
  }

  // The way this shape runs where it is known: forced, or chosen earlier.
  std::optional<Product> known_way() const {
    if (forced_step_way) return forced_step_way;
    std::lock_guard<std::mutex> hold(step_choices_lock);
    const auto known = step_choices.find(key());
    if (known == step_choices.end()) return std::nullopt;
    return known->second;
  }

  // Times BLAS and the panels on inputs of this shape (each five times, round by round, the
  // fastest single run wins) and records the faster, unless another thread recorded one first.
  Product time_ways() const {
    const std::vector<float> a(rows_ * inner_, 0.5f);
    std::vector<float> out(rows_ * cols_);
    constexpr int kRounds = 5;
    const Product ways[] = {Product::kBlas, panels_->kernel()};
    double best[2] = {std::numeric_limits<double>::infinity(),
                      std::numeric_limits<double>::infinity()};
    for (int round = 0; round < kRounds; ++round) {
      for (int way = 0; way < 2; ++way) {
        const auto start = std::chrono::steady_clock::now();
        multiply_by(ways[way], out.data(), a.data(), /*accumulate=*/false);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        best[way] = std::min(best[way], seconds);
      }
    }
    const Product way = best[1] < best[0] ? ways[1] : ways[0];
    std::lock_guard<std::mutex> hold(step_choices_lock);
    return step_choices.emplace(key(), way).first->second;
  }

  std::optional<Panels> panels_;
#endif
  const T* b_;
  int64_t rows_, inner_, cols_;
  std::optional<MklPacked> mkl_;
};

// Sets how the step products run: "auto" (timed), "blas", or "avx2" or "avx512" (where built).
void set_step_products(const std::string& policy) {
  forced_step_way = policy_way("step product", policy, kStepWays);
}

// out_in (rows, cols) (+)= a (rows, inner) @ b (inner, cols), as a new tensor, the way a time
// step runs it under set_step_products: the step product on its own, for tests.
Tensor step_product(const Tensor& out_in, const Tensor& a, const Tensor& b, bool accumulate) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) &&
                  out_in.sizes() == at::IntArrayRef({a.size(0), b.size(1)}),
              "rnnbench_fused: step_product of mismatched shapes");
  TORCH_CHECK(a.scalar_type() == b.scalar_type() && out_in.scalar_type() == a.scalar_type(),
              "rnnbench_fused: step_product of mixed dtypes");
  Tensor out = out_in.clone(at::MemoryFormat::Contiguous);  // `out_in` stays as it was
  const Tensor a_c = a.contiguous(), b_c = b.contiguous();
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "rnnbench_fused_step_product", [&] {
    const StepWeight<scalar_t> weight(b_c.data_ptr<scalar_t>(), a.size(0), a.size(1), b.size(1));
    weight.multiply(out.data_ptr<scalar_t>(), a_c.data_ptr<scalar_t>(), accumulate);
  });
  return out;
}

// The ways the timed step products chose, one line each: "rows x inner x cols, threads: way",
// the threads "N threads in a team" where each ran its own product.
std::vector<std::string> step_choices_made() {
  std::lock_guard<std::mutex> hold(step_choices_lock);
  std::vector<std::string> lines;
  for (const auto& [key, way] : step_choices) {
    const auto [rows, inner, cols, threads, team] = key;
    lines.push_back(choice_line(rows, inner, cols, threads, product_name(way), team));
  }
  return lines;
}

// ---- transposes ------------------------------------------------------------------------------

// How a transpose writes its result: through the caches, for a reader soon after, or streamed
// to memory past them (non-temporal stores), for one that reads it only after much other work:
// no read of each line before it is written, and what the writer reads next stays in cache. (The
// backward's gate gradients of all steps, 25 MiB for an LSTM at T=50 B=64 H=512, are read only by
// the products after the loop.)
enum class Writes { kCached, kStreamed };

// Bytes a tile's rows start at a multiple of to be streamed: a whole line of memory, so that no
// line is left half written by one tile for another to finish.
constexpr uintptr_t kStreamAlignment = 64;

// Orders this thread's streamed writes before whatever it writes next, such as its arrival at a
// barrier: they are weakly ordered, and other threads may read them after it.
RNNBENCH_INLINE void fence_streamed_writes() {
#ifdef __AVX2__
  _mm_sfence();
#endif
}

#ifdef __AVX512F__
template <Writes W>
RNNBENCH_INLINE void store_row(float* p, __m512 v) {
  if constexpr (W == Writes::kStreamed) {
    _mm512_stream_ps(p, v);
  } else {
    _mm512_storeu_ps(p, v);
  }
}

// dst (16, 16), its rows ldd apart, = src (16, 16)^T, src's rows lds apart: 16 loads, four
// rounds of shuffles (pairs of floats, pairs of doubles, then 128-bit lanes twice), 16 stores.
template <Writes W>
RNNBENCH_INLINE void transpose_tile(float* dst, int64_t ldd, const float* src, int64_t lds) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
    const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 16; i += 8) {
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {
    store_row<W>(dst + j * ldd, _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88));
    store_row<W>(dst + (j + 8) * ldd, _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd));
  }
}
#elif defined(__AVX2__)
template <Writes W>
RNNBENCH_INLINE void store_row(float* p, __m256 v) {
  if constexpr (W == Writes::kStreamed) {
    _mm256_stream_ps(p, v);
  } else {
    _mm256_storeu_ps(p, v);
  }
}

// dst (8, 8), its rows ldd apart, = src (8, 8)^T: 8 loads, three rounds of shuffles (pairs of
// floats, pairs of pairs, then 128-bit halves), 8 stores.
template <Writes W>
RNNBENCH_INLINE void transpose_8x8(float* dst, int64_t ldd, const float* src, int64_t lds) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    store_row<W>(dst + j * ldd, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
    store_row<W>(dst + (j + 4) * ldd, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
  }
}

// dst (16, 16) = src (16, 16)^T as four 8 x 8 transposes, both halves of a row of dst one after
// the other (streamed, a line is then written whole at once).
template <Writes W>
RNNBENCH_INLINE void transpose_tile(float* dst, int64_t ldd, const float* src, int64_t lds) {
  for (int j = 0; j < 16; j += 8) {
    for (int i = 0; i < 16; i += 8) {
      transpose_8x8<W>(dst + j * ldd + i, ldd, src + i * lds + j, lds);
    }
  }
}
#endif

// dst (cols, rows), its rows ld apart, = src (rows, cols)^T, src's rows lds apart. In tiles of
// 16 x 16 (in registers where AVX2 or AVX-512 is built), so that every line of memory read or
// written is read or written whole. Streamed `writes` are streamed where a tile's rows start on
// whole lines (the rest go through the caches); fence_streamed_writes before another thread
// reads them.
template <typename T>
void transpose_into(T* __restrict__ dst, int64_t ld, const T* __restrict__ src, int64_t lds,
                    int64_t rows, int64_t cols, Writes writes = Writes::kCached) {
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
#ifdef __AVX2__
      if constexpr (std::is_same_v<T, float>) {
        if (r1 - r0 == kTile && c1 - c0 == kTile) {
          float* const tile = dst + c0 * ld + r0;
          const bool aligned = reinterpret_cast<uintptr_t>(tile) % kStreamAlignment == 0 &&
                               ld * sizeof(float) % kStreamAlignment == 0;
          if (writes == Writes::kStreamed && aligned) {
            transpose_tile<Writes::kStreamed>(tile, ld, src + r0 * lds + c0, lds);
          } else {
            transpose_tile<Writes::kCached>(tile, ld, src + r0 * lds + c0, lds);
          }
          continue;
        }
      }
#else
      (void)writes;
#endif
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) dst[c * ld + r] = src[r * lds + c];
      }
    }
  }
}

// The transpose of row-major `m` (rows, cols), as a view of a new row-major (cols, rows) matrix:
// the layout fused stores its weights in, which autograd would otherwise copy a gradient into.
// Blocks of 16 rows are shared out between torch's threads.
Tensor transposed_copy(const Tensor& m) {
  const int64_t rows = m.size(0), cols = m.size(1);
  Tensor out = at::empty({cols, rows}, m.options());
  AT_DISPATCH_FLOATING_TYPES(m.scalar_type(), "rnnbench_fused_transpose", [&] {
    const scalar_t* const from = m.data_ptr<scalar_t>();
    scalar_t* const to = out.data_ptr<scalar_t>();
    // Blocks of at least 64 Ki elements a task: a small copy runs on the calling thread.
    const int64_t block = 16 * std::max<int64_t>(cols, 1);
    const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / block);
    at::parallel_for(0, (rows + 15) / 16, grain, [&](int64_t begin, int64_t end) {
      const int64_t r0 = begin * 16, r1 = std::min(rows, end * 16);
      transpose_into(to + r0, rows, from + r0 * cols, cols, r1 - r0, cols);
    });
  });
  return out.t();
}

// ---- products over all time steps --------------------------------------------------------------

// The input projection before the time loop, and the input and weight gradients after it, are
// each one product with a row for every step and batch row: at a large batch, half or more of
// a layer's FLOPs. Two libraries in torch run them, and neither is the faster everywhere: on a
// 2-core AMD EPYC (AVX2, two threads), one at a time, oneDNN's matmul ran the input projection
// of an LSTM at T=100 B=32 H=256 1.08x as fast as MKL's sgemm, the input gradient at T=50 B=64
// H=512 1.37x, and a weight gradient at T=100 B=32 H=256 0.93x. So a large product's shape is
// timed once per process with each way of running it, and the fastest runs it from then on.
// oneDNN is reached through torch's own operator (mkldnn::_linear_pointwise, out = input @
// weight^T): torch exports no oneDNN symbols, and including the dispatcher's headers to call
// the operator from C++ made this file's build a third slower. The kernels are called from
// Python, which holds the GIL: that makes the call back into Python legal and the bookkeeping
// below safe without a lock. Our own kernel, where built, is timed beside the two.

// Products smaller than this (rows x inner x cols) are not timed against oneDNN, whose call
// through Python costs tens of microseconds: a few milliseconds at most, where that timing
// would cost more than a better choice saves. Where our own kernel is built, products of
// every size are timed against it: a few runs of each way, once per shape and process, which
// pays for itself in the calls after (on a Zen 5 EPYC the AVX-512 kernel ran the input
// projection of an LSTM at T=25 B=1 H=128 in a third of MKL's time).
constexpr int64_t kTimedProduct = int64_t(1) << 27;

// One way forced for every product (tests run each), or none: timed.
std::optional<Product> forced_product;
// Shape, operand layouts (and whether oneDNN may take them), the result's layout, and threads ->
// the way that measured fastest, and the ways timed.
struct ProductChoice {
  Product way;
  std::vector<Product> timed;
};
using ProductKey = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, bool, int>;
std::map<ProductKey, ProductChoice> product_choices;

// torch.ops.mkldnn._linear_pointwise, or None where this torch has no oneDNN. Never freed: a
// Python object must not be destroyed after the interpreter is.
const py::object& onednn_linear() {
  static const py::object* op = [] {
    try {
      return new py::object(
          py::module_::import("torch").attr("ops").attr("mkldnn").attr("_linear_pointwise"));
    } catch (const py::error_already_set&) {
      return new py::object(py::none());
    }
  }();
  return *op;
}

Tensor linear_onednn(const Tensor& input, const Tensor& weight) {
  return onednn_linear()(input, weight, py::none(), "none", py::list(), "").cast<Tensor>();
}

// Whether our own kernel reads a and b as they are: float32, a's rows of contiguous elements
// (wherever they start), b row-major.
bool own_kernel_reads(const Tensor& a, const Tensor& b) {
  return a.scalar_type() == at::kFloat && a.stride(1) == 1 && b.is_contiguous();
}

#ifdef RNNBENCH_OWN_KERNEL
// Rows of a product over all time steps that our own kernel computes at a time: their rows of a
// stay in cache while b's columns pass (all 3200 rows of an input projection would not).
constexpr int64_t kRowsPerTask = 64;

// a @ b on our own `kernel`, reading b as it lies and a's rows wherever they start (a view of
// some columns of a matrix will do). A large product is shared out between torch's threads a
// block of rows at a time, and each block is taken a depth (kDepth of the inner dimension) at a
// time across all of b's columns, so that the block's slice of a (64 KiB) stays in L2 while b's
// panels pass. Each panel across the whole depth instead read the block's rows of a (800 KiB for
// a weight gradient at T=50 B=64 H=512, more than L2 keeps beside b's stream) back from L3 for
// every panel: on a Zen 5 EPYC that product ran at 468 GFLOP/s instead of 490. (The step
// products there measured no difference either way, and keep the panel outside.)
Tensor own_sequence_product(Product kernel, const Tensor& a, const Tensor& b) {
  // sequence_product offers the kernel only these; a way that fell back to another library
  // here would pass every test of it on its numbers alone.
  TORCH_CHECK(built(kernel) && own_kernel_reads(a, b), "rnnbench_fused: the ",
              product_name(kernel), " kernel was given operands it does not read (not float32, "
              "or strided rows)");
  const int64_t rows = a.size(0), inner = a.size(1), cols = b.size(1);
  Tensor out = at::empty({rows, cols}, a.options());
  float* const outp = out.data_ptr<float>();
  const float* const ap = a.data_ptr<float>();
  const float* const bp = b.data_ptr<float>();
  const int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  const bool large = rows * inner * cols >= kTimedProduct;
  at::parallel_for(0, tasks, large ? 1 : tasks, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r0 = task * kRowsPerTask;
      for (int64_t k0 = 0; k0 < inner; k0 += kDepth) {
        own_product(kernel, outp + r0 * cols, ap + r0 * a.stride(0) + k0, a.stride(0),
                    bp + k0 * cols, std::min(kRowsPerTask, rows - r0),
                    std::min(kDepth, inner - k0), cols, panel_width(kernel), cols,
                    /*direct=*/true, /*accumulate=*/k0 > 0);
      }
    }
  });
  return out;
}
#endif

// The layout a caller takes a product's result in: row-major, or transposed (a view of a row-major
// matrix of the transposed shape: the layout fused stores its weights in, in which autograd
// takes a weight's gradient without copying it).
enum class Layout { kRowMajor, kTransposed };

// a (rows, inner) @ b (inner, cols) one way; kOneDnnTransposed gives a transposed view.
Tensor product_by(Product product, const Tensor& a, const Tensor& b) {
  switch (product) {
    case Product::kOneDnn:
      return linear_onednn(a, b.t());
    case Product::kOneDnnTransposed:  // (b^T a^T)^T: oneDNN runs some shapes faster this way
      return linear_onednn(b.t(), a).t();
    case Product::kAvx2:
    case Product::kAvx512:
#ifdef RNNBENCH_OWN_KERNEL
      return own_sequence_product(product, a, b);
#endif
      break;
    case Product::kBlas:
      break;
  }
  // ATen for strided operands, and for empty ones (BLAS refuses a leading dimension of 0).
  if (!a.is_contiguous() || !b.is_contiguous() || a.numel() == 0 || b.numel() == 0) {
    return at::mm(a, b);
  }
  Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "rnnbench_fused_product", [&] {
    matmul(out.data_ptr<scalar_t>(), a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(), a.size(0),
           a.size(1), b.size(1), /*accumulate=*/false);
  });
  return out;
}

// a @ b run `product`'s way, in `layout`: a way that gives the other layout is followed by a
// transposed copy (part of that way's time when ways are timed).
Tensor product_in(Layout layout, Product product, const Tensor& a, const Tensor& b) {
  const Tensor result = product_by(product, a, b);
  const bool row_major = result.is_contiguous();
  if (layout == Layout::kTransposed && row_major) return transposed_copy(result);
  if (layout == Layout::kRowMajor && !row_major) return result.contiguous();
  return result;
}

// Whether m is row-major or the transpose of a row-major matrix.
bool plain(const Tensor& m) { return m.is_contiguous() || m.t().is_contiguous(); }

// a @ b for a product over all time steps in `layout`, run the way chosen for its shape.
Tensor sequence_product(const Tensor& a, const Tensor& b, Layout layout) {
  const bool fp32 = a.scalar_type() == at::kFloat && a.numel() > 0 && b.numel() > 0;
  // Not for other strides: oneDNN ran W_hh's gradient at T=50 B=64 H=512, whose gate gradients
  // are some columns of a wider matrix, on its reference code, 30 s a call instead of 15 ms.
  const bool onednn = fp32 && plain(a) && plain(b) && !onednn_linear().is_none();
  const bool own = fp32 && kOwnKernel && own_kernel_reads(a, b);
  const bool transposed = layout == Layout::kTransposed;
  if (forced_product) {
    const Product forced = *forced_product;
    const bool kernel = forced == Product::kAvx2 || forced == Product::kAvx512;
    const bool here = forced == Product::kBlas || (kernel ? own : onednn);
    if (!here) return product_in(layout, Product::kBlas, a, b);
    return product_in(layout, !transposed && forced == Product::kOneDnnTransposed
                                  ? Product::kOneDnn : forced, a, b);
  }
  // The ways that may be the faster: oneDNN for large products (its call through Python costs
  // more than a small one takes), our own kernel where built.
  const bool large = a.size(0) * a.size(1) * b.size(1) >= kTimedProduct;
  std::vector<Product> ways{Product::kBlas};
  if (onednn && large) ways.push_back(Product::kOneDnn);
  if (onednn && large && transposed) ways.push_back(Product::kOneDnnTransposed);
  if (own) ways.push_back(*kOwnKernel);
  if (ways.size() == 1) return product_in(layout, Product::kBlas, a, b);
  const auto key = std::make_tuple(a.size(0), a.size(1), b.size(1), a.is_contiguous(),
                                   a.stride(1) == 1, b.is_contiguous(), onednn, transposed,
                                   at::get_num_threads());
  const auto known = product_choices.find(key);
  if (known != product_choices.end()) return product_in(layout, known->second.way, a, b);
  // Each way three times, round by round so that every way sees the same moments of a machine
  // whose speed drifts; the way of the fastest run wins, and that run's result is returned. A
  // way that fails (a oneDNN that cannot run here) drops out.
  constexpr int kRounds = 3;
  Tensor best_result;
  double best_seconds = std::numeric_limits<double>::infinity();
  for (int round = 0; round < kRounds; ++round) {
    for (const Product product : ways) {
      const auto start = std::chrono::steady_clock::now();
      Tensor result;
      try {
        result = product_in(layout, product, a, b);
      } catch (const std::exception&) {
        if (product == Product::kBlas) throw;
        continue;
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (seconds < best_seconds) {
        best_seconds = seconds;
        best_result = result;
        product_choices[key] = ProductChoice{product, ways};
      }
    }
  }
  return best_result;
}

// a (rows, inner) @ b (inner, cols) the way a product over all time steps runs under
// set_products, row-major or `transposed`: on its own, for tests.
Tensor product_alone(const Tensor& a, const Tensor& b, bool transposed) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
              "rnnbench_fused: product of mismatched shapes");
  TORCH_CHECK(a.scalar_type() == b.scalar_type() && a.device().is_cpu() && b.device().is_cpu(),
              "rnnbench_fused: product of mixed dtypes or not on the CPU");
  return sequence_product(a, b, transposed ? Layout::kTransposed : Layout::kRowMajor);
}

// Sets how the products over all time steps run: "auto", "blas", "onednn",
// "onednn_transposed" (where a row-major result is needed, "onednn") or, where built, "avx2"
// or "avx512" (for float32 operands, a's rows of contiguous elements; for others "blas").
void set_products(const std::string& policy) {
  forced_product = policy_way("product", policy, kProducts);
}

// The ways the timed products chose, one line each:
// "rows x inner x cols, threads: way (timed: way, way, ...)".
std::vector<std::string> product_choices_made() {
  std::vector<std::string> lines;
  for (const auto& [key, choice] : product_choices) {
    std::string timed;
    for (const Product way : choice.timed) {
      timed += (timed.empty() ? "" : ", ") + std::string(product_name(way));
    }
    lines.push_back(choice_line(std::get<0>(key), std::get<1>(key), std::get<2>(key),
                                std::get<8>(key), product_name(choice.way)) +
                    " (timed: " + timed + ")");
  }
  return lines;
}

// Asks the CPU to bring `rows` rows of `width` elements, `stride` elements apart, into cache.
// The time loop's gate pass reads the step's slice of the input projection, written by the GEMM
// before the loop and long out of cache: requested before the step's product, it arrives while
// the product runs instead of stalling the gate pass (at T=100 B=32 H=256 the LSTM's gate pass
// spent most of its time waiting on these loads).
template <typename T>
void prefetch_rows(const T* first, int64_t rows, int64_t width, int64_t stride) {
  constexpr int64_t kLine = 64;
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = reinterpret_cast<const char*>(first + r * stride);
    for (int64_t at = 0; at < width * static_cast<int64_t>(sizeof(T)); at += kLine) {
      __builtin_prefetch(row + at, /*rw=*/1, /*locality=*/3);
    }
  }
}

// Rows of the batch, and hidden units, a thread gets at least before the batch, or the units,
// are split between threads.
constexpr int64_t kMinRowsPerThread = 8;
constexpr int64_t kMinUnitsPerThread = 16;

// The part of a layer's time loop one thread runs: batch rows [b0, b0 + rows) and hidden units
// [j0, j0 + units) of every gate.
struct Share {
  int64_t b0, rows, j0, units;
  bool units_split;  // then a step's h is whole only when every thread has written its units

  // Where the threads meet after each step when the units are split.
  void sync() const {
#ifdef _OPENMP
    if (units_split) {
#pragma omp barrier
    }
#endif
  }
};

// Runs a layer's time loop, split between torch's threads where the batch is large enough. Each
// thread calls prepare(share), which may throw (it allocates), and then the loop it returns.
//
// Two splits. Each row's recurrence is independent, so the batch can be split: every thread runs
// the whole time loop on its rows with no synchronisation. Or the hidden units: every thread
// multiplies all rows of h_{t-1} by its units' columns of the weight, and the threads meet once
// per step (the next product reads every unit). The units split gives every thread's step
// product all the rows, which BLAS runs nearer its peak: on two AVX2 cores (AMD EPYC, MKL) a
// step at T=50 B=64 H=512 took 1050 instead of 1261 us, at T=100 B=32 H=256 145 instead of
// 185 us (scripts/step_gemm.py). `units_allowed`: whether the caller's loop can run on a share
// of the units (an LSTM with a projection cannot: its h_t needs every unit of the cell).
// A small batch runs in one call, where BLAS may use the threads itself.
template <typename Prepare>
void run_shares(int64_t batch, int64_t hidden, bool units_allowed, const Prepare& prepare) {
  const Share whole{0, batch, 0, hidden, false};
#ifdef _OPENMP
  const int64_t threads = at::get_num_threads();
  if (threads < 2 || batch < 2 * kMinRowsPerThread || at::in_parallel_region()) {
    prepare(whole)();
    return;
  }
  // A loop that threw would leave the other threads waiting at its barrier. The loops call
  // nothing that throws but ATen's mm, the fallback where torch links no BLAS: only with BLAS
  // are the units split.
  const bool by_units = units_allowed && hidden >= 2 * kMinUnitsPerThread && sgemm_ && dgemm_;
  const int64_t total = by_units ? hidden : batch;
  const int64_t parts =
      std::min(threads, total / (by_units ? kMinUnitsPerThread : kMinRowsPerThread));
  std::exception_ptr error;
  bool failed = false;
#pragma omp parallel num_threads(parts)
  {
    // The team may be smaller than asked for.
    const int64_t team = omp_get_num_threads();
    const int64_t chunk = (total + team - 1) / team;
    const int64_t from = std::min(total, omp_get_thread_num() * chunk);
    const int64_t size = std::min(total, from + chunk) - from;
    const Share share = by_units ? Share{0, batch, from, size, true}
                                 : Share{from, size, 0, hidden, false};
    std::function<void()> loop;
    try {
      loop = prepare(share);
    } catch (...) {
#pragma omp critical
      {
        failed = true;
        if (!error) error = std::current_exception();
      }
    }
    // Every thread meets every barrier: the loops start only when every thread is ready.
#pragma omp barrier
    if (!failed) {
      try {
        loop();
      } catch (...) {
#pragma omp critical
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
#else
  (void)units_allowed;
  prepare(whole)();
#endif
}

// ---- the layer -------------------------------------------------------------------------------

enum class Family { kRnn, kLstm, kGru };

Family parse_family(const std::string& name) {
  if (name == "rnn") return Family::kRnn;
  if (name == "lstm") return Family::kLstm;
  TORCH_CHECK(name == "gru", "rnnbench_fused: unknown family ", name);
  return Family::kGru;
}

int64_t gate_count(Family family) {
  return family == Family::kRnn ? 1 : family == Family::kLstm ? 4 : 3;
}

// Everything a forward or backward pass needs to know about one layer and direction.
struct Layer {
  Family family;
  bool relu;
  bool reverse;
  int64_t steps, batch, hidden, out_size, gates;

  // Time index of the s-th step processed, and of the step before it (-1: the initial state).
  int64_t time(int64_t s) const { return reverse ? steps - 1 - s : s; }
  int64_t previous(int64_t s) const { return s == 0 ? -1 : time(s - 1); }
};

void check_inputs(const Layer& layer, const Tensor& x, const std::vector<Tensor>& state,
                  const Tensor& w_ih, const Tensor& w_hh, const std::optional<Tensor>& b_ih,
                  const std::optional<Tensor>& b_hh, const std::optional<Tensor>& w_hr) {
  TORCH_CHECK(x.device().is_cpu(), "rnnbench_fused: CPU tensors only, got ", x.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "rnnbench_fused: float32 and float64 only, got ", x.scalar_type());
  auto same = [&](const Tensor& t, const char* what) {
    TORCH_CHECK(t.scalar_type() == x.scalar_type() && t.device() == x.device(),
                "rnnbench_fused: ", what, " is ", t.scalar_type(), " on ", t.device(),
                " but the input is ", x.scalar_type(), " on ", x.device());
  };
  same(w_ih, "weight_ih");
  same(w_hh, "weight_hh");
  if (w_hr) same(*w_hr, "weight_hr");
  TORCH_CHECK(b_ih.has_value() == b_hh.has_value(), "rnnbench_fused: give both biases or neither");
  for (const auto& bias : {b_ih, b_hh}) {
    if (!bias) continue;
    same(*bias, "a bias");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == layer.gates, "rnnbench_fused: a bias has shape ",
                bias->sizes());
  }
  for (const auto& s : state) same(s, "the initial state");
  auto shape = [](const Tensor& w, int64_t rows, int64_t cols, const char* what) {
    TORCH_CHECK(w.dim() == 2 && w.size(0) == rows && w.size(1) == cols, "rnnbench_fused: ", what,
                " has shape ", w.sizes(), ", expected (", rows, ", ", cols, ")");
  };
  shape(w_ih, layer.gates, x.size(2), "weight_ih");
  shape(w_hh, layer.gates, layer.out_size, "weight_hh");
  const bool lstm = layer.family == Family::kLstm;
  TORCH_CHECK(!w_hr || lstm, "rnnbench_fused: only an LSTM has weight_hr");
  if (w_hr) shape(*w_hr, layer.out_size, layer.hidden, "weight_hr");
  if (state.empty()) return;  // zeros
  TORCH_CHECK(state.size() == (lstm ? 2u : 1u), "rnnbench_fused: wrong number of state tensors");
  TORCH_CHECK(state[0].sizes() == at::IntArrayRef({layer.batch, layer.out_size}),
              "rnnbench_fused: h0 has shape ", state[0].sizes());
  if (lstm) {
    TORCH_CHECK(state[1].sizes() == at::IntArrayRef({layer.batch, layer.hidden}),
                "rnnbench_fused: c0 has shape ", state[1].sizes());
  }
}

// `gates` rows of stacked gate blocks; outputs of `out_size` (proj_size if projected).
Layer describe(const std::string& family_name, const Tensor& x, int64_t gates, int64_t out_size,
               bool relu, bool reverse) {
  TORCH_CHECK(x.dim() == 3, "rnnbench_fused: input must be (steps, batch, features)");
  Layer layer;
  layer.family = parse_family(family_name);
  TORCH_CHECK(gates % gate_count(layer.family) == 0, "rnnbench_fused: ", gates,
              " gate rows are not a whole number of gates");
  layer.relu = relu;
  layer.reverse = reverse;
  layer.steps = x.size(0);
  layer.batch = x.size(1);
  layer.gates = gates;
  layer.hidden = gates / gate_count(layer.family);
  layer.out_size = out_size;
  return layer;
}

// The initial state, contiguous: the given one, or zeros where none is given (an empty list).
std::vector<Tensor> initial_state(const Layer& layer, const std::vector<Tensor>& state,
                                  const at::TensorOptions& options) {
  if (state.empty()) {
    std::vector<Tensor> zeros{at::zeros({layer.batch, layer.out_size}, options)};
    if (layer.family == Family::kLstm) zeros.push_back(at::zeros({layer.batch, layer.hidden}, options));
    return zeros;
  }
  std::vector<Tensor> given;
  for (const auto& s : state) given.push_back(s.contiguous());
  return given;
}

// Forward gate arithmetic of one batch row and `units` hidden units; see numerics.py for the
// equations. The gate pointers (g*) hold the input projection of the step, less the bias, and
// are overwritten with the activations (the backward pass reads them); r* are the step's
// product h_{t-1} @ W_hh^T of the same units; b* what the step adds: the input-side bias (and
// the hidden-side one, where it is a plain addition; a GRU's b_hn sits inside r * (...)),
// zeros without bias. Added here, on rows in cache, rather than written into the whole premul
// buffer before its GEMM. Every array is its own restrict pointer: gates of one row are slices
// of one buffer, and without the promise that they do not overlap gcc does not vectorise.
template <typename T>
void elman_row(T* __restrict__ h, const T* __restrict__ r, const T* __restrict__ bias,
               int64_t units, bool relu) {
  if (relu) {
    for (int64_t j = 0; j < units; ++j) {
      const T a = h[j] + r[j] + bias[j];
      h[j] = a > T(0) ? a : T(0);
    }
  } else {
    for (int64_t j = 0; j < units; ++j) h[j] = act_tanh(h[j] + r[j] + bias[j]);
  }
}

template <typename T>
void lstm_row(T* __restrict__ gi, T* __restrict__ gf, T* __restrict__ gg, T* __restrict__ go,
              const T* __restrict__ ri, const T* __restrict__ rf, const T* __restrict__ rg,
              const T* __restrict__ ro, const T* __restrict__ bi, const T* __restrict__ bf,
              const T* __restrict__ bg, const T* __restrict__ bo, const T* __restrict__ c_prev,
              T* __restrict__ c, T* __restrict__ h, int64_t units) {
  for (int64_t j = 0; j < units; ++j) {
    const T i = act_sigmoid(gi[j] + ri[j] + bi[j]), f = act_sigmoid(gf[j] + rf[j] + bf[j]),
            g = act_tanh(gg[j] + rg[j] + bg[j]), o = act_sigmoid(go[j] + ro[j] + bo[j]);
    const T cn = f * c_prev[j] + i * g;
    gi[j] = i;
    gf[j] = f;
    gg[j] = g;
    go[j] = o;
    c[j] = cn;
    h[j] = o * act_tanh(cn);
  }
}

// gh_n receives W_hn h + b_hn (backward reads it).
template <typename T>
void gru_row(T* __restrict__ xr, T* __restrict__ xz, T* __restrict__ xn, const T* __restrict__ hr,
             const T* __restrict__ hz, const T* __restrict__ hn, const T* __restrict__ ir,
             const T* __restrict__ iz, const T* __restrict__ in, const T* __restrict__ br,
             const T* __restrict__ bz, const T* __restrict__ bn, const T* __restrict__ h_prev,
             T* __restrict__ h, T* __restrict__ gh_n, int64_t units) {
  for (int64_t j = 0; j < units; ++j) {
    const T r = act_sigmoid(xr[j] + ir[j] + hr[j] + br[j]);
    const T z = act_sigmoid(xz[j] + iz[j] + hz[j] + bz[j]);
    const T hn_b = hn[j] + bn[j];
    const T n = act_tanh(xn[j] + in[j] + r * hn_b);
    xr[j] = r;
    xz[j] = z;
    xn[j] = n;
    gh_n[j] = hn_b;
    h[j] = n + z * (h_prev[j] - n);
  }
}

// forward(family, x (T, B, I), state [h0 (B, P)], [h0, c0 (B, H)] or [] for zeros, w_ih (G, I),
// w_hh (G, P), b_ih, b_hh, w_hr (P, H), relu, reverse, keep)
// -> [output (T, B, P), h_n, (c_n,) saved...]. `saved` (only when keep) is what backward
// needs besides the inputs and the output: LSTM [gates, cells, hidden (proj only)], GRU
// [gates, gh_n].
std::vector<Tensor> forward(const std::string& family_name, const Tensor& x_in,
                            const std::vector<Tensor>& state, const Tensor& w_ih,
                            const Tensor& w_hh,
                            const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh,
                            const std::optional<Tensor>& w_hr, bool relu, bool reverse,
                            bool keep) {
  TORCH_CHECK(w_hh.dim() == 2, "rnnbench_fused: weight_hh must be 2-D");
  const Layer L = describe(family_name, x_in, w_hh.size(0), w_hh.size(1), relu, reverse);
  check_inputs(L, x_in, state, w_ih, w_hh, b_ih, b_hh, w_hr);
  at::NoGradGuard no_grad;
  const Tensor x = x_in.contiguous();
  const int64_t T_ = L.steps, B = L.batch, H = L.hidden, P = L.out_size, G = L.gates;
  // Buffers. Elman's output is its premul buffer, updated in place step by step. At batch 1
  // the whole call is a few microseconds of arithmetic, so the work below is raw loops on
  // these buffers rather than ATen ops, each of which costs about a microsecond.
  const auto options = x.options();
  const std::vector<Tensor> initial = initial_state(L, state, options);
  // Every GEMM reads its weight transposed, row-major. fused.py stores its parameters that way
  // (a parameter is a transposed view of its storage), so these are views, not copies.
  const Tensor w_ih_t = w_ih.t().contiguous(), w_hh_t = w_hh.t().contiguous();
  // Premul: the input projection of every step in one product.
  Tensor gx = sequence_product(x.view({T_ * B, x.size(2)}), w_ih_t, Layout::kRowMajor)
                  .view({T_, B, G});
  Tensor out = L.family == Family::kRnn ? gx : at::empty({T_, B, P}, options);
  Tensor cells, hidden, gh_n, c0;
  if (L.family == Family::kLstm) {
    c0 = initial[1];
    cells = at::empty({T_, B, H}, options);
    hidden = w_hr ? at::empty({T_, B, H}, options) : out;
  } else if (L.family == Family::kGru) {
    gh_n = at::empty({keep ? T_ : 1, B, H}, options);
  }
  const Tensor h0 = initial[0];
  const Tensor w_hr_t = w_hr ? w_hr->t().contiguous() : Tensor();
  const Tensor b_ih_c = b_ih ? b_ih->contiguous() : Tensor();
  const Tensor b_hh_c = b_hh ? b_hh->contiguous() : Tensor();

  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rnnbench_fused_forward", [&] {
    using T = scalar_t;
    T* gxp = gx.data_ptr<T>();
    T* outp = out.data_ptr<T>();
    const T* h0p = h0.data_ptr<T>();

    // The bias each step adds: both biases where they are plain additions, b_ih alone for a
    // GRU, whose b_hh sits inside r * (...) and is added there; zeros without bias.
    const bool gru = L.family == Family::kGru;
    std::vector<T> bias(G, T(0)), gru_b_hh(gru ? G : 0, T(0));
    if (b_ih) {
      const T* bi = b_ih_c.data_ptr<T>();
      const T* bh = b_hh_c.data_ptr<T>();
      for (int64_t j = 0; j < G; ++j) bias[j] = gru ? bi[j] : bi[j] + bh[j];
      if (gru) std::copy(bh, bh + G, gru_b_hh.begin());
    }
    const T* biasp = bias.data();
    // The time loop of one thread's share of the rows and units. Its step product multiplies
    // the rows of h_{t-1} by the columns of W_hh^T of its units (in gate order: all columns
    // unless the units are split) into `product`.
    const int64_t gate_blocks = gate_count(L.family);
    T* const cellp = cells.defined() ? cells.data_ptr<T>() : nullptr;
    const T* const c0p = c0.defined() ? c0.data_ptr<T>() : nullptr;
    T* const hiddenp = hidden.defined() ? hidden.data_ptr<T>() : nullptr;
    T* const gh_np = gh_n.defined() ? gh_n.data_ptr<T>() : nullptr;
    const T* const gru_bp = gru_b_hh.data();
    auto prepare = [&](const Share& share) {
      const int64_t width = gate_blocks * share.units;
      // (An Elman's single gate block would come back from reshape as a strided view.)
      const Tensor weight = share.units == H ? w_hh_t
          : w_hh_t.view({P, gate_blocks, H}).narrow(2, share.j0, share.units).reshape({P, width})
                .contiguous();
      const Tensor product = at::empty({share.rows, width}, options);
      const StepWeight<T> recurrent(weight.data_ptr<T>(), share.rows, P, width);
      return std::function<void()>([&, share, width, weight, product, recurrent] {
        T* const r0 = product.data_ptr<T>();
        const int64_t j0 = share.j0, units = share.units;
        for (int64_t s = 0; s < T_; ++s) {
          const int64_t t = L.time(s), tp = L.previous(s);
          const T* const h_prev = tp < 0 ? h0p : outp + tp * B * P;
          for (int64_t q = 0; q < gate_blocks; ++q) {
            prefetch_rows(gxp + (t * B + share.b0) * G + q * H + j0, share.rows, units, G);
          }
          if (units > 0) {
            // From a zero state the first step's product is zero.
            if (s == 0 && state.empty()) {
              std::fill(r0, r0 + share.rows * width, T(0));
            } else {
              recurrent.multiply(r0, h_prev + share.b0 * P, /*accumulate=*/false);
            }
          }
          for (int64_t b = share.b0; b < share.b0 + share.rows && units > 0; ++b) {
            T* const g = gxp + (t * B + b) * G + j0;  // gate q of the share: g + q * H
            const T* const r = r0 + (b - share.b0) * width;  // its product: r + q * units
            const T* const bias = biasp + j0;
            switch (L.family) {
              case Family::kRnn:
                elman_row(g, r, bias, units, L.relu);  // g is the output
                break;
              case Family::kLstm: {
                const int64_t at = b * H + j0;
                lstm_row(g, g + H, g + 2 * H, g + 3 * H, r, r + units, r + 2 * units,
                         r + 3 * units, bias, bias + H, bias + 2 * H, bias + 3 * H,
                         (tp < 0 ? c0p : cellp + tp * B * H) + at, cellp + t * B * H + at,
                         hiddenp + t * B * H + at, units);
                break;
              }
              case Family::kGru: {
                const T* const bn = gru_bp + j0;
                gru_row(g, g + H, g + 2 * H, r, r + units, r + 2 * units, bias, bias + H,
                        bias + 2 * H, bn, bn + H, bn + 2 * H, h_prev + b * P + j0,
                        outp + (t * B + b) * P + j0, gh_np + ((keep ? t : 0) * B + b) * H + j0,
                        units);
                break;
              }
            }
          }
          if (w_hr) {  // the units are never split with a projection
            matmul(outp + (t * B + share.b0) * P, hiddenp + (t * B + share.b0) * H,
                   w_hr_t.data_ptr<T>(), share.rows, H, P, /*accumulate=*/false);
          }
          share.sync();
        }
      });
    };
    run_shares(B, H, /*units_allowed=*/!w_hr, prepare);
  });

  // The final state: a copy of the last step processed.
  const int64_t last = L.time(T_ - 1);
  auto final_of = [&](const Tensor& steps, int64_t width) {
    Tensor final = at::empty({B, width}, options);
    if (final.numel() == 0) return final;
    const int64_t bytes = B * width * x.element_size();
    std::memcpy(final.data_ptr(), static_cast<char*>(steps.data_ptr()) + last * bytes, bytes);
    return final;
  };
  std::vector<Tensor> result{out, final_of(out, P)};
  if (L.family == Family::kLstm) result.push_back(final_of(cells, H));
  if (keep && L.family == Family::kLstm) {
    result.push_back(gx);
    result.push_back(cells);
    if (w_hr) result.push_back(hidden);
  } else if (keep && L.family == Family::kGru) {
    result.push_back(gx);
    result.push_back(gh_n);
  }
  return result;
}

// Backward gate arithmetic of one step; `dh` is dL/dh_t on entry (output and recurrent parts).
template <typename T>
void elman_step_back(const T* dh, const T* h, T* da, int64_t n, bool relu) {
  if (relu) {
    for (int64_t i = 0; i < n; ++i) da[i] = h[i] > T(0) ? dh[i] : T(0);
  } else {
    for (int64_t i = 0; i < n; ++i) da[i] = dh[i] * (T(1) - h[i] * h[i]);
  }
}

// dc: dL/dc_t on entry, dL/dc_{t-1} on exit; d*: the pre-activation gradients of i, f, g, o.
template <typename T>
void lstm_row_back(const T* __restrict__ gi, const T* __restrict__ gf, const T* __restrict__ gg,
                   const T* __restrict__ go, const T* __restrict__ c, const T* __restrict__ c_prev,
                   const T* __restrict__ dh, T* __restrict__ dc, T* __restrict__ di,
                   T* __restrict__ df, T* __restrict__ dg, T* __restrict__ d_o, int64_t hidden) {
  for (int64_t j = 0; j < hidden; ++j) {
    const T i = gi[j], f = gf[j], g = gg[j], o = go[j];
    const T tc = act_tanh(c[j]);
    const T dct = dc[j] + dh[j] * o * (T(1) - tc * tc);
    di[j] = dct * g * i * (T(1) - i);
    df[j] = dct * c_prev[j] * f * (T(1) - f);
    dg[j] = dct * i * (T(1) - g * g);
    d_o[j] = dh[j] * tc * o * (T(1) - o);
    dc[j] = dct * f;
  }
}

// dh: dL/dh_t on entry, the direct part z * dL/dh_t of dL/dh_{t-1} on exit (the part through
// W_hh is added by a GEMM). di* / dh*: gradients of the input / hidden pre-activations r, z, n.
template <typename T>
void gru_row_back(const T* __restrict__ gr, const T* __restrict__ gz, const T* __restrict__ gn,
                  const T* __restrict__ gh_n, const T* __restrict__ h_prev, T* __restrict__ dh,
                  T* __restrict__ dir, T* __restrict__ diz, T* __restrict__ din,
                  T* __restrict__ dhr, T* __restrict__ dhz, T* __restrict__ dhn, int64_t hidden) {
  for (int64_t j = 0; j < hidden; ++j) {
    const T r = gr[j], z = gz[j], n = gn[j], d = dh[j];
    const T dpn = d * (T(1) - z) * (T(1) - n * n);
    const T dpr = dpn * gh_n[j] * r * (T(1) - r);
    const T dpz = d * (h_prev[j] - n) * z * (T(1) - z);
    dir[j] = dpr;
    diz[j] = dpz;
    din[j] = dpn;
    dhr[j] = dpr;
    dhz[j] = dpz;
    dhn[j] = dpn * r;
    dh[j] = d * z;
  }
}

// backward(family, grad_output (T, B, P), grad_state [dh_n] or [dh_n, dc_n], x, state,
// weights..., has_bias, relu, reverse, output, saved, need_input_grad)
// -> [dx (undefined unless need_input_grad), dh0, (dc0,) dw_ih, dw_hh, (db_ih, db_hh,) (dw_hr)],
// dh0 and dc0 undefined where no state was given.
std::vector<Tensor> backward(const std::string& family_name, const Tensor& grad_out_in,
                             const std::vector<Tensor>& grad_state, const Tensor& x_in,
                             const std::vector<Tensor>& state,
                             const Tensor& w_ih, const Tensor& w_hh, bool has_bias,
                             const std::optional<Tensor>& w_hr, bool relu, bool reverse,
                             const Tensor& out, const std::vector<Tensor>& saved,
                             bool need_input_grad) {
  const Layer L = describe(family_name, x_in, w_hh.size(0), w_hh.size(1), relu, reverse);
  at::NoGradGuard no_grad;
  const Tensor x = x_in.contiguous();
  const Tensor grad_out = grad_out_in.contiguous();
  const int64_t T_ = L.steps, B = L.batch, H = L.hidden, P = L.out_size, G = L.gates;
  const std::vector<Tensor> initial = initial_state(L, state, x.options());
  const Tensor h0 = initial[0];

  Tensor dh = grad_state[0].clone().contiguous();  // dL/dh of the step being processed
  // The gate gradients of every step are kept transposed, a row per gate unit over every step
  // and batch row: the products after the loop read them so (the weight gradients as they lie,
  // the input gradient as its transpose) and the bias gradients are sums along their rows.
  // Each step's are written row-major first, for the step's own product, into one of two
  // buffers taken in turn: a thread may start the next step's gate pass while another still
  // multiplies this step's. The loop transposes them while they are in cache, streaming whole
  // tiles to memory: nothing reads them before the loop ends. (Read as a transposed view
  // instead, oneDNN copied the other operand transposed for each weight gradient, and autograd
  // copied the gradient into the weight's layout.) A GRU keeps the input- and hidden-side
  // gradients apart; its step product reads the hidden side's.
  Tensor dgates_by_unit = at::empty({G, T_ * B}, x.options());
  Tensor steps_dg = at::empty({2, B, G}, x.options());
  Tensor dgates_h_by_unit, steps_dgh, dc, dh_full, dhidden, c0, w_hr_c;
  if (L.family == Family::kGru) {
    dgates_h_by_unit = at::empty({G, T_ * B}, x.options());
    steps_dgh = at::empty({2, B, G}, x.options());
  }
  if (L.family == Family::kLstm) {
    c0 = initial[1];
    dc = grad_state[1].clone().contiguous();
    if (w_hr) {
      w_hr_c = w_hr->contiguous();
      dh_full = at::empty({B, H}, x.options());
      dhidden = at::empty({T_, B, P}, x.options());  // dL/d(projected h_t), for dW_hr
    }
  }

  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rnnbench_fused_backward", [&] {
    using T = scalar_t;
    T* const dhp = dh.data_ptr<T>();
    T* const dgp = steps_dg.data_ptr<T>();
    T* const dghp = steps_dgh.defined() ? steps_dgh.data_ptr<T>() : dgp;
    T* const dgup = dgates_by_unit.data_ptr<T>();
    T* const dghup = dgates_h_by_unit.defined() ? dgates_h_by_unit.data_ptr<T>() : nullptr;
    const T* const gop = grad_out.data_ptr<T>();
    const T* const outp = out.data_ptr<T>();
    const T* const h0p = h0.data_ptr<T>();
    const T* const gatesp = saved.empty() ? nullptr : saved[0].data_ptr<T>();  // none: Elman
    const T* const cellp = L.family == Family::kLstm ? saved[1].data_ptr<T>() : nullptr;
    const T* const gh_np = L.family == Family::kGru ? saved[1].data_ptr<T>() : nullptr;
    const T* const c0p = c0.defined() ? c0.data_ptr<T>() : nullptr;
    T* const dcp = dc.defined() ? dc.data_ptr<T>() : nullptr;
    const int64_t gate_blocks = gate_count(L.family);
    // The time loop of one thread's share, backwards: the gate pass on its rows and units
    // writes their pre-activation gradients; once every thread has (the threads meet where the
    // units are split), its product dgates_t @ W_hh[:, units] gives its part of dL/dh_{t-1},
    // which it keeps in `dh_share` (every unit of the output with a projection, whose units are
    // never split).
    auto prepare = [&](const Share& share) {
      const int64_t width = share.units == H ? P : share.units;
      // Each thread copies the columns of W_hh it multiplies by (W_hh is a transposed view of
      // its storage, as fused.py stores it), all of them where the rows are split, at the same
      // time as the others, rather than one thread a whole copy first.
      const Tensor weight = share.units == H ? w_hh.contiguous()
                                             : w_hh.narrow(1, share.j0, share.units).contiguous();
      const Tensor dh_share = dh.narrow(0, share.b0, share.rows).narrow(1, share.j0, width)
                                  .clone(at::MemoryFormat::Contiguous);
      const StepWeight<T> recurrent(weight.data_ptr<T>(), share.rows, G, width);
      return std::function<void()>([&, share, width, weight, dh_share, recurrent] {
        T* const d0 = dh_share.data_ptr<T>();
        const int64_t j0 = share.j0, units = share.units;
        for (int64_t s = T_ - 1; s >= 0; --s) {
          const int64_t t = L.time(s), tp = L.previous(s);
          T* const step_dg = dgp + (s % 2) * B * G;
          T* const step_dgh = dghp + (s % 2) * B * G;
          for (int64_t b = 0; b < share.rows; ++b) {
            const T* go = gop + (t * B + share.b0 + b) * P + j0;
            T* d = d0 + b * width;
            for (int64_t j = 0; j < width; ++j) d[j] += go[j];
          }
          if (w_hr) {  // dL/dh of the cell, through the projection
            std::copy(d0, d0 + share.rows * P, dhidden.data_ptr<T>() + (t * B + share.b0) * P);
            matmul(dh_full.data_ptr<T>() + share.b0 * H, d0, w_hr_c.data_ptr<T>(), share.rows, P,
                   H, /*accumulate=*/false);
          }
          for (int64_t b = share.b0; b < share.b0 + share.rows && units > 0; ++b) {
            T* const d = d0 + (b - share.b0) * width;
            T* const dg = step_dg + b * G + j0;  // gate q of the share: dg + q * H
            switch (L.family) {
              case Family::kRnn:
                elman_step_back(d, outp + (t * B + b) * P + j0, dg, units, L.relu);
                break;
              case Family::kLstm: {
                const T* g = gatesp + (t * B + b) * G + j0;
                const int64_t at = b * H + j0;
                lstm_row_back(g, g + H, g + 2 * H, g + 3 * H, cellp + t * B * H + at,
                              (tp < 0 ? c0p : cellp + tp * B * H) + at,
                              w_hr ? dh_full.data_ptr<T>() + at : d, dcp + at, dg, dg + H,
                              dg + 2 * H, dg + 3 * H, units);
                break;
              }
              case Family::kGru: {
                const T* g = gatesp + (t * B + b) * G + j0;
                T* const dgh = step_dgh + b * G + j0;
                gru_row_back(g, g + H, g + 2 * H, gh_np + (t * B + b) * H + j0,
                             (tp < 0 ? h0p : outp + tp * B * P) + b * P + j0, d, dg, dg + H,
                             dg + 2 * H, dgh, dgh + H, dgh + 2 * H, units);
                break;
              }
            }
          }
          for (int64_t q = 0; q < gate_blocks && units > 0; ++q) {
            const int64_t from = share.b0 * G + q * H + j0;
            const int64_t to = (q * H + j0) * T_ * B + t * B + share.b0;
            transpose_into(dgup + to, T_ * B, step_dg + from, G, share.rows, units,
                           Writes::kStreamed);
            if (dghup) {
              transpose_into(dghup + to, T_ * B, step_dgh + from, G, share.rows, units,
                             Writes::kStreamed);
            }
          }
          fence_streamed_writes();
          share.sync();
          // dL/dh_{t-1} through W_hh; a GRU's direct part z * dL/dh_t is already in d0. None
          // for h0 when no state was given: zeros need no gradient.
          if (units > 0 && !(s == 0 && state.empty())) {
            recurrent.multiply(d0, step_dgh + share.b0 * G,
                               /*accumulate=*/L.family == Family::kGru);
          }
        }
        // dL/dh0, this share's rows and units of it.
        for (int64_t b = 0; b < share.rows && !state.empty(); ++b) {
          std::copy(d0 + b * width, d0 + (b + 1) * width, dhp + (share.b0 + b) * P + j0);
        }
      });
    };
    run_shares(B, H, /*units_allowed=*/!w_hr, prepare);
  });

  // Whole-sequence GEMMs. The hidden-side gradient pairs each step's gradient with the state
  // before it: h0 for the first step processed, the previous output for the others.
  const Tensor dg_h_t = L.family == Family::kGru ? dgates_h_by_unit : dgates_by_unit;
  const int64_t first = L.time(0);
  Tensor dw_hh;
  if (T_ > 1) {
    const Tensor later = dg_h_t.narrow(1, reverse ? 0 : B, (T_ - 1) * B);
    const Tensor before = reverse ? out.narrow(0, 1, T_ - 1) : out.narrow(0, 0, T_ - 1);
    dw_hh = sequence_product(later, before.reshape({-1, P}), Layout::kTransposed);
    // None given: h0 is zeros.
    if (!state.empty()) dw_hh.addmm_(dg_h_t.narrow(1, first * B, B), h0);
  } else {
    dw_hh = sequence_product(dg_h_t, h0, Layout::kTransposed);
  }
  Tensor dx;
  if (need_input_grad) {  // dx^T = W_ih^T @ dgates^T, given in the layout of dx
    dx = sequence_product(w_ih.t(), dgates_by_unit, Layout::kTransposed).t()
             .view({T_, B, x.size(2)});
  }
  std::vector<Tensor> result{dx, state.empty() ? Tensor() : dh};
  if (L.family == Family::kLstm) result.push_back(state.empty() ? Tensor() : dc);
  result.push_back(sequence_product(dgates_by_unit, x.view({T_ * B, x.size(2)}),
                                    Layout::kTransposed));
  result.push_back(dw_hh);
  if (has_bias) {
    // Both biases are plain additions but in a GRU: the same gradient, summed once.
    const Tensor db_ih = dgates_by_unit.sum(1);
    result.push_back(db_ih);
    result.push_back(L.family == Family::kGru ? dgates_h_by_unit.sum(1) : db_ih.clone());
  }
  if (w_hr) {
    result.push_back(sequence_product(dhidden.view({T_ * B, P}).t(), saved[2].view({T_ * B, H}),
                                      Layout::kTransposed));
  }
  return result;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "one layer and direction, forward");
  m.def("backward", &backward, "one layer and direction, backward");
  m.def("set_products", &set_products, "how the products over all time steps run");
  m.def("product_choices", &product_choices_made, "the ways timed products chose");
  m.def("set_step_products", &set_step_products, "how the products of a time step run");
  m.def("step_product", &step_product, "a time step's product on its own (for tests)");
  m.def("product", &product_alone, "a product over all time steps on its own (for tests)",
        py::arg("a"), py::arg("b"), py::arg("transposed") = false);
  m.def("kernel_ways", &kernel_ways, "the ways products can run here besides oneDNN");
  m.def("step_choices", &step_choices_made, "the ways timed step products chose");
}
